"""The ID metrics' evidence in bulk (``details_batch``, what ``results.jsonl`` and the batch
scorer write) equals each row's, sample by sample, byte for byte (#53).

The bulk form reads the sides once per chunk for every ID metric and computes the flags, the
split and the top k by C-level passes; every row must still carry exactly the details the
per-sample path gives (``details_of(pipeline.judge_now(sample))``), in the same key order.
"""

from __future__ import annotations

import json
import random
from typing import Any

import attrs
import orjson
import pytest

import ctxeval
from ctxeval import Sample
from ctxeval._output.lines import jsonl_lines
from ctxeval_ids.metrics import IDBasedContextPrecision

POOL = ["d1", "d2", "d3", "é", "日本", 'a"b', "x\\y", "tab\tid", "🙂", "1", "01", " sp ", "Ωzz"]
"""IDs that JSON escapes, that are not ASCII, that look alike."""

METRICS: list[tuple[str, dict[str, Any]]] = [
    ("id_based_context_precision", {}),
    ("id_based_context_recall", {}),
    ("id_based_context_recall", {"relevance_level": 2, "name": "recall_at_level_2"}),
    ("id_precision_at_k", {"k": 3}),
    ("id_recall_at_k", {}),
    ("id_hit_rate_at_k", {"k": 2}),
    ("id_mrr", {}),
    ("id_average_precision", {}),
    ("id_ndcg_at_k", {}),
    ("id_ndcg_at_k", {"k": 4, "relevance_level": 2}),
    ("id_average_precision_at_k", {"k": 5}),
    ("id_reciprocal_rank_at_k", {}),
    ("id_r_precision", {}),
    ("id_f1_at_k", {}),
    ("id_bpref", {"relevance_level": 2}),
    ("id_judged_at_k", {"k": 5}),
    ("id_mrr", {"trec_eval_averaging": True, "name": "mrr_trec_eval"}),
]


def odd_samples(count: int, seed: int) -> list[Sample]:
    """Random samples with every odd case: empty sides, repeats, graded references (negative
    and zero grades), integer IDs, escaped and non-ASCII IDs, more IDs than any k."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        retrieved: list[Any] = [rng.choice(POOL) for _ in range(rng.randint(0, 14))]
        reference: Any = [rng.choice(POOL) for _ in range(rng.randint(0, 6))]
        kind = i % 6
        if kind == 1:
            reference = {item: rng.randint(-1, 3) for item in reference}
        elif kind == 2:
            retrieved = retrieved + retrieved
        elif kind == 3:
            retrieved = [rng.randint(0, 5) for _ in retrieved]
            reference = [str(rng.randint(0, 5)) for _ in reference]
        row = {"id": f"s{i}", "retrieved_context_ids": retrieved}
        row["reference_context_ids"] = reference
        out.append(Sample.from_dict(row))
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_bulk_details_equal_each_rows_byte_for_byte(seed: int) -> None:
    samples = odd_samples(300, seed)
    metrics = [ctxeval.get_metric(name, **options) for name, options in METRICS]
    memo: dict[Any, Any] = {}  # shared, as the columns of one block share it
    for metric in metrics:
        bulk = metric.details_batch(samples, memo)
        one_by_one = [metric._details_now(sample) for sample in samples]
        assert len(bulk) == len(samples)
        for sample, fast, slow in zip(samples, bulk, one_by_one, strict=True):
            assert orjson.dumps(fast) == orjson.dumps(slow), (metric.name, sample)


def test_bulk_details_of_a_chunk_do_not_depend_on_the_other_metrics() -> None:
    """A metric's details are the same computed alone or after metrics that share its sides
    (the memo hands it what they computed, never what they made their own)."""
    samples = odd_samples(200, 9)
    metrics = [ctxeval.get_metric(name, **options) for name, options in METRICS]
    alone = [orjson.dumps(m.details_batch(samples, {})) for m in metrics]
    memo: dict[Any, Any] = {}
    shared = [orjson.dumps(m.details_batch(samples, memo)) for m in metrics]
    assert shared == alone


def test_results_lines_from_the_columns_equal_each_rows_json() -> None:
    """What ``results.jsonl`` gets from a run's row blocks (the evidence in bulk) is each
    row's ``to_json()``, line for line, the odd rows (undefined, graded) included."""
    samples = odd_samples(400, 4)
    metrics = [ctxeval.get_metric(name, **options) for name, options in METRICS]
    evaluation = ctxeval.evaluate(samples, metrics, lenient=True)
    written = b"".join(jsonl_lines(part) for part in evaluation._parts)
    expected = "".join(row.to_json() + "\n" for row in evaluation.results).encode()
    assert written == expected


@attrs.frozen(kw_only=True)
class _OddEvidence(IDBasedContextPrecision):
    """Evidence orjson refuses (a set, an integer beyond 64 bits): written as ``to_json``
    writes it."""

    registry_name = "odd_evidence_precision"

    def evidence(self, judgement: Any) -> dict[str, Any]:
        return {"seen": frozenset(judgement.retrieved), "big": 2**70}


def test_the_batch_scorer_writes_what_orjson_refuses_as_results_jsonl_does() -> None:
    import pyarrow as pa

    from ctxeval.runners import BatchScorer

    rows = [
        {"id": f"s{i}", "retrieved_context_ids": ["a", "b"], "reference_context_ids": ["a"]}
        for i in range(20)
    ]
    metrics = [_OddEvidence(), ctxeval.get_metric("id_ndcg_at_k")]
    table = BatchScorer.build(metrics)(pa.Table.from_pylist(rows))
    expected = [
        json.loads(row.to_json())["details"] for row in ctxeval.evaluate(rows, metrics).results
    ]
    assert [json.loads(text) for text in table.column("details").to_pylist()] == expected
    assert expected[0]["big"] == 2**70  # (not "unwritable", as the scorer wrote it before)
