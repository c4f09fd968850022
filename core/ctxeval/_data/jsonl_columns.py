"""A JSONL file of plain ID samples as a columnar source (#58): when every line holds only an
``id`` (a string, or none) and the two ID lists (``retrieved_context_ids`` and
``reference_context_ids``, lists of strings), :func:`read_plain` reads the file in bulk into
the columns a run of ranked ID metrics scores (:class:`~ctxeval._data.ranked.RankedColumns`,
:mod:`ctxeval._run.columnar`): the IDs coded to integers, each side deduplicated as the ID
metrics read it (a repeat keeps its first rank), each retrieved ID's gain its membership in
the reference side. Nothing of a :class:`~ctxeval.Sample` per line is built on the way: the
samples (equal to those :func:`~ctxeval.load_samples` reads) are built from the columns when
read, a chunk at a time.

Anything else (another field, graded IDs, IDs given as numbers, a line that is not JSON, a
repeated sample id, an ID no sample takes as it is) leaves the whole file to the sample path,
which reads it as it always does (its errors name file and line): :func:`read_plain` gives
None. The strictness is the sample path's: a file is read here only when every line gives
the sample :meth:`~ctxeval.Sample.from_dict` would give without a converter changing or
refusing a value.
"""

from __future__ import annotations

import functools
import itertools
import json
from collections.abc import Iterator, Sequence
from operator import itemgetter
from pathlib import Path
from typing import Any, Final, overload

import numpy as np
import numpy.typing as npt
import orjson

from ctxeval._data.collector import collector_paused
from ctxeval._data.ranked import RankedColumns, position_in
from ctxeval._data.sample import MAX_ID_LENGTH, Sample, checked_samples

__all__ = ["JsonlSource", "read_plain", "read_plain_lines"]

IntArray = npt.NDArray[np.int64]

_RETRIEVED: Final = "retrieved_context_ids"
_REFERENCE: Final = "reference_context_ids"
_BYTES_AT_ONCE: Final = 1 << 22
"""Bytes of lines read (and held as rows) at a time."""
_LINES_AT_ONCE: Final = 16_384
"""Lines read (and held as rows) at a time from lines given (:func:`read_plain_lines`)."""
_SAMPLES_AT_ONCE: Final = 4096
"""Samples built at a time when the source is read as samples."""
_WINDOW: Final = 256
"""Samples built at a time when one is read by its position."""
_get_retrieved, _get_reference = itemgetter(_RETRIEVED), itemgetter(_REFERENCE)


class _LazySamples(Sequence[Sample]):
    """The samples of positions ``start:stop`` of a source, each built when read (a few
    hundred at a time, the last ones read kept by the source: a row block's rows are read in
    order). What a row block keeps for its rows' evidence, as it is (``held_compactly``: the
    columns, not a line or a sample per row)."""

    __slots__ = ("_source", "_start", "_stop")

    held_compactly: Final = True

    def __init__(self, source: JsonlSource, start: int, stop: int) -> None:
        self._source, self._start, self._stop = source, start, stop

    def __len__(self) -> int:
        return self._stop - self._start

    @overload
    def __getitem__(self, index: int) -> Sample: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Sample]: ...

    def __getitem__(self, index: int | slice) -> Sample | Sequence[Sample]:
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step != 1:
                return [self[i] for i in range(start, stop, step)]
            first = self._start + start
            return _LazySamples(self._source, first, max(first, self._start + stop))
        return self._source.sample(self._start + position_in(index, len(self)))

    def __iter__(self) -> Iterator[Sample]:
        return self._source.between(self._start, self._stop)


