"""The score policy: the one set of rules every metric scores by.

Every metric of ctxeval, built-in or third-party, turns its verdicts into a result through the
functions here, so the rules hold everywhere:

====================================  =====================================================
Situation                             Result
====================================  =====================================================
empty reference (nothing to recall)   ``undefined`` for recall *and* precision: without a
                                      reference nothing can be judged relevant (as trec_eval
                                      leaves out queries with no relevant documents)
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
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction
from typing import Any

from .results import NO_USAGE, MetricResult, Usage

__all__ = [
    "average_precision",
    "average_precision_value",
    "dedupe",
    "is_match",
    "no_reference",
    "precision",
    "recall",
]


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
        return MetricResult.undefined(
            f"nothing retrieved: there are no {what}", details=details, usage=usage
        )
    return MetricResult.ok(relevant / retrieved, details=details, usage=usage)


def average_precision_value(verdicts: Sequence[bool]) -> Fraction:
    """Exact average precision of a ranked list of relevance verdicts.

    The mean of precision@k over the ranks k that hold a relevant item, as the seeds define
    context precision (divided by the relevant items *retrieved*); zero when none is relevant.
    ``verdicts`` must not be empty.
    """
    ranks = [rank for rank, relevant in enumerate(verdicts, start=1) if relevant]
    if not ranks:
        return Fraction(0)
    # sum(i / rank_i) over a common denominator, in integers (exact, and fast)
    common = math.lcm(*ranks)
    total = sum(hits * (common // rank) for hits, rank in enumerate(ranks, start=1))
    return Fraction(total, common * len(ranks))


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
        return MetricResult.undefined(
            f"nothing retrieved: there are no {what}", details=details, usage=usage
        )
    return MetricResult.ok(float(average_precision_value(verdicts)), details=details, usage=usage)


def _check_counts(part: int, whole: int) -> None:
    if not (0 <= part <= whole):
        raise ValueError(f"a count of {part} out of {whole} is impossible")
