"""A JSONL file of plain ID samples as ranked columns (#58): ``evaluate(load_samples(path))``
and ``ctxeval evaluate FILE.jsonl`` read such a file in bulk (:mod:`ctxeval._data.
jsonl_columns`) and score the ID metrics from its columns, with no sample per line, to exactly
the rows the sample path gives (scores to the last bit, reasons, details, summaries, the files
of ``--out``); any other file goes the sample path, with its errors."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ctxeval
from ctxeval._data import jsonl_columns, loading
from ctxeval._data.jsonl_columns import JsonlSource, read_plain
from ctxeval._run import columnar
from ctxeval.cli import main
from test_trec_columns import columnar_calls

FAST = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(autouse=True)
def _small_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Small files read in several batches of lines, scored in chunks of a few samples."""
    monkeypatch.setattr(loading, "COLUMNS_FROM", 0)
    monkeypatch.setattr(jsonl_columns, "_BYTES_AT_ONCE", 300)
    monkeypatch.setattr(jsonl_columns, "_WINDOW", 3)
    monkeypatch.setattr(columnar, "RANKED_CHUNK", 7)


def metrics() -> list[Any]:
    get = ctxeval.get_metric
    return [
        get("id_based_context_precision"),
        get("id_based_context_recall"),
        get("id_based_context_recall", relevance_level=2, name="recall_2"),
        get("id_based_context_precision", trec_eval_averaging=True, name="precision_trec"),
        get("id_precision_at_k", k=5),
        get("id_recall_at_k", k=3),
        get("id_ndcg_at_k", k=5),
        get("id_mrr"),
        get("id_average_precision"),
    ]


def odd_rows(seed: int, size: int = 60) -> list[dict[str, Any]]:
    """Plain rows of every odd shape: repeats on both sides, empty sides, no id, a null id,
    non-ASCII IDs, IDs that look like numbers, keys in another order."""
    rng = random.Random(seed)
    docs = [f"d{i}" for i in range(12)] + ["é-1", "\U0001f600", "", "7", "a b"]
    rows: list[dict[str, Any]] = []
    for i in range(size):
        retrieved = [rng.choice(docs) for _ in range(rng.choice([0, 1, 3, 10, 20]))]
        reference = [rng.choice(docs) for _ in range(rng.choice([0, 1, 2, 4]))]
        row: dict[str, Any] = {"reference_context_ids": reference}
        if i % 7 == 3:
            pass  # no id: known by its position
        elif i % 11 == 5:
            row["id"] = None
        else:
            row["id"] = f"q{i}" if i % 5 else f"q-é{i}"
        row["retrieved_context_ids"] = retrieved
        rows.append(row)
    return rows


def write(path: Path, rows: list[Any], *, blank: bool = False) -> Path:
    lines = [json.dumps(row, ensure_ascii=bool(i % 2)) for i, row in enumerate(rows)]
    if blank:
        lines.insert(2, "  ")
        lines.append("")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def outcome(path: Path, chosen: list[Any]) -> tuple[bytes, dict[str, Any]]:
    """Every row as ``Evaluation.to_jsonl`` writes it, and the summaries."""
    evaluation = ctxeval.evaluate(ctxeval.load_samples(path), chosen)
    written = path.with_suffix(".rows")
    evaluation.to_jsonl(written)
    return written.read_bytes(), {n: s.to_dict() for n, s in evaluation.summary().items()}


def both_paths(path: Path, chosen: list[Any], monkeypatch: pytest.MonkeyPatch) -> None:
    calls = columnar_calls(monkeypatch)
    fast = outcome(path, chosen)
    assert calls, "the run did not take the columnar path"
    with monkeypatch.context() as forced:
        forced.setattr("ctxeval._run.local.ranked_file", lambda run, samples: None)
        slow = outcome(path, chosen)
    assert len(calls) == 1
    assert fast == slow


