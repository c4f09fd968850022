"""Spans read one by one (a collector's file, a Phoenix JSONL export) grouped into traces, in
bounded memory.

A collector writes a span when it ends, and a parent ends after its children: the root span of a
trace comes last. So a trace is *complete* once its root span has been read (and the rest of the
line it came on): it is handed on at once and forgotten. At most ``max_open_traces`` traces are
open (read in part, root not yet seen) at a time; past that, the oldest open one is given up as
an error row ("no root span among its N spans..."), so memory stays bounded whatever the file
holds. A span of a trace already handed on (it came after its root) is not part of the sample:
it is counted and logged (the first few). At the end of the input, every trace still open
(no root span) is an error row naming its missing parent or its cycle.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Iterator
from typing import Final

from ctxeval import DataError

from .spans import Span

__all__ = ["MAX_OPEN_TRACES", "Grouper"]

logger = logging.getLogger("ctxeval_traces")

MAX_OPEN_TRACES: Final = 10_000
"""Traces open at once by default (``--map max_open_traces=N``)."""
MAX_SPANS: Final = 100_000
"""Spans kept of one trace: a trace with more is an error row (its other spans are counted,
not kept), so one runaway trace cannot fill the memory."""
LATE_LOGGED: Final = 20


class _Open:
    __slots__ = ("count", "first", "root", "spans")

    def __init__(self, first: int) -> None:
        self.first = first
        self.spans: list[Span] = []
        self.root = False
        self.count = 0


class Grouper:
    """Groups spans into traces; ``add`` and then ``complete`` after each line."""

    def __init__(self, max_open: int = MAX_OPEN_TRACES, *, source: str = "") -> None:
        self.max_open = max_open
        self.source = source
        self._open: OrderedDict[str, _Open] = OrderedDict()
        self._done: OrderedDict[str, None] = OrderedDict()  # recently finished (bounded)
        self._rooted: list[str] = []
        self.late = 0

    def add(self, trace_id: str, span: Span, position: int) -> None:
        """One span of ``trace_id``, read at ``position``."""
        group = self._open.get(trace_id)
        if group is None:
            if trace_id in self._done:
                self._late(trace_id, span)
                return
            group = self._open[trace_id] = _Open(position)
        group.count += 1
        if group.count <= MAX_SPANS:
            group.spans.append(span)
        if span.parent_id is None and not group.root:
            group.root = True
            self._rooted.append(trace_id)

    def is_open(self, trace_id: str) -> bool:
        """Whether ``trace_id`` has spans read and is not handed on yet."""
        return trace_id in self._open

    def complete(self, position: int) -> Iterator[tuple[int, str, list[Span] | DataError]]:
        """The traces complete after the line at ``position``; then the oldest open ones
        given up while more than ``max_open`` are open."""
        for trace_id in self._rooted:
            group = self._open.pop(trace_id, None)
            if group is not None:
                self._finished(trace_id)
                yield position, trace_id, _spans_or_error(trace_id, group)
        self._rooted.clear()
        while len(self._open) > self.max_open:
            trace_id, group = self._open.popitem(last=False)
            self._finished(trace_id)
            yield (
                group.first,
                trace_id,
                DataError(
                    f"trace {trace_id}: no root span among its {len(group.spans)} span(s) read "
                    f"(from line {group.first}) before {self.max_open} other traces were open: "
                    "the trace is incomplete, or its spans are far apart in the file",
                    sample_id=trace_id,
                    hint="raise --map max_open_traces=N if its root comes later",
                ),
            )

    def finish(self) -> Iterator[tuple[int, str, list[Span] | DataError]]:
        """The traces still open at the end (none has a root span: their spans say why, a
        missing parent or a cycle)."""
        while self._open:
            trace_id, group = self._open.popitem(last=False)
            yield group.first, trace_id, _spans_or_error(trace_id, group)
        if self.late > LATE_LOGGED:
            logger.warning(
                "%s: %d spans in all came after their trace's root span and were left out",
                self.source, self.late,
            )  # fmt: skip

    def _finished(self, trace_id: str) -> None:
        self._done[trace_id] = None
        if len(self._done) > 4 * self.max_open:
            self._done.popitem(last=False)

    def _late(self, trace_id: str, span: Span) -> None:
        self.late += 1
        if self.late <= LATE_LOGGED:
            logger.warning(
                "%s: %s of trace %s came after the trace's root span, once the trace was read: "
                "it is left out of the sample",
                self.source, span.label(), trace_id,
            )  # fmt: skip


def _spans_or_error(trace_id: str, group: _Open) -> list[Span] | DataError:
    if group.count <= MAX_SPANS:
        return group.spans
    return DataError(
        f"trace {trace_id}: {group.count} spans (from line {group.first}), more than the "
        f"{MAX_SPANS} one trace may have: its spans were counted, not kept",
        sample_id=trace_id,
    )
