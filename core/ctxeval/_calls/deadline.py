"""The clock and the timeout of one attempt, at asyncio's own cost on asyncio.

An attempt reads the clock when it starts and when it ends, and runs under a deadline. Through
anyio that is three backend lookups and a cancel scope per request: about 7% of a request's
CPU at zero latency (bench/llm_throughput.py; 62 k of 960 k instructions, measured with
callgrind). In an asyncio task (Python 3.11 and later) :class:`AttemptClock` reads the loop's
clock and cuts the attempt with a timer on the loop, as :func:`asyncio.timeout` does (the
task cancelled at the deadline, the cancellation taken back with ``Task.uncancel()`` when the
attempt ends); elsewhere (trio, Python 3.10) it uses anyio. Both read the same clock: anyio's
on asyncio is the loop's.
"""

from __future__ import annotations

import asyncio
import sys
from types import TracebackType
from typing import Protocol

import anyio

__all__ = ["AttemptClock", "Cut"]


class Cut(Protocol):
    """A deadline being kept: ``cancelled_caught`` once it ended the block it cut."""

    @property
    def cancelled_caught(self) -> bool: ...

    def __enter__(self) -> Cut: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool | None: ...


class AttemptClock:
    """The current task's clock (:meth:`now`) and deadlines (:meth:`cut_at`); made in the
    task that runs the attempt."""

    __slots__ = ("_loop", "_task")

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[object] | None = None
        if sys.version_info >= (3, 11):  # (Task.uncancel(): a timeout takes its cancel back)
            loop = asyncio._get_running_loop()
            task = asyncio.current_task(loop) if loop is not None else None
            if task is not None:  # (trio in guest mode runs no asyncio task)
                self._loop, self._task = loop, task

    def now(self) -> float:
        """The event loop's clock, in seconds."""
        if self._loop is not None:
            return self._loop.time()
        return anyio.current_time()

    def cut_at(self, deadline: float) -> Cut:
        """A ``with`` block that ``deadline`` (on :meth:`now`'s clock) cancels: its
        ``cancelled_caught`` says so afterwards, the cancellation having stopped there (as
        ``anyio.CancelScope(deadline=...)``, which it is off asyncio)."""
        if sys.version_info >= (3, 11) and self._loop is not None and self._task is not None:
            return _LoopDeadline(self._loop, self._task, deadline)
        return anyio.CancelScope(deadline=deadline)


if sys.version_info >= (3, 11):

    class _LoopDeadline:
        """:func:`asyncio.timeout`'s way, as a plain ``with`` block: a timer on the loop cancels
        the task at the deadline; on the way out the timer is dropped and a cancellation it made
        is taken back (``uncancel``), and stopped here when it was the only one (a cancellation
        from anywhere else, an anyio cancel scope's, goes on).

        One case ends as this block's timeout although an outer scope fell due too: when this
        timer fires first in the same turn of the loop, the task holds one cancellation, this
        block's (anyio does not cancel a task whose wait is already cancelled), and this block
        stops it. anyio delivers the outer scope's cancellation again at the next ``await`` (it
        retries while a task is inside a cancelled scope), so it is not lost; the attempt counts
        as timed out. ``asyncio.timeout`` inside an anyio scope does the same."""

        __slots__ = (
            "_cancelling",
            "_deadline",
            "_handle",
            "_loop",
            "_task",
            "cancelled_caught",
            "fired",
        )

        def __init__(
            self, loop: asyncio.AbstractEventLoop, task: asyncio.Task[object], deadline: float
        ) -> None:
            self._loop = loop
            self._task = task
            self._deadline = deadline
            self._handle: asyncio.Handle | None = None
            self._cancelling = 0
            self.fired = False
            self.cancelled_caught = False

        def __enter__(self) -> _LoopDeadline:
            self._cancelling = self._task.cancelling()
            if self._deadline <= self._loop.time():  # due already: cut at the first await
                self._handle = self._loop.call_soon(self._fire)
            else:
                self._handle = self._loop.call_at(self._deadline, self._fire)
            return self

        def _fire(self) -> None:
            self._handle = None
            self.fired = True
            self._task.cancel()

        def __exit__(
            self,
            exc_type: type[BaseException] | None,
            exc: BaseException | None,
            traceback: TracebackType | None,
        ) -> bool:
            if self._handle is not None:
                self._handle.cancel()
                self._handle = None
            if not self.fired:
                return False
            if self._task.uncancel() <= self._cancelling and exc_type is asyncio.CancelledError:
                self.cancelled_caught = True
                return True
            return False
