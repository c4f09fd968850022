"""Read samples from JSONL, JSON, CSV and Parquet files, one at a time.

:func:`load_samples` returns a :class:`SampleStream`: an iterator that reads the file lazily
(a JSONL or CSV file of any size is never held in memory whole) and turns each row into a
:class:`~ctxeval.Sample`. A bad row raises a :class:`~ctxeval.DataError` naming the file, the
line and the field; with ``strict=False`` the bad row is skipped and the good rows go on: the
first :data:`KEPT_ERRORS` bad rows are kept in :attr:`SampleStream.errors` (and the first
:data:`LOGGED_ERRORS` logged), all are counted in :attr:`SampleStream.bad_rows`, so a file of
any size is read in bounded memory however many of its rows are bad. With ``strict=False`` a row
whose ``id`` an earlier row has is such a bad row too (the first one is scored); read strictly,
the run refuses two samples with one id.

Formats, chosen by the file's suffix (or ``format=``):

* ``.jsonl`` / ``.ndjson``: one JSON object per line; blank lines are skipped.
* ``.json``: an array of objects, or an object of equal-length columns
  (``{"question": [...], "contexts": [...]}``, as ``Dataset.to_dict()`` writes).
* ``.csv``: a header row; list fields hold JSON arrays (``["a", "b"]``) or Python list
  literals as ragas's ``to_csv()`` writes them (``['a', "b's"]``, read with
  :func:`ast.literal_eval`: literals only, nothing is executed); an empty cell is null.
* ``.parquet``: needs ``pyarrow``; read in record batches.
"""

from __future__ import annotations

import csv
import functools
import itertools
import json
import logging
import os
import sys
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any, Final

from ctxeval._data.column_map import check_column_map, renamed
from ctxeval._data.sample import (
    FIELD_ALIASES,
    ID_LIST_FIELDS,
    STEPS_FIELD,
    TEXT_LIST_FIELDS,
    Sample,
    id_for_message,
)
from ctxeval._errors import ConfigError, DataError

__all__ = ["FORMATS", "SampleStream", "json_list_items", "load_samples", "skip_space"]

logger = logging.getLogger(__name__)

FORMATS: Final[Mapping[str, str]] = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "json",
    ".csv": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
}
"""File suffixes and the format each one is read as."""

_LIST_FIELDS: Final = frozenset(
    [
        *TEXT_LIST_FIELDS,
        *ID_LIST_FIELDS,
        *(k for k, v in FIELD_ALIASES.items() if v in TEXT_LIST_FIELDS),
        STEPS_FIELD,
    ]
)


COLUMNS_FROM: Final = 1 << 21
"""The least size (bytes) of a JSONL file a run of ranked ID metrics reads as columns
(:meth:`SampleStream._ranked`); an eighth of it when numpy is imported already. A smaller
file is read faster sample by sample than numpy is imported."""
KEPT_ERRORS: Final = 1_000
"""The bad rows a lenient :class:`SampleStream` keeps in ``errors`` (all are counted)."""
LOGGED_ERRORS: Final = 20
"""The bad rows a lenient :class:`SampleStream` logs one by one (a warning each); the next
one logs that the rest are counted, not logged (at DEBUG each)."""


