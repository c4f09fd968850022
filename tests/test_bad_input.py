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
