"""Samples read from the columns of an Arrow table, without a dict per row: :func:`arrow_samples`.

A data engine hands the batch scorer a pyarrow Table or RecordBatch (Spark's ``mapInArrow``,
Ray Data's ``map_batches``). Reading it row by row (``to_pylist``: one dict per row, every
cell a Python object, then :meth:`Sample.from_dict <ctxeval.Sample.from_dict>`) was half of a
batch's time on ID metrics. Here each column is read once: a column of strings as one list,
a column of lists of strings from its flat values and offsets (the values, which repeat from
sample to sample, turned into Python strings once each through Arrow's dictionary encoding),
checked in Arrow (ASCII, ID length) so that no value needs its converter, and the samples are
built a field at a time (:func:`~ctxeval._data.sample.checked_samples`). A column whose values
do need their converter (non-ASCII text, integer IDs, graded qrels as a struct) is converted
cell by cell, as building the sample would.

Whatever this path does not read as :meth:`Sample.from_dict` would (a column that is no sample
field: metadata; steps, sources; a field given under its old and new name; no ``id`` column
or a null id; a cell the field refuses) makes :func:`arrow_samples` give None, and the batch
is read row by row, with that path's checks and errors: the samples are equal either way.

pyarrow is imported only here, by what hands it an Arrow batch (so it is loaded already).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Final

from ctxeval._data.collector import collector_paused
from ctxeval._data.ranked import RankedColumns
from ctxeval._data.sample import (
    COLUMN_FIELDS,
    FIELD_ALIASES,
    ID_LIST_FIELDS,
    MAX_ID_LENGTH,
    TEXT_LIST_FIELDS,
    Sample,
    checked_samples,
    field_converter,
)
from ctxeval._errors import DataError

__all__ = ["ArrowRanked", "arrow_ranked", "arrow_samples"]

_IDColumns = tuple[Any, Any, Any]
"""Per query: the offsets of its retrieved IDs' gains, the gains, the offsets of its reference
IDs (numpy arrays)."""

_LIST_FIELDS: Final = frozenset(TEXT_LIST_FIELDS) | (COLUMN_FIELDS & frozenset(ID_LIST_FIELDS))
_ID_FIELDS: Final = frozenset((*ID_LIST_FIELDS, "id"))


def arrow_samples(batch: Any) -> list[Sample] | None:
    """The samples of ``batch`` (a pyarrow Table or RecordBatch) read column by column, a null
    cell a missing field: each equal to ``Sample.from_dict`` of its row without its null cells.
    None when the batch must be read row by row (see the module's text), which then says what
    is wrong where."""
    fields: dict[str, str] = {}
    for name in batch.schema.names:
        field = FIELD_ALIASES.get(name, name)
        if field not in COLUMN_FIELDS or field in fields:
            return None
        fields[field] = name
    if "id" not in fields:
        return None
    columns: dict[str, Sequence[Any]] = {}
    with collector_paused():  # (objects by the thousand, none of them cyclic)
        for field, name in fields.items():
            values = _values(_whole(batch.column(name)), field)
            if values is None:
                return None
            columns[field] = values
        if None in columns["id"]:
            return None
        return checked_samples(columns, batch.num_rows)


def _whole(column: Any) -> Any:
    """A column as one Arrow array (a table's column may be in chunks)."""
    chunks = getattr(column, "chunks", None)
    if chunks is None:
        return column
    if len(chunks) == 1:
        return chunks[0]
    return column.combine_chunks()


def _values(array: Any, field: str) -> list[Any] | None:
    """The values of ``field`` in ``array``, as the field's converter makes them (None for a
    null cell); None when a cell is refused."""
    import pyarrow as pa

    kind = array.type
    if field in _LIST_FIELDS:
        if (pa.types.is_list(kind) or pa.types.is_large_list(kind)) and _is_string(kind.value_type):
            fast = _string_lists(array, ids=field in _ID_FIELDS)
            if fast is not None:
                return fast
    elif _is_string(kind) and _plain(array, ids=field in _ID_FIELDS):
        values: list[Any] = array.to_pylist()
        return values
    return _converted(array, field)


def _is_string(kind: Any) -> bool:
    import pyarrow as pa

    return bool(pa.types.is_string(kind) or pa.types.is_large_string(kind))


def _plain(strings: Any, *, ids: bool) -> bool:
    """Whether every string of ``strings`` is what its converter would leave as it is: ASCII
    (text that is not is checked for lone surrogates, cell by cell) and, for IDs, no longer
    than :data:`MAX_ID_LENGTH`."""
    import pyarrow.compute as pc

    if len(strings) == strings.null_count:
        return True
    if not pc.all(pc.string_is_ascii(strings)).as_py():
        return False
    return not ids or (pc.max(pc.binary_length(strings)).as_py() or 0) <= MAX_ID_LENGTH


def _string_lists(array: Any, *, ids: bool) -> list[Any] | None:
    """The tuples of a column of lists of strings, read from its flat values and offsets;
    None when a value needs its converter (or is a null item, which the field refuses)."""
    import pyarrow.compute as pc

    offsets: list[int] = array.offsets.to_pylist()
    start = offsets[0]
    flat = array.values.slice(start, offsets[-1] - start)
    if flat.null_count or not _plain(flat, ids=ids):
        return None
    if len(flat):
        encoded = pc.dictionary_encode(flat)  # each distinct value made a Python str once
        words: list[str] = encoded.dictionary.to_pylist()
        items = list(map(words.__getitem__, encoded.indices.to_pylist()))
    else:
        items = []
    if start:
        offsets = [offset - start for offset in offsets]
    tuples: list[Any] = list(map(tuple, map(items.__getitem__, map(slice, offsets, offsets[1:]))))
    if array.null_count:
        for position, null in enumerate(array.is_null().to_pylist()):
            if null:
                tuples[position] = None
    return tuples


def _converted(array: Any, field: str) -> list[Any] | None:
    """The cells of ``array`` through the field's converter, one by one (None: one refused)."""
    convert = field_converter(field)
    try:
        return [None if cell is None else convert(cell) for cell in array.to_pylist()]
    except (DataError, TypeError, ValueError):
        return None


class ArrowRanked(Sequence[Sample]):
    """An Arrow batch of ID samples (an ``id``, the retrieved and the reference context IDs)
    as a :class:`~ctxeval._data.ranked.RankedSource`: its queries as ranked columns, made from
    the ID columns' flat values and offsets (:func:`arrow_ranked`), and its samples (those of
    :func:`arrow_samples`), built only when read: one at a time for the few rows the columns
    leave to the sample path, all at once for the rows' evidence."""

    def __init__(self, batch: Any, ids: list[str], columns: _IDColumns) -> None:
        self._batch, self.ids = batch, ids
        self._offsets, self._gains, self._ref_offsets = columns
        self._samples: list[Sample] | None = None
        self._some: dict[int, Sample] = {}

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, index: Any) -> Any:
        return self.built()[index]

    def __iter__(self) -> Iterator[Sample]:
        return iter(self.built())

    def built(self) -> list[Sample]:
        """The batch's samples (:func:`arrow_samples`), built on the first call."""
        if self._samples is None:
            samples = arrow_samples(self._batch)
            assert samples is not None  # (arrow_ranked checked what arrow_samples reads)
            self._samples = samples
        return self._samples

    def sample(self, position: int) -> Sample:
        """The sample at ``position`` (from 0), built alone while few are read."""
        if self._samples is not None or len(self._some) >= _FEW:
            return self.built()[position]
        sample = self._some.get(position)
        if sample is None:
            read = arrow_samples(self._batch.slice(position, 1))
            assert read is not None
            sample = self._some[position] = read[0]
        return sample

    def ranked(self, start: int, stop: int) -> RankedColumns:
        """The queries at positions ``start:stop`` as ranked columns."""
        import numpy as np

        stop = min(stop, len(self))
        offsets = self._offsets[start : stop + 1]
        ref_offsets = self._ref_offsets[start : stop + 1]
        return RankedColumns(
            self.ids[start:stop],
            offsets - offsets[0],
            self._gains[offsets[0] : offsets[-1]],
            ref_offsets - ref_offsets[0],
            np.ones(int(ref_offsets[-1] - ref_offsets[0]), np.int64),
            _Part(self, start, stop),
        )


_FEW: Final = 32
"""Samples of an :class:`ArrowRanked` built one at a time before the rest are built at once."""


class _Part(Sequence[Sample]):
    """The samples at positions ``start:stop`` of an :class:`ArrowRanked`, built when read."""

    __slots__ = ("_source", "_start", "_stop")

    def __init__(self, source: ArrowRanked, start: int, stop: int) -> None:
        self._source, self._start, self._stop = source, start, stop

    def __len__(self) -> int:
        return self._stop - self._start

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, int) and -len(self) <= index < len(self):
            return self._source.sample(self._start + index % len(self))
        return self._source.built()[self._start : self._stop][index]

    def __iter__(self) -> Iterator[Sample]:
        return iter(self._source.built()[self._start : self._stop])


