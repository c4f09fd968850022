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

from collections.abc import Sequence
from typing import Any, Final

from ctxeval._data.collector import collector_paused
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

__all__ = ["arrow_samples"]

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
