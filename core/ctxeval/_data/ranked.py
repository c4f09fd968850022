"""Queries as ranked columns: what a ranked measure reads of a chunk of queries
(:class:`RankedColumns`), and the sources that give them (:class:`RankedSource`: the TREC
files of the command line, :class:`~ctxeval._data.trec_columns.TrecSource`). A run whose
metrics all score such columns (:class:`~ctxeval.plugin.hooks.ScoresRankedColumns`) takes
its columnar path (:mod:`ctxeval._run.columnar`). No numpy here: the columns are numpy
arrays, made and read where numpy is imported.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ctxeval._data.sample import Sample

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    IntArray = npt.NDArray[np.int64]
else:
    IntArray = Any

__all__ = ["RankedColumns", "RankedSource", "position_in"]


class RankedColumns:
    """A chunk of queries as columns: what a ranked measure needs of them.

    Attributes:
        ids: the queries' ids (the samples' ids), in order.
        offsets: query ``i``'s retrieved documents are ``gains[offsets[i]:offsets[i + 1]]``
            (``len(ids) + 1`` values).
        gains: per retrieved document, in rank order (trec_eval's), its grade in the qrels of
            its query (a judged grade, >= 0), or -1 when the qrels do not judge it.
        ref_offsets: query ``i``'s judged grades are ``ref_grades[ref_offsets[i]:
            ref_offsets[i + 1]]``.
        ref_grades: the grades of each query's judged documents (grade >= 0), in the qrels'
            order (the reference context IDs' grades).
        samples: the queries as samples (each built when first read), equal to the samples
            :func:`~ctxeval.load_trec` reads.
        memo: what the measures scoring the chunk share (each computed once for all).
        graded: whether every query's judged documents carry their grades in its sample
            (:class:`~ctxeval._data.sample.GradedIDs`, as a qrels file's do); False when
            some may be a plain list (read as grade 1).
    """

    __slots__ = (
        "gains",
        "graded",
        "ids",
        "memo",
        "offsets",
        "ref_grades",
        "ref_offsets",
        "samples",
    )

    def __init__(
        self,
        ids: list[str],
        offsets: IntArray,
        gains: IntArray,
        ref_offsets: IntArray,
        ref_grades: IntArray,
        samples: Sequence[Sample],
        *,
        graded: bool = False,
    ) -> None:
        self.ids = ids
        self.graded = graded
        self.offsets, self.gains = offsets, gains
        self.ref_offsets, self.ref_grades = ref_offsets, ref_grades
        self.samples = samples
        self.memo: dict[Any, Any] = {}


@runtime_checkable
class RankedSource(Protocol):
    """Samples that a run may also read as :class:`RankedColumns` (their queries at
    positions ``start:stop``; equal to the samples at those positions): what takes a run to
    its columnar path (:mod:`ctxeval._run.columnar`). Each query's judged documents and
    retrieved documents are distinct."""

    def __len__(self) -> int: ...

    def __iter__(self) -> Iterator[Sample]: ...

    def ranked(self, start: int, stop: int) -> RankedColumns: ...


def position_in(index: int, length: int) -> int:
    """``index`` of a sequence of ``length`` samples as a position from 0 (negative from the
    end, as a list's); IndexError outside it."""
    if index < 0:
        index += length
    if not 0 <= index < length:
        raise IndexError("sample index out of range")
    return index