class JsonlSource(Sequence[Sample]):
    """The samples of a JSONL file of plain ID samples (see the module), in the file's order,
    held as columns: a sequence of samples, each built when read, and :meth:`ranked` chunks
    for a run that scores columns.

    Attributes:
        rows: the file's rows (its lines that are not blank).
    """

    def __init__(self, parts: _Parts) -> None:
        self.rows = parts.count
        self._id_text = "".join(parts.id_texts)  # (the ids in one string: see `ids`)
        self._id_ends = _joined(parts.id_ends, np.int64)
        self._given = _joined(parts.given, np.bool_)
        self._names = parts.names
        code = np.min_scalar_type(max(len(parts.names) - 1, 0))
        self._retrieved = _Flat(parts.retrieved_sizes, parts.retrieved, code)
        self._reference = _Flat(parts.reference_sizes, parts.reference, code)
        self._ranked = _Flat(parts.ranked_sizes, parts.gains, np.dtype(np.int8))
        self._judged = _offsets(parts.judged_sizes)
        self._window: tuple[int, list[Sample]] = (0, [])

    def __len__(self) -> int:
        return self.rows

    def ids(self, start: int, stop: int) -> list[str]:
        """The ids of the samples at positions ``start:stop`` as a run labels their rows (a
        sample without one: its position)."""
        ends = self._id_ends[max(start - 1, 0) : stop].tolist()
        if start == 0:
            ends.insert(0, 0)
        text = self._id_text
        return [text[a:b] for a, b in itertools.pairwise(ends)]

    @overload
    def __getitem__(self, index: int) -> Sample: ...

    @overload
    def __getitem__(self, index: slice) -> list[Sample]: ...

    def __getitem__(self, index: int | slice) -> Sample | list[Sample]:
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step == 1:
                return self.samples(start, max(start, stop))
            return [self.sample(i) for i in range(start, stop, step)]
        return self.sample(position_in(index, len(self)))

    def __iter__(self) -> Iterator[Sample]:
        return self.between(0, len(self))

    def between(self, start: int, stop: int) -> Iterator[Sample]:
        """The samples at positions ``start:stop``, built a few thousand at a time."""
        for first in range(start, stop, _SAMPLES_AT_ONCE):
            yield from self.samples(first, min(stop, first + _SAMPLES_AT_ONCE))

    def sample(self, position: int) -> Sample:
        """The sample at ``position``: built with its neighbours (:data:`_WINDOW` samples
        at a time), the last ones built kept for the next read."""
        first, built = self._window
        if not first <= position < first + len(built):
            first = position - position % _WINDOW
            built = self.samples(first, min(len(self), first + _WINDOW))
            self._window = (first, built)  # (one assignment: read by any thread)
        return built[position - first]

    def samples(self, start: int, stop: int) -> list[Sample]:
        """The samples at positions ``start:stop``, built now (each equal to the one
        :meth:`~ctxeval.Sample.from_dict` gives of its line)."""
        size = stop - start
        given = self._given[start:stop].tolist()
        ids = [i if g else None for i, g in zip(self.ids(start, stop), given, strict=True)]
        columns: dict[str, Sequence[Any]] = {
            "id": ids,
            _RETRIEVED: self._retrieved.tuples(start, stop, self._names),
            _REFERENCE: self._reference.tuples(start, stop, self._names),
        }
        return checked_samples(columns, size)

    def ranked(self, start: int, stop: int) -> RankedColumns:
        """The samples at positions ``start:stop`` as :class:`RankedColumns`: the retrieved
        IDs each once (at its first rank), gain 1 when the reference names it, else -1; the
        reference IDs each once, grade 1."""
        stop = min(stop, len(self))
        offsets = self._ranked.offsets[start : stop + 1]
        gains = self._ranked.values[offsets[0] : offsets[-1]].astype(np.int64)
        judged = self._judged[start : stop + 1]
        return RankedColumns(
            self.ids(start, stop),
            offsets - offsets[0],
            gains,
            judged - judged[0],
            np.ones(int(judged[-1] - judged[0]), np.int64),
            _LazySamples(self, start, stop),
        )


class _Flat:
    """Per sample a run of values: ``values[offsets[i]:offsets[i + 1]]``."""

    __slots__ = ("offsets", "values")

    def __init__(
        self, sizes: list[IntArray], values: list[npt.NDArray[Any]], dtype: np.dtype[Any]
    ) -> None:
        self.offsets = _offsets(sizes)
        self.values = _joined(values, dtype)

    def tuples(self, start: int, stop: int, names: list[str]) -> list[tuple[str, ...]]:
        """The values of samples ``start:stop`` as tuples of the names they code."""
        bounds = self.offsets[start : stop + 1]
        first = int(bounds[0])
        flat = list(map(names.__getitem__, self.values[first : int(bounds[-1])].tolist()))
        ends = (bounds - first).tolist()
        return [tuple(flat[a:b]) for a, b in itertools.pairwise(ends)]


