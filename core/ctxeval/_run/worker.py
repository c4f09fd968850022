"""Synchronous plugin work with a time bound: :class:`SyncWorker`.

A deterministic metric scores with a plain ``score``/``score_batch`` call. Called in the event
loop's thread, a call that never returns would hold the whole run, and Ctrl-C could not stop it
(the loop never gets control back to cancel). So a run hands its synchronous calls to a worker
thread of its own and waits for them, which costs one thread hand-over per batch of calls (a
chunk of samples on the fast path: ``bench/timeouts.py`` measures it).

The worker does nothing per call but count (a call costs ~0.1 µs more than in the loop's
thread). The waiting side looks at the count every half ``timeout``: a call that was in progress
at two looks a ``timeout`` apart is *cut* (so a call is cut after ``timeout`` to 1.5 x
``timeout``): the worker thread gets :class:`WorkCut` raised inside the call
(``PyThreadState_SetAsyncExc``, at the next Python bytecode it runs), the call's result is
:data:`TIMED_OUT`, and the worker goes on with the next call. A cut that lands just after its
call ended (in the worker's own code, or in the next call) is recognised as late: nothing is
lost, the next call is made again. Cancelling the wait (Ctrl-C, a run that stops) cuts the call
in progress the same way.

A call that runs no Python bytecode (blocked in C code: a ``sleep``, a lock, a C extension's long
loop) cannot be cut. After :data:`GRACE` seconds the worker thread is given up (it is a daemon
thread: it cannot keep the process alive), the call is :data:`TIMED_OUT` all the same, and a new
thread does the calls after it. Whatever the given-up thread returns later is dropped.

See docs/decisions/0004-bounded-sync-work.md.
"""

from __future__ import annotations

import contextlib
import contextvars
import ctypes
import logging
import math
import queue
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Final

import anyio
import anyio.lowlevel

__all__ = [
    "GRACE",
    "TIMED_OUT",
    "SyncWorker",
    "TimedOut",
    "WorkCut",
    "raise_in",
    "thread_safe_soon",
]

logger = logging.getLogger(__name__)

GRACE: Final = 1.0
"""Seconds a cut call may take to stop before its thread is given up."""


class WorkCut(BaseException):
    """Raised inside a synchronous plugin call that ran past its deadline or was cancelled.

    A ``BaseException``, so that a plugin's ``except Exception`` does not swallow it.
    """


