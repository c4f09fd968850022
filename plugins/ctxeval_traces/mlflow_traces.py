"""MLflow traces: a ``mlflow.search_traces()`` DataFrame (its ``trace_id``, ``spans`` and
``trace_metadata`` columns), ``Trace`` objects, or exported trace JSON (``Trace.to_json()``:
``{"info": {...}, "data": {"spans": [...]}}``, one per file, an array, or one per line).

A span's ``mlflow.spanType``, ``mlflow.spanInputs`` and ``mlflow.spanOutputs`` attributes are
JSON; a RETRIEVER (or RERANKER, or TOOL) span's outputs are its documents: a list of
``{"page_content" or "content", "metadata", "id"}`` (MLflow's ``Document``), the id from the
document's ``id`` or ``metadata.doc_uri``/``metadata.id`` (``id_key``). The sample's id is the
MLflow trace id (``tr-...``); the trace's metadata (``mlflow.*`` keys aside) goes to the
sample's metadata, where ``join_on`` finds a question id set with
``mlflow.update_current_trace(metadata=...)``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from ctxeval import DataError

from .assemble import document_of, sample_of
from .files import json_items
from .mapping import Notes, TraceMapping
from .spans import Document, Span, hex_id

__all__ = ["read_mlflow"]


def read_mlflow(source: Any, mapping: TraceMapping, notes: Notes) -> Iterator[tuple[int, Any]]:
    """``(position, sample row or DataError)`` for each trace of ``source``."""
    if hasattr(source, "iterrows") and hasattr(source, "columns"):
        _check_frame(source)
        items: Any = _frame_items(source)
    else:
        items = json_items(source, "mlflow")
    return _traces(items, mapping, notes)


def _traces(items: Any, mapping: TraceMapping, notes: Notes) -> Iterator[tuple[int, Any]]:
    for position, item in items:
        if isinstance(item, DataError):
            yield position, item
            continue
        yield position, _trace(item, position, mapping, notes)


def _check_frame(frame: Any) -> None:
    if "spans" not in frame.columns:
        raise DataError(
            "an MLflow traces DataFrame has a 'spans' column (mlflow.search_traces()); this "
            f"one has {', '.join(map(str, frame.columns))}"
        )


def _frame_items(frame: Any) -> Iterator[tuple[int, Any]]:
    for position, (_, row) in enumerate(frame.iterrows(), start=1):
        yield (
            position,
            {
                "info": {
                    "trace_id": row.get("trace_id"),
                    "trace_metadata": row.get("trace_metadata"),
                },
                "data": {"spans": row.get("spans")},
            },
        )


def _trace(item: Any, position: int, mapping: TraceMapping, notes: Notes) -> Any:
    if hasattr(item, "to_json") and not isinstance(item, dict):  # an mlflow Trace
        item = json.loads(item.to_json())
    if not isinstance(item, dict) or not isinstance(item.get("data"), dict):
        return DataError(
            'an MLflow trace is an object {"info": ..., "data": {"spans": [...]}} '
            f"(Trace.to_json()), got {type(item).__name__}",
            line=position,
        )
    info: dict[str, Any] = item["info"] if isinstance(item.get("info"), dict) else {}
    spans = item["data"].get("spans")
    trace_id = str(info.get("trace_id") or info.get("request_id") or f"trace {position}")
    if not isinstance(spans, list) or not spans:
        return DataError(f"trace {trace_id}: no spans", sample_id=trace_id)
    made = []
    for index, raw in enumerate(spans):
        made.append(_span(raw, index, mapping, notes))
    metadata = info.get("trace_metadata")
    if isinstance(metadata, dict) and made:
        roots = [s for s in made if s.parent_id is None]
        for root in roots[:1]:
            root.metadata.update(
                {k: v for k, v in metadata.items() if not str(k).startswith("mlflow.")}
            )
    return sample_of(trace_id, made, mapping, notes)


def _json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except (ValueError, RecursionError):
            return value
    return value


def _span(raw: Any, index: int, mapping: TraceMapping, notes: Notes) -> Span:
    if not isinstance(raw, dict):
        return Span(f"#{index}", None, "", "", index, problem=f"not an object: {raw!r:.40}")
    attrs: dict[str, Any] = raw["attributes"] if isinstance(raw.get("attributes"), dict) else {}
    context: dict[str, Any] = raw["context"] if isinstance(raw.get("context"), dict) else {}
    kind = _json(attrs.get("mlflow.spanType", raw.get("span_type")))
    span_id = hex_id(raw.get("span_id") or context.get("span_id"), 8) or f"#{index}"
    parent = raw.get("parent_span_id", raw.get("parent_id"))
    start = raw.get("start_time_unix_nano", raw.get("start_time_ns"))
    span = Span(
        span_id,
        hex_id(parent, 8),
        str(raw.get("name", "")),
        kind.upper() if isinstance(kind, str) else "",
        float(start) if isinstance(start, (int, float)) else float(index),
        _json(attrs.get("mlflow.spanInputs", raw.get("inputs"))),
        _json(attrs.get("mlflow.spanOutputs", raw.get("outputs"))),
    )
    if span.kind in ("RETRIEVER", "RERANKER", "TOOL"):
        span.read_documents(lambda: _documents(span, mapping, notes))
    return span


def _documents(span: Span, mapping: TraceMapping, notes: Notes) -> list[Document] | None:
    outputs = span.output
    if isinstance(outputs, dict) and isinstance(outputs.get("documents"), list):
        outputs = outputs["documents"]
    if not isinstance(outputs, list):
        if span.kind == "TOOL" or outputs is None:
            return None
        raise DataError(f"the outputs are {type(outputs).__name__}, not a list of documents")
    if span.kind == "TOOL" and not all(isinstance(d, dict) for d in outputs):
        return None
    if len(outputs) > mapping.max_documents:
        raise DataError(
            f"returned {len(outputs)} documents, more than max_documents={mapping.max_documents}"
        )
    return [document_of(d, mapping, notes, f"outputs[{i}]") for i, d in enumerate(outputs)]