class SampleStream(Iterator[Sample]):
    """An iterator of samples read lazily from one file.

    Attributes:
        path: the file being read.
        format: ``jsonl``, ``json``, ``csv`` or ``parquet``.
        strict: whether the first bad row raises (True) or is skipped (False).
        errors: the first :data:`KEPT_ERRORS` bad rows skipped (lenient mode only), as
            :class:`DataError`; a row whose id an earlier row has is one of them.
        bad_rows: how many bad rows were skipped so far, all of them (lenient mode only).
        rows_read: rows read so far, good and bad.
    """

    def __init__(
        self, path: Path, format: str, strict: bool, rows: Iterator[Row] | None = None
    ) -> None:
        self.path = path
        self.format = format
        self.strict = strict
        self.errors: list[DataError] = []
        self.bad_rows = 0
        self.rows_read = 0
        self._rows = _READERS[format](path) if rows is None else rows
        self.as_read = rows is None
        """Whether the stream's samples are the file's rows as its reader reads them (no
        ``column_map``, not some lines of it): another reader of the file's lines, such as a
        worker of the ``processes`` runner or the columnar path (:meth:`_ranked`), gets the
        same samples."""
        # the ids given so far (lenient mode: a repeat is skipped; strict: the run refuses it)
        self._ids: set[str] | None = None if strict else set()
        self._set_aside = False  # (a lenient run reads it: a repeated id is an error row)

    @classmethod
    def of_lines(
        cls, path: Path, lines: Iterable[bytes], *, first_line: int, strict: bool = True
    ) -> SampleStream:
        """The samples of some lines of the JSONL file ``path`` (its lines from number
        ``first_line`` on), read as reading the whole file reads them, errors located at their
        real line: how a worker of the ``processes`` runner reads its part of a file."""
        return cls(path, "jsonl", strict, _jsonl_rows(zip(itertools.count(first_line), lines)))

    def __iter__(self) -> SampleStream:
        return self

    def __next__(self) -> Sample:
        while True:
            try:
                line, row, _ = next(self._rows)
            except DataError as exc:  # the file itself is unreadable past this point
                raise exc.located(path=str(self.path)) from None
            self.rows_read += 1
            sample = self._sample(line, row)
            if sample is not None:
                return sample

    def _samples_and_errors(self) -> Iterator[Sample | DataError]:
        """The samples, with the :class:`DataError` of each bad row in its place (a strict
        stream raises it, a lenient one skips the row): how a lenient run reads a strict stream,
        turning each bad row into error rows rather than stopping or leaving it out.

        Raises:
            DataError: the file itself cannot be read past some point.
        """
        self._lenient_run()
        while True:
            try:
                line, row, _ = next(self._rows)
            except StopIteration:
                return
            except DataError as exc:  # the file itself is unreadable past this point
                raise exc.located(path=str(self.path)) from None
            self.rows_read += 1
            try:
                sample = self._sample(line, row)
            except DataError as exc:  # (strict) a bad row, located at its line
                yield exc
                continue
            if sample is not None:
                yield sample

    def _lenient_run(self) -> None:
        """Read for a lenient run: a strict stream now also finds a repeated id, located at its
        line (the run makes its error rows)."""
        if self._ids is None:
            self._ids = set()
            self._set_aside = True

    def _sample(self, line: int, row: Any) -> Sample | None:
        """The sample of the row read at ``line``; None when it is bad and skipped (lenient
        mode: logged and kept in :attr:`errors`).

        Raises:
            DataError: the row is bad (strict mode), naming file, line, field and sample id.
        """
        try:
            if isinstance(row, _Bad):
                raise row.error
            sample = Sample.from_dict(row)
            if self._ids is not None and sample.id is not None:
                if sample.id in self._ids:
                    raise _repeated_id(self._set_aside)
                self._ids.add(sample.id)
            return sample
        except DataError as exc:
            sample_id = row.get("id") if isinstance(row, Mapping) else None
            error = exc.located(path=str(self.path), line=line, sample_id=id_for_message(sample_id))
            if self.strict:
                raise error from None
            self._skipped(error)
            return None

    def _skipped(self, error: DataError) -> None:
        """Count, keep (the first :data:`KEPT_ERRORS`) and log (the first
        :data:`LOGGED_ERRORS`) a bad row skipped in lenient mode."""
        self.bad_rows += 1
        if self.bad_rows <= KEPT_ERRORS:
            self.errors.append(error)
        if self.bad_rows <= LOGGED_ERRORS:
            logger.warning("skipping a bad row: %s", error)
        elif self.bad_rows == LOGGED_ERRORS + 1:
            logger.warning(
                "%s: more than %d bad rows; the others are skipped without a warning each "
                "(SampleStream.bad_rows counts them all, SampleStream.errors keeps the first "
                "%d); this one: %s",
                self.path, LOGGED_ERRORS, KEPT_ERRORS, error,
            )  # fmt: skip
        else:
            logger.debug("skipping a bad row: %s", error)

    def _take(
        self,
        n: int,
        samples: list[Sample | DataError],
        sources: list[Sample | bytes | None],
        *,
        keep_bad: bool = False,
    ) -> int:
        """Read up to ``n`` more rows: append the sample of each good one to ``samples`` and
        what stands for it to ``sources``; the number of rows read (0: the file is done).

        A source is the JSON line a sample was read from (bytes, when reading it again gives
        an equal sample: :func:`~ctxeval._results.columns.sample_of` does) or else the sample
        itself. The deterministic fast path keeps the sources of a large run's samples for their
        rows' evidence, rather than the samples: a line is one object the cycle collector
        never walks, a sample is several and a few times its size. Bad rows are handled as
        iterating does; what was read before a bad row (strict mode) is in the lists when the
        error is raised. ``keep_bad``: a bad row of a strict stream puts its :class:`DataError`
        in ``samples`` (and None in ``sources``) rather than raising it (a lenient run's read).

        Raises:
            DataError: as iterating raises it.
        """
        read = 0
        if keep_bad:
            self._lenient_run()
        from_dict, sample_of = Sample.from_dict, self._sample
        add_sample, add_source = samples.append, sources.append
        ids = self._ids
        try:
            for line, row, raw in itertools.islice(self._rows, n):
                read += 1
                if type(row) is not _Bad:
                    try:
                        sample = from_dict(row)
                    except DataError:
                        pass  # `_sample` says why (or skips it)
                    else:
                        if ids is None or sample.id is None or sample.id not in ids:
                            if ids is not None and sample.id is not None:
                                ids.add(sample.id)
                            add_sample(sample)
                            add_source(sample if raw is None else raw)
                            continue
                if not keep_bad:
                    sample_of(line, row)  # a bad row: raises (strict) or is logged and skipped
                    continue
                try:
                    sample_of(line, row)
                except DataError as bad:
                    add_sample(bad)
                    add_source(None)
        except DataError as exc:  # the file is unreadable past this point (or a bad row)
            raise exc.located(path=str(self.path)) from None
        finally:
            self.rows_read += read
        return read

    def _may_be_ranked(self) -> bool:
        """Whether :meth:`_ranked` may read the stream as ranked columns: a whole JSONL file
        not read yet, of at least :data:`COLUMNS_FROM` bytes (checked before anything
        imports numpy)."""
        if not self.as_read or self.format != "jsonl" or self.rows_read:
            return False
        least = COLUMNS_FROM // 8 if "numpy" in sys.modules else COLUMNS_FROM
        try:
            return self.path.stat().st_size >= least
        except OSError:
            return False  # (the sample path says what is wrong)

    def _ranked(self) -> Any:
        """The stream's samples as a :class:`~ctxeval._data.jsonl_columns.JsonlSource`
        (ranked columns, see :mod:`ctxeval._run.columnar`) when :meth:`_may_be_ranked` and
        every line of the file is a plain ID sample: the file is then read in bulk, and the
        stream is done. None otherwise (nothing read from the stream)."""
        if not self._may_be_ranked():
            return None
        from ctxeval._data.jsonl_columns import read_plain

        source = read_plain(self.path)
        if source is not None:
            self.close()
            self._rows = iter(())
            self.rows_read = source.rows
        return source

    def close(self) -> None:
        """Stop reading and release the file."""
        close = getattr(self._rows, "close", None)
        if close is not None:
            close()


