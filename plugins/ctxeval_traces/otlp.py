"""OpenInference spans in OTLP JSON, as the OpenTelemetry collector's file exporter writes them.

Each line of the file is one ``ExportTraceServiceRequest`` in protobuf JSON:
``{"resourceSpans": [{"scopeSpans": [{"spans": [...]}]}]}``. Both spellings of the fields are
read (``resourceSpans`` / ``resource_spans``, ``traceId`` / ``trace_id``...), an ``intValue``
as a number or a string, ids as hex (OTLP JSON) or base64 (protobuf JSON). A file holding one
such object over many lines (``.json``) is read whole. A folder is read file by file
(``*.json``, ``*.jsonl``, sorted by name).

The OpenInference attributes read: ``openinference.span.kind``, ``input.value``,
``output.value``, ``metadata`` (a JSON object: the root span's goes to the sample's metadata,
with ``session.id`` and ``user.id``), ``retrieval.documents.N.document.{id,content,score,
metadata}`` and ``reranker.output_documents.N.document.*``; a TOOL/MCP span's documents are its
``retrieval.documents.*`` or a JSON list of documents in its ``output.value``.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from ctxeval import DataError

from .assemble import document_of, sample_of
from .grouping import Grouper
from .mapping import Notes, TraceMapping
from .spans import Document, Span, hex_id

__all__ = ["otlp_lines", "read_otlp", "span_of"]

_VALUE_KEYS = {
    "stringValue": "s", "string_value": "s",
    "intValue": "i", "int_value": "i",
    "doubleValue": "d", "double_value": "d",
    "boolValue": "b", "bool_value": "b",
    "arrayValue": "a", "array_value": "a",
    "kvlistValue": "k", "kvlist_value": "k",
    "bytesValue": "y", "bytes_value": "y",
}  # fmt: skip
_FIELDS = ("id", "content", "score", "metadata")
DOCUMENT_PREFIXES = {"RETRIEVER": "retrieval.documents.", "RERANKER": "reranker.output_documents."}


def value_of(any_value: Any) -> Any:
    """The Python value of an OTLP ``AnyValue``."""
    if type(any_value) is dict:  # the common case first: a string
        text = any_value.get("stringValue")
        if text is not None:
            return text
    return _value_of(any_value)


def _value_of(any_value: Any) -> Any:
    if not isinstance(any_value, dict):
        return any_value
    for key, raw in any_value.items():
        kind = _VALUE_KEYS.get(key)
        if kind is None:
            continue
        if kind == "i":
            try:
                return int(raw)
            except (TypeError, ValueError):
                return raw
        if kind == "d":
            try:
                return float(raw)
            except (TypeError, ValueError):
                return raw
        if kind == "a":
            values = raw.get("values", []) if isinstance(raw, dict) else []
            return [_value_of(v) for v in values]
        if kind == "k":
            values = raw.get("values", []) if isinstance(raw, dict) else []
            return {v.get("key"): _value_of(v.get("value")) for v in values if isinstance(v, dict)}
        return raw
    return None


def _get(obj: dict[str, Any], camel: str, snake: str) -> Any:
    value = obj.get(camel)
    return obj.get(snake) if value is None else value


def span_of(raw: Any, position: int, mapping: TraceMapping, notes: Notes) -> tuple[str, Span]:
    """The trace id and the normalised span of one OTLP JSON span.

    Raises:
        DataError: the span has no trace or span id (the whole line is then bad).
    """
    if not isinstance(raw, dict):
        raise DataError(f"a span must be an object, got {type(raw).__name__}")
    trace_id = hex_id(raw.get("traceId") or raw.get("trace_id"), 16)
    span_id = hex_id(raw.get("spanId") or raw.get("span_id"), 8)
    if trace_id is None or span_id is None:
        raise DataError(f"span {raw.get('name')!r} has no traceId or spanId")
    attributes = raw.get("attributes") or []
    if isinstance(attributes, list) and len(attributes) > _most_attributes(mapping):
        return trace_id, _too_many(raw, span_id, trace_id, len(attributes), mapping)
    attrs = _attributes(attributes)
    start = raw.get("startTimeUnixNano") or raw.get("start_time_unix_nano")
    try:
        order = float(int(start)) if start is not None else float(position)
    except (TypeError, ValueError):
        order = float(position)
    kind = value_of(attrs.get("openinference.span.kind"))
    span = Span(
        span_id,
        hex_id(raw.get("parentSpanId") or raw.get("parent_span_id"), 8),
        str(raw.get("name", "")),
        kind.upper() if isinstance(kind, str) else "",
        order,
        value_of(attrs.get("input.value")),
        value_of(attrs.get("output.value")),
    )
    if kind is not None and not isinstance(kind, str):
        span.problem = f"openinference.span.kind is {type(kind).__name__}, not text"
    try:
        _fill(span, attrs, mapping, notes)
    except DataError as exc:
        span.problem = exc.problem
    return trace_id, span


def _attributes(attributes: Any) -> dict[str, Any]:
    """``{key: AnyValue}`` of a span's attribute list (items that are no key-value are left
    out)."""
    try:
        return {item["key"]: item["value"] for item in attributes}
    except (TypeError, KeyError):
        pass
    if not isinstance(attributes, list):
        return {}
    return {
        item["key"]: item.get("value")
        for item in attributes
        if isinstance(item, dict) and isinstance(item.get("key"), str)
    }


def _most_attributes(mapping: TraceMapping) -> int:
    """The attributes a span may have: five per document allowed, and a thousand more."""
    return 5 * mapping.max_documents + 1_000


def _too_many(raw: Any, span_id: str, trace_id: str, count: int, mapping: TraceMapping) -> Span:
    """A span of too many attributes to read (its documents are not read one by one)."""
    parent = hex_id(_get(raw, "parentSpanId", "parent_span_id"), 8)
    span = Span(span_id, parent, str(raw.get("name", "")), "", 0.0)
    span.problem = (
        f"has {count} attributes, more than max_documents={mapping.max_documents} documents "
        "would need (raise it with --map max_documents=N if they are meant)"
    )
    return span


def _fill(span: Span, attrs: dict[str, Any], mapping: TraceMapping, notes: Notes) -> None:
    for name in ("input", "output"):
        value = getattr(span, name)
        if value is not None and not isinstance(value, str):
            raise DataError(f"{name}.value is {type(value).__name__}, not text")
    if span.parent_id is None:
        metadata = value_of(attrs.get("metadata"))
        if isinstance(metadata, str):
            try:
                metadata = json.loads(metadata)
            except (ValueError, RecursionError):
                raise DataError("the metadata attribute is not a JSON object") from None
        if isinstance(metadata, dict):
            span.metadata.update(metadata)
        for key in ("session.id", "user.id"):
            if key in attrs:
                span.metadata[key] = value_of(attrs[key])
    prefix = DOCUMENT_PREFIXES.get(span.kind)
    if prefix is None and span.kind in ("TOOL", "MCP"):
        prefix = "retrieval.documents."
        if f"{prefix}0.document.content" not in attrs and f"{prefix}0.document.id" not in attrs:
            span.documents = _tool_documents(span, mapping, notes)
            return
    if prefix is not None and any(f"{prefix}0.document.{f}" in attrs for f in _FIELDS):
        span.loader = functools.partial(_flat_documents, span, attrs, prefix, mapping, notes)


def _flat_documents(
    span: Span, attrs: dict[str, Any], prefix: str, mapping: TraceMapping, notes: Notes
) -> list[Document] | None:
    documents: list[Document] = []
    while True:
        base = f"{prefix}{len(documents)}.document."
        found = {f: attrs[base + f] for f in _FIELDS if base + f in attrs}
        if not found:
            break
        if len(documents) >= mapping.max_documents:
            raise DataError(
                f"returned more than max_documents={mapping.max_documents} documents "
                "(raise it with --map max_documents=N if they are meant)"
            )
        raw = {f: value_of(v) for f, v in found.items()}
        where = f"{base[:-1]}"
        documents.append(document_of(raw, mapping, notes, where))
    return documents or None


def _tool_documents(span: Span, mapping: TraceMapping, notes: Notes) -> list[Document] | None:
    """A tool's documents: its output, a JSON list of documents or ``{"documents": [...]}``."""
    if not isinstance(span.output, str) or not span.output.lstrip().startswith(("[", "{")):
        return None
    try:
        value = json.loads(span.output)
    except (ValueError, RecursionError):
        return None
    if isinstance(value, dict):
        value = value.get("documents")
    if not isinstance(value, list) or not value:
        return None
    if not all(isinstance(d, dict) and ("content" in d or "page_content" in d) for d in value):
        return None
    if len(value) > mapping.max_documents:
        raise DataError(f"returned {len(value)} documents, more than max_documents")
    return [document_of(d, mapping, notes, f"output.value[{i}]") for i, d in enumerate(value)]


