"""The compact ``pandas`` frame of an evaluation's rows: :meth:`Evaluation.to_pandas
<ctxeval.Evaluation.to_pandas>` with ``details="json"`` or ``details="none"``.

A details dict per row is most of what the default frame weighs (about 1 kB a row for an ID
metric, against some 60 bytes for the rest of the row). Here each row's details are the JSON
text ``results.jsonl`` writes (or left out), and, with pyarrow installed, the frame is made
from :meth:`Evaluation.to_arrow <ctxeval.Evaluation.to_arrow>`'s table a record batch at a
time: its text columns stay in Arrow's buffers (``pd.ArrowDtype(pa.string())``, one buffer
per column rather than one Python string per cell), ``metric`` and ``status`` categorical.
Without pyarrow the same values are plain Python objects.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ctxeval._data.optional import is_installed, require_pandas
from ctxeval._output.writers import _COLUMNS, _records, _records_without_details, arrow_table
from ctxeval._results.results import MetricResult

__all__ = ["compact_frame"]

_CATEGORIES = ("metric", "status")
"""The columns of a few distinct values, categorical in the compact frame."""


def compact_frame(parts: Iterable[Sequence[MetricResult]], *, details: bool) -> Any:
    """The rows of ``parts`` as a ``pandas.DataFrame`` of ``to_pandas``'s columns, the
    details as JSON text (``details``) or left out (see the module)."""
    require_pandas("Evaluation.to_pandas()")
    import pandas as pd

    if is_installed("pyarrow"):
        import pyarrow as pa

        table = arrow_table(parts, details=details)
        for name in _CATEGORIES:  # (dictionary arrays become pandas categoricals)
            at = table.schema.get_field_index(name)
            table = table.set_column(at, name, table.column(name).dictionary_encode())

        def types(kind: Any) -> Any:
            return pd.ArrowDtype(kind) if pa.types.is_string(kind) else None

        return table.to_pandas(types_mapper=types)
    names = [c for c in _COLUMNS if details or c != "details"]
    rows = (_records(p) if details else _records_without_details(p) for p in parts)
    frame = pd.DataFrame.from_records([r for part in rows for r in part], columns=names)
    for name in _CATEGORIES:
        frame[name] = frame[name].astype("category")
    return frame
