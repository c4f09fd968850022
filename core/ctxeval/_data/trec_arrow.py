"""TREC files read by pyarrow's CSV reader, when it is installed and the file is *regular*:
columns split by single spaces, one line break (``\\n``) after each line, nothing else. Most
run and qrels files are written so; the others go to the numpy reader
(:mod:`ctxeval._data.trec_bulk`), which reads every shape trec_eval reads.

On a regular file, splitting on one space is exactly splitting on runs of ASCII white space
(trec_eval's and the line reader's split): there is no other white space, no run of it, and
none at a line's ends; no comment line, no blank line, no byte order mark. IDs are read as
dictionary-encoded strings (Arrow checks they are UTF-8), their dictionaries unified: numbered
in the order they first appear, as the numpy reader numbers them. Values are read by Arrow's number
parser, which reads the line reader's grammar (``[+-]?digits[.digits][e[+-]digits]``, and
``[+-]?digits`` for grades) to the same numbers, correctly rounded as ``float`` rounds, and
refuses the rest (``1e``, ``.``, ``1.2.3``, ``1_0``: the numpy reader then reads the file)
but for ``nan`` and ``inf``, which are not finite: the run reader hands such a file to the
line reader, which refuses them with their line.
"""

from __future__ import annotations

import mmap
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from ctxeval._data.sample import MAX_ID_LENGTH

__all__ = ["Data", "arrow_table", "regular"]

IntArray = npt.NDArray[np.int64]
Data = bytes | mmap.mmap
"""A file's bytes: read, or mapped into memory (searched with ``find``: a map's ``in`` looks
for one byte's value only)."""
Table = tuple[tuple[IntArray, list[str]], tuple[IntArray, list[str]], npt.NDArray[Any]]

_ODD: Final = (b"\t", b"\r", b"\v", b"\f")
"""White space other than the space and the line break (each found by ``memchr``)."""
_PART: Final = 1 << 18
"""Bytes checked at a time for runs of white space."""


def regular(data: Data) -> bool:
    """Whether ``data`` (a whole file) is regular (see the module)."""
    if not data or data[:1] in (b" ", b"\n", b"#") or data[-1:] == b" ":
        return False
    if data[:3] == b"\xef\xbb\xbf":  # (Arrow would skip a byte order mark)
        return False
    if any(data.find(odd) >= 0 for odd in _ODD):
        return False
    if data.find(b"#") >= 0 and data.find(b"\n#") >= 0:
        return False
    raw = np.frombuffer(data, dtype=np.uint8)
    for start in range(0, len(raw), _PART):  # (a part at a time: little memory, in cache)
        blank = raw[start : start + _PART + 1] <= ord(" ")  # (other controls too: no harm)
        if (blank[1:] & blank[:-1]).any():  # a run of white space, an empty line
            return False
    return True


def arrow_table(
    data: Data, wanted: tuple[int, int, int], width: int, kind: type[int] | type[float]
) -> Table | None:
    """The rows of a regular file of ``width`` columns each: the query and document columns
    (``wanted[0]``, ``wanted[1]``) numbered with their texts, and the values of column
    ``wanted[2]``; None when pyarrow is not installed or does not read the file so (a line
    of another width, a value that is no number, an ID longer than a sample takes)."""
    try:
        import pyarrow as pa
        import pyarrow.csv as csv
    except ImportError:
        return None
    pool = pa.system_memory_pool()  # (Arrow's own pools hand pages back and fault them again)
    names = [f"c{i}" for i in range(width)]
    types = {name: pa.string() for name in names}
    ids = pa.dictionary(pa.int32(), pa.string())  # (numbered as read: no second pass)
    types[names[wanted[0]]] = types[names[wanted[1]]] = ids
    types[names[wanted[2]]] = pa.int64() if kind is int else pa.float64()
    try:
        table = csv.read_csv(
            pa.py_buffer(data),
            read_options=csv.ReadOptions(column_names=names, use_threads=False, block_size=1 << 22),
            parse_options=csv.ParseOptions(
                delimiter=" ",
                quote_char=False,
                double_quote=False,
                escape_char=False,
                newlines_in_values=False,
                ignore_empty_lines=False,
            ),
            convert_options=csv.ConvertOptions(
                column_types=types,
                include_columns=[names[i] for i in wanted],
                null_values=[],
                strings_can_be_null=False,
                quoted_strings_can_be_null=False,
            ),
            memory_pool=pool,
        ).unify_dictionaries(pool)  # (one dictionary, the IDs in the order they first appear)
        query, doc, value = (table.column(names[i]) for i in wanted)
        if value.null_count or _longest(query) > MAX_ID_LENGTH or _longest(doc) > MAX_ID_LENGTH:
            return None
        values = _flat(value, np.int64 if kind is int else np.float64)
        return _numbered(query), _numbered(doc), values
    except (pa.ArrowException, ValueError, OverflowError):
        return None  # (a line of another width, a value Arrow does not read as a number)


def _longest(ids: Any) -> int:
    """The bytes of the longest of ``ids`` (an Arrow chunked array, dictionary-encoded)."""
    if not ids.num_chunks or not len(ids.chunk(0).dictionary):
        return 0
    strings = ids.chunk(0).dictionary  # (unified: every chunk's)
    offsets = np.frombuffer(strings.buffers()[1], dtype=np.int32)
    offsets = offsets[strings.offset : strings.offset + len(strings) + 1]
    return int(np.diff(offsets).max())


def _numbered(ids: Any) -> tuple[IntArray, list[str]]:
    """Each row's number (in the order the IDs first appear) and the IDs' texts (``ids``: a
    chunked array, dictionary-encoded, its chunks sharing one dictionary)."""
    chunks = [chunk for chunk in ids.chunks if len(chunk)]
    if not chunks:
        return np.zeros(0, np.int64), []
    numbers = np.concatenate([_view(c.indices, np.int32) for c in chunks], dtype=np.int64)
    return numbers, chunks[0].dictionary.to_pylist()


def _view(array: Any, dtype: Any) -> npt.NDArray[Any]:
    """The values of an Arrow array of fixed-width numbers without nulls, as a numpy view
    (``to_numpy`` may import pandas)."""
    values = np.frombuffer(array.buffers()[1], dtype=dtype)
    return values[array.offset : array.offset + len(array)]


def _flat(chunked: Any, dtype: Any) -> npt.NDArray[Any]:
    """The values of a chunked Arrow array of ``dtype`` numbers without nulls, in one array."""
    chunks = [_view(chunk, dtype) for chunk in chunked.chunks if len(chunk)]
    return np.concatenate(chunks) if chunks else np.zeros(0, dtype)