_RANKED_FIELDS: Final = frozenset(("id", "retrieved_context_ids", "reference_context_ids"))


def arrow_ranked(batch: Any) -> ArrowRanked | None:
    """``batch`` (a pyarrow Table or RecordBatch) as an :class:`ArrowRanked` when it is of the
    plain shape: the columns ``id`` (distinct strings, no null) and the retrieved and
    reference context IDs (lists of strings, no null item), every ID what its converter
    leaves as it is (ASCII, not too long: as :func:`arrow_samples` reads them) and no
    reference list with a repeated ID; else None (the batch is read as samples)."""
    import pyarrow.compute as pc

    fields: dict[str, str] = {}
    for name in batch.schema.names:
        fields[FIELD_ALIASES.get(name, name)] = name
    if set(fields) != _RANKED_FIELDS or len(fields) != len(batch.schema.names):
        return None
    ids = _whole(batch.column(fields["id"]))
    if not _is_string(ids.type) or ids.null_count or not _plain(ids, ids=True):
        return None
    if len(ids) and pc.count_distinct(ids).as_py() != len(ids):
        return None  # (two samples with one id: the sample path says so)
    retrieved = _id_lists(_whole(batch.column(fields["retrieved_context_ids"])))
    reference = _id_lists(_whole(batch.column(fields["reference_context_ids"])))
    if retrieved is None or reference is None:
        return None
    columns = _id_columns(len(ids), retrieved, reference)
    if columns is None:
        return None
    return ArrowRanked(batch, ids.to_pylist(), columns)


