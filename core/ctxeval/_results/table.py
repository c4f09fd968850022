"""An evaluation's rows as columns of plain values: :func:`row_columns`, what
:meth:`Evaluation.to_pandas <ctxeval.Evaluation.to_pandas>` makes its frame of.

A row block (:class:`~ctxeval._results.columns.RowBlock`) is read from its columns: its plain
``ok`` rows are never built as :class:`~ctxeval.MetricResult` objects, their details come
from the columns' batch form (the details each row would give), and a sample's id is one
string for all of its rows. Each value is the one ``row.to_dict()`` gives.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Final

from ctxeval._results.columns import RowBlock, Scores, block_evidence
from ctxeval._results.results import NO_USAGE, MetricResult, plain_details

__all__ = ["ROW_COLUMNS", "USAGE_COLUMNS", "row_columns"]

USAGE_COLUMNS: Final = tuple(NO_USAGE.to_dict())
"""The usage fields, each a column of its own."""

ROW_COLUMNS: Final = ("sample_id", "metric", "status", "score", "reason", "details", *USAGE_COLUMNS)
"""The columns of :func:`row_columns`, in order."""

_ZERO: Final = tuple(NO_USAGE.to_dict().values())


def row_columns(parts: Iterable[Sequence[MetricResult]]) -> dict[str, list[Any]]:
    """The rows of ``parts``, in order, as one list of values per column of
    :data:`ROW_COLUMNS` (each value as ``row.to_dict()`` gives it, the usage flattened)."""
    out: dict[str, list[Any]] = {name: [] for name in ROW_COLUMNS}
    for part in parts:
        if isinstance(part, RowBlock):
            _block_columns(part, out)
        else:
            for row in part:
                _add_row(row, out)
    return out


def _add_row(row: MetricResult, out: dict[str, list[Any]]) -> None:
    record = row.to_dict()
    usage = record.pop("usage")
    for name, value in record.items():
        out[name].append(value)
    for name in USAGE_COLUMNS:
        out[name].append(usage[name])


def _block_columns(block: RowBlock, out: dict[str, list[Any]]) -> None:
    """Add the rows of ``block`` to ``out``, its plain rows read from the columns."""
    samples, details = block_evidence(block)
    columns = block.columns
    scores = [
        c.scores.tolist() if isinstance(c.scores, Scores) else list(c.scores) for c in columns
    ]
    plain = [name for name in ROW_COLUMNS if name not in USAGE_COLUMNS]
    add = [out[name].append for name in plain]
    add_usage = [out[name].append for name in USAGE_COLUMNS]
    for position, sample_id in enumerate(block.sample_ids):
        sample: Any = None
        for index, column in enumerate(columns):
            score = scores[index][position]
            if score is None:  # a row kept whole
                _add_row(column.rows[position], out)
                continue
            evidence = details[index]
            if evidence is not None:
                these = plain_details(evidence[position])
            elif column.evidence is None:
                these = {}
            else:
                if sample is None:
                    sample = samples[position] if samples is not None else block.held(position)
                these = plain_details(column.row(position, sample_id, sample).details)
            for append, value in zip(
                add, (sample_id, column.metric, "ok", score, None, these), strict=True
            ):
                append(value)
            for append, value in zip(add_usage, _ZERO, strict=True):
                append(value)
