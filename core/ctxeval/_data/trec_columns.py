"""TREC files as a columnar source: the qrels and the run kept as the flat columns the bulk
reader (:mod:`ctxeval._data.trec_bulk`) reads, handed to a run a chunk of queries at a time
as :class:`RankedColumns` (each retrieved document's grade, per query; the judged grades, per
query), and as samples to whatever reads samples.

A run whose metrics all score ranked columns (:class:`~ctxeval.plugin.hooks.
ScoresRankedColumns`: the ID metrics of the ranked measures) scores them without a
:class:`~ctxeval.Sample` per query (:mod:`ctxeval._run.fastpath`); any other run, and every
reader of the rows' evidence, reads the same samples :func:`~ctxeval.load_trec` reads, built
a chunk at a time from the columns.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Final, overload

import numpy as np
import numpy.typing as npt

from ctxeval._data.ranked import RankedColumns, position_in
from ctxeval._data.sample import GradedIDs, Sample, checked_id_sample
from ctxeval._data.trec import BULK_FROM, read_qrels, read_run, samples_from_dicts
from ctxeval._data.trec_bulk import (
    QrelsColumns,
    RunColumns,
    pair_keys,
    read_qrels_columns,
    read_run_columns,
    small_pages,
)

__all__ = ["TrecSource", "open_trec"]

IntArray = npt.NDArray[np.int64]

_SAMPLES_AT_ONCE = 4096
"""Samples built at a time when the source is read as samples."""


class _LazySamples(Sequence[Sample]):
    """The samples of positions ``start:stop`` of a source, each built when first read."""

    __slots__ = ("_built", "_source", "_start", "_stop")

    def __init__(self, source: TrecSource, start: int, stop: int) -> None:
        self._source, self._start, self._stop = source, start, stop
        self._built: dict[int, Sample] = {}

    def __len__(self) -> int:
        return self._stop - self._start

    @overload
    def __getitem__(self, index: int) -> Sample: ...

    @overload
    def __getitem__(self, index: slice) -> list[Sample]: ...

    def __getitem__(self, index: int | slice) -> Sample | list[Sample]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        index = position_in(index, len(self))
        sample = self._built.get(index)
        if sample is None:
            sample = self._built[index] = self._source.sample(self._start + index)
        return sample

    def __iter__(self) -> Iterator[Sample]:
        if len(self._built) == len(self):
            yield from (self._built[i] for i in range(len(self)))
            return
        yield from self._source.samples(self._start, self._stop)


class TrecSource(Sequence[Sample]):
    """The samples of a qrels file and a run file (those :func:`~ctxeval.load_trec`
    reads, in its order), held as columns: a sequence of samples, each built when read, and
    :meth:`ranked` chunks for a run that scores columns."""

    def __init__(self, qrels: QrelsColumns, run: RunColumns, *, complete: bool) -> None:
        self._qrels, self._run = qrels, run
        run_to_qrels = _numbers_in(run.queries, qrels.queries)
        kept = np.flatnonzero(run_to_qrels >= 0)  # trec_eval leaves out a query without qrels
        sizes = np.diff(run.bounds)
        if len(kept) < len(run.queries):
            self._docs = run.doc[np.repeat(run_to_qrels >= 0, sizes)]
        else:  # (every query of the run is judged: the usual case)
            self._docs = run.doc
        qrels_of = run_to_qrels[kept]
        self.ids = [run.queries[i] for i in kept.tolist()]
        counts = sizes[kept]
        if complete:  # the qrels' queries missing from the run, with nothing retrieved
            missing = np.setdiff1d(np.arange(len(qrels.queries)), qrels_of)
            self.ids += [qrels.queries[i] for i in missing.tolist()]
            qrels_of = np.concatenate((qrels_of, missing))
            counts = np.concatenate((counts, np.zeros(len(missing), np.int64)))
        self._offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
        self._ref_start = qrels.bounds[qrels_of]
        self._ref_stop = qrels.bounds[qrels_of + 1]
        self._gains = _grades(qrels, run, run_to_qrels[kept], sizes[kept], self._docs)

    def __len__(self) -> int:
        return len(self.ids)

    @overload
    def __getitem__(self, index: int) -> Sample: ...

    @overload
    def __getitem__(self, index: slice) -> list[Sample]: ...

    def __getitem__(self, index: int | slice) -> Sample | list[Sample]:
        if isinstance(index, slice):
            return [self.sample(i) for i in range(*index.indices(len(self)))]
        return self.sample(position_in(index, len(self)))

    def __iter__(self) -> Iterator[Sample]:
        for start in range(0, len(self), _SAMPLES_AT_ONCE):
            yield from self.samples(start, min(len(self), start + _SAMPLES_AT_ONCE))

    def sample(self, position: int) -> Sample:
        """The sample at ``position``."""
        return self.samples(position, position + 1)[0]

    def samples(self, start: int, stop: int) -> list[Sample]:
        """The samples at positions ``start:stop``, built now."""
        run_names, qrels = self._run.names, self._qrels
        offsets = self._offsets[start : stop + 1].tolist()
        docs = list(map(run_names.__getitem__, self._docs[offsets[0] : offsets[-1]].tolist()))
        begin = offsets[0]
        out = []
        for i, (a, b, r0, r1) in enumerate(
            zip(
                offsets[:-1],
                offsets[1:],
                self._ref_start[start:stop].tolist(),
                self._ref_stop[start:stop].tolist(),
                strict=True,
            )
        ):
            judged = tuple(map(qrels.names.__getitem__, qrels.doc[r0:r1].tolist()))
            reference = GradedIDs(judged, tuple(qrels.grade[r0:r1].tolist()))
            retrieved = tuple(docs[a - begin : b - begin])
            out.append(checked_id_sample(self.ids[start + i], retrieved, reference))
        return out

    def ranked(self, start: int, stop: int) -> RankedColumns:
        """The queries at positions ``start:stop`` as :class:`RankedColumns`."""
        stop = min(stop, len(self))
        offsets = self._offsets[start : stop + 1]
        gains = self._gains[offsets[0] : offsets[-1]]
        ref_start, ref_stop = self._ref_start[start:stop], self._ref_stop[start:stop]
        sizes = ref_stop - ref_start
        ref_offsets = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
        rows = np.arange(int(ref_offsets[-1])) + np.repeat(ref_start - ref_offsets[:-1], sizes)
        return RankedColumns(
            self.ids[start:stop],
            offsets - offsets[0],
            gains,
            ref_offsets,
            self._qrels.grade[rows],
            _LazySamples(self, start, stop),
            graded=True,
        )


def _numbers_in(texts: list[str], known: list[str]) -> IntArray:
    """Each of ``texts``' place in ``known`` (-1 where it is not there)."""
    if texts == known:  # (the run's queries in the qrels' order: the usual case)
        return np.arange(len(known), dtype=np.int64)
    place = dict(zip(known, range(len(known)), strict=True))
    return np.array(list(map(place.get, texts, itertools.repeat(-1, len(texts)))), np.int64)


