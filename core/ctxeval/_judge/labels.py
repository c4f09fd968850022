"""People's labels of judged items: :class:`Labels`, read from a small file.

A label says what a person decided for one item a judge judged: a retrieved chunk (relevant to
the reference, for ``llm_context_precision_with_reference``; useful for the response, for
``..._without_reference``), a reference statement (attributed to the contexts, for
``llm_context_recall``; the statements are those of the run's results, as the judge split
them), or a reference entity (present in the contexts, for ``context_entity_recall``). Items are
numbered from 0 in the order of the row's ``details["flags"]``.

The file is JSONL (or a JSON list, or CSV with the same columns), one label per line::

    {"sample_id": "q17", "metric": "context_precision", "index": 0, "label": 1}

or all the labels of one sample at once::

    {"sample_id": "q17", "metric": "context_precision", "labels": [1, 0, 0, 1]}

``metric`` may be an alias (``context_precision``); ``label`` is 0/1 or false/true, or null
for an item not labelled yet (a sheet being filled in).

A judge that grades instead of saying yes or no (``context_relevance``: each retrieved chunk
0 to 3 on the UMBRELA scale) is labelled with grades, ``grade`` for one item and ``grades``
for all of a sample's, in the same records::

    {"sample_id": "q17", "metric": "context_relevance", "index": 0, "grade": 3}
    {"sample_id": "q18", "metric": "context_relevance", "grades": [3, 0, 2, null]}

The index is the chunk's rank from 0 (``details["chunks"][i]["index"]``). A metric is labelled
one way or the other: 0/1 labels and grades for one metric in one file are an error.

Files are read strictly, so that what ctxeval writes reads back whatever the texts hold: UTF-8
(a byte-order mark, as Excel writes one, is accepted), JSONL lines split at line feeds only (a
text may hold U+2028 or any other character), CSV as the csv module reads it (quoted cells may
hold line breaks). A byte that is not UTF-8, an index that is not written in ASCII digits, a
record that is not an object: each a :class:`~ctxeval.DataError` naming the file, the line and
the field; a file with no label record at all is an error too.
"""

from __future__ import annotations

import csv
import io
import json
import os
import sys
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs

from ctxeval._data.loading import json_list_items, skip_space
from ctxeval._errors import DataError

__all__ = ["Labels"]

_TRUE = (True, 1, "1", "true", "yes")
_FALSE = (False, 0, "0", "false", "no")

GRADES = range(4)
"""The grades people may give: 0 to 3, the UMBRELA scale ``context_relevance`` grades on."""

_KINDS = (
    "grade / grades (0-3) for a judge that grades (context_relevance), "
    "label / labels (0/1) for one that says yes or no"
)


def _flag(value: Any, where: dict[str, Any], field: str) -> int | None:
    if value is None:
        return None  # not labelled yet (a sheet being filled in)
    folded = value.strip().lower() if isinstance(value, str) else value
    if folded in _TRUE and not isinstance(folded, float):
        return 1
    if folded in _FALSE and not isinstance(folded, float):
        return 0
    graded = "grade" if field == "label" else "grades"
    raise DataError(
        f"a label is 0 or 1 (or false/true), got {value!r}",
        field=field,
        hint="1: the item is relevant / attributed / present; 0: it is not; a grade 0-3 of a "
        f"judge that grades (context_relevance) goes in {graded!r} instead",
        **where,
    )


def _grade(value: Any, where: dict[str, Any], field: str) -> int | None:
    if value is None:
        return None  # not graded yet (a sheet being filled in)
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        value = int(value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # (a spreadsheet's 2.0)
    if isinstance(value, bool) or not isinstance(value, int) or value not in GRADES:
        raise DataError(
            f"a grade is a whole number from {GRADES[0]} to {GRADES[-1]}, got {value!r}",
            field=field,
            hint="3: dedicated to the question, the exact answer; 2: some answer, unclear or "
            "mixed; 1: related, no answer; 0: nothing to do with the question",
            **where,
        )
    return value


def _index(value: Any, where: dict[str, Any]) -> int:
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        value = int(value)  # (not "²" or "٣": isdigit() alone takes them, int() does not)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise DataError(
            f"index is the item's position from 0 (a whole number in digits 0-9), got {value!r}",
            field="index",
            **where,
        )
    return value


