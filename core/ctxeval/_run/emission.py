"""Rows leave a run in input order, in batches, with a bounded window of samples in flight.

Samples finish in any order (one waits for an LLM, the next needs none); the :class:`Emitter`
holds each finished sample's rows until every earlier sample is out, then hands them to the
reader in batches (fewer hand-overs between tasks). At most ``samples_in_flight`` samples are
started and not yet emitted, so memory stays bounded even behind one slow sample.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence

import anyio

from ctxeval._results.results import MetricResult

__all__ = ["BATCH_ROWS", "Emitter"]

BATCH_ROWS = 256
"""Rows handed to the reader at once (samples that waited for outside calls go at once)."""
_BATCH_SECONDS = 0.05
"""The longest a finished row waits in a batch while the run keeps producing."""


class Emitter:
    """Emits the rows of finished samples in input order (see the module's description)."""

    def __init__(
        self, send: Callable[[Sequence[MetricResult]], Awaitable[None]], samples_in_flight: int
    ) -> None:
        self._send = send
        self._window = anyio.Semaphore(samples_in_flight)
        self._finished: dict[int, list[MetricResult]] = {}
        self._next = 0
        self._emitting = False
        self._batch: list[MetricResult] = []
        self._last_flush = time.monotonic()

    async def admit(self) -> None:
        """Wait for a place in the window for one more sample (sending what is ready first,
        so that the reader can free places)."""
        try:
            self._window.acquire_nowait()
        except anyio.WouldBlock:
            await self.flush()
            await self._window.acquire()

    async def done(self, index: int, rows: list[MetricResult], *, eager: bool) -> None:
        """Sample ``index`` is complete: emit it and every later one already complete, in order.

        ``eager`` sends at once, as the samples that waited for outside calls do. Only one
        task emits at a time: a task that finds another one emitting leaves its rows to it.
        """
        self._finished[index] = rows
        if self._emitting:
            return
        self._emitting = True
        try:
            while True:
                while self._next in self._finished:
                    self._batch.extend(self._finished.pop(self._next))
                    self._next += 1
                    self._window.release()
                if self._batch and (
                    eager
                    or len(self._batch) >= BATCH_ROWS
                    or time.monotonic() - self._last_flush >= _BATCH_SECONDS
                ):
                    await self.flush()
                    continue  # others may have finished while we waited
                break
        finally:
            self._emitting = False

    async def send_now(self, rows: Sequence[MetricResult]) -> None:
        """Send ``rows`` at once, bypassing the window (the deterministic fast path's chunks,
        which are complete and in order: a :class:`~ctxeval._results.columns.RowBlock` each)."""
        if rows:
            await self._send(rows)

    async def flush(self) -> None:
        """Send the rows emitted so far to the reader."""
        batch, self._batch = self._batch, []
        self._last_flush = time.monotonic()
        if batch:
            await self._send(batch)