@pytest.mark.parametrize("small", [256, 0])  # small arrays, or sorting
@pytest.mark.parametrize("seed", range(3))
def test_columnar_rows_are_the_sample_paths_rows(
    tmp_path: Path, seed: int, small: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jsonl_columns, "SMALL", small)
    path = write(tmp_path / "odd.jsonl", odd_rows(seed), blank=seed == 1)
    both_paths(path, metrics(), monkeypatch)


def test_the_source_reads_the_samples_load_samples_reads(tmp_path: Path) -> None:
    path = write(tmp_path / "odd.jsonl", odd_rows(4), blank=True)
    source = read_plain(path)
    assert isinstance(source, JsonlSource)
    expected = list(ctxeval.load_samples(path))
    assert list(source) == expected
    assert [s.id for s in source] == [s.id for s in expected]  # (None where none is given)
    assert source[5] == expected[5]
    assert source[-1] == expected[-1]
    assert source[3:9] == expected[3:9]
    chunk = source.ranked(2, 11)
    assert list(chunk.samples) == expected[2:11]
    assert [chunk.samples[i] for i in range(9)] == expected[2:11]
    assert list(chunk.samples[2:5]) == expected[4:7]
    assert chunk.ids == [s.id if s.id is not None else str(i) for i, s in enumerate(expected)][2:11]


def test_a_kept_evaluation_holds_the_columns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rows keep their samples as the source's columns (no line, no sample per row)."""
    path = write(tmp_path / "odd.jsonl", odd_rows(5))
    evaluation = ctxeval.evaluate(ctxeval.load_samples(path), metrics()[:2])
    assert all(getattr(part.sources, "held_compactly", False) for part in evaluation.parts)
    rows = [row.to_dict() for row in evaluation.results]
    with monkeypatch.context() as forced:
        forced.setattr("ctxeval._run.local.ranked_file", lambda run, samples: None)
        again = ctxeval.evaluate(ctxeval.load_samples(path), metrics()[:2])
    assert rows == [row.to_dict() for row in again.results]


