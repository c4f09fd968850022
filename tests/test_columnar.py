"""A kept evaluation holds a deterministic run's rows as columns (#58): sample ids in one
string, scores in one array, each sample as the JSON line it reads back from; rows are made
only when asked for, and equal the rows of a run that kept them whole."""

from __future__ import annotations

import pickle
from collections.abc import Iterator

import pytest

import ctxeval
from ctxeval import Sample
from ctxeval._results.columns import Lines, RowBlock, Scores, Texts, _line_of, sample_of

METRICS = ["id_based_context_precision", "id_ndcg_at_k", "id_mrr"]


def samples() -> list[Sample]:
    return [
        Sample(id="q1", retrieved_context_ids=["d1", "d2", "d3"], reference_context_ids=["d2"]),
        Sample(retrieved_context_ids=["a"], reference_context_ids=[]),  # undefined rows
        Sample(id="no-reference", retrieved_context_ids=["a"]),  # error rows (a field missing)
        Sample(
            id="graded",
            retrieved_context_ids=["a", "b"],
            reference_context_ids={"a": 2, "c": 1},  # type: ignore[arg-type]
        ),
        Sample(
            id="with metadata",
            retrieved_context_ids=["x", "y"],
            reference_context_ids=["y"],
            metadata={"kept": (1, 2)},
        ),
        Sample(
            id="\u00e9t\u00e9 \U0001f600", retrieved_context_ids=["z"], reference_context_ids=["z"]
        ),
    ]


def generated() -> Iterator[Sample]:
    yield from samples()


def test_a_kept_run_holds_columns_not_objects() -> None:
    evaluation = ctxeval.evaluate(generated(), METRICS)
    (block,) = evaluation.parts
    assert isinstance(block, RowBlock)
    assert isinstance(block.sample_ids, Texts)
    assert isinstance(block.sources, Lines)
    assert all(isinstance(column.scores, Scores) for column in block.columns)
    # each sample a line but the one whose metadata may not read back equal
    held = [block.sources[i] for i in range(len(block.sources))]
    assert [type(h).__name__ for h in held] == ["bytes"] * 4 + ["Sample", "bytes"]
    assert list(block.sample_ids) == [
        "q1",
        "1",
        "no-reference",
        "graded",
        "with metadata",
        "\u00e9t\u00e9 \U0001f600",
    ]


def test_rows_read_from_columns_equal_rows_kept_whole() -> None:
    kept = ctxeval.evaluate(generated(), METRICS)
    whole = ctxeval.evaluate(samples(), METRICS)
    whole_rows = whole.results  # (built and kept)
    assert list(kept) == list(whole_rows)  # (iterated: built one by one, not kept)
    assert kept._results is None
    for metric in kept.metrics:
        assert kept.rows(metric) == [r for r in whole_rows if r.metric == metric]
        assert kept.scores(metric) == whole.scores(metric)
    assert [r.to_json() for r in kept.results] == [r.to_json() for r in whole_rows]
    assert kept.summary() == whole.summary()
    assert [r.to_json() for r in kept.errors()] == [r.to_json() for r in whole.errors()]


def test_to_pandas_reads_the_columns_and_equals_the_rows_frame() -> None:
    pd = pytest.importorskip("pandas")
    evaluation = ctxeval.evaluate(generated(), METRICS)
    frame = evaluation.to_pandas()
    assert evaluation._results is None  # no row kept to make it
    records = []
    for row in ctxeval.evaluate(samples(), METRICS).results:
        record = row.to_dict()
        record.update(record.pop("usage"))
        records.append(record)
    expected = pd.DataFrame.from_records(records, columns=list(frame.columns))
    pd.testing.assert_frame_equal(frame, expected)


def test_the_compact_columns_are_equal_to_their_lists() -> None:
    scores = [0.5, None, 1.0, 0.0, None]
    kept = Scores(scores)
    assert list(kept) == scores
    assert kept.tolist() == scores
    assert len(kept) == 5
    assert [kept[i] for i in range(5)] == scores
    assert type(kept[0]) is float
    assert list(kept[1:4]) == scores[1:4]
    texts = ["q1", "", "\u00e9t\u00e9", "\U0001f600x"]
    ids = Texts(texts)
    assert list(ids) == texts
    assert [ids[i] for i in range(4)] == texts
    assert ids[-1] == texts[-1]
    assert ids[1:3] == texts[1:3]
    for compact, plain in ((kept, scores), (ids, texts)):
        assert list(pickle.loads(pickle.dumps(compact))) == plain


