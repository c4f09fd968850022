"""Confidence intervals and paired comparisons of runs, by bootstrap (numpy); a judge's
agreement with people (Cohen's kappa) and the mean corrected by their labels (PPI)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

__all__ = [
    "BOOTSTRAP_METHOD",
    "NORMAL_METHOD",
    "PPI_METHOD",
    "bootstrap_ci",
    "cohen_kappa",
    "holm",
    "kappa_ci",
    "mean_ci",
    "paired_bootstrap",
    "percentile_interval",
    "ppi_mean",
    "randomization_test",
]

_RESAMPLES = 2000
_CHUNK = 200
_NORMAL_ABOVE = 20_000

BOOTSTRAP_METHOD = f"percentile bootstrap, {_RESAMPLES} resamples, seed 0"
"""How the 95% interval of a mean is computed (the name written beside it)."""
NORMAL_METHOD = f"normal approximation (more than {_NORMAL_ABOVE} scores)"
"""How it is computed for large samples, where the bootstrap and the normal approximation
agree and the bootstrap would cost seconds."""


def _resampled_means(values: Any, rng: Any, resamples: int) -> Any:
    import numpy as np

    n = len(values)
    means = np.empty(resamples)
    for start in range(0, resamples, _CHUNK):
        count = min(_CHUNK, resamples - start)
        index = rng.integers(0, n, size=(count, n))
        means[start : start + count] = values[index].mean(axis=1)
    return means


def mean_ci(scores: Sequence[float]) -> tuple[tuple[float, float], str] | None:
    """The 95% confidence interval of the mean of ``scores`` and the name of the method: the
    one interval every output of ctxeval shows (``Evaluation.summary()``, ``summary.json``,
    the report, the terminal). None with fewer than 2 scores."""
    interval = bootstrap_ci(scores)
    if interval is None:
        return None
    return interval, NORMAL_METHOD if len(scores) > _NORMAL_ABOVE else BOOTSTRAP_METHOD


def bootstrap_ci(
    scores: Sequence[float], *, confidence: float = 0.95, resamples: int = _RESAMPLES, seed: int = 0
) -> tuple[float, float] | None:
    """The percentile bootstrap confidence interval of the mean (None with fewer than 2 scores).

    Deterministic for a given ``seed``. Above 20 000 scores the normal approximation is used
    (the two agree there, and it costs nothing).
    """
    import numpy as np

    n = len(scores)
    if n < 2:
        return None
    values = np.asarray(scores, dtype=np.float64)
    if n > _NORMAL_ABOVE:
        half = 1.959963984540054 * values.std(ddof=1) / math.sqrt(n)
        mean = float(values.mean())
        return max(0.0, mean - half), min(1.0, mean + half)
    means = _resampled_means(values, np.random.default_rng(seed), resamples)
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(low), float(high)


def paired_bootstrap(
    a: Sequence[float], b: Sequence[float], *, resamples: int = 5000, seed: int = 0
) -> dict[str, float | None]:
    """Compare two runs on the same samples: mean difference ``b - a``, its 95% CI and a
    two-sided p-value for "no difference" (paired bootstrap of the differences)."""
    import numpy as np

    if len(a) != len(b):
        raise ValueError("paired scores must have the same length")
    n = len(a)
    if n == 0:
        return {
            "n": 0,
            "mean_a": None,
            "mean_b": None,
            "difference": None,
            "ci95_low": None,
            "ci95_high": None,
            "p_value": None,
        }
    diff = np.asarray(b, dtype=np.float64) - np.asarray(a, dtype=np.float64)
    observed = float(diff.mean())
    result: dict[str, float | None] = {
        "n": n,
        "mean_a": float(np.mean(a)),
        "mean_b": float(np.mean(b)),
        "difference": observed,
        "ci95_low": None,
        "ci95_high": None,
        "p_value": None,
    }
    if n < 2:
        return result
    rng = np.random.default_rng(seed)
    means = _resampled_means(diff, rng, resamples)
    low, high = np.percentile(means, [2.5, 97.5])
    centred = _resampled_means(diff - observed, rng, resamples)
    if np.all(diff == diff[0]):
        p = 0.0 if observed != 0 else 1.0
    else:
        p = float((np.sum(np.abs(centred) >= abs(observed)) + 1) / (resamples + 1))
    result.update(ci95_low=float(low), ci95_high=float(high), p_value=min(1.0, p))
    return result


_EXACT_UP_TO = 16


def randomization_test(
    a: Sequence[float], b: Sequence[float], *, permutations: int = 10_000, seed: int = 0
) -> float | None:
    """Two-sided p-value of a paired randomisation (sign-flip) test of "no difference": the
    share of sign assignments of the paired differences ``b - a`` whose mean is at least as
    far from 0 as the observed one. Exact (every assignment) up to 16 pairs, else
    ``permutations`` random ones (seeded; ``(k + 1) / (permutations + 1)``). None without pairs.
    """
    import numpy as np

    if len(a) != len(b):
        raise ValueError("paired scores must have the same length")
    n = len(a)
    if n == 0:
        return None
    diff = np.asarray(b, dtype=np.float64) - np.asarray(a, dtype=np.float64)
    observed = abs(float(diff.mean()))
    if observed == 0.0:
        return 1.0
    tolerance = 1e-12 * max(1.0, observed)  # the observed assignment itself always counts
    if n <= _EXACT_UP_TO:
        codes = np.arange(2**n)[:, None] >> np.arange(n)
        signs = (codes & 1) * 2 - 1
        means = np.abs(signs @ diff) / n
        return float(np.mean(means >= observed - tolerance))
    rng = np.random.default_rng(seed)
    extreme = 0
    for start in range(0, permutations, _CHUNK * 5):
        count = min(_CHUNK * 5, permutations - start)
        signs = rng.choice(np.array([-1.0, 1.0]), size=(count, n))
        extreme += int(np.sum(np.abs(signs @ diff) / n >= observed - tolerance))
    return (extreme + 1) / (permutations + 1)


def holm(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjustment of ``p_values`` for multiple comparisons (None stays None):
    the i-th smallest of m p-values becomes ``max over j <= i of min(1, (m - j + 1) p_(j))``."""
    known = sorted((p, i) for i, p in enumerate(p_values) if p is not None)
    m = len(known)
    adjusted: list[float | None] = [None] * len(p_values)
    running = 0.0
    for rank, (p, index) in enumerate(known):
        running = max(running, min(1.0, (m - rank) * p))
        adjusted[index] = running
    return adjusted


