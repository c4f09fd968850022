"""The batch scorer scores an Arrow batch of ID samples as ranked columns (#53): when every
metric of the run takes them and the batch is of the plain shape (an ``id``, the retrieved and
reference context IDs as lists of strings), its rows are scored from the columns' flat values
and offsets, without a :class:`~ctxeval.Sample` per row; the rows are those of ``evaluate``
whatever the batch holds (empty lists, null lists, repeated IDs, non-ASCII IDs, slices and
chunks, chunks of queries smaller than the batch), and a batch of another shape goes the
sample path as before."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

import ctxeval
from ctxeval._data import arrow_columns
from ctxeval._data.arrow_columns import arrow_ranked
from ctxeval._results.table import USAGE_COLUMNS
from ctxeval.runners import BatchScorer

pa = pytest.importorskip("pyarrow")
pytest.importorskip("numpy")

RANKED = [
    "id_based_context_precision",
    "id_ndcg_at_k",
    "id_based_context_recall",
    "id_mrr",
    "id_average_precision",
    "id_precision_at_k",
    "id_recall_at_k",
    "id_hit_rate_at_k",
]


def _rows(table: Any) -> list[dict[str, Any]]:
    rows = table.to_pylist()
    for row in rows:
        row["details"] = None if row["details"] is None else json.loads(row["details"])
        row["usage"] = {name: row.pop(name) for name in USAGE_COLUMNS}  # (flattened)
    return rows


def _evaluated(table: Any, metrics: list[str], *, details: bool = True) -> list[dict[str, Any]]:
    samples = [{k: v for k, v in row.items() if v is not None} for row in table.to_pylist()]
    rows = [row.to_dict() for row in ctxeval.evaluate(samples, metrics).results]
    if not details:
        for row in rows:
            row["details"] = None
    return rows


def _odd() -> Any:
    """Plain rows and odd ones: empty lists, null lists, a retrieved ID repeated, nothing
    relevant retrieved, everything relevant retrieved."""
    return pa.table(
        {
            "id": ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"],
            "retrieved_context_ids": [
                ["x", "y", "z"],
                [],
                None,
                ["y", "x", "y", "x", "w"],
                ["x"],
                ["q", "x"],
                ["p", "q"],
                ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"],
                ["x", "x"],
                ["x", "y"],
            ],
            "reference_context_ids": [
                ["y"],
                ["x"],
                ["x"],
                ["x", "w"],
                [],
                None,
                ["x"],
                ["l", "a", "e"],
                ["x"],
                ["y", "x"],
            ],
        }
    )


def _generated(n: int, seed: int = 7, least: int = 0) -> Any:
    rng = random.Random(seed)
    return pa.table(
        {
            "id": [f"q{seed}-{i}" for i in range(n)],
            "retrieved_context_ids": [
                [f"d{rng.randrange(30)}" for _ in range(rng.randrange(least, 12))] for _ in range(n)
            ],
            "reference_context_ids": [
                [f"d{x}" for x in rng.sample(range(30), rng.randrange(least, 5))] for _ in range(n)
            ],
        }
    )


def test_a_plain_batch_is_read_as_ranked_columns() -> None:
    source = arrow_ranked(_odd())
    assert source is not None
    chunk = source.ranked(0, len(source))
    assert chunk.ids == list("abcdefghij")
    bounds = zip(chunk.offsets[:-1], chunk.offsets[1:], strict=True)
    retrieved = [chunk.gains[a:b].tolist() for a, b in bounds]
    assert retrieved[:4] == [[-1, 1, -1], [], [], [-1, 1, 1]]  # (d: repeats left out)
    assert retrieved[8] == [1]
    assert chunk.ref_offsets.tolist() == [0, 1, 2, 3, 5, 5, 5, 6, 9, 10, 12]
    assert set(chunk.ref_grades.tolist()) == {1}
    assert chunk.samples[3] == ctxeval.Sample(
        id="d", retrieved_context_ids=["y", "x", "y", "x", "w"], reference_context_ids=["x", "w"]
    )


@pytest.mark.parametrize("details", [True, False])
@pytest.mark.parametrize("dense", [True, False], ids=["flags table", "sorted keys"])
def test_ranked_rows_equal_the_rows_of_evaluate(
    details: bool, dense: bool, monkeypatch: Any
) -> None:
    if not dense:  # (a batch of many distinct IDs: its keys sorted, not looked up)
        monkeypatch.setattr(arrow_columns, "_DENSE", 0)
    table = pa.concat_tables([_odd(), _generated(200, seed=5)])
    expected = _evaluated(table, RANKED, details=details)
    assert {row["status"] for row in expected} == {"ok", "undefined", "error"}
    assert _rows(BatchScorer.build(RANKED, details=details)(table)) == expected
    repeated = pa.table(
        {"id": ["a"], "retrieved_context_ids": [["x"]], "reference_context_ids": [["y", "y"]]}
    )
    assert arrow_ranked(repeated) is None


def test_no_sample_is_built_for_plain_rows_without_details(monkeypatch: Any) -> None:
    table = pa.concat_tables([_generated(300, least=1), _odd()])  # 4 rows left by the columns
    expected = _evaluated(table, RANKED, details=False)
    built: list[int] = []
    real = arrow_columns.arrow_samples

    def counted(batch: Any) -> Any:
        built.append(batch.num_rows)
        return real(batch)

    monkeypatch.setattr(arrow_columns, "arrow_samples", counted)
    got = _rows(BatchScorer.build(RANKED, details=False)(table))
    assert got == expected
    assert built == [1] * 4  # one sample for each row the columns leave, no more


def test_chunks_slices_and_small_chunks_of_queries(monkeypatch: Any) -> None:
    from ctxeval._run import columnar

    table = pa.concat_tables([_odd(), _generated(40, seed=3)]).slice(2)
    assert table.column("id").num_chunks == 2
    monkeypatch.setattr(columnar, "RANKED_CHUNK", 7)  # the batch in several chunks of queries
    scorer = BatchScorer.build(RANKED)
    assert _rows(scorer(table)) == _evaluated(table, RANKED)
    batch = table.combine_chunks().to_batches()[0].slice(3, 20)  # a RecordBatch, offset
    assert _rows(scorer(batch)) == _evaluated(pa.Table.from_batches([batch]), RANKED)
    assert scorer(table.slice(0, 0)).num_rows == 0


def test_many_rows_left_to_the_sample_path_build_their_samples_at_once() -> None:
    table = pa.table(
        {
            "id": [f"s{i}" for i in range(100)],
            "retrieved_context_ids": [[] if i % 2 else ["x"] for i in range(100)],
            "reference_context_ids": [["x"]] * 100,
        }
    )
    assert _rows(BatchScorer.build(RANKED)(table)) == _evaluated(table, RANKED)


@pytest.mark.parametrize(
    ("columns", "why"),
    [
        (
            {"id": ["a"], "retrieved_context_ids": [["é"]], "reference_context_ids": [["é"]]},
            "a non-ASCII id",
        ),
        (
            {"id": ["a"], "retrieved_context_ids": [["x"]], "reference_context_ids": [["x", "x"]]},
            "a reference id twice",
        ),
        (
            {"id": ["a"], "retrieved_context_ids": [["x", None]], "reference_context_ids": [["x"]]},
            "a null id in a list",
        ),
        ({"id": ["a"], "retrieved_context_ids": [["x"]]}, "no reference column"),
        (
            {
                "id": ["a"],
                "retrieved_context_ids": [["x"]],
                "reference_context_ids": [["x"]],
                "user_input": ["q"],
            },
            "another field",
        ),
        (
            {"id": [1], "retrieved_context_ids": [["x"]], "reference_context_ids": [["x"]]},
            "an integer sample id",
        ),
    ],
)
def test_other_batches_go_the_sample_path_with_the_same_rows(
    columns: dict[str, Any], why: str
) -> None:
    table = pa.table(columns)
    assert arrow_ranked(table) is None, why
    try:
        expected: Any = _evaluated(table, RANKED)
    except ctxeval.DataError as exc:  # (a null id: refused as evaluate refuses it)
        expected = type(exc)
    try:
        got: Any = _rows(BatchScorer.build(RANKED)(table))
    except ctxeval.DataError as exc:
        got = type(exc)
    assert got == expected, why


def test_a_null_id_or_two_samples_with_one_id_are_refused_as_before() -> None:
    twice = pa.table(
        {
            "id": ["a", "a"],
            "retrieved_context_ids": [["x"], ["y"]],
            "reference_context_ids": [["x"]] * 2,
        }
    )
    assert arrow_ranked(twice) is None
    with pytest.raises(ctxeval.DataError, match="two samples have this id"):
        BatchScorer.build(RANKED)(twice)
    unnamed = twice.set_column(0, "id", pa.array(["a", None]))
    assert arrow_ranked(unnamed) is None
    with pytest.raises(ctxeval.DataError, match="needs an 'id'"):
        BatchScorer.build(RANKED)(unnamed)


def test_a_metric_without_ranked_columns_scores_the_batch_from_samples() -> None:
    table = _odd()
    metrics = ["id_based_context_precision", "id_f1_at_k"]
    assert _rows(BatchScorer.build(metrics)(table)) == _evaluated(table, metrics)
