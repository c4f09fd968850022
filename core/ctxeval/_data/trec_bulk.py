"""TREC files read in bulk: a qrels file and a run file parsed as whole blocks of bytes (split on
ASCII white space in C, the columns' shape checked with numpy), straight into the per-query
columns the ID metrics read, without a dict per query or a regular expression per line.

This is the fast path of :func:`ctxeval._data.trec.load_trec`. It accepts only what it can
prove the line-by-line reader (:mod:`ctxeval._data.trec`) reads the same way, and gives
``None`` for anything else: a file that is not UTF-8, a comment line, a line of another
width, a relevance that is no ASCII integer, a score that is no finite number, an ID longer
than a sample takes, a document given twice for a query, a lone carriage return. The
line-by-line reader then reads the file and says what is wrong, on which line, or reads
what it accepts; so a file reads to the same samples (or fails with the same error) on
either path.

Columns are split as trec_eval splits them: on ASCII white space only (``bytes.split``), so an
ID may hold a no-break space, U+2028 or U+3000.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from ctxeval._data.sample import MAX_ID_LENGTH

__all__ = ["Qrels", "Run", "read_qrels_bulk", "read_run_bulk"]

BLOCK: Final = 1 << 20
"""Bytes of a file split at once (cut after a line break): bounds the tokens alive at a time."""

_SPACE: Final = np.zeros(256, dtype=bool)
_SPACE[list(b" \t\n\r\x0b\x0c")] = True
"""The bytes ``bytes.split()`` splits on: ASCII white space, what trec_eval splits on."""
_NEWLINE: Final = ord("\n")
_COMMENT: Final = ord("#")
_NUMBER_BYTES: Final = b"0123456789+-.eE"
"""The bytes a score may hold (``float`` reads the rest of the grammar, as the line reader's
regular expression does: no ``nan``, ``inf``, ``_`` or other scripts' digits)."""
_INTEGER_BYTES: Final = b"0123456789+-"

IntArray = npt.NDArray[np.int64]


class _Codes:
    """Tokens numbered in the order they first appear; their text decoded once each."""

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

    @property
    def names(self) -> list[str]:
        """The tokens as text (the whole file was checked to be UTF-8 and the tokens are cut
        at ASCII bytes, which no multi-byte sequence holds: each decodes)."""
        return b"\n".join(self.tokens).decode("utf-8").split("\n") if self.tokens else []


def _blocks(data: bytes) -> Iterator[bytes]:
    """``data`` cut into blocks of about :data:`BLOCK` bytes, each ending after a line break
    (the last one wherever the file ends)."""
    start = 0
    while start < len(data):
        end = data.find(b"\n", start + BLOCK)
        end = len(data) if end < 0 else end + 1
        yield data[start:end]
        start = end


def _columns(
    block: bytes, wanted: Sequence[int], width: int, exact: bool
) -> list[list[bytes]] | None:
    """The columns ``wanted`` of the lines of ``block`` (comment and blank lines left out),
    each line holding ``width`` columns (at least ``width`` when not ``exact``); None when a
    line has another number of columns or an ID is too long for a sample."""
    tokens = block.split()
    if not tokens:
        return [[] for _ in wanted]
    raw = np.frombuffer(block, dtype=np.uint8)
    space = _SPACE[raw]
    edges = np.diff(space.view(np.int8), prepend=np.int8(1), append=np.int8(1))
    starts = np.flatnonzero(edges == -1)  # a token starts after a blank (or at the start)
    ends = np.flatnonzero(edges == 1)
    if len(starts) != len(tokens) or int((ends - starts).max()) > MAX_ID_LENGTH:
        return None
    breaks = np.flatnonzero(raw == _NEWLINE)
    line = np.searchsorted(breaks, starts)  # the line of each token (0-based in the block)
    line_starts = np.concatenate(([0], breaks + 1))
    comments = np.flatnonzero(raw[line_starts[line_starts < len(raw)]] == _COMMENT)
    keep = None
    if len(comments):
        keep = ~np.isin(line, comments)
        line = line[keep]
        if not len(line):
            return [[] for _ in wanted]
    counts = np.bincount(line)
    counts = counts[counts > 0]
    if (exact and not (counts == width).all()) or not (counts >= width).all():
        return None
    if keep is None and (counts == width).all():
        return [tokens[column::width] for column in wanted]
    kept = np.flatnonzero(keep) if keep is not None else np.arange(len(tokens))
    first = kept[np.concatenate(([0], np.cumsum(counts)[:-1]))]
    return [[tokens[i] for i in (first + column).tolist()] for column in wanted]


def _only(column: list[bytes], alphabet: bytes) -> bool:
    return not b"".join(column).translate(None, alphabet)


def _data(path: Path) -> bytes | None:
    """The bytes of ``path`` when the bulk reader may read them (see the module), else None."""
    try:
        data = path.read_bytes()
    except OSError:
        return None  # (the line reader says what is wrong)
    if b"\r" in data and data.count(b"\r") != data.count(b"\r\n"):
        return None  # a lone carriage return ends a line for the line reader
    if not data.isascii():
        try:
            data.decode("utf-8")  # every byte of the file, the columns not kept too
        except UnicodeDecodeError:
            return None
    return data


class _Table:
    """A file's rows as codes: per row its query's and document's number (in the order each
    first appears) and its value (a grade, a score)."""

    __slots__ = ("doc_codes", "docs", "queries", "query_codes", "values")

    def __init__(self) -> None:
        self.queries, self.docs = _Codes(), _Codes()
        self.query_codes: list[IntArray] = []
        self.doc_codes: list[IntArray] = []
        self.values: list[npt.NDArray[Any]] = []

    def add(
        self, columns: list[list[bytes]], alphabet: bytes, kind: type[int] | type[float]
    ) -> bool:
        """Add a block's rows (query, document, value columns); False when one is not what the
        line reader would read the same way."""
        query_column, doc_column, value_column = columns
        if not _only(value_column, alphabet):
            return False
        dtype = np.int64 if kind is int else np.float64
        try:
            values = np.fromiter(map(kind, value_column), dtype=dtype, count=len(value_column))
        except (ValueError, OverflowError):
            return False
        self.query_codes.append(self.queries.encode(query_column))
        self.doc_codes.append(self.docs.encode(doc_column))
        self.values.append(values)
        return True

    def columns(self) -> tuple[IntArray, IntArray, npt.NDArray[Any]] | None:
        """The rows' query codes, doc codes and values; None when a pair is given twice."""
        q = np.concatenate([np.zeros(0, np.int64), *self.query_codes])
        d = np.concatenate([np.zeros(0, np.int64), *self.doc_codes])
        values = np.concatenate(self.values) if self.values else np.zeros(0)
        return None if _repeats(q, d, len(self.docs.tokens)) else (q, d, values)


def _table(
    path: Path, wanted: Sequence[int], width: int, *, exact: bool, kind: type[int] | type[float]
) -> _Table | None:
    """The rows of the file, or None (see the module)."""
    data = _data(path)
    if data is None:
        return None
    table = _Table()
    alphabet = _INTEGER_BYTES if kind is int else _NUMBER_BYTES
    for block in _blocks(data):
        columns = _columns(block, wanted, width, exact)
        if columns is None or not table.add(columns, alphabet, kind):
            return None
    return table


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


def read_qrels_bulk(path: Path) -> Qrels | None:
    """The qrels of ``path`` (``query iteration doc relevance``), or None (see the module)."""
    table = _table(path, (0, 2, 3), 4, exact=True, kind=int)
    found = None if table is None else table.columns()
    if table is None or found is None:
        return None
    q, d, grades = found
    judged = np.flatnonzero(grades >= 0)
    judged = judged[np.argsort(q[judged], kind="stable")]  # by query, in file order within
    names = table.docs.names
    doc_list = list(map(names.__getitem__, d[judged].tolist()))
    grade_list = grades[judged].tolist()
    queries = table.queries.names
    spans = list(itertools.pairwise(_bounds(q[judged], len(queries))))
    return Qrels(
        queries,
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


def read_run_bulk(path: Path) -> Run | None:
    """The run of ``path`` (``query Q0 doc rank score name [...]``), or None (see the module)."""
    table = _table(path, (0, 2, 4), 6, exact=False, kind=float)
    found = None if table is None else table.columns()
    if table is None or found is None:
        return None
    q, d, scores = found
    if not np.isfinite(scores).all():
        return None
    names = table.docs.names
    by_name = np.empty(len(names), dtype=np.int64)  # each document's place in string order
    by_name[sorted(range(len(names)), key=names.__getitem__)] = np.arange(len(names))
    order = _ranking(q, scores, by_name[d])
    ranked_docs = list(map(names.__getitem__, d[order].tolist()))
    queries = table.queries.names
    spans = itertools.pairwise(_bounds(q[order], len(queries)))
    return Run(queries, [tuple(ranked_docs[a:b]) for a, b in spans])


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
    pairs = np.sort(queries * max(n_docs, 1) + docs)
    return bool((pairs[1:] == pairs[:-1]).any())