def test_a_sample_is_kept_as_a_line_only_when_it_reads_back_equal() -> None:
    for sample in samples():
        line = _line_of(sample)
        if isinstance(line, bytes):
            assert sample_of(line) == sample
            assert sample_of(line).reference_context_ids == sample.reference_context_ids
        else:
            assert line is sample
            assert sample.metadata


def test_to_arrow_reads_the_columns_and_holds_what_results_parquet_holds(tmp_path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    evaluation = ctxeval.evaluate(generated(), METRICS)
    table = evaluation.to_arrow()
    assert evaluation._results is None  # no row kept to make it
    assert all(part.evidence is None for part in evaluation.parts)  # (nor its details)
    evaluation.write(tmp_path / "run", formats=["parquet"])
    assert table.equals(pq.read_table(tmp_path / "run" / "results.parquet"))
    whole = ctxeval.evaluate(samples(), METRICS).results
    assert table.column("score").to_pylist() == [r.score for r in whole]
    assert table.num_rows == len(whole)


@pytest.mark.parametrize("arrow", [True, False], ids=["pyarrow", "no-pyarrow"])
def test_the_compact_frame_holds_the_default_frames_values(arrow: bool, monkeypatch) -> None:
    import json

    pd = pytest.importorskip("pandas")
    if arrow:
        pytest.importorskip("pyarrow")
    else:  # (the frame made without pyarrow: plain objects)
        from ctxeval._output import frames

        monkeypatch.setattr(frames, "is_installed", lambda module: False)
    evaluation = ctxeval.evaluate(generated(), METRICS)
    default = evaluation.to_pandas()
    as_json = evaluation.to_pandas(details="json")
    without = evaluation.to_pandas(details="none")
    assert evaluation._results is None  # no row kept to make them
    assert list(as_json.columns) == list(default.columns)
    assert list(without.columns) == [c for c in default.columns if c != "details"]
    assert [json.loads(text) for text in as_json["details"]] == default["details"].tolist()
    for frame in (as_json, without):
        assert isinstance(frame["metric"].dtype, pd.CategoricalDtype)
        assert isinstance(frame["sample_id"].dtype, pd.ArrowDtype) is arrow
        for name in without.columns:  # equal values, a missing one NA (Arrow) or None
            given = [None if pd.isna(v) else v for v in frame[name].astype(object)]
            expected = [None if pd.isna(v) else v for v in default[name]]
            assert given == expected, name


def test_to_pandas_refuses_an_unknown_details_form() -> None:
    pytest.importorskip("pandas")
    evaluation = ctxeval.evaluate(generated(), METRICS)
    with pytest.raises(ctxeval.ConfigError, match=r"'dicts'.*'json'.*'none'"):
        evaluation.to_pandas(details="lazy")


def test_texts_pickle_as_one_string_and_cut_the_same() -> None:
    ids = Texts(iter(["a", "", "\u00e9t\u00e9", "q10"]))  # (any iterable)
    again = pickle.loads(pickle.dumps(ids))
    assert list(again) == ["a", "", "\u00e9t\u00e9", "q10"] == [again[i] for i in range(4)]
    assert ids.__reduce__()[1][0] == "a\u00e9t\u00e9q10"  # (the string travels, not a list)


def test_a_processes_worker_sends_its_blocks_compact(tmp_path) -> None:
    from ctxeval._results.columns import Lines
    from ctxeval._run.plan import RunPlan
    from ctxeval._run.processes import _score_part

    path = tmp_path / "s.jsonl"
    lines = [f'{{"id": "q{i}", "retrieved_context_ids": ["a"], "reference_context_ids": ["a"]}}\n'
             for i in range(5)]  # fmt: skip
    path.write_text("".join(lines))
    plan = RunPlan.build(METRICS[:2]).for_workers()
    parts, _, error = _score_part(plan, 0, ("lines", (str(path), 1, path.read_bytes())), False)
    assert error is None
    (block,) = pickle.loads(pickle.dumps(parts))  # (as it travels to the driving process)
    assert isinstance(block.sample_ids, Texts)  # the ids in one string, not a list
    assert isinstance(block.sources, Lines)
    assert all(isinstance(column.scores, Scores) for column in block.columns)
    assert list(block.sample_ids) == [f"q{i}" for i in range(5)]
    assert [row.score for row in block] == [1.0] * 10
