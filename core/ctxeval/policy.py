"""The score policy: the one set of rules every metric scores by.

Every metric of ctxeval, built-in or third-party, turns its verdicts into a result through the
functions here, so the rules hold everywhere:

====================================  =====================================================
Situation                             Result
====================================  =====================================================
empty reference (nothing to recall)   ``undefined`` for recall *and* precision: without a
                                      reference nothing can be judged relevant
nothing retrieved, precision          ``undefined``, with the reason
nothing retrieved, recall             ``0.0`` when the reference is not empty
a perfect result                      exactly ``1.0`` (exact arithmetic, no epsilon)
similarity vs threshold               a match when ``similarity >= threshold``
duplicate IDs                         removed, keeping the first (best) rank
a score outside [0, 1] or NaN         impossible: :class:`MetricResult` refuses it
====================================  =====================================================

Fractions are computed on integers (``n / d`` of two ints is correctly rounded, so ``n / n`` is
exactly 1.0) and average precision with :class:`fractions.Fraction`, so the float a user sees
is the correctly rounded value of the exact score (e.g. ``[1, 0, 1]`` gives ``float(5/6)``).

The formulas
------------
Every metric built as a pipeline (:class:`ctxeval.plugin.Pipeline`) ends in one :class:`Formula`: it
receives the matcher's verdicts (``flags``: one bool per judged item, in order) and the number
of reference units, and gives the score. Each formula says which side it judges: ``reference``
(recall: is each reference unit found?) or ``retrieved`` (precision: is each retrieved item
relevant?, in ranked order), how deep it looks (``depth``: only the top k for the @k measures)
and whether nothing retrieved is ``undefined`` (precision-like) or scores 0.

=========================  ==========  =======================================================
formula                    judges      value
=========================  ==========  =======================================================
:class:`Recall`            reference   found / reference units
:class:`Precision`         retrieved   relevant / retrieved
:class:`AveragePrecision`  retrieved   mean of precision@i at the relevant ranks i (the seeds)
:class:`PrecisionAtK`      retrieved   relevant in the top k / k (trec_eval ``P_k``)
:class:`RecallAtK`         retrieved   relevant in the top k / reference units
:class:`HitRateAtK`        retrieved   1 if a relevant item is in the top k, else 0
:class:`ReciprocalRank`    retrieved   1 / rank of the first relevant item, 0 if none
:class:`RankedAveragePrecision`  retrieved  sum of precision@i at the relevant ranks /
                                       reference units (trec_eval ``map``)
:class:`RankedAveragePrecisionAtK`  top k  the same over the top k (trec_eval ``map_cut_k``)
:class:`ReciprocalRankAtK`  top k      1 / rank of the first relevant item in the top k
:class:`RPrecision`        retrieved   relevant in the top R / R, R = reference units
                                       (trec_eval ``Rprec``)
:class:`F1AtK`             top k       harmonic mean of P@k and R@k: 2 hits / (k + R)
:class:`NDCGAtK`           retrieved   DCG@k / ideal DCG@k, gain = grade (1 without grades),
                                       discount ``log2(rank + 1)`` (trec_eval ``ndcg_cut_k``)
:class:`BPref`             retrieved   binary preference over the judged items (``bpref``)
=========================  ==========  =======================================================
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction
from itertools import compress, count
from typing import Any, ClassVar, Literal

import attrs

from ctxeval._plugins.validators import positive_int
from ctxeval._results.results import NO_USAGE, MetricResult, Status, Usage

__all__ = [
    "AveragePrecision",
    "F1AtK",
    "Formula",
    "HitRateAtK",
    "NDCGAtK",
    "Precision",
    "PrecisionAtK",
    "RPrecision",
    "RankedAveragePrecision",
    "RankedAveragePrecisionAtK",
    "Recall",
    "RecallAtK",
    "ReciprocalRank",
    "ReciprocalRankAtK",
    "Side",
    "average_precision",
    "average_precision_value",
    "dedupe",
    "is_match",
    "no_reference",
    "nothing_retrieved",
    "precision",
    "recall",
    "relevant_ranks",
]

Side = Literal["reference", "retrieved"]
"""The side of a pipeline whose items a formula judges."""


def is_match(similarity: float, threshold: float) -> bool:
    """The one threshold rule: a similarity at or above the threshold is a match."""
    return similarity >= threshold


def dedupe(ids: Iterable[str]) -> list[str]:
    """The IDs in their order with repeats removed, each kept at its first (best) rank."""
    return list(dict.fromkeys(ids))


def no_reference(
    what: str, *, details: Mapping[str, Any] | None = None, usage: Usage = NO_USAGE
) -> MetricResult:
    """The result for an empty reference: ``undefined``, whatever the metric.

    Args:
        what: what the reference is missing, plural (e.g. ``"reference context IDs"``).
    """
    return MetricResult.undefined(
        f"nothing to recall: there are no {what}", details=details, usage=usage
    )


def recall(
    found: int,
    total: int,
    *,
    what: str,
    details: Mapping[str, Any] | None = None,
    usage: Usage = NO_USAGE,
) -> MetricResult:
    """``found / total``: the share of the reference's units that the retrieval covers.

    Args:
        found: reference units matched by the retrieved items.
        total: reference units; zero makes the result ``undefined`` (nothing to recall).
        what: what the units are, plural, for the reason (e.g. ``"reference entities"``).
    """
    _check_counts(found, total)
    if total == 0:
        return no_reference(what, details=details, usage=usage)
    return MetricResult.ok(found / total, details=details, usage=usage)


def precision(
    relevant: int,
    retrieved: int,
    *,
    what: str = "retrieved items",
    details: Mapping[str, Any] | None = None,
    usage: Usage = NO_USAGE,
) -> MetricResult:
    """``relevant / retrieved``: the share of the retrieved items that are relevant.

    Args:
        relevant: retrieved items judged relevant.
        retrieved: retrieved items; zero makes the result ``undefined`` (nothing retrieved).
        what: what the items are, plural, for the reason.
    """
    _check_counts(relevant, retrieved)
    if retrieved == 0:
        return nothing_retrieved(what, details=details, usage=usage)
    return MetricResult.ok(relevant / retrieved, details=details, usage=usage)


def nothing_retrieved(
    what: str, *, details: Mapping[str, Any] | None = None, usage: Usage = NO_USAGE
) -> MetricResult:
    """The result of a precision-like metric when nothing was retrieved: ``undefined``.

    Args:
        what: what was not retrieved, plural (e.g. ``"retrieved context IDs"``).
    """
    return MetricResult.undefined(
        f"nothing retrieved: there are no {what}", details=details, usage=usage
    )


def average_precision_value(verdicts: Sequence[bool]) -> Fraction:
    """Exact average precision of a ranked list of relevance verdicts.

    The mean of precision@k over the ranks k that hold a relevant item, as the seeds define
    context precision (divided by the relevant items *retrieved*); zero when none is relevant.
    ``verdicts`` must not be empty.
    """
    ranks = relevant_ranks(verdicts)
    if not ranks:
        return Fraction(0)
    total, common = _precision_sum(ranks)
    return Fraction(total, common * len(ranks))


def relevant_ranks(flags: Sequence[bool]) -> list[int]:
    """The 1-based ranks of the true flags."""
    return list(compress(count(1), flags))


def _precision_sum(ranks: Sequence[int]) -> tuple[int, int]:
    """``sum(i / rank_i)`` over the relevant ranks as ``(numerator, denominator)`` integers:
    exact, so one correctly rounded division gives the float."""
    common = math.lcm(*ranks)
    return sum(hits * (common // rank) for hits, rank in enumerate(ranks, start=1)), common


def average_precision(
    verdicts: Sequence[bool],
    *,
    what: str = "retrieved contexts",
    details: Mapping[str, Any] | None = None,
    usage: Usage = NO_USAGE,
) -> MetricResult:
    """Context precision: average precision over the verdicts, in ranked order.

    ``undefined`` when nothing was retrieved; ``0.0`` when nothing retrieved is relevant.
    """
    if not verdicts:
        return nothing_retrieved(what, details=details, usage=usage)
    return MetricResult.ok(float(average_precision_value(verdicts)), details=details, usage=usage)


def _check_counts(part: int, whole: int) -> None:
    if not (0 <= part <= whole):
        raise ValueError(f"a count of {part} out of {whole} is impossible")


# --- formulas ----------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Formula:
    """The last part of a pipeline: verdicts in, a score out.

    Subclasses set :attr:`judged` and :attr:`undefined_when_nothing_retrieved` and implement
    :meth:`value`; :meth:`result` applies the score policy around it (empty reference,
    nothing retrieved) and is what every metric calls, on the fast path too.
    """

    judged: ClassVar[Side] = "retrieved"
    """The side whose items get one verdict each."""
    undefined_when_nothing_retrieved: ClassVar[bool] = False
    """True for precision-like formulas: nothing retrieved makes the result ``undefined``."""
    graded: ClassVar[bool] = False
    """True for formulas that use relevance grades (:meth:`graded_value`) when the reference
    carries them."""

    @property
    def depth(self) -> int | None:
        """Only the first ``depth`` retrieved items are judged (None: all of them)."""
        return None

    def value(self, flags: Sequence[bool], n_reference: int) -> float:
        """The score of ``flags`` (one per judged item, in order) given ``n_reference``
        reference units; called only when ``n_reference > 0`` and, for a precision-like
        formula, when something was retrieved."""
        raise NotImplementedError

    def graded_value(self, gains: Sequence[int], reference_grades: Sequence[int]) -> float:
        """The score from graded relevance: ``gains`` is the grade of the reference item each
        judged item matched (-1 when it matched none: not judged), ``reference_grades`` those
        of every reference item given."""
        raise NotImplementedError(f"{type(self).__name__} has no graded form")

    def relevant_in(self, reference_grades: Sequence[int]) -> int:
        """How many of the graded reference items count as relevant (all of them, unless the
        formula says otherwise): zero makes the result ``undefined``."""
        return len(reference_grades)

    def evidence(self, flags: Sequence[bool]) -> dict[str, Any]:
        """What the formula adds to a row's details (e.g. ``k`` and the relevant ranks)."""
        return {}

    def result(
        self,
        flags: Sequence[bool],
        n_reference: int,
        n_retrieved: int,
        *,
        reference: str,
        retrieved: str,
        details: Mapping[str, Any] | None = None,
        usage: Usage = NO_USAGE,
        gains: Sequence[int] | None = None,
        reference_grades: Sequence[int] | None = None,
        zero_when_empty: bool = False,
    ) -> MetricResult:
        """The row for ``flags``, under the score policy.

        Args:
            n_reference: reference units (zero: ``undefined``, nothing to recall).
            n_retrieved: retrieved items (zero: ``undefined`` for a precision-like formula).
            reference: what the reference units are, plural, for a reason.
            retrieved: what the retrieved items are, plural, for a reason.
            gains: graded relevance, for a :attr:`graded` formula (see
                :meth:`graded_value`); without it the verdicts count as grade 1.
            reference_grades: the grades of the reference items, with ``gains``.
            zero_when_empty: trec_eval's averaging: an empty reference or nothing retrieved
                scores 0 (and so counts in the mean) instead of being ``undefined``.
        """
        graded = self.graded and gains is not None and reference_grades is not None
        if graded and reference_grades is not None:
            n_reference = self.relevant_in(reference_grades)
        if zero_when_empty and (n_reference == 0 or n_retrieved == 0):
            why = "no relevant reference items" if n_reference == 0 else "nothing retrieved"
            return MetricResult(
                Status.OK, 0.0, f"{why}: scored 0 (trec_eval averaging)", details or {}, usage
            )
        if n_reference == 0:
            return no_reference(reference, details=details, usage=usage)
        if n_retrieved == 0 and self.undefined_when_nothing_retrieved:
            return nothing_retrieved(retrieved, details=details, usage=usage)
        if graded and gains is not None and reference_grades is not None:
            score = self.graded_value(gains, reference_grades)
        else:
            score = self.value(flags, n_reference)
        return MetricResult.ok(score, details=details, usage=usage)