# --- a judge against people ---------------------------------------------------------------

Z95 = 1.959963984540054
"""The 0.975 quantile of the standard normal distribution."""

PPI_METHOD = "prediction-powered inference (PPI++, power-tuned), normal interval"
"""How the corrected mean and its interval are computed (the name written beside them)."""


def cohen_kappa(tp: int, fp: int, fn: int, tn: int) -> float | None:
    """Cohen's kappa of two binary raters from their confusion counts (``tp``: both 1,
    ``tn``: both 0, ``fp``/``fn``: the first says 1/0 and the second the other): observed
    agreement beyond chance, ``(p_o - p_e) / (1 - p_e)``. None when chance agreement is 1
    (both raters gave one same class throughout: kappa is not defined)."""
    n = tp + fp + fn + tn
    if n == 0:
        return None
    observed = (tp + tn) / n
    chance = ((tp + fp) * (tp + fn) + (fn + tn) * (fp + tn)) / (n * n)
    if chance >= 1.0:
        return None
    return (observed - chance) / (1.0 - chance)


def kappa_ci(
    counts: Sequence[tuple[int, int, int, int]],
    *,
    resamples: int = _RESAMPLES,
    seed: int = 0,
    confidence: float = 0.95,
) -> tuple[float, float] | None:
    """The 95% percentile-bootstrap interval of Cohen's kappa, resampling *samples* (each a
    ``(tp, fp, fn, tn)`` of its items): the items of one sample are not independent, so the
    sample is the unit resampled. Resamples where kappa is not defined are left out. None
    with fewer than 2 samples or no defined kappa."""
    import numpy as np

    n = len(counts)
    if n < 2:
        return None
    table = np.asarray(counts, dtype=np.float64)
    rng = np.random.default_rng(seed)
    kappas: list[Any] = []
    for start in range(0, resamples, _CHUNK):
        count = min(_CHUNK, resamples - start)
        sums = _times_drawn(rng.integers(0, n, size=(count, n)), n) @ table
        tp, fp, fn, tn = sums.T
        total = sums.sum(axis=1)
        observed = (tp + tn) / total
        chance = ((tp + fp) * (tp + fn) + (fn + tn) * (fp + tn)) / (total * total)
        defined = chance < 1.0
        kappas.append((observed[defined] - chance[defined]) / (1.0 - chance[defined]))
    return percentile_interval(np.concatenate(kappas), confidence)


