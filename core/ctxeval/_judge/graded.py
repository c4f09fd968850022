"""A grading judge against people's grades, item by item: :class:`GradedAgreement`.

For a judge that grades each item on an ordinal scale (``context_relevance``: each retrieved
chunk 0 to 3, UMBRELA) rather than saying yes or no. Reported: the confusion matrix per grade
(rows: the people's grade, columns: the judge's), the share of exact agreement and of agreement
within one grade, the judge's mean grade minus the people's, and Cohen's kappa unweighted,
linear-weighted and quadratic-weighted, the weighted ones with 95% intervals (percentile
bootstrap over samples, as for yes/no judges).

The weighted kappa is Cohen's (1968): ``1 - sum(w * observed) / sum(w * expected)`` with the
disagreement weight ``w[i][j] = |i - j|`` (linear) or ``(i - j) ** 2`` (quadratic) of the grades
themselves, and ``expected`` the product of the two raters' marginals. It is computed from the
integer counts in exact rational arithmetic, so the float is correctly rounded; a grade that
neither side gave changes nothing (its row and column are zero), one side alone leaving a grade
unused is fine. It equals scikit-learn's ``cohen_kappa_score(people, judge, weights=...,
labels=range(4))``. Kappa is undefined (None) when the expected disagreement is 0: both sides
gave one same grade to every item.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any, Literal

import attrs

from ctxeval._judge.agreement import ratio
from ctxeval._judge.evidence import details_of, unused_labels
from ctxeval._judge.labels import GRADES
from ctxeval._results.results import MetricResult, Status
from ctxeval._results.stats import percentile_interval

__all__ = [
    "GRADED_ROWS",
    "NOT_GRADED",
    "GradedAgreement",
    "Matrix",
    "graded_against_labels",
    "judge_grades",
    "weighted_kappa",
]

Matrix = Sequence[Sequence[int]]
"""A square confusion matrix of counts: ``m[people's grade][judge's grade]``."""

Weights = Literal["none", "linear", "quadratic"]

_RESAMPLES = 2000
_CHUNK = 200

NOT_GRADED = "the judge said 0/1, it did not grade: give label / labels (0/1), not grades"
"""Why grades given for a yes/no judge's rows are not used."""
GRADED_ROWS = "the judge graded 0-3: give grade / grades (0-3), not 0/1 labels"
"""Why 0/1 labels given for a grading judge's rows are not used."""


def _weight(i: int, j: int, weights: Weights) -> int:
    """The disagreement weight of grades ``i`` and ``j`` (0 when they agree)."""
    if weights == "linear":
        return abs(i - j)
    if weights == "quadratic":
        return (i - j) ** 2
    return int(i != j)


def weighted_kappa(matrix: Matrix, weights: Weights = "quadratic") -> float | None:
    """Cohen's kappa of a confusion matrix of counts (grade ``i`` is row and column ``i``),
    unweighted (``"none"``), linear- or quadratic-weighted; None when undefined (no item, or
    both raters gave one same grade throughout)."""
    size = len(matrix)
    n = sum(sum(row) for row in matrix)
    rows = [sum(row) for row in matrix]
    columns = [sum(matrix[i][j] for i in range(size)) for j in range(size)]
    observed = sum(_weight(i, j, weights) * matrix[i][j] for i in range(size) for j in range(size))
    expected = sum(
        _weight(i, j, weights) * rows[i] * columns[j] for i in range(size) for j in range(size)
    )
    if n == 0 or expected == 0:
        return None
    return float(1 - Fraction(n * observed, expected))


def _bootstrap(
    matrices: Sequence[Matrix], weights: Weights, *, seed: int = 0, confidence: float = 0.95
) -> tuple[float, float] | None:
    """The percentile-bootstrap interval of the weighted kappa, resampling *samples* (each a
    confusion matrix of its items: the items of one sample are not independent). Resamples
    where kappa is undefined are left out; None with fewer than 2 samples or none defined."""
    import numpy as np

    if len(matrices) < 2:
        return None
    samples = len(matrices)
    size = len(matrices[0])
    flat = np.asarray(matrices, dtype=np.float64).reshape(samples, size * size)
    w = np.asarray(
        [[_weight(i, j, weights) for j in range(size)] for i in range(size)], dtype=np.float64
    )
    rng = np.random.default_rng(seed)
    kappas = []
    for start in range(0, _RESAMPLES, _CHUNK):
        count = min(_CHUNK, _RESAMPLES - start)
        drawn = rng.integers(0, samples, size=(count, samples))
        times = np.zeros((count, samples))  # how often each sample is drawn, per resample
        np.add.at(times, (np.arange(count)[:, None], drawn), 1.0)
        sums = (times @ flat).reshape(count, size, size)  # (memory: count x samples, no more)
        n = sums.sum(axis=(1, 2))
        observed = (sums * w).sum(axis=(1, 2))
        expected = np.einsum("bi,ij,bj->b", sums.sum(axis=2), w, sums.sum(axis=1))
        defined = expected > 0
        kappas.append(1.0 - n[defined] * observed[defined] / expected[defined])
    return percentile_interval(np.concatenate(kappas), confidence)


def _ci(pair: tuple[float, float] | None) -> list[float] | None:
    return None if pair is None else list(pair)


