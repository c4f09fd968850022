"""The reason of an ``undefined`` ID row says why: no reference IDs at all, or reference IDs
that are all judged not relevant (below ``relevance_level``)."""

from __future__ import annotations

import pytest

import ctxeval

EMPTY = "nothing to recall: there are no reference context IDs"
NOT_RELEVANT = (
    "nothing to recall: the reference judges every document not relevant "
    "(grade below relevance_level {level})"
)
METRICS = ["id_based_context_precision", "id_based_context_recall", "nDCG@10", "P@5", "RR",
           "AP", "Bpref", "Rprec"]  # fmt: skip


def reasons(samples: list[dict[str, object]], metrics: list[object]) -> set[str | None]:
    ev = ctxeval.evaluate(samples, metrics)
    assert {row.status for row in ev.results} == {ctxeval.Status.UNDEFINED}
    return {row.reason for row in ev.results}


@pytest.mark.parametrize("retrieved", [["d1", "d2"], []])
def test_every_document_judged_not_relevant(retrieved: list[str]) -> None:
    sample = {"retrieved_context_ids": retrieved, "reference_context_ids": {"d1": 0, "d2": 0}}
    assert reasons([sample] * 3, list(METRICS)) == {NOT_RELEVANT.format(level=1)}


def test_the_batch_path_gives_the_same_reason() -> None:
    judged = {"retrieved_context_ids": ["d1"], "reference_context_ids": {"d1": 0}}
    plain = {"retrieved_context_ids": ["d1"], "reference_context_ids": ["d1"]}
    ev = ctxeval.evaluate([plain, judged, plain] * 50, list(METRICS))
    undefined = {row.reason for row in ev.results if row.status is ctxeval.Status.UNDEFINED}
    assert undefined == {NOT_RELEVANT.format(level=1)}
    assert len([row for row in ev.results if row.score is not None]) == 100 * len(METRICS)


def test_below_a_higher_relevance_level() -> None:
    graded = {"retrieved_context_ids": ["d1"], "reference_context_ids": {"d1": 1, "d2": 0}}
    metric = ctxeval.get_metric("id_mrr", relevance_level=2)
    assert reasons([graded], [metric]) == {NOT_RELEVANT.format(level=2)}
    plain = {"retrieved_context_ids": ["d1"], "reference_context_ids": ["d1"]}
    [reason] = reasons([plain], [metric])
    assert reason is not None
    assert "carry no grades" in reason
    assert "relevance_level 2" in reason


def test_no_reference_ids_keeps_its_reason() -> None:
    sample = {"retrieved_context_ids": ["d1"], "reference_context_ids": []}
    assert reasons([sample] * 3, list(METRICS)) == {EMPTY}


def test_relevant_documents_score_as_before() -> None:
    sample = {"retrieved_context_ids": ["d3", "d1"], "reference_context_ids": {"d1": 1, "d3": 0}}
    ev = ctxeval.evaluate([sample], ["id_based_context_precision", "RR"])
    assert [row.score for row in ev.results] == [0.5, 0.5]


def test_trec_eval_averaging_still_scores_zero() -> None:
    sample = {"retrieved_context_ids": ["d1"], "reference_context_ids": {"d1": 0}}
    metric = ctxeval.get_metric("P@5", trec_eval_averaging=True)
    [row] = ctxeval.evaluate([sample], [metric]).results
    assert (row.status, row.score) == (ctxeval.Status.OK, 0.0)
