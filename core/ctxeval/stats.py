"""Confidence intervals and paired comparisons of runs, by bootstrap (numpy)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

__all__ = [
    "BOOTSTRAP_METHOD",
    "NORMAL_METHOD",
    "bootstrap_ci",
    "holm",
    "mean_ci",
    "paired_bootstrap",
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