def _names(names: Iterable[str]) -> frozenset[str]:
    return frozenset(names)


@attrs.frozen
class Labels:
    """People's labels, by metric and sample: ``items[metric, sample_id][index]`` is 0 or 1,
    or a grade 0 to 3 for the metrics in ``graded``.

    Attributes:
        items: the labels.
        source: where they came from (a file name), for messages.
        lines: where each label was given (``(metric, sample_id, index)`` -> line).
        graded: the metrics labelled with grades (``grade``/``grades``), not 0/1.
    """

    items: Mapping[tuple[str, str], Mapping[int, int]]
    source: str = "labels"
    lines: Mapping[tuple[str, str, int], int] = attrs.field(factory=dict, repr=False)
    graded: frozenset[str] = attrs.field(default=frozenset(), converter=_names)

    def __len__(self) -> int:
        return sum(len(v) for v in self.items.values())

    @property
    def metrics(self) -> list[str]:
        """The metric names the labels are for, as written."""
        return list(dict.fromkeys(metric for metric, _ in self.items))

    def renamed(self, names: Mapping[str, str]) -> Labels:
        """The labels with their metric names mapped through ``names`` (aliases to the run's
        row names)."""
        items = {(names.get(m, m), s): v for (m, s), v in self.items.items()}
        lines = {(names.get(m, m), s, i): n for (m, s, i), n in self.lines.items()}
        graded = frozenset(names.get(m, m) for m in self.graded)
        return Labels(items, self.source, lines, graded)

    @classmethod
    def from_records(
        cls, records: Iterable[Mapping[str, Any]], *, source: str = "labels"
    ) -> Labels:
        """Labels from dicts, as the file's lines give them (see the module).

        Raises:
            DataError: a record lacks a field or has a bad value, or two records give one item
                different labels (the message names both lines).
        """
        return cls._numbered(enumerate(records, start=1), source)

    @classmethod
    def _numbered(cls, records: Iterable[tuple[int, Any]], source: str) -> Labels:
        items: dict[tuple[str, str], dict[int, int]] = {}
        lines: dict[tuple[str, str, int], int] = {}
        kinds: dict[str, tuple[bool, int]] = {}  # metric -> (graded, the line that said so)
        for number, record in records:
            where: dict[str, Any] = {"path": source, "line": number}
            if not isinstance(record, Mapping):
                raise DataError("each label is a JSON object", **where)
            _check_text(record, where)
            sample = record.get("sample_id", record.get("id"))
            if sample is None or (isinstance(sample, str) and not sample.strip()):
                raise DataError("a label needs the sample_id of the sample it is for", **where)
            if isinstance(sample, bool) or not isinstance(sample, (str, int)):
                raise DataError(
                    f"a sample_id is a string (or an integer), got {sample!r}",
                    field="sample_id",
                    **where,
                )
            metric = record.get("metric")
            if not isinstance(metric, str) or not metric.strip():
                raise DataError(
                    "a label needs the metric whose judge it checks",
                    field="metric",
                    sample_id=str(sample),
                    **where,
                )
            where["sample_id"] = str(sample)
            graded = "grade" in record or "grades" in record
            if graded and ("label" in record or "labels" in record):
                raise DataError(
                    "a label record gives label(s) or grade(s), not both",
                    hint=_KINDS,
                    **where,
                )
            given = _given(record, where, graded)
            name = metric.strip()
            kind = kinds.setdefault(name, (graded, number))
            if kind[0] != graded:
                said = "grades" if kind[0] else "0/1 labels"
                raise DataError(
                    f"{name} has {said} on line {kind[1]} and "
                    f"{'grades' if graded else '0/1 labels'} here: a metric is labelled one way",
                    hint=_KINDS,
                    **where,
                )
            key = (name, str(sample))
            for index, flag in given:
                known = items.setdefault(key, {})
                if index in known and known[index] != flag:
                    first = lines[key[0], key[1], index]
                    raise DataError(
                        f"item {index} of {key[0]} is labelled {known[index]} on line {first} "
                        f"and {flag} here",
                        **where,
                    )
                known[index] = flag
                lines.setdefault((key[0], key[1], index), number)
        graded_metrics = frozenset(m for m, (graded, _) in kinds.items() if graded)
        return cls(items, source, lines, graded_metrics)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Labels:
        """Labels from a JSONL, JSON (a list) or CSV file (columns ``sample_id``, ``metric``
        and ``index`` + ``label``, or ``labels`` as a JSON list; ``grade`` / ``grades`` for a
        judge that grades), UTF-8 (with or without a byte-order mark).

        Raises:
            DataError: the file cannot be read, is empty, is not UTF-8, or a line is malformed
                (file, line and field named).
        """
        target = Path(path)
        name = str(target)
        try:
            raw = target.read_bytes()
        except OSError as exc:
            raise DataError(f"cannot read the labels: {exc.strerror or exc}", path=name) from None
        # a byte that is not UTF-8 is kept as a lone surrogate, found and named (line, field)
        # once the records are read: see _check_text
        text = raw.decode("utf-8-sig", errors="surrogateescape")
        suffix = target.suffix.lower()
        if suffix == ".csv":
            records = _csv_records(text, name)
        elif suffix == ".json":
            records = _json_records(text, name)
        else:
            records = _jsonl_records(text, name)
        seen = _Counted(records)
        labels = cls._numbered(seen, name)
        if not seen.count:
            raise DataError(
                "the labels file is empty: no label in it",
                path=name,
                hint="one label per line, e.g. "
                '{"sample_id": "q1", "metric": "context_precision", "index": 0, "label": 1}; '
                "ctxeval label-sheet RUN -m METRIC writes a sheet to fill in",
            )
        return labels