def test_rows_read_back_build_no_sample_until_their_details_are_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A row of a source held compactly keeps the source and its position, not a sample:
    reading every row of 1M samples back once held a sample per row (1.25 GB against 0.92)."""
    path = write(tmp_path / "odd.jsonl", odd_rows(7, 60))
    evaluation = ctxeval.evaluate(ctxeval.load_samples(path), metrics()[:2])
    built: list[int] = []
    original = JsonlSource.samples

    def counted(self: JsonlSource, start: int, stop: int) -> Any:
        built.append(stop - start)
        return original(self, start, stop)

    monkeypatch.setattr(JsonlSource, "samples", counted)
    rows = list(evaluation.results)
    assert len(rows) == 120
    assert [part[0] for part in evaluation.parts]  # (a row by its index, too)
    assert built == []
    assert (
        rows[7].details
        == ctxeval.get_metric(rows[7].metric).score(list(ctxeval.load_samples(path))[3]).details
    )
    assert built


def test_the_stream_is_read_once(tmp_path: Path) -> None:
    path = write(tmp_path / "odd.jsonl", odd_rows(6, 20), blank=True)
    stream = ctxeval.load_samples(path)
    evaluation = ctxeval.evaluate(stream, metrics()[:1])
    assert len(evaluation.results) == 20
    assert stream.rows_read == 20
    assert list(stream) == []


OTHER_LINES = {
    "a metadata field": '{"id": "x", "retrieved_context_ids": ["a"], '
    '"reference_context_ids": ["a"], "topic": "t"}',
    "graded reference IDs": '{"retrieved_context_ids": ["a"], "reference_context_ids": {"a": 2}}',
    "IDs as numbers": '{"retrieved_context_ids": [1, "a"], "reference_context_ids": ["1"]}',
    "a sample id as a number": '{"id": 5, "retrieved_context_ids": ["a"], '
    '"reference_context_ids": ["a"]}',
    "a missing side": '{"id": "y", "retrieved_context_ids": ["a"]}',
    "a null side": '{"retrieved_context_ids": null, "reference_context_ids": ["a"]}',
    "a string side": '{"retrieved_context_ids": "a", "reference_context_ids": ["a"]}',
    "a list of lists": '{"retrieved_context_ids": [["a"]], "reference_context_ids": ["a"]}',
    "an old field name": '{"contexts": ["t"], "retrieved_context_ids": ["a"], '
    '"reference_context_ids": ["a"]}',
    "an array": '["a"]',
    "a lone surrogate": '{"retrieved_context_ids": ["\\ud800"], "reference_context_ids": []}',
    "an ID too long": json.dumps(
        {"retrieved_context_ids": ["x" * 10_001], "reference_context_ids": ["a"]}
    ),
    "a repeated id": '{"id": "q1", "retrieved_context_ids": ["a"], "reference_context_ids": []}',
    "an id that is a position": '{"id": "1", "retrieved_context_ids": ["a"], '
    '"reference_context_ids": []}',
    "not JSON": '{"retrieved_context_ids": ["a"], ',
    "NaN": '{"retrieved_context_ids": ["a"], "reference_context_ids": [], "x": NaN}',
}


def fails_alike(path: Path, chosen: list[Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """The run over ``path`` gives what the sample path gives: rows, or the same error."""

    def run() -> tuple[bytes, dict[str, Any]] | str:
        try:
            return outcome(path, chosen)
        except ctxeval.DataError as exc:
            return f"DataError: {exc}"

    calls = columnar_calls(monkeypatch)
    fast = run()
    assert not calls, "the run took the columnar path"
    with monkeypatch.context() as forced:
        forced.setattr("ctxeval._run.local.ranked_file", lambda run, samples: None)
        assert fast == run()


@pytest.mark.parametrize("kind", sorted(OTHER_LINES))
def test_another_line_sends_the_file_through_samples(
    tmp_path: Path, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = [
        {"id": "q1", "retrieved_context_ids": ["a", "b"], "reference_context_ids": ["b"]},
        {"retrieved_context_ids": ["c"], "reference_context_ids": ["c", "d"]},  # (id "1")
    ]
    path = tmp_path / "file.jsonl"
    lines = [orjson.dumps(row).decode() for row in rows]
    lines += [f'{{"id": "q{i}", "retrieved_context_ids": ["a"], "reference_context_ids": ["a"]}}'
              for i in range(2, 9)]  # fmt: skip
    lines.insert(5, OTHER_LINES[kind])
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert read_plain(path) is None
    fails_alike(path, metrics()[:3], monkeypatch)


def test_a_bad_line_is_named_as_the_sample_path_names_it(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    good = '{"id": "q%d", "retrieved_context_ids": ["a"], "reference_context_ids": ["a"]}'
    path.write_text("\n".join([good % 1, good % 2, '{"id": "q3", ', good % 4]) + "\n")
    with pytest.raises(ctxeval.DataError, match=r"bad.jsonl:3: not valid JSON"):
        ctxeval.evaluate(ctxeval.load_samples(path), ["id_based_context_precision"])


def test_a_byte_order_mark_line_feeds_and_a_lenient_stream(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(tmp_path / "bom.jsonl", odd_rows(7, 15), blank=True)
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes().replace(b"\n", b"\r\n"))
    source = read_plain(path)
    assert isinstance(source, JsonlSource)
    assert list(source) == list(ctxeval.load_samples(path))
    both_paths(path, metrics()[:2], monkeypatch)
    calls = columnar_calls(monkeypatch)
    evaluation = ctxeval.evaluate(ctxeval.load_samples(path, strict=False), metrics()[:2])
    assert calls
    assert len(evaluation.results) == 30


def test_a_metric_without_the_hook_sends_the_run_through_samples(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(tmp_path / "odd.jsonl", odd_rows(8))
    read: list[int] = []
    monkeypatch.setattr(jsonl_columns, "read_plain", lambda path: read.append(1))
    chosen = [ctxeval.get_metric("id_based_context_precision"), ctxeval.get_metric("id_bpref")]
    ctxeval.evaluate(ctxeval.load_samples(path), chosen)
    assert not read  # (the file is not read as columns for nothing)


def test_a_small_file_is_read_sample_by_sample(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Below ``COLUMNS_FROM`` bytes (an eighth of it once numpy is imported), reading the
    samples is faster than importing numpy: the file is not read as columns."""
    path = write(tmp_path / "odd.jsonl", odd_rows(10))
    size = path.stat().st_size
    read: list[int] = []
    original = jsonl_columns.read_plain
    monkeypatch.setattr(jsonl_columns, "read_plain", lambda path: read.append(1) or original(path))
    monkeypatch.setattr(loading, "COLUMNS_FROM", 8 * size + 8)
    ctxeval.evaluate(ctxeval.load_samples(path), metrics()[:2])
    assert not read
    monkeypatch.setattr(loading, "COLUMNS_FROM", 8 * size)  # (numpy is imported here)
    ctxeval.evaluate(ctxeval.load_samples(path), metrics()[:2])
    assert read