@attrs.frozen
class GradedAgreement:
    """The judge's grades against people's grades, over the labelled items.

    Attributes:
        n_items, n_samples: graded items compared, and the samples they belong to.
        grades: the grades of the matrix's rows and columns, in order (0 to 3, or to the
            highest grade given when a judge grades higher).
        confusion: ``confusion[i][j]``: items the people graded ``grades[i]`` and the judge
            ``grades[j]`` (rows: people, columns: judge).
        exact: share of items given the same grade by both.
        within_one: share of items whose grades differ by one at most.
        mean_difference: the judge's mean grade minus the people's (above 0: a lenient judge).
        kappa: Cohen's kappa, unweighted (every disagreement counts the same).
        kappa_linear, kappa_quadratic: linear- and quadratic-weighted kappa (a disagreement by
            two grades counts twice / four times one by one grade); each None when undefined.
        kappa_linear_ci95, kappa_quadratic_ci95: their 95% intervals, percentile bootstrap over
            samples (2000, seed 0); None with fewer than 2 samples.
    """

    n_items: int
    n_samples: int
    grades: tuple[int, ...]
    confusion: tuple[tuple[int, ...], ...]
    exact: float | None
    within_one: float | None
    mean_difference: float | None
    kappa: float | None
    kappa_linear: float | None
    kappa_quadratic: float | None
    kappa_linear_ci95: tuple[float, float] | None
    kappa_quadratic_ci95: tuple[float, float] | None

    @classmethod
    def of(cls, pairs: Sequence[Sequence[tuple[int, int]]]) -> GradedAgreement:
        """From each sample's ``(people's grade, judge's grade)`` pairs, one per item."""
        top = max([GRADES[-1], *(g for sample in pairs for pair in sample for g in pair)])
        size = top + 1
        matrices = []
        for sample in pairs:
            matrix = [[0] * size for _ in range(size)]
            for people, judge in sample:
                matrix[people][judge] += 1
            matrices.append(matrix)
        total = [[sum(m[i][j] for m in matrices) for j in range(size)] for i in range(size)]
        n = sum(map(sum, total))
        cells = [(i, j, total[i][j]) for i in range(size) for j in range(size)]
        difference = sum((j - i) * c for i, j, c in cells)
        return cls(
            n_items=n,
            n_samples=len(pairs),
            grades=tuple(range(size)),
            confusion=tuple(tuple(row) for row in total),
            exact=ratio(sum(c for i, j, c in cells if i == j), n),
            within_one=ratio(sum(c for i, j, c in cells if abs(i - j) <= 1), n),
            mean_difference=ratio(difference, n),
            kappa=weighted_kappa(total, "none"),
            kappa_linear=weighted_kappa(total, "linear"),
            kappa_quadratic=weighted_kappa(total, "quadratic"),
            kappa_linear_ci95=_bootstrap(matrices, "linear"),
            kappa_quadratic_ci95=_bootstrap(matrices, "quadratic"),
        )

    def to_dict(self) -> dict[str, Any]:
        """As ``summary.json`` keeps it: ``confusion`` a list of rows (people's grade) of
        counts by the judge's grade; ``people_counts`` and ``judge_counts`` the items per
        grade on each side."""
        out: dict[str, Any] = attrs.asdict(self, recurse=False)
        out["grades"] = list(self.grades)
        out["confusion"] = [list(row) for row in self.confusion]
        out["people_counts"] = [sum(row) for row in self.confusion]
        out["judge_counts"] = [sum(column) for column in zip(*self.confusion, strict=True)]
        out["kappa_linear_ci95"] = _ci(self.kappa_linear_ci95)
        out["kappa_quadratic_ci95"] = _ci(self.kappa_quadratic_ci95)
        return out


def graded_against_labels(
    rows: Sequence[MetricResult], labelled: Mapping[str, Mapping[int, int]]
) -> tuple[GradedAgreement | None, dict[str, int]]:
    """The grading judge of ``rows`` (their ``details["chunks"][i]["grade"]``) against people's
    grades by sample and item index, and the grades not used, counted by reason."""
    skipped = unused_labels(rows, labelled)

    def skip(reason: str, count: int = 1) -> None:
        skipped[reason] = skipped.get(reason, 0) + count

    pairs: list[list[tuple[int, int]]] = []
    for row in rows:
        items = labelled.get(row.sample_id) or {}
        if not items:
            continue
        if row.status is not Status.OK:
            skip(f"row {row.status.value}, nothing judged", len(items))
            continue
        judged = judge_grades(details_of(row))
        if judged is None:
            skip(NOT_GRADED, len(items))
            continue
        beyond = [i for i in items if i >= len(judged)]
        if beyond:
            skip("index beyond the judged items", len(beyond))
        sample = [(people, judged[i]) for i, people in sorted(items.items()) if i < len(judged)]
        if sample:
            pairs.append(sample)
    return (GradedAgreement.of(pairs) if pairs else None), skipped


def judge_grades(details: Mapping[str, Any]) -> list[int] | None:
    """The judge's grade of each item of a row, in order (``details["chunks"]``), or None when
    the row holds no grades (a yes/no judge, or no judge)."""
    chunks = details.get("chunks")
    if not isinstance(chunks, list) or not chunks:
        return None
    grades = [c.get("grade") if isinstance(c, Mapping) else None for c in chunks]
    out: list[int] = []
    for grade in grades:
        if isinstance(grade, bool) or not isinstance(grade, int) or grade < 0:
            return None
        out.append(grade)
    return out