@attrs.frozen(kw_only=True)
class Recall(Formula):
    """Reference units found / reference units."""

    judged: ClassVar[Side] = "reference"

    def value(self, flags: Sequence[bool], n_reference: int) -> float:
        # a count above n_reference would give a score above 1, which no result can hold
        return sum(flags) / n_reference


@attrs.frozen(kw_only=True)
class Precision(Formula):
    """Relevant retrieved items / retrieved items (a set measure: the order does not count)."""

    undefined_when_nothing_retrieved: ClassVar[bool] = True

    def value(self, flags: Sequence[bool], n_reference: int) -> float:
        return sum(flags) / len(flags)


@attrs.frozen(kw_only=True)
class AveragePrecision(Formula):
    """The seeds' context precision: the mean of precision@i over the ranks i that hold a
    relevant item (divided by the relevant items *retrieved*); 0 when none is relevant."""

    undefined_when_nothing_retrieved: ClassVar[bool] = True

    def value(self, flags: Sequence[bool], n_reference: int) -> float:
        return float(average_precision_value(flags))


@attrs.frozen(kw_only=True)
class _AtK(Formula):
    k: int = attrs.field(default=10, validator=positive_int)
    """The cut-off rank."""

    @property
    def depth(self) -> int | None:
        return self.k

    def evidence(self, flags: Sequence[bool]) -> dict[str, Any]:
        return {"k": self.k, "relevant_ranks": relevant_ranks(flags[: self.k])}


