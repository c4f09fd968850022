"""Graded reference IDs (TREC qrels) on the fast path: the ranked ID metrics judge them in
the chunk's batch, and nDCG's graded value comes from :func:`graded_scores`; every row equals
the row ``score`` gives, whatever the grades, repeats or matcher."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ctxeval
from ctxeval import Sample, Status, policy
from ctxeval._data.sample import GradedIDs
from ctxeval.plugin import Items, compose
from ctxeval_ids.matcher import IDMatcher

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


class _NotMembership(IDMatcher):
    """The ID matcher without ``membership``: judged through ``match_batch``."""

    membership = False


graded = st.lists(st.tuples(st.sampled_from("abcdef"), st.integers(-1, 3)), max_size=7).map(
    lambda pairs: GradedIDs(tuple(i for i, _ in pairs), tuple(g for _, g in pairs))
)  # repeats and negative grades included, as GradedIDs may hold them
samples = st.lists(
    st.builds(
        lambda i, retrieved, reference: Sample(
            id=str(i), retrieved_context_ids=retrieved, reference_context_ids=reference
        ),
        st.integers(0, 10_000),
        st.lists(st.sampled_from("abcdefg"), max_size=8),
        st.one_of(graded, st.lists(st.sampled_from("abcdef"), max_size=4)),
    ),
    min_size=1,
    max_size=8,
)


def metrics(k: int) -> list[Any]:
    reference = Items(field="reference_context_ids", what="reference IDs", dedupe=True)
    retrieved = Items(field="retrieved_context_ids", what="retrieved IDs", dedupe=True)
    return [
        ctxeval.get_metric("id_ndcg_at_k", k=k),
        ctxeval.get_metric("id_ndcg_at_k", k=k, trec_eval_averaging=True, name="ndcg_trec"),
        ctxeval.get_metric("id_average_precision"),
        ctxeval.get_metric("id_precision_at_k", k=k),
        ctxeval.get_metric("id_mrr"),
        ctxeval.get_metric("id_recall_at_k", k=k),
        ctxeval.get_metric("id_bpref"),
        ctxeval.get_metric("id_r_precision", relevance_level=2, name="rprec_2"),
        compose(
            "ndcg_not_membership", reference=reference, retrieved=retrieved,
            matcher=_NotMembership(), formula=policy.NDCGAtK(k=k),
        ),
    ]  # fmt: skip


@FAST
@given(batch=samples, k=st.integers(1, 5))
def test_every_graded_row_equals_scores_row(batch: list[Sample], k: int) -> None:
    batch = [
        Sample(
            id=str(i),
            retrieved_context_ids=s.retrieved_context_ids,
            reference_context_ids=s.reference_context_ids,
        )
        for i, s in enumerate(batch)
    ]
    chosen = metrics(k)
    evaluation = ctxeval.evaluate(batch, chosen)
    expected = [m.score(s).labelled(s.id or "", m.name) for s in batch for m in chosen]
    for row, plain in zip(evaluation.results, expected, strict=True):
        assert (row.sample_id, row.metric, row.status, row.reason) == (
            plain.sample_id, plain.metric, plain.status, plain.reason,
        )  # fmt: skip
        assert row.score == plain.score  # to the last bit
        assert row.to_dict() == plain.to_dict()
    for metric in chosen[:2]:  # and each batch's rows
        fast = metric.score_batch(batch)
        for row, sample in zip(fast, batch, strict=True):
            plain = metric.score(sample)
            assert (row.status, row.score, row.reason) == (plain.status, plain.score, plain.reason)
            assert row.to_dict()["details"] == plain.to_dict()["details"]


def test_graded_samples_are_judged_in_the_batch() -> None:
    batch = [
        Sample(id="1", retrieved_context_ids=["a", "b"], reference_context_ids={"b": 2, "c": 0}),
        Sample(
            id="2", retrieved_context_ids=["a"], reference_context_ids={"c": 0}
        ),  # none relevant
        Sample(id="3", retrieved_context_ids=["c"], reference_context_ids=["c"]),
    ]
    ndcg = ctxeval.get_metric("id_ndcg_at_k", k=2)
    judged = ndcg.judge_batch(batch)
    assert judged is not None
    assert judged.where == [0, 2]  # the graded sample too; the edge case goes to score
    rows = ndcg.score_batch(batch)
    assert rows[0].score == ndcg.score(batch[0]).score == pytest.approx(1 / math.log2(3))
    assert rows[1].status is Status.UNDEFINED
    assert rows[1].reason == ndcg.score(batch[1]).reason