def _times_drawn(index: Any, n: int) -> Any:
    """How many times each of ``n`` rows is drawn in each resample (a row of ``index``): the
    resamples' sums are then one matrix product with the table, the very sums of the rows
    drawn (whole counts add up exactly in float64), without a copy of each row drawn."""
    import numpy as np

    count = index.shape[0]
    flat = (index + np.arange(count)[:, None] * n).ravel()
    return np.bincount(flat, minlength=count * n).reshape(count, n).astype(np.float64)


def percentile_interval(values: Any, confidence: float = 0.95) -> tuple[float, float] | None:
    """The central ``confidence`` interval of ``values`` (bootstrap replicates) by their
    percentiles; None for no value."""
    import numpy as np

    if values.size == 0:
        return None
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(values, [tail, 100 - tail])
    return float(low), float(high)


def ppi_mean(
    human: Sequence[float], judged: Sequence[float], unlabelled: Sequence[float]
) -> dict[str, float] | None:
    """The mean of a score corrected by people's labels: prediction-powered inference
    (Angelopoulos et al., Science 2023) with power tuning (PPI++, Angelopoulos, Duchi and
    Zrnic 2023), as ``ppi_py.ppi_mean_ci`` computes it.

    Args:
        human: the score of each labelled sample, from the people's labels.
        judged: the judge's score of the same samples, in the same order.
        unlabelled: the judge's score of the samples nobody labelled.

    Returns:
        ``mean`` (``λ·mean(unlabelled) + mean(human - λ·judged)``), ``ci95_low`` and
        ``ci95_high`` (normal interval, clipped to [0, 1]), ``lambda`` (the power-tuning weight
        in [0, 1]: 0 ignores the judge, 1 is classic PPI), and the counts ``n_labelled`` and
        ``n_unlabelled``; None with fewer than 2 labelled samples.
    """
    import numpy as np

    n, big_n = len(human), len(unlabelled)
    if len(judged) != n:
        raise ValueError("human and judged scores must pair up")
    if n < 2:
        return None
    y = np.asarray(human, dtype=np.float64)
    f = np.asarray(judged, dtype=np.float64)
    u = np.asarray(unlabelled, dtype=np.float64)
    if big_n < 2:
        lam = 0.0
    else:
        every = np.concatenate([f, u])
        spread = float(every.var(ddof=1))
        covariance = float(np.cov(y, f, ddof=1)[0, 1])
        lam = 0.0 if spread == 0.0 else covariance / ((1 + n / big_n) * spread)
        lam = min(1.0, max(0.0, lam))
    rectified = y - lam * f
    mean = float(rectified.mean()) + (lam * float(u.mean()) if big_n else 0.0)
    variance = float(rectified.var(ddof=1)) / n
    if lam and big_n >= 2:
        variance += lam * lam * float(u.var(ddof=1)) / big_n
    half = Z95 * math.sqrt(variance)
    return {
        "mean": mean,
        "ci95_low": max(0.0, mean - half),
        "ci95_high": min(1.0, mean + half),
        "lambda": lam,
        "n_labelled": n,
        "n_unlabelled": big_n,
    }