@attrs.frozen(kw_only=True)
class PrecisionAtK(_AtK):
    """Relevant items in the top k / k, as trec_eval's ``P_k`` (k, not the items retrieved)."""

    undefined_when_nothing_retrieved: ClassVar[bool] = True

    def value(self, flags: Sequence[bool], n_reference: int) -> float:
        return sum(flags[: self.k]) / self.k


@attrs.frozen(kw_only=True)
class RecallAtK(_AtK):
    """Relevant items in the top k / reference units (trec_eval ``recall_k``)."""

    def value(self, flags: Sequence[bool], n_reference: int) -> float:
        return sum(flags[: self.k]) / n_reference


@attrs.frozen(kw_only=True)
class HitRateAtK(_AtK):
    """1 when a relevant item is in the top k, else 0 (trec_eval ``success_k``)."""

    def value(self, flags: Sequence[bool], n_reference: int) -> float:
        return 1.0 if any(flags[: self.k]) else 0.0


@attrs.frozen(kw_only=True)
class ReciprocalRank(Formula):
    """1 / rank of the first relevant item; 0 when none is retrieved (``recip_rank``)."""

    def value(self, flags: Sequence[bool], n_reference: int) -> float:
        for rank, relevant in enumerate(flags, start=1):
            if relevant:
                return 1 / rank
        return 0.0

    def evidence(self, flags: Sequence[bool]) -> dict[str, Any]:
        first = next((rank for rank, hit in enumerate(flags, start=1) if hit), None)
        return {"first_relevant_rank": first}


