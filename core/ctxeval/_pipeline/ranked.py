"""The ranked measures over :class:`~ctxeval._data.ranked.RankedColumns`, vectorised:
a chunk of queries scored with a few numpy operations per measure, each score the very float
the formula (:mod:`ctxeval.policy`) gives for the query's sample.

Only the plain ``ok`` rows are scored here (something retrieved and something relevant); the
others (NaN in the scores) are left to the sample path, which gives their reasons and details.
How each stays bit-for-bit the formula's float:

* counts divided by counts (precision, recall, P@k, R@k, 1/rank) are one IEEE division of
  two exact integers, as Python's ``int / int`` is: correctly rounded;
* average precision is the exact fraction ``sum(i * (L // rank_i)) / (L * R)`` with ``L`` a
  common multiple of the ranks (``lcm(1..last relevant rank)``), both integers exact in a
  double, then one correctly rounded division, as the formula's (whose common multiple may
  differ: the same fraction); a query whose integers would not be exact goes through the
  formula itself;
* nDCG sums ``gain / log2(rank + 1)`` in rank order, one rank at a time across the chunk, with
  the logarithms Python's ``math.log2`` gives (adding the 0.0 of an unjudged rank changes no
  sum).
"""

from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING, Any, Final

import numpy as np
import numpy.typing as npt

from ctxeval.policy import (
    Formula,
    HitRateAtK,
    NDCGAtK,
    Precision,
    PrecisionAtK,
    RankedAveragePrecision,
    Recall,
    RecallAtK,
    ReciprocalRank,
)

if TYPE_CHECKING:
    from ctxeval._data.ranked import RankedColumns

__all__ = ["RANKED_FORMULAS", "ranked_scores"]

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]

RANKED_FORMULAS: Final = frozenset(
    {
        Precision,
        Recall,
        PrecisionAtK,
        RecallAtK,
        HitRateAtK,
        ReciprocalRank,
        RankedAveragePrecision,
        NDCGAtK,
    }
)
"""The formulas scored here (exactly these classes: a subclass may change the value)."""

_EXACT: Final = 1 << 53
"""Integers below this are exact in a double."""


@functools.lru_cache(maxsize=8)
def _lcms(most: int) -> tuple[int, ...]:
    """``lcm(1..r)`` for r = 0..most (0 for 0), while ``r * lcm(1..r)`` stays exact."""
    out = [0, 1]
    while len(out) <= most:
        nxt = math.lcm(out[-1], len(out))
        if nxt * len(out) >= _EXACT:
            break
        out.append(nxt)
    return tuple(out)


@functools.lru_cache(maxsize=64)
def _log2s(k: int) -> Floats:
    """``math.log2(rank + 1)`` for rank = 0..k (index = rank), as the formula computes it."""
    return np.array([1.0] + [math.log2(rank + 1) for rank in range(1, k + 1)])


class _Chunk:
    """What every measure reads of a chunk: per row its query and rank, per query its sizes."""

    __slots__ = ("gains", "query", "rank", "retrieved", "size")

    def __init__(self, columns: RankedColumns) -> None:
        offsets = columns.offsets
        self.size = len(offsets) - 1
        self.retrieved: Ints = np.diff(offsets)
        self.query: Ints = np.repeat(np.arange(self.size), self.retrieved)
        self.rank: Ints = np.arange(len(columns.gains)) - offsets[self.query] + 1
        self.gains = columns.gains


def _per_query(values: Ints, offsets: Ints) -> Ints:
    """The sum of ``values`` (integers) over each query's rows."""
    total = np.concatenate(([0], np.cumsum(values)))
    return total[offsets[1:]] - total[offsets[:-1]]


def ranked_scores(formula: Formula, level: int, columns: RankedColumns) -> Floats:
    """Each query's score of ``formula`` (one of :data:`RANKED_FORMULAS`) when its row is a
    plain ``ok`` row, NaN where it is not (nothing retrieved, nothing relevant: the sample
    path scores those). ``level``: the least grade the reference side keeps."""
    chunk = columns.memo.get("chunk")
    if chunk is None:  # (once for every measure of the chunk)
        chunk = columns.memo["chunk"] = _Chunk(columns)
    if type(formula) is NDCGAtK:
        level = 1  # (its gains: every grade above 0)
    hits, n_reference, plain = columns.memo.get(("level", level)) or columns.memo.setdefault(
        ("level", level), _at_level(chunk, columns, level)
    )
    scores = _values(formula, chunk, columns, hits, n_reference)
    return np.where(plain, scores, np.nan)


def _at_level(chunk: _Chunk, columns: RankedColumns, level: int) -> tuple[Any, Ints, Any]:
    """At relevance ``level``: which retrieved documents are relevant, how many judged ones
    each query has, and which queries have a plain row (something retrieved and relevant)."""
    relevant = columns.ref_grades >= level
    n_reference = _per_query(relevant.astype(np.int64), columns.ref_offsets)
    plain = (chunk.retrieved > 0) & (n_reference > 0)
    return chunk.gains >= level, n_reference, plain


