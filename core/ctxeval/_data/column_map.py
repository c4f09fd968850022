"""Explicit field mapping: ``column_map={"user_input": "query", ...}`` for
:func:`~ctxeval.evaluate` and :func:`~ctxeval.load_samples`, ``--map FIELD=COLUMN`` on the
command line (#57).

A sample's fields are read by name (with the ragas aliases: ``question``, ``contexts``...). A
table or file whose columns have other names gets a map from each sample field to the column
that holds it: each row is read with those columns under the fields' names, the other columns
as they are (an unmapped column named like a field is still that field; the rest goes to
``metadata``). The map is checked before any row is read: a target that is not a sample field
is a :class:`~ctxeval.ConfigError` naming the valid fields.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ctxeval._data.sample import FIELD_ALIASES, SAMPLE_FIELDS
from ctxeval._errors import ConfigError, DataError

__all__ = ["check_column_map", "map_columns", "parse_map_options", "renamed"]


def check_column_map(column_map: Any, *, option: str = "column_map") -> dict[str, str]:
    """``column_map`` as a dict of sample field -> column name, checked.

    Raises:
        ConfigError: not a mapping, a field that is not a sample field (the message names the
            fields and the closest one), a column name that is not a non-empty string, or two
            fields read from one column.
    """
    if not isinstance(column_map, Mapping):
        raise ConfigError(
            f"{option} must be a dict of sample field -> column name, e.g. "
            f"{{'user_input': 'query'}}; got {type(column_map).__name__}"
        )
    checked: dict[str, str] = {}
    for field, column in column_map.items():
        if field not in SAMPLE_FIELDS:
            names = {**{f: f for f in SAMPLE_FIELDS}, **FIELD_ALIASES}  # (ragas' old names too)
            close = difflib.get_close_matches(str(field), list(names), n=1)
            hint = f" (did you mean {names[close[0]]!r}?)" if close else ""
            raise ConfigError(
                f"{option}: {field!r} is not a sample field{hint}; the fields are "
                f"{', '.join(SAMPLE_FIELDS)}"
            )
        if not isinstance(column, str) or not column:
            raise ConfigError(
                f"{option}: the column of field {field!r} must be a column name, got {column!r}"
            )
        checked[field] = column
    columns = list(checked.values())
    repeated = sorted({c for c in columns if columns.count(c) > 1})
    if repeated:
        raise ConfigError(f"{option}: column {repeated[0]!r} is given for two fields")
    return checked


def parse_map_options(items: Iterable[str]) -> dict[str, str]:
    """``--map FIELD=COLUMN`` (repeated) as a checked column map."""
    mapping: dict[str, str] = {}
    for item in items:
        field, sep, column = item.partition("=")
        if not sep or not field.strip() or not column.strip():
            raise ConfigError(
                f"--map: give FIELD=COLUMN, e.g. --map user_input=query; got {item!r}"
            )
        mapping[field.strip()] = column.strip()
    return check_column_map(mapping, option="--map")


def renamed(row: Any, column_map: Mapping[str, str], where: str = "") -> Any:
    """``row`` (a dict) with each mapped column under its field's name; anything else as it
    is (the sample's own checks then say what is wrong with it).

    Raises:
        DataError: a mapped column is not in the row (``where`` says which row).
    """
    if not isinstance(row, Mapping):
        return row
    out = {key: value for key, value in row.items() if key not in column_map.values()}
    for field, column in column_map.items():
        if column not in row:
            raise DataError(
                f"column {column!r} (given for field {field!r}) is not in the row; its columns "
                f"are {', '.join(map(str, row)) or 'none'}" + (f" ({where})" if where else "")
            )
        out[field] = row[column]
    return out


def map_columns(samples: Iterable[Any], column_map: Mapping[str, str]) -> Iterator[Any]:
    """The rows of ``samples`` (dicts, or a table's rows) read through ``column_map``."""
    for position, row in enumerate(samples):
        yield renamed(row, column_map, f"sample {position}")
