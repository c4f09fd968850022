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
from .otlp_typed import decode, raw_type, raw_value, string_decoder
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
_RAW = raw_type()
_STRING = string_decoder()
_HEX = "0123456789abcdef"
_KIND_OF = {
    spelling.format(kind).encode(): kind
    for kind in ("RETRIEVER", "RERANKER", "TOOL", "MCP", "LLM", "CHAIN", "AGENT", "EMBEDDING",
                 "GUARDRAIL", "EVALUATOR", "PROMPT")
    for spelling in ('{{"stringValue":"{}"}}', '{{"stringValue": "{}"}}')
}  # fmt: skip
"""The kinds of the fast path, as OTLP JSON spells them (any other spelling goes the general
way)."""
_DOCUMENT_KINDS = frozenset(("RETRIEVER", "RERANKER", "TOOL", "MCP"))
_FIRST_DOCUMENT = {
    prefix: tuple(f"{prefix}0.document.{f}" for f in _FIELDS)
    for prefix in DOCUMENT_PREFIXES.values()
}


def value_of(any_value: Any) -> Any:
    """The Python value of an OTLP ``AnyValue`` (decoded JSON, or the raw JSON bytes the fast
    path leaves undecoded)."""
    if _RAW is not None and type(any_value) is _RAW:
        any_value = raw_value(any_value)
        if type(any_value) is str:
            return any_value
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
    parent = raw.get("parentSpanId") or raw.get("parent_span_id")
    name = str(raw.get("name", ""))
    if isinstance(attributes, list) and len(attributes) > _most_attributes(mapping):
        return trace_id, _too_many(name, parent, span_id, len(attributes), mapping)
    start = raw.get("startTimeUnixNano") or raw.get("start_time_unix_nano")
    span = _span(span_id, parent, name, start, _attributes(attributes), position, mapping, notes)
    return trace_id, span


def typed_span_of(
    typed: Any, position: int, mapping: TraceMapping, notes: Notes
) -> tuple[str, Span, dict[str, Any]]:
    """:func:`span_of` of a span of the fast path (``otlp_typed.TypedSpan``); also its
    attributes, whose values are raw JSON still pointing into the line read. The common span
    (ids in lower-case hex, a kind, input and output as strings, no documents) is made here;
    any other goes the general way."""
    trace_id, span_id, parent = typed.traceId, typed.spanId, typed.parentSpanId or None
    if len(trace_id) != 32 or trace_id.strip(_HEX):
        trace_id = hex_id(trace_id, 16)
    if len(span_id) != 16 or span_id.strip(_HEX):
        span_id = hex_id(span_id, 8)
    attributes = typed.attributes
    if len(attributes) > _most_attributes(mapping):
        return trace_id, _too_many(typed.name, parent, span_id, len(attributes), mapping), {}
    attrs = {item.key: item.value for item in attributes}
    kind = _KIND_OF.get(bytes(attrs.get("openinference.span.kind", b"")))
    if kind is None or parent is None or len(parent) != 16 or parent.strip(_HEX):
        span = _span(span_id, parent, typed.name, typed.startTimeUnixNano, attrs, position,
                     mapping, notes)  # fmt: skip
        return trace_id, span, attrs
    start = typed.startTimeUnixNano
    try:
        order = float(int(start)) if start is not None else float(position)
    except (TypeError, ValueError):
        order = float(position)
    given, given_out = attrs.get("input.value"), attrs.get("output.value")
    try:
        text_in = None if given is None else _STRING(given).stringValue
        text_out = None if given_out is None else _STRING(given_out).stringValue
    except ValueError:  # (msgspec's errors are ValueErrors) not an object: read below
        text_in = text_out = None
    span = Span(span_id, parent, typed.name, kind, order, text_in, text_out)
    if (text_in is None and given is not None) or (text_out is None and given_out is not None):
        span.input, span.output = value_of(given), value_of(given_out)  # a non-text value
        _fill_or_problem(span, attrs, mapping, notes)
    elif kind in _DOCUMENT_KINDS:
        _fill_or_problem(span, attrs, mapping, notes)
    return trace_id, span, attrs


def _span(
    span_id: str,
    parent: Any,
    name: str,
    start: Any,
    attrs: dict[str, Any],
    position: int,
    mapping: TraceMapping,
    notes: Notes,
) -> Span:
    try:
        order = float(int(start)) if start is not None else float(position)
    except (TypeError, ValueError):
        order = float(position)
    kind = value_of(attrs.get("openinference.span.kind"))
    span = Span(
        span_id,
        hex_id(parent, 8),
        name,
        kind.upper() if isinstance(kind, str) else "",
        order,
        value_of(attrs.get("input.value")),
        value_of(attrs.get("output.value")),
    )
    if kind is not None and not isinstance(kind, str):
        span.problem = f"openinference.span.kind is {type(kind).__name__}, not text"
    _fill_or_problem(span, attrs, mapping, notes)
    return span