def test_a_small_run_does_not_import_numpy(tmp_path: Path) -> None:
    """A small file's run imports nothing for the columns it does not read as such."""
    path = write(tmp_path / "small.jsonl", odd_rows(11, 10))
    code = (
        "import sys, ctxeval\n"
        f"ctxeval.evaluate(ctxeval.load_samples({str(path)!r}), "
        "['id_based_context_precision', 'id_mrr'])\n"
        "assert 'numpy' not in sys.modules, 'numpy imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_a_large_file_of_other_metrics_does_not_import_numpy(tmp_path: Path) -> None:
    """A run of metrics that score no ranked columns reads a large file as before, without
    importing numpy to find that out."""
    row = {"retrieved_contexts": ["the tower is in paris"], "reference_contexts": ["paris"]}
    path = write(tmp_path / "texts.jsonl", [row] * 200)
    code = (
        "import sys, ctxeval\n"
        "from ctxeval._data import loading\n"
        "loading.COLUMNS_FROM = 0\n"
        f"ctxeval.evaluate(ctxeval.load_samples({str(path)!r}), "
        "['non_llm_context_precision_with_reference', 'non_llm_context_recall'])\n"
        "assert 'numpy' not in sys.modules, 'numpy imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_the_command_line_writes_the_same_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(tmp_path / "odd.jsonl", odd_rows(9))
    names = ["-m", "id_based_context_precision", "-m", "id_based_context_recall", "-m", "nDCG@5"]
    calls = columnar_calls(monkeypatch)
    assert main(["evaluate", str(path), *names, "-q", "--out", str(tmp_path / "columns")]) == 0
    assert calls
    monkeypatch.setattr("ctxeval._run.local.ranked_file", lambda run, samples: None)
    assert main(["evaluate", str(path), *names, "-q", "--out", str(tmp_path / "samples")]) == 0
    for name in ("results.jsonl", "summary.json"):
        ours = (tmp_path / "columns" / name).read_bytes()
        theirs = (tmp_path / "samples" / name).read_bytes()
        if name == "summary.json":  # (the folders' own paths aside)
            ours, theirs = (json.loads(ours)["metrics"], json.loads(theirs)["metrics"])
        assert ours == theirs


plain_id = st.text(alphabet='abcé\U0001f600 "\\\n', max_size=3)
plain_row = st.fixed_dictionaries(
    {
        "retrieved_context_ids": st.lists(plain_id, max_size=12),
        "reference_context_ids": st.lists(plain_id, max_size=5),
    },
    optional={"id": st.none() | st.uuids().map(str)},
)


@FAST
@given(rows=st.lists(plain_row, min_size=1, max_size=25), small=st.sampled_from([256, 0]))
def test_any_plain_file_scores_as_its_samples(rows: list[dict[str, Any]], small: int) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as folder, pytest.MonkeyPatch.context() as patch:
        patch.setattr(jsonl_columns, "SMALL", small)
        patch.setattr(jsonl_columns, "_BYTES_AT_ONCE", 300)
        path = write(Path(folder) / "rows.jsonl", rows)
        both_paths(path, metrics(), patch)
