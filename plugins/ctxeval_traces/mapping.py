"""The user's choices (``mapping=``, ``--map FIELD=PATH``): what is the question, the answer,
"the" retrieved context, the document id. Every key has a documented default (docs/traces.md
has the table); a key a reader does not know is refused with the known ones.

* ``question``: ``root`` (the root span's input; else the first LLM span's), ``llm``,
  ``retriever`` (the chosen step's query), or a span name. Default ``root``.
* ``answer``: ``root`` (else the last LLM span's output), ``llm``, or a span name.
  Default ``root``.
* ``retrieval``: ``last``, ``first``, ``reranker``, ``all`` (every step, kept as the sample's
  ``retrieval_steps``, their span names in its metadata as ``retrieval_step_spans``). Default
  ``last``.
* ``id_key``: ``id`` (fallbacks ``metadata.id``, ``metadata.doc_id``, ``metadata.doc_uri``,
  ``metadata.source``, said once), or ``metadata.KEY`` / another key, exactly. Default ``id``.
* ``content_key``: ``content`` (fallback ``page_content``), ``page_content`` (fallback
  ``content``), or another key, exactly. Default ``content``; ``page_content`` for MLflow and
  LangSmith.
* ``question_key``: the key of a JSON input holding the question (fallbacks ``query``,
  ``input``, ``user_input``, ``inputs``, ``messages``, said once). Default ``question``.
* ``tools``: ``yes`` / ``no``: TOOL and MCP spans that return documents are retrieval steps.
  Default ``yes``.
* ``max_documents``: a span with more documents is that trace's error row. Default 10000.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from ctxeval import ConfigError

__all__ = ["DEFAULTS", "Notes", "TraceMapping"]

logger = logging.getLogger("ctxeval_traces")

DEFAULTS: Final[Mapping[str, str]] = {
    "question": "root",
    "answer": "root",
    "retrieval": "last",
    "id_key": "id",
    "content_key": "content",
    "question_key": "question",
    "tools": "yes",
    "max_documents": "10000",
}
RETRIEVALS: Final = ("last", "first", "reranker", "all")
ID_FALLBACKS: Final = ("metadata.id", "metadata.doc_id", "metadata.doc_uri", "metadata.source")
CONTENT_FALLBACKS: Final = {"content": ("page_content",), "page_content": ("content",)}
QUESTION_FALLBACKS: Final = ("query", "input", "user_input", "inputs", "messages")


@dataclass(slots=True)
class TraceMapping:
    """The choices of one read, checked."""

    question: str = "root"
    answer: str = "root"
    retrieval: str = "last"
    id_key: str = "id"
    content_key: str = "content"
    question_key: str = "question"
    tools: bool = True
    max_documents: int = 10_000
    extra: dict[str, str] = field(default_factory=dict)

    @classmethod
    def parse(
        cls,
        given: Mapping[str, str],
        *,
        reader: str,
        extra: Mapping[str, str] | None = None,
        defaults: Mapping[str, str] | None = None,
    ) -> TraceMapping:
        """The mapping of ``given`` (``{FIELD: PATH}``); ``extra``: the reader's own keys
        and their defaults; ``defaults``: the reader's defaults of the common keys.

        Raises:
            ConfigError: an unknown key, or a value that is not one of the key's.
        """
        own = dict(extra or {})
        known = {**DEFAULTS, **(defaults or {}), **own}
        for key in given:
            if key not in known:
                raise ConfigError(
                    f"trace format {reader!r} has no mapping key {key!r}; the keys are: "
                    + ", ".join(f"{k} (default {v})" for k, v in known.items())
                )
        values = {**known, **given}
        if values["retrieval"] not in RETRIEVALS:
            raise ConfigError(
                f"mapping retrieval={values['retrieval']!r}: use one of {', '.join(RETRIEVALS)}"
            )
        if values["tools"] not in ("yes", "no"):
            raise ConfigError(f"mapping tools={values['tools']!r}: use yes or no")
        try:
            max_documents = int(values["max_documents"])
        except ValueError:
            max_documents = 0
        if max_documents < 1:
            raise ConfigError(
                f"mapping max_documents={values['max_documents']!r}: give a whole number >= 1"
            )
        for key in ("question", "answer", "id_key", "content_key", "question_key"):
            if not values[key].strip():
                raise ConfigError(f"mapping {key}= is empty")
        return cls(
            question=values["question"],
            answer=values["answer"],
            retrieval=values["retrieval"],
            id_key=values["id_key"],
            content_key=values["content_key"],
            question_key=values["question_key"],
            tools=values["tools"] == "yes",
            max_documents=max_documents,
            extra={k: values[k] for k in own},
        )


class Notes:
    """What one read says once: a key chosen by fallback (``page_content`` for ``content``),
    logged at the first time it is used, with the mapping key that would make it explicit."""

    def __init__(self, reader: str) -> None:
        self._reader = reader
        self._said: set[tuple[str, str]] = set()

    def fallback(self, what: str, key: str, mapping_key: str) -> None:
        if (what, key) in self._said:
            return
        self._said.add((what, key))
        logger.warning(
            "%s traces: the %s was read from %r, a fallback (said once per run); "
            "--map %s=%s (mapping={%r: %r}) makes it explicit",
            self._reader, what, key, mapping_key, key, mapping_key, key,
        )  # fmt: skip
