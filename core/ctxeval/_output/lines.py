"""Rows as ``results.jsonl`` lines, a part at a time: :func:`jsonl_lines`.

Each line is, byte for byte, ``row.to_json()`` and a newline. The rows a deterministic run
keeps as columns (:class:`~ctxeval._results.columns.RowBlock`) are written without building
them: one dict per row straight to orjson, the sample read once from its JSON line for all of
its rows' evidence. A row whose details orjson cannot write as they are (a plugin's set, a
number beyond 64 bits) is written by ``to_json`` itself, which knows what to do with them.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import orjson

from ctxeval._data.collector import collector_paused
from ctxeval._results.columns import Column, RowBlock, block_evidence, sample_of
from ctxeval._results.results import NO_USAGE, MetricResult

__all__ = [
    "PlainRow",
    "arrow_row_fields",
    "block_rows",
    "built_row",
    "evidence_of",
    "forget_evidence",
    "jsonl_lines",
    "plain_line",
    "write_jsonl",
]

_ZERO_USAGE = NO_USAGE.to_dict()


def jsonl_lines(part: Sequence[MetricResult]) -> bytes:
    """The ``results.jsonl`` lines of ``part``'s rows, in order (each ``row.to_json()``
    followed by a newline), as UTF-8."""
    out = io.BytesIO()
    write_jsonl(part, out.write)
    return out.getvalue()


def write_jsonl(part: Sequence[MetricResult], write: Callable[[bytes], object]) -> None:
    """Write the ``results.jsonl`` lines of ``part``'s rows with ``write`` (a binary file's),
    a line at a time: each line is freed once written, so its memory serves the next (a
    block's lines gathered first cost a page of fresh memory every few rows)."""
    if isinstance(part, RowBlock):
        with collector_paused():  # (objects by the thousand, none of them cyclic)
            _block_lines(part, write)
        return
    # (a lone surrogate a plugin let through is written as \ud800 text, never a crash)
    write("".join([row.to_json() + "\n" for row in part]).encode("utf-8", "backslashreplace"))


def evidence_of(block: RowBlock) -> tuple[list[Any] | None, list[Sequence[Any] | None]]:
    """The samples of ``block`` (None when no column has evidence) and, per column, the
    details of its plain rows by position (None for a column without a batch form): computed
    once per block for every writer (kept on the block until :func:`forget_evidence`)."""
    kept: Any = block.evidence
    if kept is not None:
        return kept  # type: ignore[no-any-return]
    block.evidence = found = block_evidence(block)
    return found


def forget_evidence(part: Sequence[MetricResult]) -> None:
    """Drop what :func:`evidence_of` kept on ``part`` (once every writer has it)."""
    if isinstance(part, RowBlock):
        part.evidence = None


PlainRow = tuple[int, Column, str, float, Any]
"""A plain ``ok`` row of a block: its sample's position, its column, the sample id, the score
and the details (its evidence)."""


def block_rows(block: RowBlock, *, with_evidence: bool = True) -> Iterator[PlainRow | MetricResult]:
    """The rows of ``block`` in order, without building the plain ones: a row kept whole as
    itself, a plain ``ok`` row as a :data:`PlainRow` whose details come from
    :func:`evidence_of` (computed a batch at a time), the sample read once for all its rows
    where a metric has no batch form. What ``results.jsonl`` and the batch scorer write;
    ``with_evidence=False`` leaves the details None (none is computed)."""
    columns = block.columns
    if not with_evidence:
        for position, sample_id in enumerate(block.sample_ids):
            for column in columns:
                score = column.scores[position]
                yield (
                    column.rows[position]
                    if score is None
                    else (position, column, sample_id, score, None)
                )
        return
    samples, details = evidence_of(block)
    for position, sample_id in enumerate(block.sample_ids):
        sample = None if samples is None else samples[position]
        for column, evidence in zip(columns, details, strict=True):
            score = column.scores[position]
            if score is None:
                yield column.rows[position]
                continue
            if evidence is not None:
                these: Any = evidence[position]
            elif column.evidence is None:
                these = {}
            else:
                if sample is None:
                    sample = sample_of(block.sources[position])
                these = column.evidence(sample)
            yield position, column, sample_id, score, these


def plain_line(block: RowBlock, row: PlainRow) -> bytes:
    """The ``results.jsonl`` line of a plain row of ``block``: straight to orjson, or by
    ``to_json`` when orjson refuses its details (a plugin's set, a number beyond 64 bits)."""
    _, column, sample_id, score, details = row
    line = {
        "sample_id": sample_id,
        "metric": column.metric,
        "status": "ok",
        "score": score,
        "reason": None,
        "details": details,
        "usage": _ZERO_USAGE,
    }
    try:
        return orjson.dumps(line, option=orjson.OPT_APPEND_NEWLINE)
    except TypeError:  # (JSONEncodeError is a TypeError)
        return _line(built_row(block, row))


def built_row(block: RowBlock, row: PlainRow) -> MetricResult:
    """The :class:`~ctxeval.MetricResult` of a plain row of ``block``, built (its sample read
    again from its line): for details orjson refuses, which ``to_json`` knows how to write."""
    position, column, sample_id, _, _ = row
    return column.row(position, sample_id, sample_of(block.sources[position]))


def _block_lines(block: RowBlock, write: Callable[[bytes], object]) -> None:
    for row in block_rows(block):
        write(_line(row) if isinstance(row, MetricResult) else plain_line(block, row))


def _line(row: MetricResult) -> bytes:
    return (row.to_json() + "\n").encode("utf-8", "backslashreplace")


def arrow_row_fields(pa: Any) -> list[tuple[str, Any]]:
    """A row's own fields as ``pyarrow`` types (``pa`` is the pyarrow module): what each
    table of rows starts with (:func:`~ctxeval._output.writers.arrow_schema`: then the usage,
    flattened), the run folder's Parquet file, ``to_arrow`` and the batch scorer's."""
    return [
        ("sample_id", pa.string()),
        ("metric", pa.string()),
        ("status", pa.string()),
        ("score", pa.float64()),
        ("reason", pa.string()),
        ("details", pa.string()),
    ]