class _Parts:
    """What :func:`read_plain` has read so far, a batch of lines at a time."""

    def __init__(self, start: int = 0) -> None:
        self.start = start  # (the position in the file of the first sample read)
        self.count = 0
        self.id_texts: list[str] = []  # (per batch, its ids joined)
        self.id_ends: list[IntArray] = []  # (where each id ends in the file's ids joined)
        self.id_hashes: list[IntArray] = []
        self.given: list[npt.NDArray[np.bool_]] = []
        self.codes: dict[str, int] = {}
        self.names: list[str] = []
        self.retrieved: list[npt.NDArray[np.int32]] = []
        self.retrieved_sizes: list[IntArray] = []
        self.reference: list[npt.NDArray[np.int32]] = []
        self.reference_sizes: list[IntArray] = []
        self.gains: list[npt.NDArray[np.int8]] = []
        self.ranked_sizes: list[IntArray] = []
        self.judged_sizes: list[IntArray] = []

    def add(self, rows: list[Any]) -> bool:
        """Take a batch of rows; False when one is no plain ID sample (the file is left to
        the sample path)."""
        count = len(rows)
        if not count:
            return True
        try:  # (a row that is no object: TypeError)
            retrieved = list(map(_get_retrieved, rows))
            reference = list(map(_get_reference, rows))
            named = sum(map(dict.__contains__, rows, itertools.repeat("id")))
        except (KeyError, TypeError):
            return False
        if sum(map(len, rows)) != 2 * count + named:  # (another field)
            return False
        ids = list(map(dict.get, rows, itertools.repeat("id")))
        if set(map(type, retrieved)) | set(map(type, reference)) != {list}:
            return False
        if not _checked(ids if None not in ids else [i for i in ids if i is not None]):
            return False
        retrieved_sizes = np.fromiter(map(len, retrieved), np.int64, count)
        reference_sizes = np.fromiter(map(len, reference), np.int64, count)
        flat: list[Any] = []
        for ids_of in (retrieved, reference):
            for listed in ids_of:
                flat += listed
        codes = self._coded(flat)
        if codes is None:
            return False
        self._add_ids(ids)
        cut = int(retrieved_sizes.sum())
        self.retrieved.append(codes[:cut])
        self.reference.append(codes[cut:])
        self.retrieved_sizes.append(retrieved_sizes)
        self.reference_sizes.append(reference_sizes)
        _ranked(self, codes[:cut], retrieved_sizes, codes[cut:], reference_sizes)
        return True

    def _add_ids(self, ids: list[str | None]) -> None:
        """The batch's sample ids (a sample without one: its position, as a run labels it),
        held as one string, where each ends, and each one's hash (to find a repeat)."""
        first = self.start + self.count
        if None in ids:
            self.given.append(np.array([i is not None for i in ids], bool))
            ids = [str(first + n) if i is None else i for n, i in enumerate(ids)]
        else:
            self.given.append(np.ones(len(ids), bool))
        self.count += len(ids)
        size = len(ids)
        ends = np.fromiter(map(len, ids), np.int64, size)  # type: ignore[arg-type]
        total = int(self.id_ends[-1][-1]) if self.id_ends and len(self.id_ends[-1]) else 0
        self.id_ends.append(np.cumsum(ends) + total)
        self.id_texts.append("".join(ids))  # type: ignore[arg-type]
        self.id_hashes.append(np.fromiter(map(hash, ids), np.int64, size))

    def repeated_id(self) -> bool:
        """Whether two samples have one id (their hashes first, then the ids of equal
        hashes)."""
        hashes = np.sort(_joined(self.id_hashes, np.int64))
        equal = hashes[1:] == hashes[:-1]
        if not equal.any():
            return False
        alike = set(hashes[1:][equal].tolist())
        same: list[str] = []
        base = 0
        for text, ends in zip(self.id_texts, self.id_ends, strict=True):
            bounds = [0, *(ends - base).tolist()]
            same += (i for a, b in itertools.pairwise(bounds) if hash(i := text[a:b]) in alike)
            base = int(ends[-1]) if len(ends) else base
        return len(set(same)) != len(same)

    def _coded(self, names: list[str]) -> npt.NDArray[np.int32] | None:
        """``names`` coded (each distinct name a number of its own, across the file); None
        when one is not an ID a sample takes as it is (each distinct one checked once)."""
        codes = self.codes
        try:
            return np.fromiter(map(codes.__getitem__, names), np.int32, len(names))
        except KeyError:  # (names not seen before: coded now)
            pass
        except TypeError:  # (a list among the IDs)
            return None
        fresh = list(set(names).difference(codes))
        if not _checked(fresh):
            return None
        codes.update(zip(fresh, itertools.count(len(self.names))))
        self.names += fresh
        return np.fromiter(map(codes.__getitem__, names), np.int32, len(names))


