"""Metrics over context IDs.

Every metric compares ``retrieved_context_ids`` (ranked, best first) with
``reference_context_ids`` (the relevant ones, all of relevance 1). IDs compare as strings
(``1`` and ``"1"`` are the same ID); a retrieved ID that repeats keeps its first rank.

=============================  ================================================  ==========
metric                         score                                             nothing
                                                                                 retrieved
=============================  ================================================  ==========
``id_based_context_precision`` retrieved IDs in the reference / retrieved IDs    undefined
``id_based_context_recall``    reference IDs retrieved / reference IDs           0.0
``id_precision_at_k``          relevant in the top k / k (trec_eval ``P_k``)     undefined
``id_recall_at_k``             relevant in the top k / reference IDs             0.0
``id_hit_rate_at_k``           1 if a relevant ID is in the top k, else 0        0.0
``id_mrr``                     1 / rank of the first relevant ID (0 if none)     0.0
``id_average_precision``       sum of precision at each relevant rank /          0.0
                               reference IDs (trec_eval ``map``)
``id_ndcg_at_k``               DCG@k / ideal DCG@k, gain 1, discount             0.0
                               ``log2(rank + 1)`` (trec_eval ``ndcg_cut_k``)
=============================  ================================================  ==========

An empty reference makes every one of them ``undefined`` (nothing is relevant, as trec_eval
leaves out queries without relevant documents).

Note that ``id_average_precision`` divides by the number of *reference* IDs, as trec_eval
does, while the seeds' context precision divides by the relevant items *retrieved*.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import attrs

from ctxeval import MetricResult, Sample, policy
from ctxeval.base import BaseDeterministicMetric, positive_int

__all__ = [
    "IDMRR",
    "IDAveragePrecision",
    "IDBasedContextPrecision",
    "IDBasedContextRecall",
    "IDHitRateAtK",
    "IDNDCGAtK",
    "IDPrecisionAtK",
    "IDRecallAtK",
]

_REFERENCE = "reference context IDs"
_RETRIEVED = "retrieved context IDs"


@attrs.frozen(kw_only=True)
class _IDMetric(BaseDeterministicMetric):
    requires = ("retrieved_context_ids", "reference_context_ids")

    def score(self, sample: Sample) -> MetricResult:
        reference = frozenset(sample.reference_context_ids or ())
        if not reference:
            return policy.no_reference(_REFERENCE)
        retrieved = policy.dedupe(sample.retrieved_context_ids or ())
        return self._score(retrieved, reference)

    def _score(self, retrieved: list[str], reference: frozenset[str]) -> MetricResult:
        raise NotImplementedError


def _split(retrieved: list[str], reference: frozenset[str]) -> dict[str, Any]:
    """Evidence: which retrieved IDs are relevant, which are not, which reference IDs are missed."""
    found = set(retrieved)
    return {
        "relevant": [i for i in retrieved if i in reference],
        "irrelevant": [i for i in retrieved if i not in reference],
        "missing": sorted(reference - found),
    }


@attrs.frozen(kw_only=True)
class IDBasedContextPrecision(_IDMetric):
    """Share of the retrieved IDs that are in the reference (the seeds' ID-based precision)."""

    registry_name = "id_based_context_precision"

    def _score(self, retrieved: list[str], reference: frozenset[str]) -> MetricResult:
        details = _split(retrieved, reference)
        return policy.precision(
            len(details["relevant"]), len(retrieved), what=_RETRIEVED, details=details
        )


@attrs.frozen(kw_only=True)
class IDBasedContextRecall(_IDMetric):
    """Share of the reference IDs that were retrieved (the seeds' ID-based recall)."""

    registry_name = "id_based_context_recall"

    def _score(self, retrieved: list[str], reference: frozenset[str]) -> MetricResult:
        details = _split(retrieved, reference)
        found = len(reference) - len(details["missing"])
        return policy.recall(found, len(reference), what=_REFERENCE, details=details)


@attrs.frozen(kw_only=True)
class _AtK(_IDMetric):
    k: int = attrs.field(default=10, validator=positive_int)
    """The cut-off rank (default 10)."""

    def default_name(self) -> str:
        return self.registry_name.replace("_at_k", f"_at_{self.k}")

    def _top(self, retrieved: list[str], reference: frozenset[str]) -> tuple[int, dict[str, Any]]:
        top = retrieved[: self.k]
        ranks = [rank for rank, i in enumerate(top, start=1) if i in reference]
        return len(ranks), {"k": self.k, "relevant_ranks": ranks, "top_k": top}


@attrs.frozen(kw_only=True)
class IDPrecisionAtK(_AtK):
    """Relevant IDs in the top k, divided by k (trec_eval ``P_k``)."""

    registry_name = "id_precision_at_k"

    def _score(self, retrieved: list[str], reference: frozenset[str]) -> MetricResult:
        if not retrieved:
            return policy.precision(0, 0, what=_RETRIEVED)
        hits, details = self._top(retrieved, reference)
        return MetricResult.ok(hits / self.k, details=details)


@attrs.frozen(kw_only=True)
class IDRecallAtK(_AtK):
    """Relevant IDs in the top k, divided by the reference IDs (trec_eval ``recall_k``)."""

    registry_name = "id_recall_at_k"

    def _score(self, retrieved: list[str], reference: frozenset[str]) -> MetricResult:
        hits, details = self._top(retrieved, reference)
        return policy.recall(hits, len(reference), what=_REFERENCE, details=details)


@attrs.frozen(kw_only=True)
class IDHitRateAtK(_AtK):
    """1.0 when any relevant ID is in the top k, else 0.0 (trec_eval ``success_k``)."""

    registry_name = "id_hit_rate_at_k"

    def _score(self, retrieved: list[str], reference: frozenset[str]) -> MetricResult:
        hits, details = self._top(retrieved, reference)
        return MetricResult.ok(1.0 if hits else 0.0, details=details)


@attrs.frozen(kw_only=True)
class IDMRR(_IDMetric):
    """Reciprocal rank of the first relevant ID; 0.0 when none is retrieved (``recip_rank``)."""

    registry_name = "id_mrr"

    def _score(self, retrieved: list[str], reference: frozenset[str]) -> MetricResult:
        for rank, item in enumerate(retrieved, start=1):
            if item in reference:
                return MetricResult.ok(1 / rank, details={"first_relevant_rank": rank})
        return MetricResult.ok(0.0, details={"first_relevant_rank": None})


@attrs.frozen(kw_only=True)
class IDAveragePrecision(_IDMetric):
    """Average precision over the reference IDs, as trec_eval's ``map`` computes it."""

    registry_name = "id_average_precision"

    def _score(self, retrieved: list[str], reference: frozenset[str]) -> MetricResult:
        hits = 0
        total = Fraction(0)
        ranks = []
        for rank, item in enumerate(retrieved, start=1):
            if item in reference:
                hits += 1
                total += Fraction(hits, rank)
                ranks.append(rank)
        return MetricResult.ok(float(total / len(reference)), details={"relevant_ranks": ranks})


def _discount(rank: int) -> float:
    return 1.0 / math.log2(rank + 1)


@attrs.frozen(kw_only=True)
class IDNDCGAtK(_AtK):
    """Normalised DCG at k with binary gain, as trec_eval's ``ndcg_cut_k`` computes it."""

    registry_name = "id_ndcg_at_k"

    def _score(self, retrieved: list[str], reference: frozenset[str]) -> MetricResult:
        _, details = self._top(retrieved, reference)
        dcg = 0.0
        for rank in details["relevant_ranks"]:
            dcg += _discount(rank)
        ideal = 0.0
        for rank in range(1, min(self.k, len(reference)) + 1):
            ideal += _discount(rank)
        score = dcg / ideal
        return MetricResult.ok(min(score, 1.0), details=details)