def otlp_lines(path: Path) -> Iterator[tuple[int, Any]]:
    """``(line, request or DataError)`` of an OTLP JSON file: one request per line, or one
    document over the whole file (a ``.json`` file that is not one per line)."""
    import orjson

    with path.open("rb") as handle:
        first = handle.readline()
        one_per_line = first.strip().endswith(b"}") or not first.strip()
        handle.seek(0)
        if not one_per_line:
            try:
                yield 1, orjson.loads(handle.read())
            except orjson.JSONDecodeError as exc:
                yield 1, DataError(f"not valid JSON: {exc}", path=str(path))
            return
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                yield number, orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                try:
                    line.decode("utf-8")
                    problem = f"not valid JSON ({exc})"
                except UnicodeDecodeError as bad:
                    problem = f"not valid UTF-8 at byte {bad.start} of the line"
                yield (
                    number,
                    DataError(
                        f"{problem}: the spans on this line are lost (their traces may be "
                        "incomplete)",
                        path=str(path),
                        line=number,
                    ),
                )


def _files(source: Any) -> list[Path]:
    if not isinstance(source, (str, os.PathLike)):
        raise DataError(
            f"the openinference reader reads a file or a folder, not a {type(source).__name__}"
        )
    path = Path(source)
    if path.is_dir():
        return sorted(p for p in path.iterdir() if p.suffix in (".json", ".jsonl", ".ndjson"))
    if not path.exists():
        raise DataError("no such file", path=str(path), hint="check the path")
    return [path]


