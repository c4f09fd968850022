"""One trace's spans → one sample row (or the :class:`~ctxeval.DataError` saying why none).

The rules, the same for every format:

* the spans must form one tree: one root (a span without a parent), every parent in the trace,
  no cycle in the parent ids; otherwise the trace is an error row naming the span;
* the spans are ordered by start time (ties: the order read);
* a *retrieval step* is a RETRIEVER span with documents, a RERANKER span's output documents,
  or (``tools=yes``) a TOOL or MCP span that returns documents (OpenInference's
  ``retrieval.documents`` attributes, or an output that is a JSON list of documents or an
  object with a ``documents`` list); ``retrieval`` chooses "the" retrieved context among them;
  a trace without one is an error row (ctxeval's metrics all need the retrieved context);
* the step's documents give ``retrieved_contexts`` (when every one has a text) and
  ``retrieved_context_ids`` (when every one has an id); some with and some without is an error
  row naming the span and the document;
* the sample's ``id`` is the trace id; its metadata holds ``trace_id``, the chosen step's span
  (``retrieval_span``), the documents' scores (``retrieval_scores``) and the root span's
  metadata (what ``join_on`` looks in).
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter
from typing import Any

from ctxeval import DataError

from .mapping import CONTENT_FALLBACKS, ID_FALLBACKS, QUESTION_FALLBACKS, Notes, TraceMapping
from .spans import Document, Span, text_of

__all__ = ["document_of", "sample_of"]

RETRIEVAL_KINDS = ("RETRIEVER", "RERANKER")
_ORDER = attrgetter("order")
TOOL_KINDS = ("TOOL", "MCP")


def sample_of(
    trace_id: str, spans: Sequence[Span], mapping: TraceMapping, notes: Notes
) -> dict[str, Any] | DataError:
    """The sample row of the trace ``trace_id`` made of ``spans``."""
    try:
        root, ordered = _tree(spans)
        for span in ordered:
            if span.problem is not None:
                raise DataError(f"{span.label()}: {span.problem}")
        steps = _steps(ordered, mapping)
        if not steps:
            kinds = "RETRIEVER, RERANKER" + (", TOOL or MCP" if mapping.tools else "")
            raise DataError(
                f"no {kinds} span with documents among its {len(ordered)} span(s) (root "
                f"{root.label()}): nothing was retrieved to evaluate",
                hint="check that the retriever is traced",
            )
        return _row(trace_id, root, ordered, steps, mapping, notes)
    except DataError as exc:
        return DataError(
            f"trace {trace_id}: {exc.problem}", field=exc.field, sample_id=trace_id, hint=exc.hint
        )


def _tree(spans: Sequence[Span]) -> tuple[Span, list[Span]]:
    """The root and the spans in order, once the parent ids are checked."""
    by_id: dict[str, Span] = {}
    roots: list[Span] = []
    children: dict[str, list[Span]] = {}
    for span in spans:
        if span.span_id in by_id:
            raise DataError(f"two spans have the id {span.span_id} ({span.label()})")
        by_id[span.span_id] = span
        if span.parent_id is None:
            roots.append(span)
        elif span.parent_id in children:
            children[span.parent_id].append(span)
        else:
            children[span.parent_id] = [span]
    if not by_id.keys() >= children.keys():
        orphan = next(s for s in spans if s.parent_id is not None and s.parent_id not in by_id)
        raise DataError(
            f"{orphan.label()} has the parent {orphan.parent_id}, which is not in the trace: "
            "the trace is incomplete (a missing parent)"
        )
    if not roots:
        raise DataError(
            f"no root span: the parent ids of its {len(spans)} span(s) form a cycle "
            f"(from {spans[0].label()})"
        )
    if len(roots) > 1:
        raise DataError(
            f"{len(roots)} root spans ({', '.join(r.label() for r in roots[:3])}): one trace "
            "has one root"
        )
    reached, todo = 0, [roots[0]]
    while todo:
        span = todo.pop()
        reached += 1
        todo.extend(children.get(span.span_id, ()))
    if reached != len(spans):
        raise DataError(f"the parent ids form a cycle at {_cycle(spans, by_id, roots[0]).label()}")
    ordered = sorted(spans, key=_ORDER)
    return roots[0], ordered


def _cycle(spans: Sequence[Span], by_id: dict[str, Span], root: Span) -> Span:
    """A span on a cycle of parent ids, found in one walk: the parents of a span the root does
    not reach are all in the trace and never reach the root, so following them comes back to
    a span already seen."""
    reached = {root.span_id}
    todo = [root]
    children: dict[str, list[Span]] = {}
    for span in spans:
        if span.parent_id is not None:
            children.setdefault(span.parent_id, []).append(span)
    while todo:
        for child in children.get(todo.pop().span_id, ()):
            reached.add(child.span_id)
            todo.append(child)
    current = next(s for s in spans if s.span_id not in reached)
    seen: set[str] = set()
    while current.span_id not in seen:
        seen.add(current.span_id)
        assert current.parent_id is not None
        current = by_id[current.parent_id]
    return current


def _steps(ordered: Sequence[Span], mapping: TraceMapping) -> list[Span]:
    kinds = RETRIEVAL_KINDS + (TOOL_KINDS if mapping.tools else ())
    return [s for s in ordered if s.kind in kinds and s.has_documents()]


def _loaded(span: Span, mapping: TraceMapping) -> list[Document]:
    """The documents of a chosen step, read now when they were left to read."""
    if span.loader is not None:
        loader, span.loader = span.loader, None
        try:
            span.documents = loader()
        except DataError as exc:
            raise DataError(f"{span.label()}: {exc.problem}", field=exc.field) from None
    documents = span.documents or []
    if len(documents) > mapping.max_documents:
        raise DataError(
            f"{span.label()} returned {len(documents)} documents, more than "
            f"max_documents={mapping.max_documents}",
            hint="raise it with --map max_documents=N if they are meant",
        )
    return documents


def _chosen(steps: list[Span], mapping: TraceMapping) -> list[Span]:
    if mapping.retrieval == "all":
        return steps
    if mapping.retrieval == "reranker":
        rerankers = [s for s in steps if s.kind == "RERANKER"]
        if not rerankers:
            raise DataError(
                f"retrieval=reranker, but no RERANKER span returned documents (the steps: "
                f"{', '.join(s.label() for s in steps[:3])})",
                hint="choose --map retrieval=last, or trace the reranker",
            )
        return [rerankers[-1]]
    return [steps[0] if mapping.retrieval == "first" else steps[-1]]


def _row(
    trace_id: str,
    root: Span,
    ordered: list[Span],
    steps: list[Span],
    mapping: TraceMapping,
    notes: Notes,
) -> dict[str, Any]:
    chosen = _chosen(steps, mapping)
    contexts: list[str | None] = []
    ids: list[str | None] = []
    scores: list[float | None] = []
    made = []
    for span in chosen:
        step_contexts, step_ids, step_scores = _documents(span, _loaded(span, mapping))
        contexts += step_contexts
        ids += step_ids
        scores += step_scores
        step = {
            "query": _query(span),
            "retrieved_context_ids": _whole(step_ids),
            "retrieved_contexts": _whole(step_contexts),
        }
        made.append({key: value for key, value in step.items() if value is not None})
    row: dict[str, Any] = {"id": trace_id}
    question = _question(root, ordered, chosen, mapping, notes)
    if question is not None:
        row["user_input"] = question
    answer = _answer(root, ordered, mapping, notes)
    if answer is not None:
        row["response"] = answer
    if _whole(contexts) is not None:
        row["retrieved_contexts"] = contexts
    if _whole(ids) is not None:
        row["retrieved_context_ids"] = ids
    metadata: dict[str, Any] = {
        **root.metadata,
        "trace_id": trace_id,
        "retrieval_span": chosen[-1].name,
    }
    if any(s is not None for s in scores):
        metadata["retrieval_scores"] = scores
    if mapping.retrieval == "all":  # the sample's steps (#55); their spans in the metadata
        row["retrieval_steps"] = made
        metadata["retrieval_step_spans"] = [span.name for span in chosen]
    row["metadata"] = metadata
    return row


def _whole(values: list[Any]) -> list[Any] | None:
    """``values`` when none is None; None when all are (an empty list is whole)."""
    return values if all(v is not None for v in values) else None


def _documents(
    span: Span, documents: list[Document]
) -> tuple[list[str | None], list[str | None], list[float | None]]:
    contexts = [d.content for d in documents]
    ids = [d.id for d in documents]
    for name, values in (("text", contexts), ("id", ids)):
        missing = [i for i, v in enumerate(values) if v is None]
        if missing and len(missing) < len(values):
            raise DataError(
                f"{span.label()}: document {missing[0]} has no {name} but document "
                f"{next(i for i, v in enumerate(values) if v is not None)} has one",
                field="retrieved_contexts" if name == "text" else "retrieved_context_ids",
                hint=f"choose the key with --map {'content_key' if name == 'text' else 'id_key'}=",
            )
    return contexts, ids, [d.score for d in documents]


def _named(ordered: list[Span], name: str) -> Span:
    for span in ordered:
        if span.name == name:
            return span
    raise DataError(f"no span is named {name!r} (the spans: {_names(ordered)})")


def _names(ordered: list[Span]) -> str:
    return ", ".join(repr(s.name) for s in ordered[:8]) + (", ..." if len(ordered) > 8 else "")


def _question(
    root: Span, ordered: list[Span], chosen: list[Span], mapping: TraceMapping, notes: Notes
) -> str | None:
    choice = mapping.question
    llms = [s for s in ordered if s.kind == "LLM"]
    if choice == "root":
        found = _text(root.input, mapping, notes)
        if found is None and llms:
            found = _text(llms[0].input, mapping, notes)
        return found
    if choice == "llm":
        return _text(llms[0].input, mapping, notes) if llms else None
    if choice == "retriever":
        return _query(chosen[0])
    return _text(_named(ordered, choice).input, mapping, notes)


def _answer(root: Span, ordered: list[Span], mapping: TraceMapping, notes: Notes) -> str | None:
    choice = mapping.answer
    llms = [s for s in ordered if s.kind == "LLM"]
    if choice == "root":
        found = _text(root.output, mapping, notes, answer=True)
        if found is None and llms:
            found = _text(llms[-1].output, mapping, notes, answer=True)
        return found
    if choice == "llm":
        return _text(llms[-1].output, mapping, notes, answer=True) if llms else None
    return _text(_named(ordered, choice).output, mapping, notes, answer=True)


ANSWER_KEYS = ("answer", "output", "response", "content", "text", "result")
QUERY_KEYS = ("query", "question", "input", "text")


def _query(span: Span) -> str | None:
    """A retrieval step's query: its input (a text, or an object's ``query``...)."""
    return text_of(span.input, QUERY_KEYS)[0] if span.input is not None else None


def _text(value: Any, mapping: TraceMapping, notes: Notes, *, answer: bool = False) -> str | None:
    if value is None:
        return None
    if answer:
        text, _ = text_of(value, ANSWER_KEYS)
        return text
    text, key = text_of(value, (mapping.question_key, *QUESTION_FALLBACKS))
    if key is not None and key != mapping.question_key:
        notes.fallback("question", key, "question_key")
    return text


def document_of(raw: Any, mapping: TraceMapping, notes: Notes, where: str) -> Document:
    """A document given as an object (``{"id", "content" or "page_content", "score",
    "metadata"}``, the dict forms of MLflow, LangChain and OpenInference), read by the
    mapping's ``id_key`` and ``content_key`` (fallbacks said once).

    Raises:
        DataError: it is not an object, or a field has the wrong type (``where`` names it).
    """
    if not isinstance(raw, dict):
        raise DataError(f"{where}: a document must be an object, got {type(raw).__name__}")
    metadata = raw.get("metadata")
    if isinstance(metadata, str):
        metadata = _json_object(metadata)
    if metadata is not None and not isinstance(metadata, dict):
        raise DataError(f"{where}: the document's metadata is {type(metadata).__name__}")
    content = _content(raw, mapping, notes, where)
    score = raw.get("score")
    if score is not None and (isinstance(score, bool) or not isinstance(score, (int, float))):
        raise DataError(f"{where}: the document's score is {type(score).__name__}, not a number")
    return Document(
        _id(raw, metadata or {}, mapping, notes, where),
        content,
        None if score is None else float(score),
        metadata,
    )


def _json_object(text: str) -> Any:
    import orjson

    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return text


def _content(raw: dict[str, Any], mapping: TraceMapping, notes: Notes, where: str) -> str | None:
    keys = [mapping.content_key, *CONTENT_FALLBACKS.get(mapping.content_key, ())]
    for key in keys:
        value = raw.get(key)
        if value is None:
            continue
        if not isinstance(value, str):
            raise DataError(f"{where}: the document's {key} is {type(value).__name__}, not text")
        if key != mapping.content_key:
            notes.fallback("document text", key, "content_key")
        return value
    return None


def _id(
    raw: dict[str, Any], metadata: dict[str, Any], mapping: TraceMapping, notes: Notes, where: str
) -> str | None:
    keys = [mapping.id_key]
    if mapping.id_key == "id":
        keys += ID_FALLBACKS
    for key in keys:
        holder, name = (metadata, key[9:]) if key.startswith("metadata.") else (raw, key)
        value = holder.get(name)
        if value is None or value == "":
            continue
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise DataError(f"{where}: the document's {key} is {type(value).__name__}, not an id")
        if key != mapping.id_key:
            notes.fallback("document id", key, "id_key")
        return str(value)
    return None