def _given(record: Mapping[str, Any], where: dict[str, Any], graded: bool) -> list[tuple[int, int]]:
    """The ``(index, value)`` pairs a record gives (an item left null is not given): one item
    (``index`` + ``label`` / ``grade``) or every item of the sample in order (``labels`` /
    ``grades``)."""
    one, every = ("grade", "grades") if graded else ("label", "labels")
    read = _grade if graded else _flag
    if every in record:
        values = record[every]
        if isinstance(values, str):
            try:
                values = json.loads(values)
            except ValueError:
                values = None
        if not isinstance(values, list):
            what = "grades (0-3)" if graded else "0/1"
            raise DataError(
                f"{every} is a list of {what}, one per item in order", field=every, **where
            )
        flags = [(i, read(v, where, every)) for i, v in enumerate(values)]
        return [(i, f) for i, f in flags if f is not None]
    if "index" in record and one in record:
        value = read(record[one], where, one)
        index = _index(record["index"], where)
        return [] if value is None else [(index, value)]
    raise DataError(
        f"a label needs index and {one} (one item), or {every} (a list, every item)",
        hint='e.g. {"sample_id": "q1", "metric": "context_precision", "index": 0, "label": 1}'
        ' or, for a judge that grades, {"sample_id": "q1", "metric": "context_relevance", '
        '"index": 0, "grade": 2}',
        **where,
    )


class _Counted(Iterator[tuple[int, Any]]):
    """The records of a file, counted as they are read."""

    def __init__(self, records: Iterator[tuple[int, Any]]) -> None:
        self._records = records
        self.count = 0

    def __next__(self) -> tuple[int, Any]:
        record = next(self._records)
        self.count += 1
        return record


