"""The queries a ranked measure leaves on the columnar path (nothing retrieved, or nothing
relevant: NaN from :func:`~ctxeval._pipeline.ranked.ranked_scores`) in classes of equal
queries, so that one sample per class is scored and its row shared by the class
(:meth:`~ctxeval._pipeline.deterministic.DeterministicPipelineMetric.ranked_edge_rows`).

Two such queries are in one class when both or neither retrieved something and their judged
grades are equal as a multiset: the row ``score`` gives such a query reads nothing else of its
sample when the metric says so (its reasons read the grades; its details are its settings, or,
with nothing retrieved, the evidence of no retrieved item).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ctxeval._data.ranked import RankedColumns

__all__ = ["EdgeClass", "edge_classes"]

EdgeClass = tuple[bool, tuple[int, ...]]
"""A class of left queries: whether nothing was retrieved, and the judged grades, sorted."""


def edge_classes(
    columns: RankedColumns, positions: Sequence[int], level: int
) -> dict[int, EdgeClass]:
    """The class of each query at ``positions`` of ``columns`` that is an edge case at
    relevance ``level`` (nothing retrieved, or no judged grade ``>= level``), by position;
    the other positions are left out (their rows read more of the sample). The grades of the
    chunk are read, and each query's class found, once for every measure of it
    (``columns.memo``)."""
    memo = columns.memo
    known: dict[int, EdgeClass] | None = memo.get("edge_classes")
    if known is None:
        known = memo["edge_classes"] = {}
        memo["edge_columns"] = (
            columns.offsets.tolist(),
            columns.ref_offsets.tolist(),
            columns.ref_grades.tolist(),
        )
    offsets, ref_offsets, grades = memo["edge_columns"]
    out: dict[int, EdgeClass] = {}
    for i in positions:
        kind = known.get(i)
        if kind is None:
            kind = known[i] = (
                offsets[i] == offsets[i + 1],
                tuple(sorted(grades[ref_offsets[i] : ref_offsets[i + 1]])),
            )
        empty, judged = kind
        if empty or not judged or judged[-1] < level:
            out[i] = kind
    return out