def _grades(
    qrels: QrelsColumns, run: RunColumns, queries: IntArray, counts: IntArray, docs: IntArray
) -> IntArray:
    """Each run row's grade in the qrels of its query, -1 where it is not judged (``docs``:
    the rows' documents, grouped by query: ``counts[i]`` rows of the query whose qrels'
    number is ``queries[i]``, in turn).

    A block of queries at a time through a table of their judged grades (a row of the
    table's cells per query, a cell per qrels document; :data:`_TABLE_CELLS` at most): each
    row's grade is one read of its cell. Where the table would take more than
    :data:`_MOST_BLOCKS` blocks (many distinct judged documents) or a grade does not fit a
    cell, a search of the sorted judged pairs."""
    doc_map = _numbers_in(run.names, qrels.names)
    width = max(len(qrels.names), 1)
    block = _TABLE_CELLS // width
    if (
        not len(qrels.grade)
        or not block
        or -(-len(queries) // block) > _MOST_BLOCKS
        or int(qrels.grade.max()) >= np.iinfo(np.int8).max
    ):
        return _gains(qrels, doc_map, np.repeat(queries, counts), docs)
    table = np.zeros(min(block, len(queries)) * width, np.int8)  # a judged grade + 1, or 0
    out = np.empty(len(docs), np.int64)
    row_docs = doc_map[docs]
    offsets = np.concatenate(([0], np.cumsum(counts))).tolist()
    for start in range(0, len(queries), block):
        stop = min(start + block, len(queries))
        first, last = qrels.bounds[queries[start:stop]], qrels.bounds[queries[start:stop] + 1]
        judged = _spans(first, last - first)
        cells = np.repeat(np.arange(stop - start), last - first) * width + qrels.doc[judged]
        table[cells] = qrels.grade[judged] + 1
        a, b = offsets[start], offsets[stop]
        found = row_docs[a:b]
        wanted = np.repeat(np.arange(stop - start), counts[start:stop]) * width + found
        out[a:b] = np.where(found >= 0, table[np.where(found >= 0, wanted, 0)], 0)
        table[cells] = 0
    out -= 1
    return out


_TABLE_CELLS: Final = 1 << 24
"""The most cells (bytes) of the table of a block of queries' judged grades."""
_MOST_BLOCKS: Final = 64
"""The most blocks of queries the table is filled for (beyond: the search)."""


def _spans(starts: IntArray, sizes: IntArray) -> IntArray:
    """The positions ``starts[i]`` to ``starts[i] + sizes[i]`` (excluded), for each ``i`` in
    turn."""
    ends = np.cumsum(sizes)
    return np.arange(int(ends[-1]) if len(ends) else 0) + np.repeat(starts - ends + sizes, sizes)


def _gains(
    qrels: QrelsColumns, doc_map: IntArray, row_queries: IntArray, row_docs: IntArray
) -> IntArray:
    """Each run row's grade in the qrels of its query (``row_queries``: the qrels' number of
    the row's query; ``doc_map``: each run document's qrels number, -1 for none), -1 where it
    is not judged: a binary search of the sorted judged pairs."""
    width = max(len(qrels.names), 1)
    judged_query = np.repeat(np.arange(len(qrels.queries)), np.diff(qrels.bounds))
    if not len(judged_query):
        return np.full(len(row_docs), -1, np.int64)
    keys = pair_keys(judged_query, qrels.doc, width)  # (distinct: a pair judged twice is refused)
    order = np.argsort(keys)
    keys = keys[order]
    docs = doc_map[row_docs]
    judged = docs >= 0
    wanted = pair_keys(row_queries, np.where(judged, docs, 0), width)
    at = np.searchsorted(keys, wanted)
    np.minimum(at, len(keys) - 1, out=at)
    judged &= keys[at] == wanted
    return np.where(judged, qrels.grade[order][at], -1)


def open_trec(
    qrels: str | os.PathLike[str],
    run: str | os.PathLike[str],
    *,
    complete: bool = False,
) -> Sequence[Sample]:
    """The samples of a qrels file and a run file as :func:`~ctxeval.load_trec` reads them:
    a :class:`TrecSource` when the bulk reader reads both files, else the list
    :func:`~ctxeval.load_trec` gives (small files, or a file the bulk reader leaves to the
    line reader, which names the line that is wrong).

    Raises:
        DataError: naming the file and line that is wrong.
    """
    if _size(qrels) + _size(run) >= BULK_FROM:
        from ctxeval._data.collector import collector_paused

        with collector_paused(), small_pages():
            source = _columns(Path(qrels), Path(run), complete=complete)
        if source is not None:
            return source
    return samples_from_dicts(read_qrels(qrels), read_run(run), complete=complete)


def _columns(qrels: Path, run: Path, *, complete: bool) -> TrecSource | None:
    judged = read_qrels_columns(qrels)
    if judged is None:
        return None
    ranked = read_run_columns(run)
    if ranked is None:
        return None
    return TrecSource(judged, ranked, complete=complete)


def _size(path: Any) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0