def _fill_or_problem(
    span: Span, attrs: dict[str, Any], mapping: TraceMapping, notes: Notes
) -> None:
    try:
        _fill(span, attrs, mapping, notes)
    except DataError as exc:
        span.problem = exc.problem


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


def _too_many(name: str, parent: Any, span_id: str, count: int, mapping: TraceMapping) -> Span:
    """A span of too many attributes to read (its documents are not read one by one)."""
    span = Span(span_id, hex_id(parent, 8), name, "", 0.0)
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
    if prefix is not None and any(key in attrs for key in _FIRST_DOCUMENT[prefix]):
        span.loader = functools.partial(_flat_documents, span, attrs, prefix, mapping, notes)


def _flat_documents(
    span: Span, attrs: dict[str, Any], prefix: str, mapping: TraceMapping, notes: Notes
) -> list[Document] | None:
    documents: list[Document] = []
    get = attrs.get
    while True:
        keys = _document_keys(prefix, len(documents))
        found = zip(_FIELDS, map(get, keys), strict=True)
        raw = {f: value_of(v) for f, v in found if v is not None}
        if not raw and not any(key in attrs for key in keys):
            break
        if len(documents) >= mapping.max_documents:
            raise DataError(
                f"returned more than max_documents={mapping.max_documents} documents "
                "(raise it with --map max_documents=N if they are meant)"
            )
        documents.append(document_of(raw, mapping, notes, keys[0].removesuffix(".id")))
    return documents or None


@functools.lru_cache(maxsize=4096)
def _document_keys(prefix: str, index: int) -> tuple[str, ...]:
    """The attribute keys of document ``index`` (``prefix``N.document.id, ...), made once."""
    return tuple(f"{prefix}{index}.document.{f}" for f in _FIELDS)


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


def otlp_lines(path: Path) -> Iterator[tuple[int, bytes, bool]]:
    """``(line, bytes, whole)`` of an OTLP JSON file: one request per line, or one document
    over the whole file (a ``.json`` file that is not one per line: ``whole`` is True)."""
    with path.open("rb") as handle:
        first = handle.readline()
        one_per_line = first.strip().endswith(b"}") or not first.strip()
        handle.seek(0)
        if not one_per_line:
            yield 1, handle.read(), True
            return
        for number, line in enumerate(handle, start=1):
            if line.strip():
                yield number, line, False


def _parsed(chunk: bytes, path: Path, number: int, whole: bool) -> Any:
    """The JSON of a line (or of the whole file), or the DataError saying why it is none."""
    import orjson

    try:
        return orjson.loads(chunk)
    except orjson.JSONDecodeError as exc:
        if whole:
            return DataError(f"not valid JSON: {exc}", path=str(path))
        try:
            chunk.decode("utf-8")
            problem = f"not valid JSON ({exc})"
        except UnicodeDecodeError as bad:
            problem = f"not valid UTF-8 at byte {bad.start} of the line"
        return DataError(
            f"{problem}: the spans on this line are lost (their traces may be incomplete)",
            path=str(path),
            line=number,
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
        for number, chunk, whole in otlp_lines(path):
            fresh = _add_line(grouper, chunk, number, whole, path, mapping, notes)
            if isinstance(fresh, DataError):
                yield number, fresh
            yield from _samples(grouper.complete(number), mapping, notes)
            if fresh and not isinstance(fresh, DataError):
                _detach(grouper, fresh)
        yield from _samples(grouper.finish(), mapping, notes)


def _add_line(
    grouper: Grouper,
    chunk: bytes,
    number: int,
    whole: bool,
    path: Path,
    mapping: TraceMapping,
    notes: Notes,
) -> list[tuple[str, dict[str, Any]]] | DataError:
    """Adds the spans of one line to ``grouper``: by the fast path when the line is in the
    common spelling (the attributes of the spans whose documents are still to read are
    returned), else by the general one. A line that cannot be read is its DataError."""
    typed = decode(chunk)
    if typed is not None:
        fresh = []
        for raw in typed:
            trace_id, span, attrs = typed_span_of(raw, number, mapping, notes)
            grouper.add(trace_id, span, number)
            if span.loader is not None:
                fresh.append((trace_id, attrs))
        return fresh
    request = _parsed(chunk, path, number, whole)
    if isinstance(request, DataError):
        return request
    try:
        for trace_id, span in _spans(request, number, mapping, notes):
            grouper.add(trace_id, span, number)
    except DataError as exc:
        return exc.located(path=str(path), line=number)
    return []


def _detach(grouper: Grouper, fresh: list[tuple[str, dict[str, Any]]]) -> None:
    """The raw attribute values of the spans of a trace still open once its line is done are
    copied out of the line's bytes, so an open trace does not keep a whole line in memory."""
    for trace_id, attrs in fresh:
        if grouper.is_open(trace_id):
            for key, value in attrs.items():
                if type(value) is _RAW:
                    attrs[key] = value.copy()


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