def load_samples(
    path: str | os.PathLike[str],
    *,
    format: str | None = None,
    strict: bool = True,
    column_map: Mapping[str, str] | None = None,
) -> SampleStream:
    """Open ``path`` and return a lazy stream of its samples.

    Args:
        path: a ``.jsonl``, ``.json``, ``.csv`` or ``.parquet`` file.
        format: read the file as this format, whatever its suffix.
        strict: raise at the first bad row (default); when False, log bad rows, collect them in
            :attr:`SampleStream.errors` and go on with the good ones.
        column_map: sample field -> the column that holds it, for files whose columns have
            other names (``{"user_input": "query"}``; the command line's ``--map
            user_input=query``); a row without a mapped column is a bad row.

    Raises:
        DataError: the file does not exist or cannot be read (at once), or a row is bad
            (while iterating, in strict mode); the message names file, line and field.
        ConfigError: the format is unknown, ``path`` is not a path (samples held in memory,
            such as a DataFrame, go to ``evaluate`` as they are), or ``column_map`` names a
            field that is not a sample field.
        MissingExtraError: a Parquet file without ``pyarrow`` installed.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise ConfigError(
            f"load_samples reads a file: give its path, not a {type(path).__name__}; samples "
            "held in memory (a list, a DataFrame, a dict of columns, a datasets.Dataset, a "
            "ragas EvaluationDataset) go to ctxeval.evaluate() as they are"
        )
    file = Path(path)
    if format is None:
        format = FORMATS.get(file.suffix.lower())
        if format is None:
            raise ConfigError(
                f"{file}: cannot tell the format from the suffix {file.suffix!r}; use one of "
                f"{', '.join(sorted(FORMATS))} or pass format= "
                f"({', '.join(sorted(set(FORMATS.values())))})"
            )
    elif format not in _READERS:
        raise ConfigError(f"unknown format {format!r}; use one of {', '.join(sorted(_READERS))}")
    if not file.exists():
        raise DataError("no such file", path=str(file), hint="check the path")
    if file.is_dir():
        raise DataError("is a directory, not a file", path=str(file))
    if not os.access(file, os.R_OK):
        raise DataError("permission denied", path=str(file))
    mapping = None if column_map is None else check_column_map(column_map)
    if format == "parquet":
        from ctxeval._data.optional import require_pyarrow

        require_pyarrow(f"reading {file}")
    if mapping:
        rows = (
            _read_csv(file, lists=_list_columns(mapping))
            if format == "csv"
            else _READERS[format](file)
        )
        return SampleStream(file, format, strict, _mapped(rows, mapping))
    return SampleStream(file, format, strict)


def _list_columns(mapping: Mapping[str, str]) -> frozenset[str]:
    """The CSV columns that hold lists when ``mapping`` renames columns to sample fields:
    those named as list fields, and those mapped onto one."""
    return _LIST_FIELDS | {column for field, column in mapping.items() if field in _LIST_FIELDS}


def _mapped(rows: Iterator[Row], mapping: Mapping[str, str]) -> Iterator[Row]:
    """The rows of a reader with ``mapping`` applied (``raw`` dropped: the row changed); a row
    without a mapped column becomes a bad row, with its reason."""
    try:
        for line, row, _ in rows:
            if isinstance(row, _Bad):
                yield line, row, None
                continue
            try:
                yield line, renamed(row, mapping), None
            except DataError as exc:
                yield line, _Bad(exc.problem, hint="check column_map / --map"), None
    finally:
        close = getattr(rows, "close", None)
        if close is not None:
            close()


# --- readers: each yields (line, row, raw) -------------------------------------------------
# `row` is whatever the line holds; `raw` is the JSON line it was read from when reading that
# line again gives the same row (a JSONL line orjson read), else None.

Row = tuple[int, Any, bytes | None]


def _read_jsonl(path: Path) -> Iterator[Row]:
    with path.open("rb") as handle:
        yield from _jsonl_rows(enumerate(handle, start=1))


def _jsonl_rows(lines: Iterable[tuple[int, bytes]]) -> Iterator[Row]:
    """The rows of numbered JSONL lines (a blank line is no row)."""
    import orjson  # about five times faster than json on sample lines; json explains errors

    fast = orjson.loads
    for number, raw in lines:
        if number > 1:
            try:
                yield number, fast(raw), raw
                continue
            except orjson.JSONDecodeError:
                pass  # blank, not UTF-8, not JSON, NaN...: json reads or explains it
        try:
            text = raw.decode("utf-8-sig" if number == 1 else "utf-8")
        except UnicodeDecodeError as exc:
            yield number, _Bad(f"not valid UTF-8 at byte {exc.start} of the line"), None
            continue
        if not text.strip():
            continue
        try:
            yield number, json.loads(text), None
        except json.JSONDecodeError as exc:
            where = (
                "the end of the line" if exc.pos >= len(text.rstrip()) else f"column {exc.colno}"
            )
            yield number, _Bad(f"not valid JSON: {exc.msg} at {where}"), None
        except RecursionError:
            yield number, _Bad("the JSON is nested too deeply to read"), None
        except ValueError as exc:  # an integer of thousands of digits
            yield number, _Bad(f"a value that cannot be read: {str(exc).split(';')[0]}"), None


def _read_json(path: Path) -> Iterator[Row]:
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DataError(f"not valid UTF-8 at byte {exc.start}") from None
    decoder = json.JSONDecoder()
    position = skip_space(text, 0)
    if position >= len(text):
        return
    try:
        if text[position] == "[":
            read = functools.partial(_array_item, decoder)
            for line, row in json_list_items(text, position, read):
                yield line, row, None
        else:
            document, end = decoder.raw_decode(text, position)
            if skip_space(text, end) != len(text):
                raise json.JSONDecodeError("extra data after the document", text, end)
            yield from _columns(document)
    except json.JSONDecodeError as exc:
        raise DataError(
            f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    except RecursionError:
        raise DataError("the JSON is nested too deeply to read") from None
    except ValueError as exc:  # an integer of thousands of digits
        raise DataError(f"a value that cannot be read: {str(exc).split(';')[0]}") from None


def _array_item(decoder: json.JSONDecoder, text: str, position: int) -> tuple[Any, int]:
    """The item of a JSON array at ``position`` and where it ends; an item nested too deeply
    (or holding an integer of thousands of digits) is a bad row of its own, as a JSONL line
    is, and reading goes on after it."""
    try:
        return decoder.raw_decode(text, position)
    except RecursionError:
        return _Bad("the JSON is nested too deeply to read"), _end_of_value(text, position)
    except json.JSONDecodeError:
        raise
    except ValueError as exc:  # an integer of thousands of digits
        problem = f"a value that cannot be read: {str(exc).split(';')[0]}"
        return _Bad(problem), _end_of_value(text, position)


def _end_of_value(text: str, start: int) -> int:
    """Where the JSON value at ``start`` ends, found by counting brackets outside strings
    (no recursion: the value may be nested too deeply for the parser)."""
    depth = 0
    position = start
    size = len(text)
    while position < size:
        char = text[position]
        if char == '"':
            position += 1
            while position < size and text[position] != '"':
                position += 2 if text[position] == "\\" else 1
        elif char in "[{":
            depth += 1
        elif char in "]}" or (char == "," and depth == 0):
            if depth == 0:
                return position  # (the end of a scalar item)
            depth -= 1
            if depth == 0:
                return position + 1
        position += 1
    raise json.JSONDecodeError("the array is not closed", text, start)


def _columns(document: object) -> Iterator[Row]:
    if not isinstance(document, dict):
        raise DataError(
            f"expected an array of samples or an object of columns, got {type(document).__name__}"
        )
    lengths = {key: len(v) for key, v in document.items() if isinstance(v, list)}
    if not lengths or len(lengths) != len(document):
        raise DataError(
            "a JSON object must map every field to a list of values (one per sample)",
            hint="or write an array of sample objects",
        )
    if len(set(lengths.values())) != 1:
        raise DataError(
            "columns have different lengths: "
            + ", ".join(f"{k}={n}" for k, n in sorted(lengths.items()))
        )
    for index in range(next(iter(lengths.values()))):
        yield index + 1, {key: column[index] for key, column in document.items()}, None


def skip_space(text: str, position: int) -> int:
    """The first position from ``position`` on that is not JSON white space."""
    while position < len(text) and text[position] in " \t\r\n":
        position += 1
    return position


def json_list_items(
    text: str, position: int, read: Callable[[str, int], tuple[Any, int]]
) -> Generator[tuple[int, Any], None, int | None]:
    """The items of the JSON list whose ``[`` is at ``position``, each with the line it starts
    on, each read by ``read(text, start)`` (giving the item and where it ends); returns where
    the list's ``]`` stands (None: the list is empty). The reader of a JSON samples file and
    that of a JSON labels file both walk a list so.

    Raises:
        json.JSONDecodeError: an item is followed by neither ``,`` nor ``]``; and what
            ``read`` raises.
    """
    position = skip_space(text, position + 1)
    if text[position : position + 1] == "]":
        return None
    line, counted = 1, 0
    while True:
        line += text.count("\n", counted, position)
        counted = position
        item, position = read(text, position)
        yield line, item
        position = skip_space(text, position)
        if text[position : position + 1] == ",":
            position = skip_space(text, position + 1)
            continue
        if text[position : position + 1] == "]":
            return position
        raise json.JSONDecodeError("expected ',' or ']'", text, position)


def _read_csv(path: Path, lists: frozenset[str] = _LIST_FIELDS) -> Iterator[Row]:
    """CSV rows with the physical line each starts on, read strictly: bad quoting, an
    unterminated quote, a line that is not UTF-8 each make that row bad (and only that row:
    reading goes on with the next line), and a header naming a column twice is refused.
    The cells of the columns in ``lists`` are read as lists."""
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
    with path.open("rb") as handle:
        lines = _CSVLines(handle)
        header: list[str] | None = None
        while True:
            start, cells, problem = lines.record()
            if start is None:
                return
            if problem is not None:
                if header is None:
                    raise DataError(f"the header line is unreadable: {problem}", line=start)
                yield start, _Bad(problem), None
                continue
            assert cells is not None
            if not cells:
                continue  # a blank line
            if header is None:
                header = _csv_header(cells, start)
                continue
            record: dict[str | None, Any] = dict(zip(header, cells, strict=False))
            if len(cells) > len(header):
                record[None] = cells[len(header) :]
            for name in header[len(cells) :]:
                record[name] = None
            yield start, _csv_row(record, header, lists), None


def _csv_header(cells: list[str], line: int) -> list[str]:
    seen: dict[str, int] = {}
    for position, name in enumerate(cells, start=1):
        if name in seen:
            raise DataError(
                f"column {name!r} appears twice in the header (columns {seen[name]} and "
                f"{position}); one of the two would be lost",
                line=line,
                hint="rename or remove one of them",
            )
        seen[name] = position
    return cells


class _CSVLines:
    """The physical lines of a CSV file, decoded one by one, parsed a record at a time; a
    record that fails gives back all its lines but its first, so that reading goes on from
    the line after it (an unterminated quote swallows nothing)."""

    def __init__(self, handle: IO[bytes]) -> None:
        self._handle = handle
        self._pending: list[tuple[int, bytes]] = []  # lines given back, in order
        self._number = 0

    def _next_line(self) -> tuple[int, bytes] | None:
        if self._pending:
            return self._pending.pop(0)
        raw = self._handle.readline()
        if not raw:
            return None
        self._number += 1
        if self._number == 1 and raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]  # a byte-order mark
        return self._number, raw

    def record(self) -> tuple[int | None, list[str] | None, str | None]:
        """``(first line, cells, None)``, ``(first line, None, problem)``, or
        ``(None, None, None)`` at the end."""
        taken: list[tuple[int, bytes]] = []
        problem: list[str] = []

        def feed() -> Iterator[str]:
            while True:
                line = self._next_line()
                if line is None:
                    return
                taken.append(line)
                number, raw = line
                try:
                    yield raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    problem.append(f"not valid UTF-8 at byte {exc.start} of line {number}")
                    return

        reader = csv.reader(feed(), strict=True)
        try:
            cells: list[str] = next(reader)
        except StopIteration:
            if not taken:
                return None, None, None
            if problem:
                self._pending[:0] = taken[1:]
                return taken[0][0], None, problem[0]
            cells = []
        except csv.Error as exc:
            first = taken[0][0] if taken else self._number
            self._pending[:0] = taken[1:]  # read again from the line after this row's first
            what = "an unterminated quote" if "end of data" in str(exc) else str(exc)
            return first, None, f"not valid CSV ({what}) in the row starting on this line"
        if problem:  # the row ran into an undecodable line
            self._pending[:0] = taken[1:]
            return taken[0][0], None, problem[0]
        return taken[0][0], cells, None


def _csv_row(record: Mapping[str | None, Any], header: Any, lists: frozenset[str]) -> Any:
    if None in record:  # more cells than the header has names
        return _Bad(f"the row has {len(record[None])} cell(s) more than the header")
    row: dict[str, Any] = {}
    for key, cell in record.items():
        assert key is not None
        if cell is None:  # fewer cells than the header
            return _Bad(f"the row has fewer cells than the header ({len(header)})")
        if cell == "":
            row[key] = None
        elif key in lists:
            value = _list_cell(cell)
            if value is None:
                return _Bad(
                    "a list field must hold a JSON array or a Python list literal",
                    field=FIELD_ALIASES.get(key, key),
                    hint='write it as ["first", "second"], e.g. with json.dumps',
                )
            row[key] = value
        else:
            row[key] = cell
    return row


def _list_cell(cell: str) -> Any:
    """The value of a CSV list cell: a JSON array, else a Python list literal (ragas's
    ``to_csv()`` writes ``['a', 'b']``); None when it is neither."""
    try:
        return json.loads(cell)
    except json.JSONDecodeError:
        pass
    except RecursionError:  # absurdly deep nesting: no list of texts or IDs
        return None
    if not cell.lstrip().startswith(("[", "(")):
        return None
    import ast

    try:
        value = ast.literal_eval(cell)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    return list(value) if isinstance(value, (list, tuple)) else None


def _read_parquet(path: Path) -> Iterator[Row]:
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(path)
    except Exception as exc:  # pyarrow raises several unrelated types for a bad file
        raise DataError(f"not a readable Parquet file: {exc}") from None
    number = 0
    with parquet:
        for batch in parquet.iter_batches(batch_size=1024):
            for row in batch.to_pylist():
                number += 1
                yield number, row, None


class RepeatedIdError(DataError):
    """A row whose id an earlier row has: a lenient reader skips it, a lenient run sets it
    aside as error rows; the earlier one is scored."""


def _repeated_id(set_aside: bool = False) -> DataError:
    """The error of a row whose id an earlier row has (lenient reading skips it; a lenient run
    sets it aside as error rows: ``set_aside``)."""
    fate = "set aside as error rows" if set_aside else "skipped"
    return RepeatedIdError(
        f"an earlier row has this id: this row is {fate}, the earlier one is scored",
        field="id",
        hint="sample ids must be unique: give this sample its own id, or remove the repeat",
    )


class _Bad(dict[str, Any]):
    """A row that could not even be parsed; turning it into a sample raises its error."""

    def __init__(self, problem: str, *, field: str | None = None, hint: str | None = None) -> None:
        super().__init__()
        self.error = DataError(problem, field=field, hint=hint)


_READERS: Final = {
    "jsonl": _read_jsonl,
    "json": _read_json,
    "csv": _read_csv,
    "parquet": _read_parquet,
}
