"""Explicit field mapping shared by the host adapters: documents to texts and IDs, the
reference IDs, and a :class:`ctxeval.Sample` from the fields a host gave.

Nothing here guesses: a document's text is its ``page_content`` or its ``content`` (or the
document itself when it is a string), its ID the first of the configured keys that it has;
documents of which some have an ID and some have none are an error that names the document,
as are documents without text. Errors are :class:`ctxeval.DataError` naming the field; the
adapters turn them into that row's error result, never into a score.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from ctxeval import DataError, Sample

__all__ = [
    "DEFAULT_ID_KEYS",
    "TEXT_KEYS",
    "Documents",
    "build_sample",
    "document_id",
    "document_text",
    "read_documents",
    "reference_ids",
    "text_list",
]

TEXT_KEYS: Final = ("page_content", "content")
"""Where a document's text is read, in this order (LangChain and MLflow ``Document`` use
``page_content``; LlamaIndex-style and many hand-made retrievers ``content``)."""

DEFAULT_ID_KEYS: Final = ("id", "metadata.doc_uri", "metadata.id")
"""Where a document's ID is read, in this order: the document's own ``id``, then its
metadata's ``doc_uri`` (MLflow's convention), then its metadata's ``id``. A dotted key reads
a nested mapping; the first key whose value is a non-empty string or an integer wins."""


def _get(document: Any, key: str) -> Any:
    if isinstance(document, Mapping):
        return document.get(key)
    return getattr(document, key, None)


def document_text(document: Any) -> str | None:
    """The text of one document: the string itself, else its ``page_content``, else its
    ``content`` (a mapping's key or an object's attribute); None when it has none."""
    if isinstance(document, str):
        return document
    for key in TEXT_KEYS:
        value = _get(document, key)
        if isinstance(value, str):
            return value
    return None


def document_id(document: Any, keys: Sequence[str] = DEFAULT_ID_KEYS) -> str | None:
    """The ID of one document: the first of ``keys`` (dotted for nested mappings) that holds
    a non-empty string or an integer, as a string; None when none does."""
    if isinstance(document, str):
        return None
    for key in keys:
        value: Any = document
        for part in key.split("."):
            value = _get(value, part)
            if value is None:
                break
        if isinstance(value, str) and value:
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
    return None


class Documents:
    """The texts and IDs of retrieved (or reference) documents, in their order.

    ``texts`` is None when no document has a text, ``ids`` None when no document has an ID.
    """

    __slots__ = ("ids", "texts")

    def __init__(self, texts: tuple[str, ...] | None, ids: tuple[str, ...] | None) -> None:
        self.texts = texts
        self.ids = ids


def read_documents(
    documents: object, *, field: str, id_keys: Sequence[str] = DEFAULT_ID_KEYS
) -> Documents:
    """Texts and IDs of a list of documents (strings, mappings or objects).

    Raises:
        DataError: ``documents`` is not a list, or only some documents have a text or an ID
            (the message names the first one without).
    """
    if documents is None:
        return Documents(None, None)
    if isinstance(documents, (str, bytes)) or not isinstance(documents, Sequence):
        raise DataError(
            f"expected a list of documents, got {type(documents).__name__}",
            field=field,
            hint="a retriever returns a list of documents (each with page_content or content)",
        )
    texts = [document_text(d) for d in documents]
    ids = [document_id(d, id_keys) for d in documents]
    return Documents(
        _all_or_none(texts, field, f"text ({' or '.join(TEXT_KEYS)})"),
        _all_or_none(ids, field, f"ID ({', '.join(id_keys)})"),
    )


def _all_or_none(values: list[str | None], field: str, what: str) -> tuple[str, ...] | None:
    missing = [i for i, value in enumerate(values) if value is None]
    if len(missing) == len(values) and values:
        return None
    if missing:
        raise DataError(
            f"document {missing[0]} of {len(values)} has no {what}, while others have one",
            field=field,
            hint="give every document the same fields, or none of them",
        )
    return tuple(v for v in values if v is not None)


def text_list(value: object, *, field: str) -> tuple[str, ...] | None:
    """A list of strings (or of documents with a text), or None."""
    if value is None:
        return None
    if isinstance(value, str):
        raise DataError(
            "expected a list of strings, got a single string",
            field=field,
            hint=f'wrap it in a list: "{field}": ["..."]',
        )
    texts = read_documents(value, field=field, id_keys=()).texts
    return texts if texts is not None else ()


def reference_ids(value: object, *, field: str) -> Any:
    """Reference context IDs as given: a list of IDs, or a mapping ``{id: grade}``; None when
    absent. (Checked by :class:`ctxeval.Sample`.)"""
    if value is None or isinstance(value, Mapping):
        return value
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise DataError(
            f"expected a list of IDs or a mapping of ID to grade, got {type(value).__name__}",
            field=field,
        )
    return list(value)


def build_sample(**fields: Any) -> Sample:
    """A :class:`ctxeval.Sample` from the given fields (None values left out).

    Raises:
        DataError: a field has the wrong type (the message names it).
    """
    return Sample(**{name: value for name, value in fields.items() if value is not None})