def _values(
    formula: Formula, chunk: _Chunk, columns: RankedColumns, hits: Any, n_reference: Ints
) -> Floats:
    kind = type(formula)
    offsets = columns.offsets
    if kind is RankedAveragePrecision:
        return _average_precision(formula, chunk, hits, n_reference, offsets)
    if kind is ReciprocalRank:
        first = np.full(chunk.size, 0, np.int64)
        at = np.flatnonzero(hits)
        queries = chunk.query[at]
        head = np.concatenate((np.ones(min(1, len(queries)), bool), queries[1:] != queries[:-1]))
        first[queries[head]] = chunk.rank[at[head]]
        with np.errstate(divide="ignore"):
            return np.where(first > 0, 1.0 / np.maximum(first, 1), 0.0)
    if kind is Precision or kind is Recall:  # (every retrieved document: distinct ones)
        found = _per_query(hits.astype(np.int64), offsets)
        if kind is Precision:
            return found / np.maximum(chunk.retrieved, 1)
        return found / np.maximum(n_reference, 1)
    assert isinstance(formula, (PrecisionAtK, RecallAtK, HitRateAtK, NDCGAtK))
    k = formula.k
    if kind is NDCGAtK:
        return _ndcg(k, chunk, columns)
    in_top = _per_query((hits & (chunk.rank <= k)).astype(np.int64), offsets)
    if kind is PrecisionAtK:
        return in_top / k
    if kind is RecallAtK:
        return in_top / np.maximum(n_reference, 1)
    return np.where(in_top > 0, 1.0, 0.0)


def _average_precision(
    formula: Formula, chunk: _Chunk, hits: Any, n_reference: Ints, offsets: Ints
) -> Floats:
    """trec_eval's AP as the exact fraction (see the module), the formula itself for a query
    whose integers would not be exact."""
    seen = np.cumsum(hits)
    before = np.concatenate(([0], seen))[offsets[:-1]]
    order = seen - before[chunk.query]  # the running count of hits within the query
    last = np.zeros(chunk.size, np.int64)
    at = np.flatnonzero(hits)
    last[chunk.query[at]] = chunk.rank[at]  # (rows in rank order: the last one stays)
    lcms = np.array(_lcms(int(last.max()) if len(last) else 1), dtype=np.int64)
    fits = last < len(lcms)
    common = lcms[np.where(fits, last, 0)]
    fits &= common.astype(np.float64) * n_reference < _EXACT
    safe = np.where(fits, common, 1)
    terms = np.where(hits, order * (safe[chunk.query] // chunk.rank), 0)
    total = _per_query(terms, offsets)
    with np.errstate(divide="ignore", invalid="ignore"):
        scores: Floats = total / (safe * n_reference)
    scores = np.where(last == 0, 0.0, scores)
    for i in np.flatnonzero(~fits & (last > 0) & (n_reference > 0)).tolist():
        flags = hits[offsets[i] : offsets[i + 1]].tolist()
        scores[i] = formula.value(flags, int(n_reference[i]))
    return scores


def _ndcg(k: int, chunk: _Chunk, columns: RankedColumns) -> Floats:
    """nDCG@k of the graded form, summed rank by rank (see the module)."""
    log2s = _log2s(k)
    top = chunk.rank <= k
    gains = np.where(top & (chunk.gains > 0), chunk.gains, 0)
    terms = np.zeros((k, chunk.size))  # a row per rank: whole-row additions
    ranks = np.minimum(chunk.rank, k)
    terms[ranks[top] - 1, chunk.query[top]] = gains[top] / log2s[ranks[top]]
    dcg = np.zeros(chunk.size)
    for rank in range(k):
        dcg += terms[rank]
    ideal = _ideal(k, columns, log2s)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(ideal > 0, np.minimum(dcg / ideal, 1.0), 0.0)


def _ideal(k: int, columns: RankedColumns, log2s: Floats) -> Floats:
    """The ideal DCG@k of each query: its judged grades above 0, highest first."""
    grades, offsets = columns.ref_grades, columns.ref_offsets
    size = len(offsets) - 1
    query = np.repeat(np.arange(size), np.diff(offsets))
    kept = grades > 0
    grades, query = grades[kept], query[kept]
    order = np.argsort(query * (int(grades.max()) + 1 if len(grades) else 1) - grades)
    grades, query = grades[order], query[order]
    starts = np.searchsorted(query, np.arange(size))
    rank = np.arange(len(query)) - starts[query] + 1
    top = rank <= k
    terms = np.zeros((k, size))
    terms[rank[top] - 1, query[top]] = grades[top] / log2s[rank[top]]
    ideal = np.zeros(size)
    for place in range(k):
        ideal += terms[place]
    return ideal
