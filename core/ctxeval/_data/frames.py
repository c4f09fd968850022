"""Samples held in memory as a table, read a row at a time: a pandas or polars ``DataFrame``, a
dict of columns (``{"user_input": [...], "retrieved_contexts": [[...], ...]}``), a Hugging Face
``datasets.Dataset`` (or ``IterableDataset``), a ragas ``EvaluationDataset`` or a list of
ragas samples (``SingleTurnSample``).

:func:`table_rows` tells such an object apart by its type, looked up among the modules already
imported: it imports none of these libraries (an object of one exists only once its library
is loaded), so none is a dependency. What it returns gives each row as a dict of plain Python
values, lazily (a large DataFrame is never copied into a list of dicts), which becomes a
:class:`~ctxeval.Sample` as a dict from a file does: the same field names (the older ragas
names too), the same checks and the same errors, naming the sample's id or position and the
field. A cell's value is made plain first: a missing value (``None``, NaN, ``pd.NA``) is a
missing field, a numpy array or scalar a list or a number, and a whole-number float in the
``id`` column (pandas makes an integer column with a gap float) an integer.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Final

from ctxeval._data.sample import FIELD_ALIASES, ID_LIST_FIELDS, STEPS_FIELD, TEXT_LIST_FIELDS
from ctxeval._errors import ConfigError, DataError

__all__ = ["TableRows", "plain", "table_rows"]

_LIST_FIELDS: Final = frozenset((*TEXT_LIST_FIELDS, *ID_LIST_FIELDS, STEPS_FIELD))
_PLAIN_ITEMS: Final = (str, int, bool)


def plain(value: Any) -> Any:
    """A cell as a plain Python value: a missing value (None, NaN, ``pd.NA``, ``NaT``) as
    None; numpy arrays and scalars, pandas and polars Series as lists and numbers (through
    their ``tolist()``/``to_list()``); lists, tuples and dicts with such items made plain."""
    kind = type(value)
    if value is None or kind is str or kind is int or kind is bool:
        return value
    if kind is float:
        return None if value != value else value  # NaN: a missing value
    if kind is list or kind is tuple:
        if _all_plain(value):
            return value
        return [plain(item) for item in value]
    if kind is dict:
        return {plain(key): plain(item) for key, item in value.items()}
    if kind.__name__ in ("NAType", "NaTType"):
        return None
    for method in ("tolist", "to_list"):  # numpy, pandas (tolist); polars (to_list)
        convert = getattr(value, method, None)
        if callable(convert):
            return plain(convert())
    if isinstance(value, str):  # a str subclass without tolist
        return str(value)
    return value


def _all_plain(items: list[Any] | tuple[Any, ...]) -> bool:
    """Whether every item is a str (numpy's ``str_`` is one), an int or a bool: nothing to
    convert."""
    try:
        "".join(items)  # C speed: raises TypeError unless every item is a str (the usual case)
    except TypeError:
        return all(type(item) in _PLAIN_ITEMS for item in items)
    return True


def _row(keys: list[Any], values: Iterable[Any]) -> dict[Any, Any]:
    """A row's dict, each value made :func:`plain` (the usual values checked inline: this runs
    once per row of a large table)."""
    row: dict[Any, Any] = {}
    for key, value in zip(keys, values, strict=True):
        kind = type(value)
        if kind is str or value is None or kind is int or (kind is list and _all_plain(value)):
            row[key] = value
        else:
            row[key] = plain(value)
    given = row.get("id")
    if type(given) is float and given.is_integer():  # an integer id column with a gap
        row["id"] = int(given)
    return row


class TableRows:
    """The rows of a table held in memory, each a dict of sample fields, read lazily.

    Attributes:
        table: the object read.
        kind: what it is, in words (``pandas DataFrame``, ``dict of columns``...).
    """

    kind = "table"

    def __init__(self, table: Any) -> None:
        self.table = table

    def __iter__(self) -> Iterator[dict[Any, Any]]:  # pragma: no cover - each kind has its own
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<rows of a {self.kind}>"


class _SizedRows(TableRows):
    """Rows of a table whose length is known (a run's progress then has a total)."""

    def __len__(self) -> int:
        return len(self.table)


class _PandasRows(_SizedRows):
    kind = "pandas DataFrame"

    def __init__(self, table: Any) -> None:
        super().__init__(table)
        columns = list(table.columns)
        seen: set[Any] = set()
        for name in columns:
            if name in seen:
                raise ConfigError(
                    f"the DataFrame has two columns named {name!r}; one of the two would be "
                    "lost: rename or drop one"
                )
            seen.add(name)
        # an index named "id" (df.set_index("id")) is the samples' ids
        self._index_is_id = "id" not in seen and table.index.name == "id"
        self._keys = ["id", *columns] if self._index_is_id else columns

    def __iter__(self) -> Iterator[dict[Any, Any]]:
        keys = self._keys
        for values in self.table.itertuples(index=self._index_is_id, name=None):
            yield _row(keys, values)


class _PolarsRows(_SizedRows):
    kind = "polars DataFrame"

    def __iter__(self) -> Iterator[dict[Any, Any]]:
        for row in self.table.iter_rows(named=True):
            yield _row(list(row), row.values())


class _ColumnRows(TableRows):
    kind = "dict of columns"

    def __init__(self, table: Mapping[Any, Any], n: int) -> None:
        super().__init__(table)
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __iter__(self) -> Iterator[dict[Any, Any]]:
        keys = list(self.table)
        for values in zip(*(self.table[key] for key in keys), strict=True):
            yield _row(keys, values)


class _DatasetRows(TableRows):
    """A Hugging Face ``IterableDataset``: rows as it streams them (no length)."""

    kind = "datasets.IterableDataset"

    def __iter__(self) -> Iterator[dict[Any, Any]]:
        for row in self.table:
            yield _row(list(row), row.values())


class _SizedDatasetRows(_SizedRows, _DatasetRows):
    kind = "datasets.Dataset"


class _RagasRows(_SizedRows):
    """ragas samples (``SingleTurnSample``), each as the dict of its set fields (ragas's own
    field names are ctxeval's)."""

    kind = "ragas EvaluationDataset"

    def __iter__(self) -> Iterator[dict[Any, Any]]:
        multi_turn = _ragas_type("MultiTurnSample")
        for position, sample in enumerate(self.table):
            if multi_turn is not None and isinstance(sample, multi_turn):
                raise DataError(
                    "a ragas MultiTurnSample (a conversation) is not a retrieval sample",
                    sample_id=str(position),
                    hint="give SingleTurnSample samples (user_input, retrieved_contexts, "
                    "reference...)",
                )
            to_dict = getattr(sample, "to_dict", None)
            fields = to_dict() if callable(to_dict) else sample.model_dump(exclude_none=True)
            yield _row(list(fields), fields.values())


def _ragas_type(name: str) -> Any:
    """A class of ragas's dataset schema, when ragas is loaded (else None)."""
    schema = sys.modules.get("ragas.dataset_schema")
    return getattr(schema, name, None) if schema is not None else None


def _of(module: str, name: str) -> Any:
    loaded = sys.modules.get(module)
    return getattr(loaded, name, None) if loaded is not None else None


def _is_a(value: Any, kind: Any) -> bool:
    return isinstance(kind, type) and isinstance(value, kind)


def table_rows(samples: Any) -> TableRows | None:
    """The rows of ``samples`` when it is a table held in memory (see the module), else None
    (a list of samples, a file's stream, a single sample's dict...).

    Raises:
        ConfigError: a dict of columns of different lengths, a DataFrame with two columns of
            one name, a ``datasets.DatasetDict`` (a split must be chosen).
    """
    if _is_a(samples, _of("pandas", "DataFrame")):
        return _PandasRows(samples)
    if _is_a(samples, _of("polars", "DataFrame")):
        return _PolarsRows(samples)
    if _is_a(samples, _of("datasets", "Dataset")):
        return _SizedDatasetRows(samples)
    if _is_a(samples, _of("datasets", "IterableDataset")):
        return _DatasetRows(samples)
    if _is_a(samples, _of("datasets", "DatasetDict")) or _is_a(
        samples, _of("datasets", "IterableDatasetDict")
    ):
        splits = ", ".join(repr(name) for name in samples)
        first = next(iter(samples), "test")
        raise ConfigError(
            f"samples is a datasets.DatasetDict of splits ({splits}): pass one split, e.g. "
            f"samples[{first!r}]"
        )
    if _is_a(samples, _ragas_type("EvaluationDataset")):
        return _RagasRows(samples.samples)
    base = _ragas_type("BaseSample")
    if isinstance(samples, (list, tuple)) and samples and _is_a(samples[0], base):
        return _RagasRows(samples)
    if isinstance(samples, Mapping):
        n = _column_count(samples)
        return _ColumnRows(samples, n) if n is not None else None
    return None


def _is_column(value: Any) -> bool:
    if isinstance(value, (str, bytes, Mapping, set, frozenset)):
        return False
    return hasattr(value, "__len__") and hasattr(value, "__iter__")


def _is_list_cell(value: Any) -> bool:
    return isinstance(value, (list, tuple, Mapping))


def _column_count(data: Mapping[Any, Any]) -> int | None:
    """The number of rows when ``data`` is a dict of columns; None when it reads as a single
    sample: a value that is not a list (a text, an id, a mapping), or a contexts or IDs field
    whose first value is not a list (a single sample's list of texts or IDs).

    Raises:
        ConfigError: the columns have different lengths.
    """
    lengths: dict[Any, int] = {}
    for key, column in data.items():
        if not _is_column(column):
            return None
        lengths[key] = len(column)
        name = FIELD_ALIASES.get(key, key) if isinstance(key, str) else key
        if name in _LIST_FIELDS:
            first = next((cell for cell in map(plain, column) if cell is not None), None)
            if first is not None and not _is_list_cell(first):
                return None
    if len(set(lengths.values())) > 1:
        shown = ", ".join(f"{key}: {n}" for key, n in lengths.items())
        raise ConfigError(
            f"samples is a dict of columns of different lengths ({shown}): give every column "
            "one value per sample (None where a sample has none); for a single sample, wrap "
            "it in a list: [sample]"
        )
    n = next(iter(lengths.values()), 0)
    return n if n > 0 else None