def _jsonl_records(text: str, name: str) -> Iterator[tuple[int, Any]]:
    """The records of a JSONL text, numbered by line: lines end at line feeds only (not at
    U+2028, U+0085, form feeds... which a text may hold, as ``str.splitlines`` would cut)."""
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except RecursionError:
            raise DataError(
                "the JSON is nested too deeply to read", path=name, line=number
            ) from None
        except ValueError as exc:
            _refuse_undecodable(line, {"path": name, "line": number})
            problem = exc.args[0] if exc.args else str(exc)
            raise DataError(f"not JSON: {problem}", path=name, line=number) from None
        yield number, record


def _json_records(text: str, name: str) -> Iterator[tuple[int, Any]]:
    """The records of a JSON list, each numbered by the line it starts on."""
    decoder = json.JSONDecoder()
    position = skip_space(text, 0)
    try:
        if position >= len(text):
            return
        if text[position] != "[":
            decoder.raw_decode(text, position)  # (an error for anything else than JSON)
            raise DataError("a JSON labels file holds a list of labels", path=name)
        closing = yield from json_list_items(text, position, decoder.raw_decode)
        if closing is None:
            return  # (an empty list)
        end = skip_space(text, closing + 1)
        if end != len(text):
            raise json.JSONDecodeError("extra data after the list", text, end)
    except DataError:
        raise
    except json.JSONDecodeError as exc:
        _refuse_undecodable(text.split("\n")[exc.lineno - 1], {"path": name, "line": exc.lineno})
        raise DataError(
            f"not JSON: {exc.msg} at column {exc.colno}", path=name, line=exc.lineno
        ) from None
    except RecursionError:
        raise DataError("the JSON is nested too deeply to read", path=name) from None
    except ValueError as exc:  # an integer of thousands of digits
        raise DataError(f"not JSON: {str(exc).split(';')[0]}", path=name) from None


def _csv_records(text: str, name: str) -> Iterator[tuple[int, Any]]:
    """The records of a CSV text (a header row, then one label per row), each numbered by
    the line it starts on; an empty cell is no value."""
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    header: list[str] | None = None
    end = 0  # the last line of the previous row
    while True:
        start = end + 1
        try:
            cells = next(reader, None)
        except csv.Error as exc:
            raise DataError(f"not valid CSV: {exc}", path=name, line=start) from None
        end = reader.line_num
        if cells is None:
            return
        if not cells or not any(c.strip() for c in cells):
            continue  # a blank line
        if header is None:
            header = [c.strip() for c in cells]
            _check_text(dict.fromkeys(header, ""), {"path": name, "line": start})
            named = [h for h in header if h]
            if len(set(named)) != len(named):
                twice = next(h for h in named if named.count(h) > 1)
                raise DataError(
                    f"column {twice!r} appears twice in the header", path=name, line=start
                )
            continue
        if len(cells) > len(header):
            raise DataError(
                f"the row has {len(cells) - len(header)} cell(s) more than the header",
                path=name,
                line=start,
            )
        yield start, {k: v for k, v in zip(header, cells, strict=False) if k and v != ""}


def _check_text(record: Mapping[Any, Any], where: dict[str, Any]) -> None:
    """Refuse a record with a text that is not valid Unicode: a byte of the file that is not
    UTF-8 (decoded as a lone surrogate), or a lone surrogate written as a JSON escape."""
    for key, value in record.items():
        for text in _texts(key, value):
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as exc:
                field = key if _valid(key) else None
                bad = text[exc.start]
                if "\udc80" <= bad <= "\udcff":
                    raise DataError(
                        f"not valid UTF-8 (the byte 0x{ord(bad) - 0xDC00:02x})",
                        field=field,
                        hint="save the file as UTF-8",
                        **where,
                    ) from None
                raise DataError(
                    f"a lone surrogate ({bad!r}) is not text", field=field, **where
                ) from None


def _texts(key: Any, value: Any) -> Iterator[str]:
    if isinstance(key, str):
        yield key
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        yield from (v for v in value if isinstance(v, str))


def _valid(text: Any) -> bool:
    if not isinstance(text, str):
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _refuse_undecodable(line: str, where: dict[str, Any]) -> None:
    """A line that is not JSON because it holds a byte that is not UTF-8: say that."""
    _check_text({None: line}, where)