SMALL: Final = 256
"""A batch whose longest retrieved list times its longest list is at most this is ranked
in small arrays (a row per rank: each rank against the ranks above it and the reference
IDs); a larger one by sorting."""


def _ranked(
    parts: _Parts,
    retrieved: npt.NDArray[np.int32],
    retrieved_sizes: IntArray,
    reference: npt.NDArray[np.int32],
    reference_sizes: IntArray,
) -> None:
    """Each sample's retrieved IDs each once (at its first rank) with their gains (1: in
    the reference), and how many distinct reference IDs it has, into ``parts``."""
    most = int(retrieved_sizes.max())
    widest = max(most, int(reference_sizes.max()))
    if most * widest <= SMALL:  # (a rank per row, a sample per column)
        ranked = _padded(retrieved, retrieved_sizes, most, -1)
        judged = _padded(reference, reference_sizes, int(reference_sizes.max()), -2)
        kept = (ranked >= 0) & ~_repeats(ranked)
        hit = np.zeros(ranked.shape, bool)
        for row in judged:
            hit |= ranked == row
        parts.gains.append(np.where(hit, 1, -1).astype(np.int8).T[kept.T])
        parts.ranked_sizes.append(kept.sum(0, dtype=np.int64))
        distinct = (judged >= 0) & ~_repeats(judged)
        parts.judged_sizes.append(distinct.sum(0, dtype=np.int64))
        return
    size = len(retrieved_sizes)
    width = max(len(parts.names), 1)
    retrieved_keys = _keys(retrieved, retrieved_sizes, width)
    order = np.argsort(retrieved_keys, kind="stable")  # (a repeat after its first rank)
    ordered = retrieved_keys[order]
    first = np.ones(len(ordered), bool)
    first[1:] = ordered[1:] != ordered[:-1]
    kept_keys = np.empty(len(ordered), bool)
    kept_keys[order] = first
    retrieved_keys = retrieved_keys[kept_keys]
    judged_keys = np.sort(_keys(reference, reference_sizes, width))
    if len(judged_keys):  # (each once)
        judged_keys = judged_keys[np.concatenate(([True], judged_keys[1:] != judged_keys[:-1]))]
    parts.judged_sizes.append(np.bincount(judged_keys // width, minlength=size).astype(np.int64))
    at = np.minimum(np.searchsorted(judged_keys, retrieved_keys), max(len(judged_keys) - 1, 0))
    found = judged_keys[at] == retrieved_keys if len(judged_keys) else np.zeros(len(at), bool)
    parts.gains.append(np.where(found, 1, -1).astype(np.int8))
    parts.ranked_sizes.append(np.bincount(retrieved_keys // width, minlength=size).astype(np.int64))


def _padded(codes: npt.NDArray[np.int32], sizes: IntArray, width: int, fill: int) -> Any:
    """The samples' codes as ``width`` rows (row ``r``: each sample's ``r``-th code, or
    ``fill`` past its last), a column per sample."""
    out = np.full((width, len(sizes)), fill, np.int32)
    starts = np.cumsum(sizes) - sizes
    samples = np.repeat(np.arange(len(sizes)), sizes)
    out[np.arange(len(codes)) - starts[samples], samples] = codes
    return out


def _repeats(rows: Any) -> Any:
    """Where a column's value is in one of its rows above (a repeat of an earlier one)."""
    out = np.zeros(rows.shape, bool)
    for j in range(1, len(rows)):
        here = out[j]
        for i in range(j):
            here |= rows[i] == rows[j]
    return out


def _keys(codes: npt.NDArray[np.int32], sizes: IntArray, width: int) -> IntArray:
    """Each coded ID's (sample, ID) pair as one integer (sample-major)."""
    samples = np.repeat(np.arange(len(sizes), dtype=np.int64), sizes)
    keys: IntArray = samples * width + codes
    return keys


def _checked(texts: list[Any]) -> bool:
    """Whether every one of ``texts`` is a string a sample takes as it is (valid Unicode,
    at most :data:`MAX_ID_LENGTH` characters)."""
    if not texts:
        return True
    if set(map(type, texts)) != {str} or max(map(len, texts)) > MAX_ID_LENGTH:
        return False
    joined = "".join(texts)
    if joined.isascii():
        return True
    try:
        joined.encode("utf-8")  # (a lone surrogate: the converters refuse it)
    except UnicodeEncodeError:
        return False
    return True


def read_plain(path: Path) -> JsonlSource | None:
    """The samples of the JSONL file ``path`` as a :class:`JsonlSource` when every line is a
    plain ID sample (see the module), else None (the file is left to the sample path)."""
    with path.open("rb") as handle:
        return _read(iter(functools.partial(handle.readlines, _BYTES_AT_ONCE), []), _Parts())


def read_plain_lines(
    lines: Sequence[bytes], *, first_line: int, first_index: int
) -> JsonlSource | None:
    """Some lines of a JSONL file (from its line number ``first_line`` on; the first sample
    among them the file's sample number ``first_index``, which names a sample without
    ``id``) as :func:`read_plain` reads the whole file: how a worker of the ``processes``
    runner reads its part of one. None when one is no plain ID sample."""
    step = _LINES_AT_ONCE
    batches = (lines[start : start + step] for start in range(0, len(lines), step))
    return _read(batches, _Parts(first_index), first=first_line == 1)


def _read(
    batches: Iterator[Sequence[bytes]], parts: _Parts, *, first: bool = True
) -> JsonlSource | None:
    """The rows of ``batches`` of lines (the file's first among them when ``first``) added
    to ``parts``, as a source (None: see :func:`read_plain`)."""
    with collector_paused():  # (no cycles: rows of lists)
        for lines in batches:
            rows = _rows(list(lines), first)
            if rows is None or not parts.add(rows):
                return None
            first = False
    if not parts.count or parts.repeated_id():
        return None  # (a repeated id: the sample path refuses it, or sets it aside)
    return JsonlSource(parts)


def _rows(lines: list[bytes], first: bool) -> list[Any] | None:
    """The rows of a batch of lines, as the sample path reads them (the file's first line as
    text, a byte-order mark allowed; blank lines skipped); None at a line that is not JSON."""
    rows: list[Any] = []
    if first:
        try:
            text = lines[0].decode("utf-8-sig")
            if text.strip():
                rows.append(json.loads(text))
        except (ValueError, RecursionError):  # (the sample path says what is wrong)
            return None
        lines = lines[1:]
    head = len(rows)
    try:
        rows += map(orjson.loads, lines)
    except orjson.JSONDecodeError:
        del rows[head:]
        for line in lines:
            if not line.strip():
                continue  # (blank: skipped; Unicode blanks go the sample path)
            try:
                rows.append(orjson.loads(line))
            except orjson.JSONDecodeError:
                return None
    return rows


def _joined(parts: list[Any], dtype: Any) -> Any:
    """The arrays of ``parts`` as one array of ``dtype`` (each part freed once copied)."""
    out = np.empty(sum(map(len, parts)), dtype)
    at = 0
    while parts:
        part = parts.pop(0)
        out[at : at + len(part)] = part
        at += len(part)
    return out


def _offsets(sizes: list[IntArray]) -> IntArray:
    """Where each sample's run of values starts and ends, of the samples' sizes."""
    out: IntArray = np.zeros(sum(map(len, sizes)) + 1, np.int64)
    np.cumsum(_joined(sizes, np.int64), out=out[1:])
    return out
