"""Every rule of the score policy, on every metric it concerns."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

import ctxeval
from ctxeval import InvalidResultError, MetricResult, Status, policy

ID_METRICS = [
    "id_based_context_precision",
    "id_based_context_recall",
    "id_precision_at_k",
    "id_recall_at_k",
    "id_hit_rate_at_k",
    "id_mrr",
    "id_average_precision",
    "id_ndcg_at_k",
]
PRECISION_LIKE = {"id_based_context_precision", "id_precision_at_k"}
STRING_METRICS = ["non_llm_context_precision_with_reference", "non_llm_context_recall"]


def run(metric: str | ctxeval.Metric, **fields: object) -> MetricResult:
    [row] = ctxeval.evaluate([fields], metrics=[metric]).results
    return row


# --- empty reference: nothing to recall ----------------------------------------------------


@pytest.mark.parametrize("metric", ID_METRICS)
@pytest.mark.parametrize("retrieved", [[], ["a", "b"]])
def test_empty_reference_ids_are_undefined(metric: str, retrieved: list[str]) -> None:
    row = run(metric, retrieved_context_ids=retrieved, reference_context_ids=[])
    assert row.status is Status.UNDEFINED
    assert row.score is None
    assert "nothing to recall" in (row.reason or "")


@pytest.mark.parametrize("metric", STRING_METRICS)
@pytest.mark.parametrize("retrieved", [[], ["some chunk"]])
def test_empty_reference_contexts_are_undefined(metric: str, retrieved: list[str]) -> None:
    row = run(metric, retrieved_contexts=retrieved, reference_contexts=[])
    assert row.status is Status.UNDEFINED
    assert "reference contexts" in (row.reason or "")


# --- nothing retrieved ----------------------------------------------------------------------


@pytest.mark.parametrize("metric", ID_METRICS)
def test_nothing_retrieved_ids(metric: str) -> None:
    row = run(metric, retrieved_context_ids=[], reference_context_ids=["a"])
    if metric in PRECISION_LIKE:
        assert row.status is Status.UNDEFINED
        assert "nothing retrieved" in (row.reason or "")
    else:
        assert row.status is Status.OK
        assert row.score == 0.0


def test_nothing_retrieved_texts() -> None:
    row = run(STRING_METRICS[0], retrieved_contexts=[], reference_contexts=["a"])
    assert row.status is Status.UNDEFINED
    assert "nothing retrieved" in (row.reason or "")
    row = run(STRING_METRICS[1], retrieved_contexts=[], reference_contexts=["a"])
    assert (row.status, row.score) == (Status.OK, 0.0)


# --- duplicates and ID types ----------------------------------------------------------------


def test_duplicate_retrieved_ids_keep_their_first_rank() -> None:
    fields = {"retrieved_context_ids": ["x", "a", "x", "a", "b"], "reference_context_ids": ["a"]}
    assert run("id_based_context_precision", **fields).score == 1 / 3  # x, a, b
    assert run("id_mrr", **fields).score == 0.5  # a keeps rank 2
    assert run(ctxeval.get_metric("id_precision_at_k", k=2), **fields).score == 0.5


def test_duplicate_reference_ids_count_once() -> None:
    row = run(
        "id_based_context_recall",
        retrieved_context_ids=["a"],
        reference_context_ids=["a", "a", "b"],
    )
    assert row.score == 0.5


def test_int_and_str_ids_compare_as_strings() -> None:
    row = run(
        "id_based_context_precision",
        retrieved_context_ids=[1, "2", 3],
        reference_context_ids=["1", 2],
    )
    assert row.score == 2 / 3
    sample = ctxeval.Sample(retrieved_context_ids=[1, "1"], reference_context_ids=[1])
    assert sample.retrieved_context_ids == ("1", "1")


@pytest.mark.parametrize("bad", [1.5, True, None, [1], {"a": 1}])
def test_other_id_types_are_refused_with_the_field(bad: object) -> None:
    with pytest.raises(ctxeval.DataError, match="retrieved_context_ids"):
        ctxeval.Sample(retrieved_context_ids=["ok", bad])


# --- the threshold rule ---------------------------------------------------------------------


def test_similarity_exactly_at_the_threshold_is_a_match() -> None:
    # Levenshtein("ab", "ac") = 1 edit over 2 characters: similarity exactly 0.5.
    at = {"retrieved_contexts": ["ab"], "reference_contexts": ["ac"]}
    assert run("non_llm_context_recall", **at).score == 1.0
    assert run("non_llm_context_precision_with_reference", **at).score == 1.0
    # Just above the threshold is not a match.
    above = ctxeval.get_metric("non_llm_context_recall", threshold=0.5000001)
    assert run(above, **at).score == 0.0


def test_is_match_is_greater_or_equal() -> None:
    assert policy.is_match(0.5, 0.5)
    assert not policy.is_match(math.nextafter(0.5, 0), 0.5)


# --- exact arithmetic -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("verdicts", "expected"),
    [
        ([True, False], Fraction(1)),
        ([False, True], Fraction(1, 2)),
        ([True, False, True], Fraction(5, 6)),
        ([False, False], Fraction(0)),
        ([True] * 7, Fraction(1)),
    ],
)
def test_average_precision_is_exact(verdicts: list[bool], expected: Fraction) -> None:
    assert policy.average_precision_value(verdicts) == expected
    assert policy.average_precision(verdicts).score == float(expected)


def test_average_precision_of_nothing_is_undefined() -> None:
    assert policy.average_precision([]).status is Status.UNDEFINED


def test_recall_and_precision_counts() -> None:
    assert policy.recall(3, 3, what="x").score == 1.0
    assert policy.recall(0, 0, what="x").status is Status.UNDEFINED
    assert policy.precision(0, 0).status is Status.UNDEFINED
    with pytest.raises(ValueError, match="impossible"):
        policy.recall(4, 3, what="x")


def test_dedupe_keeps_first_rank() -> None:
    assert policy.dedupe(["b", "a", "b", "c", "a"]) == ["b", "a", "c"]


# --- a result outside the policy cannot exist -----------------------------------------------


@pytest.mark.parametrize("score", [1.0000001, -0.1, math.nan, math.inf, True, "0.5"])
def test_an_ok_result_refuses_a_score_outside_0_1(score: object) -> None:
    with pytest.raises(InvalidResultError):
        MetricResult(Status.OK, score)  # type: ignore[arg-type]


def test_undefined_and_error_need_a_reason_and_no_score() -> None:
    with pytest.raises(InvalidResultError, match="reason"):
        MetricResult(Status.UNDEFINED)
    with pytest.raises(InvalidResultError, match="no score"):
        MetricResult(Status.ERROR, 0.5, "x")
    assert MetricResult.ok(1).score == 1.0
    assert type(MetricResult.ok(1).score) is float


def test_result_round_trips_through_a_dict() -> None:
    result = MetricResult.ok(
        0.25, details={"pairs": (1, 2)}, usage=ctxeval.Usage(requests=2, cost_usd=None)
    )
    again = MetricResult.from_dict(result.to_dict())
    assert again.score == 0.25
    assert again.usage.cost_usd is None
    assert again.details == {"pairs": [1, 2]}


def test_usage_adds_and_unknown_cost_stays_unknown() -> None:
    a = ctxeval.Usage(requests=1, prompt_tokens=10, cost_usd=0.5)
    b = ctxeval.Usage(requests=2, retries=1, completion_tokens=5, cost_usd=0.25, cache_hits=1)
    total = a + b
    assert (total.requests, total.retries, total.prompt_tokens, total.completion_tokens) == (
        3,
        1,
        10,
        5,
    )
    assert total.cost_usd == 0.75
    assert (a + ctxeval.Usage(cost_usd=None)).cost_usd is None
    with pytest.raises(ValueError, match="whole number >= 0"):
        ctxeval.Usage(requests=-1)
