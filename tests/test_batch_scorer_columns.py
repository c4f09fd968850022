"""The batch scorer reads an Arrow batch by columns (no dict per row) and builds its rows as
Arrow columns: the samples and the rows are those of the row-by-row reading and of
``evaluate`` (#53), whatever the cells hold (nulls, empty lists, missing or old-named
columns, integer or non-ASCII ids, graded qrels, chunks and slices); what the columns cannot
be read for goes row by row, with that path's errors."""

from __future__ import annotations

import json
from typing import Any

import pytest

import ctxeval
from ctxeval._data.arrow_columns import arrow_samples
from ctxeval._results.table import USAGE_COLUMNS
from ctxeval.runners import BatchScorer

pa = pytest.importorskip("pyarrow")

METRICS = ["id_based_context_precision", "id_ndcg_at_k", "id_based_context_recall"]


def _by_rows(table: Any) -> list[ctxeval.Sample]:
    """The samples of ``table`` read row by row (the way every batch was read before)."""
    return [
        ctxeval.Sample.from_dict({k: v for k, v in row.items() if v is not None})
        for row in table.to_pylist()
    ]


def _rows(table: Any) -> list[dict[str, Any]]:
    rows = table.to_pylist()
    for row in rows:
        row["details"] = None if row["details"] is None else json.loads(row["details"])
        row["usage"] = {name: row.pop(name) for name in USAGE_COLUMNS}  # (flattened)
    return rows


def _evaluated(table: Any, metrics: list[str] = METRICS) -> list[dict[str, Any]]:
    samples = [{k: v for k, v in row.items() if v is not None} for row in table.to_pylist()]
    return [row.to_dict() for row in ctxeval.evaluate(samples, metrics).results]


def _mixed() -> Any:
    """Nulls (a null list, a null id list, a null text), empty lists, non-ASCII ids and text,
    a sample whose reference is empty (undefined rows) and one without reference ids (error
    rows: a missing field)."""
    return pa.table(
        {
            "id": ["a", "b", "c", "d", "e", "f"],
            "retrieved_context_ids": [["x", "y", "z"], [], None, ["é1", "x"], ["x"], ["q", "x"]],
            "reference_context_ids": [["y"], ["x"], ["x"], ["é1"], [], None],
            "user_input": ["what?", None, "où ?", "", None, "why"],
        }
    )


def test_columns_give_the_samples_rows_give() -> None:
    table = _mixed()
    read = arrow_samples(table)
    assert read is not None  # (read by columns)
    assert read == _by_rows(table)
    assert read[2].retrieved_context_ids is None
    assert read[1].retrieved_context_ids == ()
    assert [s.metadata for s in read] == [{}] * 6


@pytest.mark.parametrize(
    "table",
    [
        pytest.param(
            pa.table({"id": pa.array([1, 2], pa.int64()), "retrieved_context_ids": [["1"], ["2"]]}),
            id="integer ids",
        ),
        pytest.param(
            pa.table(
                {
                    "id": pa.array(["a", "b"], pa.large_string()),
                    "retrieved_context_ids": pa.array(
                        [["1", "2"], ["2"]], pa.large_list(pa.string())
                    ),
                    "reference_context_ids": pa.array([[3], [2, 4]], pa.list_(pa.int64())),
                }
            ),
            id="large types, integer context ids",
        ),
        pytest.param(
            pa.table(
                {"id": ["a", "b"], "question": ["q1", "q2"], "contexts": [["t1"], ["t 2", "é"]]}
            ),
            id="old field names",
        ),
        pytest.param(
            pa.table(
                {
                    "id": ["a", "b"],
                    "retrieved_context_ids": [["d1", "d2"], ["d3"]],
                    "reference_context_ids": [{"d1": 2, "d3": 0}, {"d1": 1, "d3": 3}],
                }
            ),
            id="graded qrels (a struct)",
        ),
        pytest.param(
            pa.concat_tables([_mixed(), _mixed().slice(2, 3)]).slice(1), id="chunks and a slice"
        ),
    ],
)
def test_cells_the_converters_read_are_read_as_rows_read_them(table: Any) -> None:
    read = arrow_samples(table)
    assert read is not None
    assert read == _by_rows(table)


@pytest.mark.parametrize(
    ("columns", "why"),
    [
        ({"id": ["a"], "retrieved_context_ids": [["x"]], "source": ["web"]}, "a metadata column"),
        ({"id": ["a"], "question": ["q"], "user_input": ["q"]}, "a field under two names"),
        ({"retrieved_context_ids": [["x"]]}, "no id column"),
        ({"id": ["a", None], "retrieved_context_ids": [["x"], ["y"]]}, "a null id"),
        ({"id": ["a"], "retrieved_context_ids": [["x", None]]}, "a null item in a list"),
        ({"id": ["a"], "retrieved_context_ids": ["x"]}, "a string for a list"),
        ({"id": ["a"], "retrieved_context_ids": [[True]]}, "a boolean id"),
    ],
)
def test_what_columns_cannot_give_is_read_row_by_row(columns: dict[str, Any], why: str) -> None:
    assert arrow_samples(pa.table(columns)) is None, why


def test_rows_from_columns_equal_the_rows_of_evaluate() -> None:
    table = _mixed()
    got = _rows(BatchScorer.build(METRICS)(table))
    expected = _evaluated(table)
    assert {row["status"] for row in expected} == {"ok", "undefined", "error"}
    assert got == expected
    lean = _rows(BatchScorer.build(METRICS, details=False)(table))
    assert [{**row, "details": None} for row in expected] == lean


def test_a_batch_read_row_by_row_gives_the_same_rows_and_errors() -> None:
    table = _mixed().append_column("source", pa.array(["w"] * 6))  # metadata: row by row
    assert arrow_samples(table) is None
    assert _rows(BatchScorer.build(METRICS)(table)) == _evaluated(table)
    with pytest.raises(ctxeval.DataError, match="needs an 'id'"):
        BatchScorer.build(METRICS)(table.drop_columns(["id"]))
    twice = pa.table({"id": ["a", "a"], "retrieved_context_ids": [["x"], ["y"]]})
    with pytest.raises(ctxeval.DataError, match="two samples have this id"):
        BatchScorer.build(METRICS)(twice)


def test_record_batches_and_empty_batches() -> None:
    table = _mixed()
    scorer = BatchScorer.build(METRICS)
    batches = table.to_batches(max_chunksize=4)
    got = [row for batch in batches for row in _rows(scorer(batch))]
    assert got == _evaluated(table)
    empty = scorer(table.slice(0, 0))
    assert empty.num_rows == 0
    assert empty.schema == scorer(table).schema
    assert json.loads(scorer.rows_per_sample(table)[5])[0]["status"] == "error"