@attrs.frozen(kw_only=True)
class RankedAveragePrecision(Formula):
    """Average precision over the *reference* units, as trec_eval's ``map`` computes it:
    the sum of precision@i at the relevant ranks, divided by the reference units."""

    def value(self, flags: Sequence[bool], n_reference: int) -> float:
        return _ranked_average_precision(flags, n_reference)

    def evidence(self, flags: Sequence[bool]) -> dict[str, Any]:
        return {"relevant_ranks": relevant_ranks(flags)}


def _ranked_average_precision(flags: Sequence[bool], n_reference: int) -> float:
    ranks = relevant_ranks(flags)
    if not ranks:
        return 0.0
    total, common = _precision_sum(ranks)
    return total / (common * n_reference)


@attrs.frozen(kw_only=True)
class RankedAveragePrecisionAtK(_AtK):
    """:class:`RankedAveragePrecision` over the top k, as trec_eval's ``map_cut_k`` computes it
    (still divided by all the reference units)."""

    def value(self, flags: Sequence[bool], n_reference: int) -> float:
        return _ranked_average_precision(flags[: self.k], n_reference)


@attrs.frozen(kw_only=True)
class ReciprocalRankAtK(_AtK):
    """1 / rank of the first relevant item in the top k; 0 when there is none (ranx
    ``mrr@k``, ir_measures ``RR@k``)."""

    def value(self, flags: Sequence[bool], n_reference: int) -> float:
        for rank, relevant in enumerate(flags[: self.k], start=1):
            if relevant:
                return 1 / rank
        return 0.0


@attrs.frozen(kw_only=True)
class F1AtK(_AtK):
    """The harmonic mean of P@k and R@k, ``2 * hits / (k + reference units)`` exactly (ranx
    ``f1@k``); 0 when nothing relevant is in the top k."""

    def value(self, flags: Sequence[bool], n_reference: int) -> float:
        return 2 * sum(flags[: self.k]) / (self.k + n_reference)


