"""Phoenix spans: the DataFrame ``px.Client().get_spans_dataframe()`` returns (one span per
row: ``context.trace_id``, ``context.span_id``, ``parent_id``, ``name``, ``span_kind``,
``start_time``, ``attributes.input.value``, ``attributes.output.value``,
``attributes.metadata``, ``attributes.retrieval.documents``,
``attributes.reranker.output_documents``...), or that frame saved as Parquet or JSONL
(``df.to_parquet``, ``df.to_json(orient="records", lines=True)``).

Documents are lists of ``{"document.id", "document.content", "document.score",
"document.metadata"}``. A DataFrame is in memory already, and its spans are in no particular
order (Phoenix sorts by start time: the root first), so its spans are grouped by trace in
memory (a Parquet or JSONL export is read into one frame); for exports too large for that,
export OTLP JSON and use the ``openinference`` reader, which streams.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ctxeval import DataError, MissingExtraError

from .assemble import document_of, sample_of
from .mapping import Notes, TraceMapping
from .spans import Document, Span

__all__ = ["read_phoenix"]

DOCUMENT_COLUMNS = {
    "RETRIEVER": "attributes.retrieval.documents",
    "RERANKER": "attributes.reranker.output_documents",
    "TOOL": "attributes.retrieval.documents",
    "MCP": "attributes.retrieval.documents",
}


def read_phoenix(
    source: Any, mapping: TraceMapping, notes: Notes, max_open: int
) -> Iterator[tuple[int, Any]]:
    """``(position, sample row or DataError)`` for each trace of ``source``."""
    return _traces(_frame(source), mapping, notes)


def _traces(frame: Any, mapping: TraceMapping, notes: Notes) -> Iterator[tuple[int, Any]]:
    for column in ("context.trace_id", "context.span_id"):
        if column not in frame.columns and column != frame.index.name:
            raise DataError(
                f"a Phoenix spans DataFrame has a {column!r} column "
                "(px.Client().get_spans_dataframe()); this one has "
                + ", ".join(map(str, frame.columns[:12]))
            )
    if "context.span_id" not in frame.columns:
        frame = frame.reset_index()
    traces: dict[str, list[Span]] = {}
    first: dict[str, int] = {}
    for position, row in enumerate(frame.to_dict("records"), start=1):
        trace_id = str(row.get("context.trace_id"))
        traces.setdefault(trace_id, []).append(_span(row, position, mapping, notes))
        first.setdefault(trace_id, position)
    for trace_id, spans in traces.items():
        yield first[trace_id], sample_of(trace_id, spans, mapping, notes)


def _frame(source: Any) -> Any:
    if hasattr(source, "to_dict") and hasattr(source, "columns"):
        return source
    if not isinstance(source, (str, os.PathLike)):
        raise DataError(
            f"the phoenix reader reads a spans DataFrame or its Parquet/JSONL export, not a "
            f"{type(source).__name__}"
        )
    path = Path(source)
    if not path.exists():
        raise DataError("no such file", path=str(path), hint="check the path")
    try:
        import pandas as pd
    except ImportError:
        raise MissingExtraError(
            f"reading the Phoenix export {path} needs pandas (and pyarrow for Parquet)",
            install="pip install 'ctxeval[all]'",
        ) from None
    try:
        if path.suffix in (".parquet", ".pq"):
            return pd.read_parquet(path)
        return pd.read_json(path, lines=path.suffix != ".json", orient="records")
    except (ValueError, OSError) as exc:
        raise DataError(f"not a readable spans export: {exc}", path=str(path)) from None


def _none(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return None
    if value is not None and type(value).__name__ in ("NaTType", "NAType"):
        return None
    return value


def _order(value: Any, position: int) -> float:
    value = _none(value)
    if hasattr(value, "timestamp"):
        return float(value.timestamp())
    if isinstance(value, str):
        from datetime import datetime

        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            pass
    if isinstance(value, (int, float)):
        return float(value)
    return float(position)


def _span(row: dict[str, Any], position: int, mapping: TraceMapping, notes: Notes) -> Span:
    kind = _none(row.get("span_kind")) or _none(row.get("attributes.openinference.span.kind"))
    parent = _none(row.get("parent_id"))
    span = Span(
        str(row.get("context.span_id")),
        str(parent) if parent else None,
        str(_none(row.get("name")) or ""),
        kind.upper() if isinstance(kind, str) else "",
        _order(row.get("start_time"), position),
        _none(row.get("attributes.input.value")),
        _none(row.get("attributes.output.value")),
    )
    metadata = _none(row.get("attributes.metadata"))
    if isinstance(metadata, str):
        import json

        try:
            metadata = json.loads(metadata)
        except (ValueError, RecursionError):
            metadata = None
    if isinstance(metadata, dict) and span.parent_id is None:
        span.metadata.update(metadata)
    column = DOCUMENT_COLUMNS.get(span.kind)
    if column is not None:
        span.read_documents(lambda: _documents(_none(row.get(column)), mapping, notes))
    return span


def _documents(value: Any, mapping: TraceMapping, notes: Notes) -> list[Document] | None:
    if value is None:
        return None
    if hasattr(value, "tolist"):
        value = value.tolist()
    if not isinstance(value, list):
        raise DataError(f"its documents are {type(value).__name__}, not a list")
    if len(value) > mapping.max_documents:
        raise DataError(
            f"returned {len(value)} documents, more than max_documents={mapping.max_documents}"
        )
    out = []
    for index, raw in enumerate(value):
        if not isinstance(raw, dict):
            raise DataError(f"document {index} is {type(raw).__name__}, not an object")
        plain = {k.removeprefix("document."): _none(v) for k, v in raw.items()}
        out.append(document_of(plain, mapping, notes, f"documents[{index}]"))
    return out or None
