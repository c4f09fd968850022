"""Hostile and broken input through the loaders and the metrics: a clear error with file, line
and field for each bad row, a defined score for each good one, and nothing else."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ctxeval
from ctxeval import DataError, Status

ID_AND_STRING_METRICS = [
    "id_based_context_precision",
    "id_based_context_recall",
    "id_mrr",
    "id_ndcg_at_k",
    "non_llm_context_precision_with_reference",
    "non_llm_context_recall",
]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
FIELDS = [
    "user_input", "response", "reference", "retrieved_contexts", "reference_contexts",
    "retrieved_context_ids", "reference_context_ids", "id", "question", "contexts", "ground_truth",
]  # fmt: skip
rows = st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=6), json_values, max_size=6)
good_rows = st.fixed_dictionaries(
    {
        "retrieved_context_ids": st.lists(st.text(max_size=3) | st.integers(0, 9), max_size=6),
        "reference_context_ids": st.lists(st.text(max_size=3) | st.integers(0, 9), max_size=6),
        "retrieved_contexts": st.lists(st.text(max_size=40), max_size=4),
        "reference_contexts": st.lists(st.text(max_size=40), max_size=4),
    }
)
lines = st.one_of(
    rows.map(json.dumps),
    good_rows.map(json.dumps),
    st.text(max_size=30),  # not JSON at all
    st.just("[1, 2, 3]"),  # JSON, not an object
    st.just("[" * 5000 + "]" * 5000),  # deep nesting
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(content=st.lists(lines, min_size=1, max_size=12), tail=st.binary(max_size=20))
def test_every_row_is_a_sample_or_a_located_error(
    tmp_path_factory: Any, content: list[str], tail: bytes
) -> None:
    path = Path(tmp_path_factory.mktemp("bad")) / "data.jsonl"
    raw = "\n".join(line.replace("\n", " ") for line in content).encode("utf-8") + b"\n" + tail
    path.write_bytes(raw)
    stream = ctxeval.load_samples(path, strict=False)
    samples = []
    for index, sample in enumerate(stream):
        samples.append(sample.to_dict() | {"id": f"row{index}"})  # ids unique on purpose
    physical = raw.count(b"\n") + (0 if raw.endswith(b"\n") else 1)
    for error in stream.errors:
        assert isinstance(error, DataError)
        assert error.path == str(path)
        assert error.line is not None
        assert 1 <= error.line <= physical
        assert str(error).startswith(f"{path}:{error.line}: ")
    assert len(samples) + len(stream.errors) <= stream.rows_read
    evaluation = ctxeval.evaluate(samples, ID_AND_STRING_METRICS)
    assert len(evaluation.results) == len(samples) * len(ID_AND_STRING_METRICS)
    for row in evaluation.results:
        if row.status is Status.OK:
            assert row.score is not None
            assert 0.0 <= row.score <= 1.0
        elif row.status is Status.ERROR:  # only for a field the sample lacks
            assert "requires" in (row.reason or "")


def test_huge_values_and_a_row_with_100k_contexts(tmp_path: Path) -> None:
    big = {
        "id": "big",
        "retrieved_context_ids": [f"d{i}" for i in range(100_000)],
        "reference_context_ids": ["d5", "d99999", "missing"],
        "retrieved_contexts": ["x" * 10] * 2000,
        "reference_contexts": ["y" * 1_000_000],
    }
    path = tmp_path / "big.jsonl"
    path.write_text(json.dumps(big) + "\n")
    evaluation = ctxeval.evaluate(ctxeval.load_samples(path), ID_AND_STRING_METRICS)
    scores = dict(zip(evaluation.metrics, (r.score for r in evaluation.results), strict=True))
    assert scores["id_based_context_recall"] == 2 / 3
    assert scores["id_mrr"] == 1 / 6
    assert all(r.status is Status.OK for r in evaluation.results)


def test_duplicate_ids_name_the_sample(tmp_path: Path) -> None:
    path = tmp_path / "dup.jsonl"
    path.write_text(json.dumps({"id": "x"}) + "\n" + json.dumps({"id": "x"}) + "\n")
    with pytest.raises(DataError, match="two samples have this id") as error:
        ctxeval.evaluate(ctxeval.load_samples(path), ["id_mrr"])
    assert error.value.sample_id == "x"


HOSTILE_IDS: list[Any] = [
    "b\ud800",  # a lone surrogate
    int("1" * 30),  # beyond 64 bits
    1.5,
    True,
    [[[["deep"]]]],
    "x" * 20_000,  # an absurdly long ID
]


@pytest.mark.parametrize("lenient", [False, True])
def test_hostile_rows_from_python_are_refused_or_error_rows(lenient: bool) -> None:
    good = {"retrieved_context_ids": ["a", "b"], "reference_context_ids": ["a"]}
    data = [{**good, "id": "first"}]
    data += [{**good, "id": bad} for bad in HOSTILE_IDS]
    data += [{**good, "id": "text", "user_input": "cut \ud83d pair"}]
    data += [{**good, "id": "ids", "retrieved_context_ids": ["x\udc00"]}]
    data += [{**good, "id": "meta", "metadata": {"n": 10**30}}]
    data += [{**good, "id": "first"}]  # a duplicate
    data += [{**good, "id": "last"}]
    if not lenient:
        with pytest.raises(ctxeval.DataError):
            ctxeval.evaluate(data, ["id_mrr"])
        return
    for metrics in (["id_mrr"], ["id_mrr", ctxeval.get_metric("id_mrr", name="other")]):
        ev = ctxeval.evaluate(data, metrics, lenient=True)
        rows = ev.results
        assert len(rows) == len(data) * len(metrics)  # nothing dropped
        by_id = {r.sample_id: r for r in rows}
        assert by_id["first"].status is ctxeval.Status.OK
        assert by_id["last"].status is ctxeval.Status.OK
        errors = [r for r in rows if r.status is ctxeval.Status.ERROR]
        assert len(errors) == (len(data) - 2) * len(metrics)
        assert all(
            "could not be read" in (r.reason or "") or (r.reason or "").startswith("set aside")
            for r in errors
        )
        for row in rows:  # every row can be written: no surrogate, no huge value
            row.to_json().encode("utf-8")


def test_a_file_of_hostile_rows_scores_every_good_row(tmp_path: Path) -> None:
    good = {"retrieved_context_ids": ["a", "b"], "reference_context_ids": ["a"]}
    lines = [json.dumps({**good, "id": f"g{i}"}) for i in range(3)]
    lines.insert(1, json.dumps({**good, "id": "b\ud800"}))
    lines.insert(2, '{"id": ' + "1" * 5000 + ', "retrieved_context_ids": ["a"]}')
    lines.insert(3, '{"id": ' + "[" * 1000 + '"a"' + "]" * 1000 + "}")
    path = tmp_path / "hostile.jsonl"
    path.write_text("\n".join(lines) + "\n")
    loaded = ctxeval.load_samples(path, strict=False)
    ev = ctxeval.evaluate(loaded, ["id_mrr"], journal=tmp_path / "run" / "journal.jsonl")
    assert sorted(r.sample_id for r in ev.results) == ["g0", "g1", "g2"]
    assert [e.line for e in loaded.errors] == [2, 3, 4]


def test_details_json_cannot_hold_do_not_take_the_run_down(tmp_path: Path) -> None:
    """A plugin's details with a set, an object, a lone surrogate or 5 000 levels of nesting:
    the row is kept and every file of the run folder is written."""
    from ctxeval._output.writers import (
        CSVWriter,
        HTMLWriter,
        JSONLWriter,
        MarkdownWriter,
        SummaryWriter,
    )
    from ctxeval._results.results import MetricResult

    deep: Any = "a"
    for _ in range(5000):
        deep = [deep]
    odd = [{"s": {1, 2}}, {"o": object()}, {"sur": "x\ud800"}, {"deep": deep}]

    class Odd:
        name = "odd"
        requires = ()

        async def ascore(self, sample: Any, ctx: Any) -> MetricResult:  # async: journaled
            return MetricResult.ok(0.5, details=odd[int(sample.id)])

    journal = tmp_path / "run" / "journal.jsonl"
    ev = ctxeval.evaluate([{"id": str(i)} for i in range(4)], [Odd()], journal=journal)
    assert [r.score for r in ev.results] == [0.5] * 4
    from ctxeval._output.summary import summary_dict

    summary = summary_dict(ev)
    for writer in (JSONLWriter(), SummaryWriter(), HTMLWriter(), CSVWriter(), MarkdownWriter()):
        path = writer.write(ev, summary, tmp_path / "run", title="odd")
        path.read_bytes().decode("utf-8")  # written, and valid UTF-8
    assert len(journal.read_text(encoding="utf-8").splitlines()) == 5


# Text with everything a Python str can hold: lone surrogates (category Cs) included.
any_text = st.text(st.characters(codec=None, categories=None), max_size=12)
hostile_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**200), max_value=2**200)
    | st.floats()
    | any_text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(any_text, inner, max_size=3),
    max_leaves=8,
)
hostile_dicts = st.dictionaries(st.sampled_from(FIELDS) | any_text, hostile_values, max_size=6)


@settings(max_examples=150, deadline=None)
@given(
    data=st.lists(
        st.one_of(hostile_dicts, good_rows, good_rows.map(lambda r: {**r, "id": "dup"})),
        min_size=1,
        max_size=10,
    )
)
def test_evaluate_never_raises_on_hostile_dicts_when_lenient(data: list[Any]) -> None:
    """Fuzz: whatever Python dicts come in, a lenient run gives every sample a row per metric,
    scores every readable one, and every row can be written."""
    metrics = ["id_mrr", "non_llm_context_recall"]
    evaluation = ctxeval.evaluate(data, metrics, lenient=True)
    assert len(evaluation.results) == len(data) * len(metrics)
    for row in evaluation.results:
        assert row.status in (Status.OK, Status.UNDEFINED, Status.ERROR)
        if row.status is Status.OK:
            assert row.score is not None
            assert 0.0 <= row.score <= 1.0
        row.to_json().encode("utf-8")
    ids = [r.sample_id for r in evaluation.results[:: len(metrics)]]
    assert len(set(ids)) == len(ids)  # one sample, one id: duplicates renamed, never merged
