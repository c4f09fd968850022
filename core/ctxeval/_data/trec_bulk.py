"""TREC files read in bulk: a qrels file and a run file read as whole blocks of bytes with
numpy, straight into the per-query columns the ID metrics read, without a Python object per
token, a dict per query or a regular expression per line.

Each block's tokens are found from its bytes' ASCII white space (where trec_eval splits), and
only the kept columns' offsets are kept; IDs are read as 64-bit words (their bytes, padded)
and numbered by one sort; grades and scores of up to 15 digits are read as ``mantissa /
10**k``, which is exactly the double ``float`` reads, the others by ``float`` and ``int``.

This is the fast path of :func:`ctxeval._data.trec.load_trec`. It accepts only what it can
prove the line-by-line reader (:mod:`ctxeval._data.trec`) reads the same way, and gives
``None`` for anything else: a file that is not UTF-8 or holds a NUL byte, a comment line, a
line of another width, a relevance that is no ASCII integer, a score that is no finite number,
an ID longer than a sample takes, a document given twice for a query, a lone carriage return.
The line-by-line reader then reads the file and says what is wrong, on which line, or reads
what it accepts; so a file reads to the same samples (or fails with the same error) on
either path.

Columns are split as trec_eval splits them: on ASCII white space only, so an ID may hold a
no-break space, U+2028 or U+3000.
"""

from __future__ import annotations

import codecs
import importlib
import itertools
import mmap
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from ctxeval._data.sample import MAX_ID_LENGTH
from ctxeval._data.trec_arrow import Data, arrow_table, regular

__all__ = [
    "Qrels",
    "QrelsColumns",
    "Run",
    "RunColumns",
    "pair_keys",
    "read_qrels_bulk",
    "read_qrels_columns",
    "read_run_bulk",
    "read_run_columns",
    "small_pages",
]

BLOCK: Final = 1 << 20
"""Bytes of a file split at once (cut after a line break): bounds the tokens alive at a time."""

_NEWLINE: Final = ord("\n")
_COMMENT: Final = ord("#")
_NUMBER_BYTES: Final = b"0123456789+-.eE"
"""The bytes a score may hold (``float`` reads the rest of the grammar, as the line reader's
regular expression does: no ``nan``, ``inf``, ``_`` or other scripts' digits)."""
_INTEGER_BYTES: Final = b"0123456789+-"

IntArray = npt.NDArray[np.int64]
Offsets = npt.NDArray[np.signedinteger[Any]]
"""Offsets into a file (32-bit below 2 GiB: half the memory)."""
ByteArray = npt.NDArray[np.uint8]

_DIGIT: Final = np.zeros(256, dtype=bool)
_DIGIT[list(b"0123456789")] = True
_POW10: Final = np.array([float(10**i) for i in range(23)])
"""Powers of ten, each exact in a double: ``m / 10**k`` (m < 2**53) is then the double nearest
the decimal, which is what ``float`` reads."""
_SIMPLE_DIGITS: Final = 15
"""The most digits of a number read with numpy (below 2**53: exact); longer ones by Python."""
_ROWS: Final = 1 << 18
"""Rows whose numbers are read at once."""
_WIDE_ID: Final = 64
"""Bytes of the longest ID numbered with numpy (as 64-bit words); longer ones by a dict."""


@contextmanager
def small_pages() -> Iterator[None]:
    """numpy's large arrays made on ordinary pages for the ``with`` block (its setting as it
    was afterwards).

    numpy asks the kernel for transparent huge pages for every array of 4 MiB or more. The
    readers make and drop such arrays by the dozen, most of them used once: each huge page is
    2 MiB zeroed (and, when memory is fragmented, compacted) at its first touch, which cost
    0.1-0.4 s of system time per 100 000 queries here, most on a loaded machine. Ordinary
    pages are faulted 4 KiB at a time, only where written.
    """
    setter = _hugepage_setter()
    if setter is None:
        yield
        return
    was = setter(False)
    try:
        yield
    finally:
        setter(was)


def _hugepage_setter() -> Callable[[bool], bool] | None:
    """numpy's switch of its huge page advice (``_set_madvise_hugepage``: it returns the
    setting it replaces), where this numpy has one."""
    for name in ("numpy._core.multiarray", "numpy.core.multiarray"):  # (numpy 2, numpy 1)
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        setter: Callable[[bool], bool] | None = getattr(module, "_set_madvise_hugepage", None)
        if setter is not None:
            return setter
    return None


