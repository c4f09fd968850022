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
from collections import deque
from types import TracebackType
from typing import Protocol

import anyio

__all__ = ["AttemptClock", "Cut", "Deadlines"]


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


class Deadlines:
    """The deadlines of a run's attempts on asyncio, kept by one timer on the loop (see the
    module): one per run (the scheduler's), bound to the loop of its first attempt."""

    __slots__ = ("_armed", "_loop", "_queue", "_timer")

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: deque[_Queued] = deque()
        self._timer: asyncio.TimerHandle | None = None
        self._armed = 0.0

    def on(self, loop: asyncio.AbstractEventLoop) -> Deadlines | None:
        """These deadlines, when they are kept on ``loop`` (the first loop to ask); else None."""
        if self._loop is None:
            self._loop = loop
        return self if self._loop is loop else None

    def add(self, cut: _Queued) -> bool:
        """Queue ``cut`` (False: its deadline comes before the last queued: not queued)."""
        queue = self._queue
        if queue and queue[-1].deadline > cut.deadline:
            return False
        queue.append(cut)
        if self._timer is None:
            self._arm(cut.deadline)
        return True

    def drop(self) -> None:
        """Drop the ended attempts at the front of the queue."""
        queue = self._queue
        while queue and queue[0].ended:
            queue.popleft()

    def _arm(self, when: float) -> None:
        assert self._loop is not None
        self._armed = when
        self._timer = self._loop.call_at(when, self._due)

    def _due(self) -> None:
        """The timer: cut the attempts due (by the loop's clock, or at the time the timer was
        armed for, which the loop has found due), and arm it for the next."""
        assert self._loop is not None
        self._timer = None
        now = max(self._loop.time(), self._armed)
        queue = self._queue
        while queue:
            first = queue[0]
            if not first.ended and first.deadline > now:
                self._arm(first.deadline)
                return
            queue.popleft()
            if not first.ended:
                first.fire()


class _Queued(Protocol):
    """An attempt's deadline in a :class:`Deadlines` queue."""

    deadline: float
    ended: bool

    def fire(self) -> None: ...


class AttemptClock:
    """The current task's clock (:meth:`now`) and deadlines (:meth:`cut_at`); made in the
    task that runs the attempt. ``deadlines``: the run's shared timer (:class:`Deadlines`);
    without it each deadline has a timer of its own."""

    __slots__ = ("_deadlines", "_loop", "_task")

    def __init__(self, deadlines: Deadlines | None = None) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[object] | None = None
        self._deadlines: Deadlines | None = None
        if sys.version_info >= (3, 11):  # (Task.uncancel(): a timeout takes its cancel back)
            loop = asyncio._get_running_loop()
            task = asyncio.current_task(loop) if loop is not None else None
            if task is not None:  # (trio in guest mode runs no asyncio task)
                self._loop, self._task = loop, task
                if deadlines is not None:
                    self._deadlines = deadlines.on(loop)  # type: ignore[arg-type]

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
            return _LoopDeadline(self._loop, self._task, deadline, self._deadlines)
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
            "_handle",
            "_loop",
            "_queue",
            "_task",
            "cancelled_caught",
            "deadline",
            "ended",
            "fired",
        )

        def __init__(
            self,
            loop: asyncio.AbstractEventLoop,
            task: asyncio.Task[object],
            deadline: float,
            queue: Deadlines | None = None,
        ) -> None:
            self._loop = loop
            self._task = task
            self.deadline = deadline
            self._queue = queue
            self._handle: asyncio.Handle | None = None
            self._cancelling = 0
            self.fired = False
            self.ended = False
            self.cancelled_caught = False

        def __enter__(self) -> _LoopDeadline:
            self._cancelling = self._task.cancelling()
            if self.deadline <= self._loop.time():  # due already: cut at the first await
                self._handle = self._loop.call_soon(self.fire)
            elif self._queue is None or not self._queue.add(self):  # a timer of its own
                self._handle = self._loop.call_at(self.deadline, self.fire)
            return self

        def fire(self) -> None:
            self._handle = None
            self.fired = True
            self._task.cancel()

        def __exit__(
            self,
            exc_type: type[BaseException] | None,
            exc: BaseException | None,
            traceback: TracebackType | None,
        ) -> bool:
            self.ended = True
            if self._handle is not None:
                self._handle.cancel()
                self._handle = None
            elif self._queue is not None:
                self._queue.drop()
            if not self.fired:
                return False
            if self._task.uncancel() <= self._cancelling and exc_type is asyncio.CancelledError:
                self.cancelled_caught = True
                return True
            return False
