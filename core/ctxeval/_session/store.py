"""The rows a session has scored, kept compact: :class:`RowStore`.

A session lives long (a harness's whole evaluation, or a production monitor's days) and keeps
every row it scored for :meth:`~ctxeval.Session.evaluation`. Kept as objects, a row of an ID
metric with its evidence takes about 1.4 kB, and every kept row is one more set of objects the
cycle collector walks again and again (that walk was the largest part of a session's
overhead per call). So the newest rows are kept as they are, and every :data:`COMPACT_AT` rows
are packed into one bytes object, each row as a JSON array of its fields (about 150 bytes for
an ID metric's row, about 3 µs to pack, and one object the collector never walks).
:meth:`RowStore.rows` reads them back: rows equal to the ones scored (tuples in a plugin's
details come back as lists, as from ``results.jsonl``). Rows whose details JSON cannot hold
(a plugin's own objects) are kept as they are.

Adding rows takes no lock (one atomic ``list.extend``); the thread whose rows cross the
threshold packs them, unless another thread is packing already.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any, Final

import orjson

from ctxeval._data.collector import collector_paused
from ctxeval._results.results import NO_USAGE, MetricResult, Status, Usage, _make

__all__ = ["COMPACT_AT", "RowStore"]

logger = logging.getLogger(__name__)

COMPACT_AT: Final = 8192
"""Rows kept as objects before they are packed."""


_STATUS: Final = {status.value: status for status in Status}

Fields = tuple[str | None, str | None, str, float | None, str | None, Any, dict[str, Any] | None]
"""A row as packed: sample id, metric, status, score, reason, details, usage (None: none)."""


def _fields(row: MetricResult) -> Fields:
    usage = None if row.usage.is_zero else row.usage.to_dict()
    return (row.sample_id, row.metric, row.status.value, row.score, row.reason, row.details, usage)


def _plain_mapping(value: object) -> object:
    """What ``orjson`` writes for a value it does not know: a mapping (lazily computed
    details) as a dict; anything else is not packed (TypeError)."""
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"{type(value).__name__} is not JSON")


def _row(
    sample_id: str | None,
    metric: str | None,
    status: str,
    score: float | None,
    reason: str | None,
    details: Any,
    usage: dict[str, Any] | None,
) -> MetricResult:
    """The row of packed fields (checked when it was first built)."""
    spent = NO_USAGE if usage is None else Usage.from_dict(usage)
    return _make(_STATUS[status], score, reason, details, spent, sample_id, metric)  # type: ignore[arg-type]


class RowStore:
    """A session's rows, in the order they were added (see the module)."""

    def __init__(self, compact_at: int = COMPACT_AT) -> None:
        self._recent: list[MetricResult] = []
        self._packed: list[bytes | tuple[MetricResult, ...]] = []
        """Packed rows, oldest first: bytes, or the rows themselves when they could not be
        written as JSON."""
        self._count = 0
        """Rows in :attr:`_packed`."""
        self._lock = threading.Lock()
        self._compact_at = max(1, compact_at)

    def __len__(self) -> int:
        return self._count + len(self._recent)

    def add(self, rows: Sequence[MetricResult]) -> None:
        """Keep ``rows`` (one sample's, together), after every row kept so far."""
        recent = self._recent
        recent.extend(rows)  # (atomic: nothing is lost to a packing thread, see _pack)
        if len(recent) >= self._compact_at and self._lock.acquire(blocking=False):
            try:
                self._pack()
            finally:
                self._lock.release()

    def _pack(self) -> None:
        """Pack the rows kept as objects (lock held). Rows only ever go to the end of the
        list, so its first ``n`` rows stay the ones copied while others add rows."""
        recent = self._recent
        n = len(recent)
        chunk = recent[:n]
        del recent[:n]
        packed: bytes | tuple[MetricResult, ...]
        try:
            packed = orjson.dumps([_fields(row) for row in chunk], default=_plain_mapping)
        except (TypeError, ValueError) as exc:  # (details a plugin made unwritable)
            logger.debug("rows kept unpacked: %s", exc)
            packed = tuple(chunk)
        self._packed.append(packed)
        self._count += n

    def rows(self) -> list[MetricResult]:
        """Every row kept, in the order they were added."""
        with self._lock:  # (no packing meanwhile)
            packed = list(self._packed)
            recent = list(self._recent)
        out: list[MetricResult] = []
        with collector_paused():  # (rows made by the hundred thousand: see there)
            for part in packed:
                if isinstance(part, bytes):
                    out.extend([_row(*fields) for fields in orjson.loads(part)])
                else:
                    out.extend(part)
        out.extend(recent)
        return out
