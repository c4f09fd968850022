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

import functools
import math
from collections.abc import Sequence
from typing import Any, ClassVar

import attrs

from ctxeval import MetricResult, Sample, Status, policy
from ctxeval.base import BaseDeterministicMetric, positive_int
from ctxeval.results import NO_USAGE, LazyDetails, _make

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
    """The shared steps: an empty reference is undefined, repeats keep their first rank; a
    metric gives its value (:meth:`_value`) and its evidence (:meth:`_details`)."""

    requires = ("retrieved_context_ids", "reference_context_ids")

    def score(self, sample: Sample) -> MetricResult:
        reference = frozenset(sample.reference_context_ids or ())
        if not reference:
            return policy.no_reference(_REFERENCE)
        retrieved = policy.dedupe(sample.retrieved_context_ids or ())
        details = self._details(retrieved, reference)
        if not retrieved and self._undefined_when_empty:
            return policy.precision(0, 0, what=_RETRIEVED, details=details)
        return MetricResult.ok(self._value(retrieved, reference), details=details)

    def score_batch(self, samples: Sequence[Sample]) -> list[MetricResult]:
        """Every sample as :meth:`score` scores it, the evidence computed only when read."""
        name, value, details_of = self.name, self._value_of, self._details_of
        out = []
        for sample in samples:
            retrieved, reference = sample.retrieved_context_ids, sample.reference_context_ids
            if not retrieved or not reference:
                out.append(self.score(sample))  # the edge cases, with their reasons
                continue
            score = value(retrieved, frozenset(reference))
            details = LazyDetails(details_of, retrieved, reference)
            out.append(_make(Status.OK, score, None, details, NO_USAGE, sample.id or "", name))
        return out

    _undefined_when_empty: ClassVar[bool] = False
    """True for the precision metrics: nothing retrieved makes them undefined."""

    def _value(self, retrieved: list[str], reference: frozenset[str]) -> float:
        raise NotImplementedError

    def _details(self, retrieved: list[str], reference: frozenset[str]) -> dict[str, Any]:
        raise NotImplementedError

    def _value_of(self, retrieved: Sequence[str], reference: frozenset[str]) -> float:
        """:meth:`_value` of IDs not yet deduplicated (a metric may skip the dedupe)."""
        return self._value(list(dict.fromkeys(retrieved)), reference)

    def _details_of(self, retrieved: Sequence[str], reference: Sequence[str]) -> dict[str, Any]:
        return self._details(policy.dedupe(retrieved), frozenset(reference))


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
    _undefined_when_empty = True

    def _value(self, retrieved: list[str], reference: frozenset[str]) -> float:
        return len(reference.intersection(retrieved)) / len(retrieved)

    def _value_of(self, retrieved: Sequence[str], reference: frozenset[str]) -> float:
        return len(reference.intersection(retrieved)) / len(set(retrieved))

    _details = staticmethod(_split)


@attrs.frozen(kw_only=True)
class IDBasedContextRecall(_IDMetric):
    """Share of the reference IDs that were retrieved (the seeds' ID-based recall)."""

    registry_name = "id_based_context_recall"

    def _value(self, retrieved: Sequence[str], reference: frozenset[str]) -> float:
        return len(reference.intersection(retrieved)) / len(reference)

    _value_of = _value  # repeats do not change the intersection

    _details = staticmethod(_split)


@attrs.frozen(kw_only=True)
class _AtK(_IDMetric):
    k: int = attrs.field(default=10, validator=positive_int)
    """The cut-off rank (default 10)."""

    def default_name(self) -> str:
        return self.registry_name.replace("_at_k", f"_at_{self.k}")

    def _hits(self, retrieved: list[str], reference: frozenset[str]) -> int:
        return len(reference.intersection(retrieved[: self.k]))

    def _details(self, retrieved: list[str], reference: frozenset[str]) -> dict[str, Any]:
        top = retrieved[: self.k]
        ranks = [rank for rank, i in enumerate(top, start=1) if i in reference]
        return {"k": self.k, "relevant_ranks": ranks, "top_k": top}