@attrs.frozen(kw_only=True)
class RPrecision(Formula):
    """Relevant items in the top R, divided by R, the number of reference units (trec_eval
    ``Rprec``): precision at the rank where precision equals recall."""

    def value(self, flags: Sequence[bool], n_reference: int) -> float:
        return sum(flags[:n_reference]) / n_reference

    def evidence(self, flags: Sequence[bool]) -> dict[str, Any]:
        return {"relevant_ranks": relevant_ranks(flags)}


@functools.lru_cache(maxsize=64)
def _discounts(k: int) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """``1 / log2(rank + 1)`` for ranks 1..k (index = rank), and their running sums (the
    ideal DCG of 1..k relevant items), each summed in rank order."""
    discount = [0.0] + [1.0 / math.log2(rank + 1) for rank in range(1, k + 1)]
    ideal = [0.0]
    for rank in range(1, k + 1):
        ideal.append(ideal[-1] + discount[rank])
    return tuple(discount), tuple(ideal)


@attrs.frozen(kw_only=True)
class NDCGAtK(_AtK):
    """Normalised DCG at k, as trec_eval's ``ndcg_cut_k`` computes it: the gain of an item is
    its relevance grade (1 when the reference carries no grades), discounted by
    ``log2(rank + 1)``; the ideal ranking holds the reference's grades, highest first, cut at
    k."""

    graded: ClassVar[bool] = True

    def relevant_in(self, reference_grades: Sequence[int]) -> int:
        return sum(g > 0 for g in reference_grades)

    def value(self, flags: Sequence[bool], n_reference: int) -> float:
        discount, ideal = _discounts(self.k)
        dcg = 0.0
        for rank, relevant in enumerate(flags[: self.k], start=1):
            if relevant:
                dcg += discount[rank]
        return min(dcg / ideal[min(self.k, n_reference)], 1.0)

    def graded_value(self, gains: Sequence[int], reference_grades: Sequence[int]) -> float:
        # summed in rank order as trec_eval sums them: gain / log2(rank + 1)
        dcg = 0.0
        for rank, gain in enumerate(gains[: self.k], start=1):
            if gain > 0:
                dcg += gain / math.log2(rank + 1)
        ideal = 0.0
        best = sorted((g for g in reference_grades if g > 0), reverse=True)[: self.k]
        for rank, gain in enumerate(best, start=1):
            ideal += gain / math.log2(rank + 1)
        return min(dcg / ideal, 1.0) if ideal > 0 else 0.0


@attrs.frozen(kw_only=True)
class BPref(Formula):
    """Binary preference, as trec_eval's ``bpref`` computes it (exactly, here): for each
    relevant item retrieved, the share of the judged non-relevant items (at most R of them)
    ranked below it, averaged over the R relevant items. Unjudged retrieved items are skipped,
    which is what makes bpref robust to incomplete judgements. Without grades every reference
    item is relevant and none judged non-relevant: bpref is then the recall.
    """

    graded: ClassVar[bool] = True
    relevance_level: int = attrs.field(default=1, validator=positive_int)
    """The least grade that counts as relevant; lower grades (from 0) are judged non-relevant."""

    def relevant_in(self, reference_grades: Sequence[int]) -> int:
        return sum(g >= self.relevance_level for g in reference_grades)

    def value(self, flags: Sequence[bool], n_reference: int) -> float:
        return sum(flags) / n_reference

    def graded_value(self, gains: Sequence[int], reference_grades: Sequence[int]) -> float:
        level = self.relevance_level
        relevant = sum(g >= level for g in reference_grades)
        cap = min(sum(0 <= g < level for g in reference_grades), relevant)
        # sum over relevant retrieved of (1 - min(nonrel above, R) / cap), over one denominator
        numerator, nonrel_above = 0, 0
        for gain in gains:
            if gain < 0:
                continue  # not judged
            if gain < level:
                nonrel_above += 1
            elif cap == 0 or nonrel_above == 0:
                numerator += cap or 1
            else:
                numerator += cap - min(nonrel_above, relevant)
        return numerator / ((cap or 1) * relevant)