def read_otlp(
    source: Any, mapping: TraceMapping, notes: Notes, max_open: int
) -> Iterator[tuple[int, Any]]:
    """``(line, sample row or DataError)`` for each trace of ``source`` (a source that does
    not exist is said at once)."""
    return _read_files(_files(source), mapping, notes, max_open)


def _read_files(
    paths: list[Path], mapping: TraceMapping, notes: Notes, max_open: int
) -> Iterator[tuple[int, Any]]:
    for path in paths:
        grouper = Grouper(max_open, source=str(path))
        for number, request in otlp_lines(path):
            if isinstance(request, DataError):
                yield number, request
                continue
            try:
                for trace_id, span in _spans(request, number, mapping, notes):
                    grouper.add(trace_id, span, number)
            except DataError as exc:
                yield number, exc.located(path=str(path), line=number)
            yield from _samples(grouper.complete(number), mapping, notes)
        yield from _samples(grouper.finish(), mapping, notes)


def _samples(
    groups: Iterable[tuple[int, str, Any]], mapping: TraceMapping, notes: Notes
) -> Iterator[tuple[int, Any]]:
    for position, trace_id, spans in groups:
        yield (
            position,
            spans if isinstance(spans, DataError) else sample_of(trace_id, spans, mapping, notes),
        )


def _spans(
    request: Any, number: int, mapping: TraceMapping, notes: Notes
) -> Iterator[tuple[str, Span]]:
    if not isinstance(request, dict):
        raise DataError(f"expected an OTLP object with resourceSpans, got {type(request).__name__}")
    for resource in _list(request, "resourceSpans", "resource_spans"):
        scopes = _list(resource, "scopeSpans", "scope_spans") or _list(
            resource, "instrumentationLibrarySpans", "instrumentation_library_spans"
        )
        for scope in scopes:
            for raw in _list(scope, "spans", "spans"):
                yield span_of(raw, number, mapping, notes)


def _list(obj: Any, camel: str, snake: str) -> list[Any]:
    if not isinstance(obj, dict):
        raise DataError(f"expected an object holding {camel}, got {type(obj).__name__}")
    value = _get(obj, camel, snake)
    if value is None:
        return []
    if not isinstance(value, list):
        raise DataError(f"{camel} is {type(value).__name__}, not a list")
    return value