def _id_lists(array: Any) -> tuple[Any, Any] | None:
    """A column of lists of IDs as its flat values (those of its cells that are not null,
    as a pyarrow array) and each cell's length (0 for a null cell, as numpy); None when an ID
    needs its converter, or is a null item."""
    import numpy as np
    import pyarrow as pa

    kind = array.type
    if not (pa.types.is_list(kind) or pa.types.is_large_list(kind)):
        return None
    if not _is_string(kind.value_type):
        return None
    offsets = array.offsets.to_numpy().astype(np.int64)
    flat = array.values.slice(int(offsets[0]), int(offsets[-1] - offsets[0]))
    if flat.null_count or not _plain(flat, ids=True):
        return None
    lengths = np.diff(offsets)
    if array.null_count:  # (a null cell may still span values: none of them is read)
        valid = ~array.is_null().to_numpy(zero_copy_only=False)
        flat = flat.filter(pa.array(np.repeat(valid, lengths)))
        lengths = np.where(valid, lengths, 0)
    return flat.cast(pa.large_string()), lengths


def _id_columns(size: int, retrieved: tuple[Any, Any], reference: tuple[Any, Any]) -> Any:
    """Per query, its retrieved IDs' gains in rank order (deduplicated, the first of a repeated
    ID kept: 1 when it is among the query's reference IDs, -1 when not) with their offsets, and
    its reference IDs' offsets (each of grade 1); None when a reference list repeats an ID."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    (ret_flat, ret_lengths), (ref_flat, ref_lengths) = retrieved, reference
    codes = pc.dictionary_encode(pa.concat_arrays([ret_flat, ref_flat])).indices
    codes = codes.to_numpy(zero_copy_only=False).astype(np.int64)
    width = int(codes.max()) + 1 if len(codes) else 1
    queries = np.arange(size, dtype=np.int64)
    ret_keys = np.repeat(queries, ret_lengths) * width + codes[: len(ret_flat)]
    ref_keys = np.repeat(queries, ref_lengths) * width + codes[len(ret_flat) :]
    if size * width <= _DENSE:  # (the usual batch: a flag per query and ID, looked up)
        member, repeated = _dense(size * width, ret_keys, ref_keys)
    else:
        member, repeated = _sorted(ret_keys, ref_keys)
    if member is None:
        return None  # (a reference ID repeated)
    if repeated:  # the first of each kept, in rank order
        _, first = np.unique(ret_keys, return_index=True)
        first.sort()
        ret_keys, member = ret_keys[first], member[first]
        ret_lengths = np.bincount(ret_keys // width, minlength=size)
    gains = np.where(member, 1, -1).astype(np.int64)
    return (
        np.concatenate(([0], np.cumsum(ret_lengths))).astype(np.int64),
        gains,
        np.concatenate(([0], np.cumsum(ref_lengths))).astype(np.int64),
    )


_DENSE: Final = 1 << 22
"""The most (query, ID) pairs of a batch looked up in a table of flags rather than by sorting."""


def _dense(pairs: int, ret_keys: Any, ref_keys: Any) -> tuple[Any, bool]:
    """Which retrieved keys are among the reference keys, and whether a retrieved key repeats,
    by a table of ``pairs`` flags (keys are below ``pairs``); (None, ...) when a reference key
    repeats."""
    import numpy as np

    flags = np.zeros(pairs, dtype=bool)
    flags[ref_keys] = True
    if int(np.count_nonzero(flags)) != len(ref_keys):
        return None, False
    member = flags[ret_keys]
    flags[:] = False
    flags[ret_keys] = True
    return member, int(np.count_nonzero(flags)) != len(ret_keys)


def _sorted(ret_keys: Any, ref_keys: Any) -> tuple[Any, bool]:
    """:func:`_dense` by sorting, for a batch of many distinct IDs."""
    import numpy as np

    ref_keys = np.sort(ref_keys)
    if _repeats(ref_keys):
        return None, False
    at = np.searchsorted(ref_keys, ret_keys)
    member = ref_keys[np.minimum(at, len(ref_keys) - 1)] == ret_keys if len(ref_keys) else at < 0
    return member, _repeats(np.sort(ret_keys))


def _repeats(keys: Any) -> bool:
    """Whether sorted ``keys`` (a numpy array) hold a value twice."""
    return bool(len(keys) > 1 and (keys[1:] == keys[:-1]).any())