class TimedOut:
    """The type of :data:`TIMED_OUT`."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "TIMED_OUT"


TIMED_OUT: Final = TimedOut()
"""The result of a call that was cut at its deadline."""

Function = Callable[[Any], object]


class _Pending:
    __slots__ = ()


_PENDING: Final = _Pending()


class _Job:
    """A sequence of calls handed to the worker, and how far it got."""

    def __init__(
        self,
        functions: Sequence[Function],
        arguments: Sequence[Any],
        timeout: float | None,
        wake: Callable[[], None],
    ):
        self.functions = functions
        self.arguments = arguments
        self.timeout = math.inf if timeout is None else timeout
        self.wake = wake
        self.context = contextvars.copy_context()
        self.results: list[object] = [_PENDING] * len(functions)
        self.position = 0
        """The call being made (or next to be made)."""
        self.owner: threading.Thread | None = None
        """The thread working on the job (None before it starts, and when given up)."""
        self.cut_at = -1
        """The position a cut was sent for, and when."""
        self.cut_time = 0.0
        self.over = False
        """No further call is to be made (all made, or nobody waits any more)."""
        self.abandoned = False
        """Nobody waits for the results any more (the wait was cancelled)."""


class SyncWorker:
    """A run's worker thread for synchronous plugin calls (see the module docstring).

    One job at a time is expected (the run waits for each); :meth:`close` lets the thread end.
    """

    def __init__(self, name: str = "ctxeval-sync") -> None:
        self._name = name
        self._lock = threading.Lock()
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    async def run(
        self, functions: Sequence[Function], arguments: Sequence[Any], timeout: float | None
    ) -> list[object]:
        """Call ``functions[i](arguments[i])`` for each ``i`` in turn in the worker thread,
        each call cut after ``timeout`` seconds (to 1.5 x ``timeout``; None: never), and return
        their results: the value returned, the exception raised (any ``BaseException``), or
        :data:`TIMED_OUT`."""
        if len(functions) != len(arguments):
            raise ValueError(f"{len(functions)} function(s) for {len(arguments)} argument(s)")
        if not functions:
            return []
        finished = anyio.Event()
        job = _Job(functions, arguments, timeout, _waker(finished))
        with self._lock:
            self._hand_over(job)
        try:
            await self._watch(job, finished)
        finally:
            if not finished.is_set():  # cancelled: stop the call in progress, make no other
                with self._lock:
                    job.over = job.abandoned = True
                    self._cut(job)
        return job.results

    def close(self) -> threading.Thread | None:
        """Let the worker thread end once its job is done (a new one starts when needed);
        the thread told to end, if there was one (to join)."""
        with self._lock:
            thread = self._thread
            if thread is not None:
                self._jobs.put(None)
                self._thread = None
            return thread

    # -- the waiting side

    async def _watch(self, job: _Job, finished: anyio.Event) -> None:
        look = None if job.timeout == math.inf else max(job.timeout / 2, 0.001)
        seen, seen_at = -1, 0.0  # the position at a look, and when it was first seen there
        while True:
            wait = look
            if job.cut_at >= 0 and job.cut_at == job.position:
                wait = max(0.0, job.cut_time + GRACE - time.monotonic())
            with anyio.move_on_after(wait):
                await finished.wait()
            if finished.is_set():
                return
            with self._lock:
                now, position = time.monotonic(), job.position
                if job.owner is None or position != seen:
                    seen, seen_at = (position, now) if job.owner is not None else (-1, 0.0)
                elif job.cut_at != position:
                    if now - seen_at >= job.timeout:
                        self._cut(job)
                elif now - job.cut_time >= GRACE:
                    self._give_up(job)

    def _cut(self, job: _Job) -> None:
        """Raise :class:`WorkCut` in the call in progress (with the lock held)."""
        if job.owner is None or job.owner.ident is None or job.cut_at == job.position:
            return
        job.cut_at, job.cut_time = job.position, time.monotonic()
        raise_in(job.owner.ident, WorkCut)
        logger.debug("cut call %d of a job in %s", job.position, job.owner.name)

    def _give_up(self, job: _Job) -> None:
        """The cut call is stuck outside Python: leave its thread, go on in a new one (with the
        lock held)."""
        logger.warning(
            "a synchronous plugin call did not stop within %g s of its cut (it is blocked "
            "outside Python); its thread is left behind and the run goes on in a new one",
            GRACE,
        )
        if job.owner is not None and job.owner.ident is not None:  # once more, for a plugin
            raise_in(job.owner.ident, WorkCut)  # that swallowed the first
        job.results[job.position] = TIMED_OUT
        job.position += 1
        job.owner = self._thread = None
        self._hand_over(job)

    # -- the worker side

    def _hand_over(self, job: _Job) -> None:
        """Queue ``job`` for the worker thread, started if there is none (lock held)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._serve, name=self._name, daemon=True)
            self._thread.start()
        self._jobs.put(job)

    def _serve(self) -> None:
        me = threading.current_thread()
        while True:
            try:
                if not self._serve_one(me):
                    return
            except WorkCut:  # a cut that landed outside a job: too late to matter
                continue

    def _serve_one(self, me: threading.Thread) -> bool:
        """Do the next job; False when this thread is to end."""
        job = self._jobs.get()
        if job is None:
            return False
        with self._lock:
            if self._thread is not me:  # given up meanwhile: the job is for another thread
                self._jobs.put(job)
                return False
            job.owner = me
        job.context.copy().run(self._work, job, me)  # (a copy: a given-up thread may still
        # be inside the job's context)
        with self._lock:
            return self._thread is me  # (else given up: a new thread took over)

    def _work(self, job: _Job, me: threading.Thread) -> None:
        while True:
            try:
                self._make_calls(job, me)
                break
            except WorkCut:
                if not self._after_cut(job, me):
                    return
        with self._lock:
            if job.owner is not me:
                return
            job.over = True
        if not job.abandoned:
            job.wake()

    @staticmethod
    def _make_calls(job: _Job, me: threading.Thread) -> None:
        """The calls from ``job.position`` on, as fast as they go."""
        functions, arguments, results = job.functions, job.arguments, job.results
        position, end = job.position, len(functions)
        while position < end and not job.over:
            try:
                result = functions[position](arguments[position])
            except WorkCut:
                raise
            except BaseException as exc:  # a plugin's failure, whatever it is, is its row's
                result = exc
            if job.owner is not me:
                return  # given up while the call ran: its result is dropped
            results[position] = result
            position += 1
            job.position = position

    def _after_cut(self, job: _Job, me: threading.Thread) -> bool:
        """Account for a :class:`WorkCut` that reached the worker; False to stop the job."""
        with self._lock:
            if job.owner is not me or job.over:
                return False
            position = job.position
            if position < len(job.functions):
                if job.results[position] is not _PENDING:
                    job.position = position + 1  # it landed after the call was recorded
                elif job.cut_at == position:
                    job.results[position] = TIMED_OUT
                    job.position = position + 1
                # else: a late cut, meant for the call before, landed in this one: made again
            return True


def thread_safe_soon() -> Callable[[Callable[[], object]], object]:
    """The running loop's own thread-safe scheduling (``call_soon_threadsafe`` or
    ``run_sync_soon``): a function that has the loop call a function soon, callable from any
    thread without waiting for the loop. It raises once the loop is closed."""
    native: Any = anyio.lowlevel.current_token().native_token  # asyncio's loop, trio's token
    soon: Callable[[Callable[[], object]], object] = (
        native.call_soon_threadsafe
        if hasattr(native, "call_soon_threadsafe")
        else native.run_sync_soon
    )
    return soon


def _waker(event: anyio.Event) -> Callable[[], None]:
    """A function that sets ``event`` from another thread, without waiting for the loop (see
    :func:`thread_safe_soon`)."""
    soon = thread_safe_soon()

    def wake() -> None:
        with contextlib.suppress(Exception):  # the run is over: nobody waits any more
            soon(event.set)

    return wake


def raise_in(thread_id: int, exc: type[BaseException] | None) -> None:
    """Raise ``exc`` in thread ``thread_id`` at its next bytecode (None: withdraw a pending
    one)."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(thread_id), ctypes.py_object(exc) if exc is not None else None
    )
