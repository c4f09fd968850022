"""LangSmith runs: run trees (a root run with nested ``child_runs``, as ``RunTree`` dumps it) or
flat runs (one per line or per array element, with ``trace_id`` and ``parent_run_id``, as the
client sends them and ``list_runs`` exports them), from a file, a folder, or objects in memory
(dicts, or ``RunTree``/``Run`` objects).

A run of ``run_type == "retriever"`` returns its documents in ``outputs["documents"]``
(LangChain's ``Document``: ``page_content``, ``metadata``, ``id``); a ``tool`` run whose outputs
are such documents is a retrieval step too (``tools=yes``). The question is the root run's input
(``question_key``), the answer its output; the root's ``extra.metadata`` (``ls_*`` keys aside)
goes to the sample's metadata. Flat runs are grouped into traces as spans are
(:mod:`ctxeval_traces.grouping`): the root run ends, and is sent, last.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

from ctxeval import DataError

from .assemble import document_of, sample_of
from .files import json_items
from .grouping import Grouper
from .mapping import Notes, TraceMapping
from .spans import Document, Span

__all__ = ["read_langsmith"]


def read_langsmith(
    source: Any, mapping: TraceMapping, notes: Notes, max_open: int
) -> Iterator[tuple[int, Any]]:
    """``(position, sample row or DataError)`` for each trace of ``source``."""
    items = json_items(source, "langsmith")
    grouper = Grouper(max_open, source=str(source) if isinstance(source, str) else "runs")
    return _runs(items, grouper, mapping, notes)


def _runs(
    items: Iterator[tuple[int, Any]], grouper: Grouper, mapping: TraceMapping, notes: Notes
) -> Iterator[tuple[int, Any]]:
    for position, item in items:
        if isinstance(item, DataError):
            yield position, item
            continue
        if not isinstance(item, dict):
            dump = getattr(item, "model_dump", None) or getattr(item, "dict", None)
            item = dump() if callable(dump) else item
        if not isinstance(item, dict):
            yield (
                position,
                DataError(f"a run is an object, got {type(item).__name__}", line=position),
            )
            continue
        if item.get("child_runs"):  # a whole tree: one trace
            spans = [_span(run, mapping, notes) for run in _flatten(item)]
            yield position, sample_of(_trace_id(item), spans, mapping, notes)
            continue
        grouper.add(_trace_id(item), _span(item, mapping, notes), position)
        yield from _samples(grouper.complete(position), mapping, notes)
    yield from _samples(grouper.finish(), mapping, notes)


def _samples(
    groups: Iterator[tuple[int, str, list[Span] | DataError]], mapping: TraceMapping, notes: Notes
) -> Iterator[tuple[int, Any]]:
    for where, trace_id, group in groups:
        yield (
            where,
            group if isinstance(group, DataError) else sample_of(trace_id, group, mapping, notes),
        )


def _trace_id(run: dict[str, Any]) -> str:
    return str(run.get("trace_id") or run.get("id"))


def _flatten(root: dict[str, Any]) -> Iterator[dict[str, Any]]:
    todo = [(root, None)]
    seen = 0
    while todo:
        run, parent = todo.pop()
        seen += 1
        if seen > 1_000_000:
            raise DataError("a run tree of more than 1,000,000 runs")
        if parent is not None and not run.get("parent_run_id"):
            run = {**run, "parent_run_id": parent}
        yield run
        children = run.get("child_runs") or []
        if isinstance(children, list):
            todo.extend((child, run.get("id")) for child in children if isinstance(child, dict))


def _order(run: dict[str, Any]) -> float:
    start = run.get("start_time")
    if isinstance(start, datetime):
        return start.timestamp()
    if isinstance(start, str):
        try:
            return datetime.fromisoformat(start.replace("Z", "+00:00")).timestamp()
        except ValueError:
            pass
    return 0.0


def _span(run: dict[str, Any], mapping: TraceMapping, notes: Notes) -> Span:
    parent = run.get("parent_run_id")
    kind = run.get("run_type")
    span = Span(
        str(run.get("id")),
        str(parent) if parent else None,
        str(run.get("name", "")),
        kind.upper() if isinstance(kind, str) else "",
        _order(run),
        run.get("inputs"),
        run.get("outputs"),
    )
    extra = run.get("extra")
    metadata = extra.get("metadata") if isinstance(extra, dict) else None
    if isinstance(metadata, dict):
        span.metadata.update({k: v for k, v in metadata.items() if not str(k).startswith("ls_")})
    if span.kind in ("RETRIEVER", "TOOL"):
        span.read_documents(lambda: _documents(span, mapping, notes))
    return span


def _documents(span: Span, mapping: TraceMapping, notes: Notes) -> list[Document] | None:
    outputs = span.output
    documents = outputs.get("documents") if isinstance(outputs, dict) else None
    if not isinstance(documents, list):
        if span.kind == "TOOL" or outputs is None:
            return None
        raise DataError("the outputs hold no list 'documents'")
    if len(documents) > mapping.max_documents:
        raise DataError(
            f"returned {len(documents)} documents, more than max_documents={mapping.max_documents}"
        )
    return [document_of(d, mapping, notes, f"documents[{i}]") for i, d in enumerate(documents)]
