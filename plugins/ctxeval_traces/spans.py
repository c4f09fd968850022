"""The one shape every reader turns its spans into: :class:`Span` and :class:`Document`.

Each format's reader (OTLP JSON, MLflow, LangSmith, Phoenix) only reads its own spelling into
these; one function (:func:`ctxeval_traces.assemble.sample_of`) turns the spans of a trace into
a sample, so the same retrieval gives the same row whatever format it came in.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ctxeval import DataError

__all__ = ["Document", "Span", "hex_id", "text_of"]

_LOWER_HEX = "0123456789abcdef"
KINDS = ("RETRIEVER", "RERANKER", "TOOL", "MCP", "LLM", "CHAIN", "AGENT", "EMBEDDING")


@dataclass(slots=True)
class Document:
    """One document a span returned, as its format spells it (normalised)."""

    id: str | None
    content: str | None
    score: float | None = None
    metadata: dict[str, Any] | None = None


@dataclass(slots=True)
class Span:
    """One span, normalised.

    ``kind`` is upper case (``RETRIEVER``, ``RERANKER``, ``LLM``, ``CHAIN``, ``TOOL``...);
    ``order`` sorts the spans of a trace (the start time, or the position read);
    ``documents`` are the retriever's documents, the reranker's output documents, or a
    tool's, or ``loader`` reads them when they are used (a step that is not chosen is not
    decoded); ``problem`` says what could not be read (the trace becomes an error row).
    """

    span_id: str
    parent_id: str | None
    name: str
    kind: str
    order: float
    input: Any = None
    output: Any = None
    documents: list[Document] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    problem: str | None = None
    loader: Callable[[], list[Document] | None] | None = None

    def has_documents(self) -> bool:
        """Whether the span returned documents (read or still to read)."""
        return self.documents is not None or self.loader is not None

    def read_documents(self, read: Callable[[], list[Document] | None]) -> None:
        """Set :attr:`documents` to what ``read()`` gives; a :class:`ctxeval.DataError` there
        is this span's :attr:`problem` (its trace becomes an error row), not the reader's."""
        try:
            self.documents = read()
        except DataError as exc:
            self.problem = exc.problem

    def label(self) -> str:
        """How messages name the span."""
        return f"span {self.name!r} ({self.kind or 'no kind'}, id {self.span_id})"


def hex_id(value: Any, size: int) -> str | None:
    """A trace or span id as lower-case hex: the OTLP JSON spelling (hex) or protobuf JSON's
    (base64 of ``size`` bytes); None when empty, the value as text when it is neither."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        return str(value)
    if len(value) == 2 * size and not value.strip(_LOWER_HEX):  # the common case: as it is
        return value
    if len(value) == 2 * size:
        try:
            int(value, 16)
        except ValueError:
            pass
        else:
            return value.lower() if value[0] not in "+-" and "_" not in value else value
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return value
    if len(raw) == size:
        return raw.hex() if any(raw) else None
    return value


def text_of(value: Any, keys: tuple[str, ...]) -> tuple[str | None, str | None]:
    """The text of an input or output value and the key it was found under: a string as it
    is (a JSON object in it is read); an object's first key of ``keys`` that holds a string;
    an object of one string value. ``(None, None)`` when none is found."""
    if isinstance(value, str):
        stripped = value.lstrip()
        if not stripped.startswith("{"):
            return value, None
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):
            return value, None
    if isinstance(value, dict):
        for key in keys:
            found = value.get(key)
            if isinstance(found, str):
                return found, key
        strings = [v for v in value.values() if isinstance(v, str)]
        if len(value) == 1 and strings:
            return strings[0], next(iter(value))
    return None, None