class _Codes:
    """Tokens numbered in the order they first appear (through a dict: the path of long IDs)."""

    __slots__ = ("number", "tokens")

    def __init__(self) -> None:
        self.number: dict[bytes, int] = {}
        self.tokens: list[bytes] = []

    def encode(self, values: list[bytes]) -> IntArray:
        number, tokens = self.number, self.tokens
        new = [v for v in dict.fromkeys(values) if v not in number]
        if new:
            number.update(zip(new, range(len(tokens), len(tokens) + len(new)), strict=True))
            tokens += new
        return np.fromiter(map(number.__getitem__, values), dtype=np.int64, count=len(values))


def _texts(tokens: list[bytes]) -> list[str]:
    """The tokens as text (the whole file was checked to be UTF-8 and the tokens are cut at
    ASCII bytes, which no multi-byte sequence holds: each decodes)."""
    return b"\n".join(tokens).decode("utf-8").split("\n") if tokens else []


def _blocks(data: Data) -> Iterator[tuple[int, int]]:
    """``(start, stop)`` of blocks of about :data:`BLOCK` bytes of ``data``, each ending after
    a line break (the last one wherever the file ends)."""
    start = 0
    while start < len(data):
        end = data.find(b"\n", start + BLOCK)
        end = len(data) if end < 0 else end + 1
        yield start, end
        start = end


def _offsets(
    raw: ByteArray, wanted: Sequence[int], width: int, exact: bool
) -> tuple[IntArray, IntArray] | None:
    """Where the columns ``wanted`` of the lines of ``raw`` begin and end (one row per line;
    comment and blank lines left out), each line holding ``width`` columns (at least ``width``
    when not ``exact``); None when a line has another number of columns or an ID is too long
    for a sample."""
    space = (raw == ord(" ")) | (raw - np.uint8(9) < np.uint8(5))  # (9-13: \t\n\v\f\r)
    edges = np.flatnonzero(space[1:] != space[:-1]) + 1
    if len(raw) and not space[0]:
        edges = np.concatenate((np.zeros(1, np.int64), edges))
    if len(raw) and not space[-1]:
        edges = np.append(edges, len(raw))
    starts, ends = edges[0::2], edges[1::2]  # a token starts after a blank, ends before one
    none = np.zeros((0, len(wanted)), dtype=np.int64)
    if not len(starts):
        return none, none
    if int((ends - starts).max()) > MAX_ID_LENGTH:
        return None
    line_starts = np.flatnonzero(raw[:-1] == _NEWLINE) + 1
    line_starts = np.concatenate((np.zeros(1, np.int64), line_starts))
    first = np.searchsorted(starts, line_starts)  # each line's first token
    counts = np.diff(first, append=len(starts))  # (tokens never span a line break)
    real = (counts > 0) & (raw[line_starts] != _COMMENT)
    first, counts = first[real], counts[real]
    if (exact and bool((counts != width).any())) or bool((counts < width).any()):
        return None
    tokens = first[:, None] + np.asarray(wanted, dtype=np.int64)
    return starts[tokens], ends[tokens]


def _data(path: Path) -> Data | None:
    """The bytes of ``path`` when the bulk reader may read them (see the module), else None:
    the file mapped into memory (read where the page cache holds it, not copied), or read
    whole where it cannot be mapped (empty, a pipe)."""
    try:
        data = _mapped(path)
    except OSError:
        return None  # (the line reader says what is wrong)
    if data.find(b"\r") >= 0:
        whole = data[:]  # (rare: the counts of a copy)
        if whole.count(b"\r") != whole.count(b"\r\n"):
            return None  # a lone carriage return ends a line for the line reader
    if data.find(b"\0") >= 0:
        return None  # (IDs are compared as bytes padded with NUL)
    if not _ascii(data):
        try:
            codecs.utf_8_decode(data, "strict", True)  # every byte, the columns not kept too
        except UnicodeDecodeError:
            return None
    return data


def _mapped(path: Path) -> Data:
    """The bytes of ``path``, mapped read-only where the file can be mapped, else read."""
    with path.open("rb") as handle:
        try:
            return mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError):  # (an empty file, a pipe, a file system without maps)
            return handle.read()


