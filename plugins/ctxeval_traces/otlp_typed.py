"""The fast path of the OTLP JSON reader: a line decoded by ``msgspec`` into a few typed
structures, each attribute's value left as raw JSON bytes (``msgspec.Raw``) until a reader asks
for it, so the ~60 attributes of a span cost one small object each, not three dicts and their
strings.

It takes only the common spelling, the one the collector's file exporter writes (camelCase
fields, string ids, a list of ``{"key", "value"}`` attributes); :func:`decode` returns None for
any other line (snake_case fields, a wrong type anywhere, a missing id, bad JSON, or msgspec not
installed), and the reader then reads that line with the general path, which says exactly what
is wrong. Both paths give the same spans.
"""

from __future__ import annotations

from typing import Any

__all__ = ["decode", "raw_type", "raw_value", "string_decoder"]

try:
    import msgspec
except ImportError:  # the general path reads every line
    msgspec = None  # type: ignore[assignment]


def raw_type() -> Any:
    """``msgspec.Raw``, the type of a value left undecoded (None without msgspec)."""
    return None if msgspec is None else msgspec.Raw


def string_decoder() -> Any:
    """Decodes a raw value as ``{"stringValue": ...}`` (its ``.stringValue``, None when the
    value is another kind); raises a ValueError when it is not an object (None without
    msgspec)."""
    return None if msgspec is None else _STRING.decode


def raw_value(raw: Any) -> Any:
    """The JSON value of a ``msgspec.Raw``: the text of a ``{"stringValue": ...}`` at once
    (the common case), else the decoded JSON."""
    try:
        text = _STRING.decode(raw).stringValue
    except (msgspec.DecodeError, ValueError):
        text = None
    return msgspec.json.decode(raw) if text is None else text


if msgspec is not None:
    _NULL = msgspec.Raw(b"null")

    class Attribute(msgspec.Struct, gc=False):
        key: str
        value: msgspec.Raw = _NULL

    class TypedSpan(msgspec.Struct, gc=False):
        traceId: str = ""  # noqa: N815 (the OTLP JSON spelling)
        spanId: str = ""  # noqa: N815
        parentSpanId: str = ""  # noqa: N815
        name: str = ""
        startTimeUnixNano: str | int | None = None  # noqa: N815
        attributes: list[Attribute] = []  # noqa: RUF012 (msgspec copies it)
        # the other spelling's fields: a span with any of them takes the general path
        trace_id: msgspec.Raw | None = None
        span_id: msgspec.Raw | None = None
        parent_span_id: msgspec.Raw | None = None
        start_time_unix_nano: msgspec.Raw | None = None

    class _Scope(msgspec.Struct, gc=False):
        spans: list[TypedSpan] = []  # noqa: RUF012

    class _Resource(msgspec.Struct, gc=False):
        scopeSpans: list[_Scope] | None = None  # noqa: N815
        scope_spans: msgspec.Raw | None = None
        instrumentationLibrarySpans: msgspec.Raw | None = None  # noqa: N815
        instrumentation_library_spans: msgspec.Raw | None = None

    class _Request(msgspec.Struct, gc=False):
        resourceSpans: list[_Resource] | None = None  # noqa: N815
        resource_spans: msgspec.Raw | None = None

    class _String(msgspec.Struct, gc=False):
        stringValue: str | None = None  # noqa: N815

    _DECODER = msgspec.json.Decoder(_Request)
    _STRING = msgspec.json.Decoder(_String)


def decode(line: bytes) -> list[Any] | None:
    """The spans of one OTLP JSON request (``TypedSpan``), or None when the line is not in the
    common spelling (the general path reads it then)."""
    if msgspec is None:
        return None
    try:
        request = _DECODER.decode(line)
    except (msgspec.DecodeError, msgspec.ValidationError, ValueError):
        return None
    if request.resourceSpans is None or request.resource_spans is not None:
        return None
    spans: list[Any] = []
    for resource in request.resourceSpans:
        if (
            resource.scope_spans is not None
            or resource.instrumentationLibrarySpans is not None
            or resource.instrumentation_library_spans is not None
        ):
            return None
        for scope in resource.scopeSpans or ():
            for span in scope.spans:
                if not span.traceId or not span.spanId or _other_spelling(span):
                    return None
                spans.append(span)
    return spans


def _other_spelling(span: Any) -> bool:
    return (
        span.trace_id is not None
        or span.span_id is not None
        or span.parent_span_id is not None
        or span.start_time_unix_nano is not None
    )
