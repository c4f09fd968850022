"""The seeds' worked examples come out exactly."""

from __future__ import annotations

import pytest

import ctxeval
from seed_data import (
    SEED_ID_PRECISION,
    SEED_ID_RECALL,
    SEED_NONLLM_PRECISION,
    SEED_NONLLM_RECALL,
)


def score(metric: str | ctxeval.Metric, sample: dict[str, object]) -> float | None:
    [row] = ctxeval.evaluate([sample], metrics=[metric]).results
    assert row.status is ctxeval.Status.OK, row.reason
    return row.score


def test_id_based_precision_seed_is_one_half() -> None:
    assert score("id_based_context_precision", SEED_ID_PRECISION) == 0.5


def test_id_based_recall_seed_is_one_quarter() -> None:
    assert score("id_based_context_recall", SEED_ID_RECALL) == 0.25


def test_non_llm_precision_seed_is_exactly_one() -> None:
    result = score("non_llm_context_precision_with_reference", SEED_NONLLM_PRECISION)
    assert result == 1.0
    assert type(result) is float


def test_non_llm_recall_seed_is_one_half() -> None:
    assert score("non_llm_context_recall", SEED_NONLLM_RECALL) == 0.5


@pytest.mark.parametrize(
    ("metric", "sample"),
    [
        (
            "id_based_context_precision",
            {"retrieved_context_ids": ["a", "b"], "reference_context_ids": ["b", "a"]},
        ),
        (
            "id_based_context_recall",
            {"retrieved_context_ids": ["a", "b"], "reference_context_ids": ["b", "a"]},
        ),
        (
            "id_precision_at_k",
            {
                "retrieved_context_ids": list("abcdefghij"),
                "reference_context_ids": list("abcdefghij"),
            },
        ),
        (
            "id_recall_at_k",
            {"retrieved_context_ids": ["a", "b"], "reference_context_ids": ["a", "b"]},
        ),
        ("id_hit_rate_at_k", {"retrieved_context_ids": ["a"], "reference_context_ids": ["a"]}),
        ("id_mrr", {"retrieved_context_ids": ["a", "x"], "reference_context_ids": ["a"]}),
        (
            "id_average_precision",
            {"retrieved_context_ids": ["a", "b", "c"], "reference_context_ids": ["c", "b", "a"]},
        ),
        (
            "id_ndcg_at_k",
            {
                "retrieved_context_ids": ["a", "b", "c", "x"],
                "reference_context_ids": ["c", "b", "a"],
            },
        ),
        (
            "non_llm_context_precision_with_reference",
            {"retrieved_contexts": ["same text"] * 7, "reference_contexts": ["same text"]},
        ),
        (
            "non_llm_context_recall",
            {"retrieved_contexts": ["x", "a passage"], "reference_contexts": ["a passage", "x"]},
        ),
    ],
)
def test_a_perfect_result_is_exactly_one(metric: str, sample: dict[str, object]) -> None:
    assert score(metric, sample) == 1.0  # no epsilon: 1.0 exactly, not 0.9999999999
