"""A judge against people's labels, item by item: :class:`Agreement`.

The confusion counts, accuracy, balanced accuracy and Cohen's kappa with a 95% interval
(percentile bootstrap over samples), from per-sample ``(tp, fp, fn, tn)`` counts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from ctxeval._results.stats import cohen_kappa, kappa_ci

__all__ = ["Agreement", "ratio"]


def ratio(part: float, whole: float) -> float | None:
    """``part / whole``; None when ``whole`` is 0."""
    return part / whole if whole else None


@attrs.frozen
class Agreement:
    """The judge (first rater) against people (the truth), over the labelled items.

    Attributes:
        n_items, n_samples: labelled items compared, and the samples they belong to.
        tp, fp, fn, tn: judge 1 & people 1, judge 1 & people 0, judge 0 & people 1, both 0.
        accuracy: share of items where they agree.
        balanced_accuracy: the mean of the judge's recall on the people's 1s and on their 0s
            (None when the people gave one class only).
        kappa: Cohen's kappa (None when undefined: both gave one same class throughout).
        kappa_ci95: its 95% interval, percentile bootstrap over samples (2000, seed 0).
    """

    n_items: int
    n_samples: int
    tp: int
    fp: int
    fn: int
    tn: int
    accuracy: float | None
    balanced_accuracy: float | None
    kappa: float | None
    kappa_ci95: tuple[float, float] | None

    @classmethod
    def of(cls, counts: Sequence[tuple[int, int, int, int]]) -> Agreement:
        """From per-sample ``(tp, fp, fn, tn)`` counts."""
        tp, fp, fn, tn = (sum(c[i] for c in counts) for i in range(4))
        n = tp + fp + fn + tn
        positives, negatives = tp + fn, fp + tn
        balanced = (tp / positives + tn / negatives) / 2 if positives and negatives else None
        return cls(
            n_items=n,
            n_samples=len(counts),
            tp=tp,
            fp=fp,
            fn=fn,
            tn=tn,
            accuracy=ratio(tp + tn, n),
            balanced_accuracy=balanced,
            kappa=cohen_kappa(tp, fp, fn, tn),
            kappa_ci95=kappa_ci(counts),
        )

    def to_dict(self) -> dict[str, Any]:
        out = attrs.asdict(self)
        out["kappa_ci95"] = list(self.kappa_ci95) if self.kappa_ci95 else None
        out["confusion"] = {"tp": self.tp, "fp": self.fp, "fn": self.fn, "tn": self.tn}
        for key in ("tp", "fp", "fn", "tn"):
            del out[key]
        return out