@attrs.frozen(kw_only=True)
class IDPrecisionAtK(_AtK):
    """Relevant IDs in the top k, divided by k (trec_eval ``P_k``)."""

    registry_name = "id_precision_at_k"
    _undefined_when_empty = True

    def _value(self, retrieved: list[str], reference: frozenset[str]) -> float:
        return self._hits(retrieved, reference) / self.k


@attrs.frozen(kw_only=True)
class IDRecallAtK(_AtK):
    """Relevant IDs in the top k, divided by the reference IDs (trec_eval ``recall_k``)."""

    registry_name = "id_recall_at_k"

    def _value(self, retrieved: list[str], reference: frozenset[str]) -> float:
        return self._hits(retrieved, reference) / len(reference)


@attrs.frozen(kw_only=True)
class IDHitRateAtK(_AtK):
    """1.0 when any relevant ID is in the top k, else 0.0 (trec_eval ``success_k``)."""

    registry_name = "id_hit_rate_at_k"

    def _value(self, retrieved: list[str], reference: frozenset[str]) -> float:
        return 0.0 if reference.isdisjoint(retrieved[: self.k]) else 1.0


def _relevant_ranks(retrieved: list[str], reference: frozenset[str]) -> list[int]:
    return [rank for rank, i in enumerate(retrieved, start=1) if i in reference]


@attrs.frozen(kw_only=True)
class IDMRR(_IDMetric):
    """Reciprocal rank of the first relevant ID; 0.0 when none is retrieved (``recip_rank``)."""

    registry_name = "id_mrr"

    def _value(self, retrieved: list[str], reference: frozenset[str]) -> float:
        for rank, item in enumerate(retrieved, start=1):
            if item in reference:
                return 1 / rank
        return 0.0

    def _details(self, retrieved: list[str], reference: frozenset[str]) -> dict[str, Any]:
        first = next((r for r, i in enumerate(retrieved, start=1) if i in reference), None)
        return {"first_relevant_rank": first}


@attrs.frozen(kw_only=True)
class IDAveragePrecision(_IDMetric):
    """Average precision over the reference IDs, as trec_eval's ``map`` computes it."""

    registry_name = "id_average_precision"

    def _value(self, retrieved: list[str], reference: frozenset[str]) -> float:
        # exact: sum(i / rank_i) over a common denominator, then one correctly rounded division
        ranks = _relevant_ranks(retrieved, reference)
        if not ranks:
            return 0.0
        common = math.lcm(*ranks)
        total = sum(hits * (common // rank) for hits, rank in enumerate(ranks, start=1))
        return total / (common * len(reference))

    def _details(self, retrieved: list[str], reference: frozenset[str]) -> dict[str, Any]:
        return {"relevant_ranks": _relevant_ranks(retrieved, reference)}


@functools.lru_cache(maxsize=64)
def _discounts(k: int) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """``1 / log2(rank + 1)`` for ranks 1..k (index = rank), and their running sums (the
    ideal DCG of 1..k relevant IDs), each summed in rank order."""
    discount = [0.0] + [1.0 / math.log2(rank + 1) for rank in range(1, k + 1)]
    ideal = [0.0]
    for rank in range(1, k + 1):
        ideal.append(ideal[-1] + discount[rank])
    return tuple(discount), tuple(ideal)


@attrs.frozen(kw_only=True)
class IDNDCGAtK(_AtK):
    """Normalised DCG at k with binary gain, as trec_eval's ``ndcg_cut_k`` computes it."""

    registry_name = "id_ndcg_at_k"

    def _value(self, retrieved: list[str], reference: frozenset[str]) -> float:
        discount, ideal = _discounts(self.k)
        dcg = 0.0
        for rank, item in enumerate(retrieved[: self.k], start=1):
            if item in reference:
                dcg += discount[rank]
        return min(dcg / ideal[min(self.k, len(reference))], 1.0)
