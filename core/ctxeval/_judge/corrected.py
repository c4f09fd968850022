"""Scoring a run's judge against people's labels: :func:`against_labels` and the
:class:`CorrectedMean` it yields.

The metric's mean corrected with the labels by prediction-powered inference (PPI++): the judged
mean of the many samples nobody labelled, corrected by the judge's error measured on the few
that were labelled, with an honest 95% interval. Only samples whose judged items are *all*
labelled count for it (their score by the people's labels goes through the metric's own
formula); every labelled item counts for the :class:`~ctxeval._judge.agreement.Agreement`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from ctxeval._judge.agreement import Agreement
from ctxeval._judge.evidence import details_of, unused_labels
from ctxeval._results.results import MetricResult, Status
from ctxeval._results.stats import PPI_METHOD, ppi_mean

__all__ = ["CorrectedMean", "against_labels"]


@attrs.frozen
class CorrectedMean:
    """The metric's mean corrected with people's labels (PPI++).

    Attributes:
        mean: the corrected mean; ci95: its 95% interval.
        judged_mean: the uncorrected mean (every ``ok`` row, as the summary shows it).
        human_mean: the mean by the people's labels over the labelled samples alone.
        n_labelled: samples whose judged items are all labelled; n_unlabelled: the others.
        weight: the power-tuning weight λ in [0, 1] given to the judge (0: the labelled
            samples alone; 1: classic PPI).
        method: how it was computed, in words.
    """

    mean: float
    ci95: tuple[float, float]
    judged_mean: float | None
    human_mean: float
    n_labelled: int
    n_unlabelled: int
    weight: float
    method: str = PPI_METHOD

    def to_dict(self) -> dict[str, Any]:
        out = attrs.asdict(self)
        out["ci95"] = list(self.ci95)
        return out


def against_labels(
    rows: Sequence[MetricResult],
    labelled: Mapping[str, Mapping[int, int]],
    formula: Any,
    judged_mean: float | None,
) -> tuple[Agreement | None, CorrectedMean | None, dict[str, int]]:
    """The judge's agreement with the labelled items of ``rows``, the mean corrected with them
    (None without a sample fully labelled and a ``formula``), and the labels not used, counted
    by reason."""
    skipped = unused_labels(rows, labelled)

    def skip(reason: str, count: int = 1) -> None:
        skipped[reason] = skipped.get(reason, 0) + count

    counts: list[tuple[int, int, int, int]] = []
    human: list[float] = []
    judged: list[float] = []
    unlabelled: list[float] = []
    for row in rows:
        given = details_of(row).get("flags")
        flags: list[int] = given if isinstance(given, list) else []
        ok = row.status is Status.OK and row.score is not None and isinstance(given, list)
        items = labelled.get(row.sample_id) or {}
        if not items:
            if ok:
                unlabelled.append(float(row.score))  # type: ignore[arg-type]
            continue
        if not ok:
            skip(f"row {row.status.value}, nothing judged", len(items))
            continue
        beyond = [i for i in items if i >= len(flags)]
        if beyond:
            skip("index beyond the judged items", len(beyond))
        tp = fp = fn = tn = 0
        for index, truth in items.items():
            if index >= len(flags):
                continue
            said = int(flags[index])
            tp += said and truth
            fp += said and not truth
            fn += truth and not said
            tn += not said and not truth
        if tp + fp + fn + tn:
            counts.append((tp, fp, fn, tn))
        if all(i in items for i in range(len(flags))) and formula is not None:
            people = [bool(items[i]) for i in range(len(flags))]
            n_reference = details_of(row).get("n_reference", len(flags))
            human.append(float(formula.value(people, n_reference)))
            judged.append(float(row.score))  # type: ignore[arg-type]
        elif tp + fp + fn + tn:
            skip("sample partly labelled (agreement only, not the corrected mean)")
    agreement = Agreement.of(counts) if counts else None
    corrected = None
    estimate = ppi_mean(human, judged, unlabelled)
    if estimate is not None:
        corrected = CorrectedMean(
            mean=estimate["mean"],
            ci95=(estimate["ci95_low"], estimate["ci95_high"]),
            judged_mean=judged_mean,
            human_mean=math.fsum(human) / len(human),
            n_labelled=len(human),
            n_unlabelled=len(unlabelled),
            weight=estimate["lambda"],
        )
    return agreement, corrected, skipped
