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
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs

from ctxeval._errors import DataError

__all__ = ["Labels"]

_TRUE = (True, 1, "1", "true", "yes")
_FALSE = (False, 0, "0", "false", "no")


def _flag(value: Any, where: dict[str, Any], field: str) -> int | None:
    if value is None:
        return None  # not labelled yet (a sheet being filled in)
    folded = value.strip().lower() if isinstance(value, str) else value
    if folded in _TRUE and not isinstance(folded, float):
        return 1
    if folded in _FALSE and not isinstance(folded, float):
        return 0
    raise DataError(
        f"a label is 0 or 1 (or false/true), got {value!r}",
        field=field,
        hint="1: the item is relevant / attributed / present; 0: it is not",
        **where,
    )


def _index(value: Any, where: dict[str, Any]) -> int:
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise DataError(
            f"index is the item's position from 0, got {value!r}", field="index", **where
        )
    return value


@attrs.frozen
class Labels:
    """People's labels, by metric and sample: ``items[metric, sample_id][index]`` is 0 or 1.

    Attributes:
        items: the labels.
        source: where they came from (a file name), for messages.
        lines: where each label was given (``(metric, sample_id, index)`` -> line).
    """

    items: Mapping[tuple[str, str], Mapping[int, int]]
    source: str = "labels"
    lines: Mapping[tuple[str, str, int], int] = attrs.field(factory=dict, repr=False)

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
        return Labels(items, self.source, lines)

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
        for number, record in records:
            where: dict[str, Any] = {"path": source, "line": number}
            if not isinstance(record, Mapping):
                raise DataError("each label is a JSON object", **where)
            sample = record.get("sample_id", record.get("id"))
            if sample is None or (isinstance(sample, str) and not sample.strip()):
                raise DataError("a label needs the sample_id of the sample it is for", **where)
            metric = record.get("metric")
            if not isinstance(metric, str) or not metric.strip():
                raise DataError(
                    "a label needs the metric whose judge it checks",
                    field="metric",
                    sample_id=str(sample),
                    **where,
                )
            where["sample_id"] = str(sample)
            given: list[tuple[int, int]]
            if "labels" in record:
                values = record["labels"]
                if isinstance(values, str):
                    try:
                        values = json.loads(values)
                    except ValueError:
                        values = None
                if not isinstance(values, list):
                    raise DataError(
                        "labels is a list of 0/1, one per item in order", field="labels", **where
                    )
                flags = [(i, _flag(v, where, "labels")) for i, v in enumerate(values)]
                given = [(i, f) for i, f in flags if f is not None]
            elif "index" in record and "label" in record:
                flag = _flag(record["label"], where, "label")
                index = _index(record["index"], where)
                given = [] if flag is None else [(index, flag)]
            else:
                raise DataError(
                    "a label needs index and label (one item), or labels (a list, every item)",
                    hint='e.g. {"sample_id": "q1", "metric": "context_precision", '
                    '"index": 0, "label": 1}',
                    **where,
                )
            key = (metric.strip(), str(sample))
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
        return cls(items, source, lines)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Labels:
        """Labels from a JSONL, JSON (a list) or CSV file (columns ``sample_id``, ``metric``
        and ``index`` + ``label``, or ``labels`` as a JSON list).

        Raises:
            DataError: the file cannot be read or a line is malformed (file, line and field
                named).
        """
        target = Path(path)
        name = str(target)
        try:
            text = target.read_text(encoding="utf-8")
        except OSError as exc:
            raise DataError(f"cannot read the labels: {exc.strerror or exc}", path=name) from None
        if target.suffix.lower() == ".csv":
            reader = csv.DictReader(text.splitlines())
            rows = ({k: v for k, v in row.items() if v not in (None, "")} for row in reader)
            return cls._numbered(((n + 1, row) for n, row in enumerate(rows, start=1)), name)
        if target.suffix.lower() == ".json":
            try:
                records = json.loads(text)
            except ValueError as exc:
                raise DataError(f"not JSON: {exc}", path=name) from None
            if not isinstance(records, list):
                raise DataError("a JSON labels file holds a list of labels", path=name)
            return cls.from_records(records, source=name)
        parsed = []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                parsed.append((number, json.loads(line)))
            except ValueError as exc:
                raise DataError(f"not JSON: {exc.args[0]}", path=name, line=number) from None
        return cls._numbered(parsed, name)