def _ascii(data: Data) -> bool:
    """Whether every byte of ``data`` is ASCII."""
    if isinstance(data, bytes):
        return data.isascii()
    raw = np.frombuffer(data, dtype=np.uint8)
    words = raw[: len(raw) // 8 * 8].view(np.uint64)
    high = np.uint64(0x8080808080808080)
    for start in range(0, len(words), _ROWS):  # (a part at a time: little memory)
        if (words[start : start + _ROWS] & high).any():
            return False
    return not (raw[len(words) * 8 :] & np.uint8(0x80)).any()


def _eights(data: Data) -> npt.NDArray[Any]:
    """The 8 bytes from each byte of ``data`` on, as big-endian words (a view, no copy)."""
    words: npt.NDArray[Any] = np.ndarray(
        (max(0, len(data) - 7),), dtype=">u8", buffer=data, strides=(1,)
    )
    return words


class _File:
    """A file's bytes and where the kept columns of its rows begin and end."""

    __slots__ = ("data", "ends", "starts", "tail", "tail_words", "words")

    def __init__(self, data: Data, starts: Offsets, ends: Offsets) -> None:
        self.data = data
        self.starts, self.ends = starts, ends
        self.tail = max(0, len(data) - 16)
        self.words = _eights(data)
        """The 8 bytes from each byte of the file on, big-endian (to its last 8 bytes)..."""
        self.tail_words = _eights(data[self.tail :] + bytes(8))
        """... and those of its last bytes (NUL past its end)."""

    def eights(self, at: Offsets) -> npt.NDArray[np.uint64]:
        """The 8 bytes from each of the offsets ``at`` (at most the file's size) on, as a
        big-endian word (NUL past the end of the file)."""
        near = at > len(self.data) - 8
        words = self.words[np.where(near, 0, at)].astype(np.uint64)
        if near.any():
            words[near] = self.tail_words[at[near] - self.tail]
        return words

    def tokens(self, column: int, rows: IntArray | None = None) -> list[bytes]:
        """The tokens of ``column`` (of ``rows``, or every row) as bytes."""
        starts, ends = self.starts[:, column], self.ends[:, column]
        if rows is not None:
            starts, ends = starts[rows], ends[rows]
        data = self.data
        return [data[a:b] for a, b in zip(starts.tolist(), ends.tolist(), strict=True)]


def _file(data: Data, wanted: Sequence[int], width: int, *, exact: bool) -> _File | None:
    """The rows of the file of ``data`` (the offsets of the columns ``wanted``), or None
    (see the module)."""
    raw = np.frombuffer(data, dtype=np.uint8)
    kind = np.int32 if len(data) < (1 << 31) - 1024 else np.int64  # (offset + 8 * words)
    found_starts: list[Offsets] = []
    found_ends: list[Offsets] = []
    for begin, end in _blocks(data):
        found = _offsets(raw[begin:end], wanted, width, exact)
        if found is None:
            return None
        found_starts.append((found[0] + begin).astype(kind))
        found_ends.append((found[1] + begin).astype(kind))
    empty = np.zeros((0, len(wanted)), dtype=kind)
    return _File(data, np.concatenate([empty, *found_starts]), np.concatenate([empty, *found_ends]))


_MASKS: Final = np.array([(~0 << (64 - 8 * kept)) & ~(~0 << 64) for kept in range(9)], np.uint64)
"""The mask of a word's first ``kept`` bytes (big-endian: its high bytes)."""


def _words(file: _File, starts: Offsets, lengths: Offsets) -> npt.NDArray[np.uint64]:
    """Each token as 64-bit words (its bytes big-endian, padded with NUL): one column per 8
    bytes of the longest, each read with one load of 8 bytes."""
    count = (int(lengths.max()) + 7) // 8 if len(lengths) else 1
    words = np.empty((len(starts), count), dtype=np.uint64)
    for column in range(count):
        at = np.minimum(starts + 8 * column, len(file.data))
        kept = np.clip(lengths - 8 * column, 0, 8)
        words[:, column] = file.eights(at) & _MASKS[kept]
    return words


def _codes(file: _File, column: int) -> tuple[IntArray, list[str]]:
    """Each row's code of the tokens of ``column`` (numbered in the order they first
    appear), and the tokens' texts."""
    starts, ends = file.starts[:, column], file.ends[:, column]
    found = None
    if len(starts) and int((ends - starts).max()) <= _WIDE_ID:
        found = _numbered(_words(file, starts, ends - starts))
    if found is None:
        codes = _Codes()
        numbers = codes.encode(file.tokens(column))
        return numbers, _texts(codes.tokens)
    numbers, firsts = found
    return numbers, _texts(file.tokens(column, firsts))


def _numbered(words: npt.NDArray[np.uint64]) -> tuple[IntArray, IntArray] | None:
    """Each row's number (equal rows alike, numbered in the order they first appear) and the
    row of each number's first appearance; None when two rows of a hash differ."""
    keys = words[:, 0].copy()
    for column in range(1, words.shape[1]):  # (a hash; checked below)
        keys *= np.uint64(0x9E3779B97F4A7C15)
        keys ^= words[:, column] + (keys >> np.uint64(29))
    heads = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
    first, inverse = _first_and_inverse(keys[heads])
    order = np.argsort(first)  # the numbers by first appearance (each first is one row)
    number = np.empty(len(order), dtype=np.int64)
    number[order] = np.arange(len(order))
    numbers = np.repeat(number[inverse.reshape(-1)], np.diff(np.append(heads, len(keys))))
    firsts = heads[first[order]]
    if words.shape[1] > 1 and not bool((words == words[firsts[numbers]]).all()):
        return None
    return numbers, firsts


def _first_and_inverse(keys: npt.NDArray[np.uint64]) -> tuple[IntArray, IntArray]:
    """``np.unique(keys, return_index=True, return_inverse=True)[1:]`` through one unstable
    sort (the first index of each key is the least of its sorted run)."""
    if not len(keys):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    perm = np.argsort(keys)
    ordered = keys[perm]
    starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
    first = np.minimum.reduceat(perm, starts)
    inverse = np.empty(len(keys), dtype=np.int64)
    inverse[perm] = np.cumsum(np.concatenate(([False], ordered[1:] != ordered[:-1])))
    return first, inverse


def _only(column: list[bytes], alphabet: bytes) -> bool:
    return not b"".join(column).translate(None, alphabet)


def _decimals(
    words: npt.NDArray[np.uint64], lengths: Offsets, *, point: bool
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
    """Each token (as :func:`_words`) read as a decimal number (``[+-]digits[.digits]``, a point
    only when ``point``) with numpy, exactly as ``float`` reads it, and which tokens were (the
    others: an exponent, more than :data:`_SIMPLE_DIGITS` digits, not a number)."""
    width = min(int(lengths.max()) if len(lengths) else 1, _SIMPLE_DIGITS + 2)
    bytes_of = words.astype(">u8").view(np.uint8).reshape(len(words), 8 * words.shape[1])
    chars = np.ascontiguousarray(bytes_of[:, :width].T)  # a row per place: whole-row work
    digit = chars - np.uint8(ord("0")) < np.uint8(10)
    dot = chars == ord(".")
    allowed = digit | (chars == 0)  # (NUL past the token's end)
    if point:
        allowed |= dot
    negative = chars[0] == ord("-")
    allowed[0] |= negative | (chars[0] == ord("+"))
    simple = (lengths <= width) & allowed.all(axis=0) & (dot.sum(axis=0) <= 1)
    mantissa = np.zeros(len(words), dtype=np.int64)
    count, after = np.zeros_like(mantissa), np.zeros_like(mantissa)
    seen_dot = np.zeros(len(words), dtype=bool)
    for place in range(width):
        is_digit = digit[place]
        seen_dot |= dot[place]
        count += is_digit
        after += is_digit & seen_dot
        update = mantissa * 10 + (chars[place] - np.uint8(ord("0")))
        np.copyto(mantissa, update, where=is_digit)
    simple &= (count >= 1) & (count <= _SIMPLE_DIGITS)
    values = mantissa / _POW10[np.minimum(after, len(_POW10) - 1)]
    return np.where(negative, -values, values), simple


def _numbers(file: _File, column: int, kind: type[int] | type[float]) -> npt.NDArray[Any] | None:
    """The values of ``column`` (grades or scores); None when one is not what the line reader
    would read the same way."""
    starts, ends = file.starts[:, column], file.ends[:, column]
    lengths = ends - starts
    values = np.zeros(len(starts))
    simple = np.zeros(len(starts), dtype=bool)
    for at in range(0, len(starts), _ROWS):  # (parts: bounds the memory of the work)
        part = slice(at, at + _ROWS)
        words = _words(file, starts[part], np.minimum(lengths[part], _SIMPLE_DIGITS + 2))
        values[part], simple[part] = _decimals(words, lengths[part], point=kind is float)
    rest = np.flatnonzero(~simple)
    if kind is int:
        values = values.astype(np.int64)  # (at most 15 digits: exact)
    if len(rest):  # an exponent, many digits, or no number: as the line reader's check
        tokens = file.tokens(column, rest)
        if not _only(tokens, _INTEGER_BYTES if kind is int else _NUMBER_BYTES):
            return None
        try:
            values[rest] = np.fromiter(map(kind, tokens), dtype=values.dtype, count=len(rest))
        except (ValueError, OverflowError):
            return None
    return values


def _table(
    path: Path, wanted: Sequence[int], width: int, *, exact: bool, kind: type[int] | type[float]
) -> tuple[tuple[IntArray, list[str]], tuple[IntArray, list[str]], npt.NDArray[Any]] | None:
    """The rows of the file: the query and document columns numbered (with their texts) and
    the values; None (see the module) when the bulk reader does not take it, or a (query,
    document) pair is given twice."""
    data = _data(path)
    if data is None:
        return None
    if regular(data):  # single spaces and line breaks only: Arrow's CSV reader, if installed
        found = arrow_table(data, (wanted[0], wanted[1], wanted[2]), width, kind)
        if found is not None:
            return None if _repeats(found[0][0], found[1][0], len(found[1][1])) else found
    file = _file(data, wanted, width, exact=exact)
    if file is None:
        return None
    values = _numbers(file, 2, kind)
    if values is None:
        return None
    queries, docs = _codes(file, 0), _codes(file, 1)
    if _repeats(queries[0], docs[0], len(docs[1])):
        return None
    return queries, docs, values


class Qrels:
    """A qrels file as columns: its queries in the order they first appear and, per query,
    its judged documents (grade >= 0) in file order with their grades."""

    __slots__ = ("docs", "grades", "queries")

    def __init__(
        self, queries: list[str], docs: list[tuple[str, ...]], grades: list[tuple[int, ...]]
    ) -> None:
        self.queries = queries
        self.docs = docs
        self.grades = grades


class QrelsColumns:
    """A qrels file as flat columns: its queries in the order they first appear, its
    documents' names (numbered as they first appear), and its judged rows (grade >= 0) by
    query, in file order within a query: each row's document number and grade; query ``i``'s
    rows are ``bounds[i]:bounds[i + 1]``."""

    __slots__ = ("bounds", "doc", "grade", "names", "queries")

    def __init__(
        self, queries: list[str], names: list[str], doc: IntArray, grade: IntArray, bounds: IntArray
    ) -> None:
        self.queries, self.names = queries, names
        self.doc, self.grade, self.bounds = doc, grade, bounds


def read_qrels_columns(path: Path) -> QrelsColumns | None:
    """The qrels of ``path`` (``query iteration doc relevance``) as columns, or None (see the
    module)."""
    found = _table(path, (0, 2, 3), 4, exact=True, kind=int)
    if found is None:
        return None
    (q, queries), (d, names), grades = found
    judged = np.flatnonzero(grades >= 0)
    by_query = q[judged]
    if not bool((by_query[1:] >= by_query[:-1]).all()):  # (grouped already: the usual case)
        judged = judged[np.argsort(by_query, kind="stable")]  # by query, in file order within
        by_query = q[judged]
    bounds = np.asarray(_bounds(by_query, len(queries)), dtype=np.int64)
    return QrelsColumns(queries, names, d[judged], grades[judged], bounds)


def read_qrels_bulk(path: Path) -> Qrels | None:
    """The qrels of ``path`` (``query iteration doc relevance``), or None (see the module)."""
    found = read_qrels_columns(path)
    if found is None:
        return None
    doc_list = list(map(found.names.__getitem__, found.doc.tolist()))
    grade_list = found.grade.tolist()
    spans = list(itertools.pairwise(found.bounds.tolist()))
    return Qrels(
        found.queries,
        [tuple(doc_list[a:b]) for a, b in spans],
        [tuple(grade_list[a:b]) for a, b in spans],
    )


class Run:
    """A run file as columns: its queries in the order they first appear and, per query, the
    documents ranked as trec_eval ranks them (score descending, ties by doc ID descending)."""

    __slots__ = ("queries", "ranked")

    def __init__(self, queries: list[str], ranked: list[tuple[str, ...]]) -> None:
        self.queries = queries
        self.ranked = ranked


class RunColumns:
    """A run file as flat columns: its queries in the order they first appear, its
    documents' names, and its rows ranked as trec_eval ranks them (by query, score
    descending, ties by doc ID descending): each row's document number; query ``i``'s rows
    are ``bounds[i]:bounds[i + 1]``."""

    __slots__ = ("bounds", "doc", "names", "queries")

    def __init__(self, queries: list[str], names: list[str], doc: IntArray, bounds: IntArray):
        self.queries, self.names, self.doc, self.bounds = queries, names, doc, bounds


def read_run_columns(path: Path) -> RunColumns | None:
    """The run of ``path`` (``query Q0 doc rank score name [...]``) as columns, or None (see
    the module)."""
    found = _table(path, (0, 2, 4), 6, exact=False, kind=float)
    if found is None:
        return None
    (q, queries), (d, names), scores = found
    if not np.isfinite(scores).all():
        return None
    by_name = np.empty(len(names), dtype=np.int64)  # each document's place in string order
    by_name[sorted(range(len(names)), key=names.__getitem__)] = np.arange(len(names))
    order = _ranking(q, scores, by_name[d])
    bounds = np.asarray(_bounds(q[order], len(queries)), dtype=np.int64)
    return RunColumns(queries, names, d[order], bounds)


def read_run_bulk(path: Path) -> Run | None:
    """The run of ``path`` (``query Q0 doc rank score name [...]``), or None (see the module)."""
    found = read_run_columns(path)
    if found is None:
        return None
    ranked_docs = list(map(found.names.__getitem__, found.doc.tolist()))
    spans = itertools.pairwise(found.bounds.tolist())
    return Run(found.queries, [tuple(ranked_docs[a:b]) for a, b in spans])


def _ranking(queries: IntArray, scores: npt.NDArray[Any], names: IntArray) -> IntArray:
    """The order of the rows by query, then score descending, then doc ID descending (``names``:
    each row's document's place in string order): one sort of a combined key when it fits in
    64 bits, else three; none when the file is in that order already, as runs usually are."""
    if len(queries) < 2:
        return np.arange(len(queries))
    if bool((queries[1:] >= queries[:-1]).all()):  # grouped: perhaps ranked already
        after = scores[1:] < scores[:-1]
        after |= (scores[1:] == scores[:-1]) & (names[1:] < names[:-1])
        if bool((after | (queries[1:] != queries[:-1])).all()):
            return np.arange(len(queries))
    levels, rank = np.unique(-scores, return_inverse=True)  # 0: the highest score
    n_names = int(names.max()) + 1 if len(names) else 1
    if len(queries) and int(queries.max()) + 1 < (1 << 62) // (len(levels) * n_names):
        key = (queries * len(levels) + rank.reshape(-1)) * n_names + (n_names - 1 - names)
        if bool((key[1:] > key[:-1]).all()):
            return np.arange(len(key))
        return np.argsort(key)
    return np.lexsort((-names, -scores, queries))


def _bounds(sorted_queries: IntArray, count: int) -> list[int]:
    """Where each query's rows begin in ``sorted_queries`` (codes 0..count-1, sorted), and the
    end."""
    return [0, *np.cumsum(np.bincount(sorted_queries, minlength=count)).tolist()]


def _repeats(queries: IntArray, docs: IntArray, n_docs: int) -> bool:
    """Whether a (query, document) pair is given twice."""
    if len(queries) < 2:
        return False
    pairs = pair_keys(queries, docs, n_docs)
    pairs.sort()
    return bool((pairs[1:] == pairs[:-1]).any())


def pair_keys(queries: IntArray, docs: IntArray, n_docs: int) -> npt.NDArray[Any]:
    """One number per (query, document) pair, distinct pairs distinct (32-bit when they fit:
    half the memory to sort and search)."""
    width = max(n_docs, 1)
    top = (int(queries.max()) + 1) * width if len(queries) else 0
    kind = np.int32 if top < (1 << 31) else np.int64
    keys = queries.astype(kind)
    keys *= width
    keys += docs.astype(kind)
    return keys
