"""An event loop of ctxeval's own, in a daemon thread: :class:`LoopThread`, and how any thread
or any event loop hands it work and waits for the result (a :class:`~ctxeval.Session`'s loop;
a :class:`~ctxeval.runners.BatchScorer`'s, one per worker process).

A :class:`~ctxeval.Session` is called from threads it does not own (a host's row threads) and
from event loops it does not own (a notebook's, Inspect AI's, a trio program's). Its LLM work
must still share one scheduler (one budget of calls in flight, rates, ``Retry-After`` pauses,
cost cap), one HTTP client and one cache, and those are bound to one event loop. So the session
runs one loop of its own (anyio on asyncio) in a daemon thread, and every caller hands it work:

* :meth:`LoopThread.submit` puts a coroutine function into the loop's task group without
  waiting for the loop (its own thread-safe scheduling, ``call_soon_threadsafe``), and returns
  a :class:`concurrent.futures.Future` of its result. A thread waits with ``future.result()``;
* :func:`wait_for` awaits such a future from any running loop, asyncio or trio, with the
  caller's loop free meanwhile: the future's completion wakes the caller through *its* loop's
  thread-safe scheduling (no thread of the caller's pool is held per waiting row, and no
  limit of such threads caps how many rows wait at once). A caller cancelled while it waits
  cancels the work.

Stopping (:meth:`LoopThread.stop`) cancels the tasks still running (their futures end
cancelled), awaits the ``on_stop`` clean-up (shielded), and joins the thread.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import logging
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio
import anyio.abc

from ctxeval._run.worker import thread_safe_soon

__all__ = ["LoopThread", "wait_for"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

_Work = tuple[Callable[..., Awaitable[Any]], tuple[Any, ...], "concurrent.futures.Future[Any]"]
"""A piece of work handed to the loop: a coroutine function, its arguments, its future."""


class LoopThread:
    """An anyio event loop (asyncio backend) in a daemon thread, running what it is handed.

    Args:
        name: the thread's name.
        on_start: called in the loop before it takes work (making what lives in the loop);
            an exception there is raised by :meth:`start`.
        on_stop: awaited in the loop (shielded) once the tasks still running are cancelled.
    """

    def __init__(
        self,
        *,
        name: str,
        on_start: Callable[[], None],
        on_stop: Callable[[], Awaitable[None]],
    ) -> None:
        self._on_start = on_start
        self._on_stop = on_stop
        self._ready = threading.Event()
        self._failure: BaseException | None = None
        self._soon: Callable[[Callable[[], object]], object] | None = None
        self._inbox: collections.deque[_Work] = collections.deque()
        """Work handed over and not started yet (appended by any thread)."""
        self._wake: anyio.Event | None = None
        self._stopping = False
        self._over = False
        """The loop has ended: nothing handed over now would ever run."""
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    @property
    def thread(self) -> threading.Thread:
        """The loop's thread."""
        return self._thread

    def in_loop(self) -> bool:
        """Whether the calling thread is the loop's own."""
        return threading.get_ident() == self._thread.ident

    def start(self) -> None:
        """Start the thread and wait until the loop takes work.

        Raises:
            what ``on_start`` raised (the thread has then ended).
        """
        self._thread.start()
        self._ready.wait()
        if self._failure is not None:
            self._thread.join()
            raise self._failure

    def submit(self, func: Callable[..., Awaitable[T]], *args: Any) -> concurrent.futures.Future[T]:
        """Run ``await func(*args)`` as a task of the loop; its future, at once (the caller
        does not wait for the loop). Cancelling the future cancels the task.

        Raises:
            RuntimeError: the loop is stopped.
        """
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        with self._lock:  # (so that the end of the thread cancels what it did not start)
            soon = self._soon
            if soon is None or self._stopping or self._over:
                raise RuntimeError("the loop is stopped")
            self._inbox.append((func, args, future))
            soon(self._wake_up)
        return future

    def stop(self, timeout: float) -> bool:
        """Cancel what runs, await ``on_stop``, and let the thread end; wait for it at most
        ``timeout`` seconds (not from the loop's own thread). Whether it ended."""
        soon = self._soon
        if soon is None:  # never started, or its start failed (then it ended)
            return not self._thread.is_alive()
        with self._lock, contextlib.suppress(RuntimeError):  # (RuntimeError: the loop is over)
            if not self._over:
                soon(self._request_stop)
        if self.in_loop():
            return False
        self._thread.join(timeout)
        return not self._thread.is_alive()

    # -- in the loop's thread

    def _run(self) -> None:
        try:
            anyio.run(self._main, backend="asyncio")
        except BaseException as exc:  # before the start: raised by start(); after: logged
            if not self._ready.is_set():
                self._failure = exc
            else:
                logger.error("the session's event loop failed", exc_info=exc)
        finally:
            with self._lock:
                self._over = True
                self._cancel_inbox()
            self._ready.set()

    async def _main(self) -> None:
        try:
            async with anyio.create_task_group() as group:
                self._on_start()
                self._wake = anyio.Event()
                self._soon = thread_safe_soon()
                self._ready.set()
                await self._dispatch(group)
                group.cancel_scope.cancel()
        finally:
            self._stopping = True
            self._cancel_inbox()
            with anyio.CancelScope(shield=True):
                await self._on_stop()

    async def _dispatch(self, group: anyio.abc.TaskGroup) -> None:
        """Start each piece of work handed over as a task of ``group``, until stopped. (Tasks
        are started from this task: anyio knows the loop inside a task, not in a plain
        callback of the loop.)"""
        inbox = self._inbox
        while not self._stopping:
            while inbox:
                func, args, future = inbox.popleft()
                group.start_soon(self._task, func, args, future)
            wake = self._wake = anyio.Event()
            if not inbox and not self._stopping:
                await wake.wait()

    def _wake_up(self) -> None:
        if self._stopping:
            self._cancel_inbox()
        elif self._wake is not None:
            self._wake.set()

    def _cancel_inbox(self) -> None:
        """Cancel the work handed over that will never start (the loop stops)."""
        while self._inbox:
            self._inbox.popleft()[2].cancel()

    def _request_stop(self) -> None:
        self._stopping = True
        if self._wake is not None:
            self._wake.set()

    async def _task(
        self,
        func: Callable[..., Awaitable[T]],
        args: tuple[Any, ...],
        future: concurrent.futures.Future[T],
    ) -> None:
        if future.cancelled():  # (cancelled before it started)
            return
        soon = self._soon
        with anyio.CancelScope() as scope:

            def cancelled(done: concurrent.futures.Future[T]) -> None:
                if done.cancelled() and soon is not None:
                    with contextlib.suppress(RuntimeError):  # (the loop is over)
                        soon(scope.cancel)

            future.add_done_callback(cancelled)
            try:
                value = await func(*args)
            except anyio.get_cancelled_exc_class():
                future.cancel()
                raise
            except BaseException as exc:
                if future.set_running_or_notify_cancel():
                    future.set_exception(exc)
                if not isinstance(exc, Exception):
                    raise
                return
            if future.set_running_or_notify_cancel():
                future.set_result(value)
        if scope.cancelled_caught:  # (the future was cancelled: its waiter knows)
            future.cancel()


async def wait_for(future: concurrent.futures.Future[T]) -> T:
    """The result of ``future`` (of :meth:`LoopThread.submit`), awaited in the running loop
    (asyncio or trio) without holding it; cancelling the wait cancels the future's work."""
    done = anyio.Event()
    soon = thread_safe_soon()

    def wake(_: concurrent.futures.Future[T]) -> None:
        with contextlib.suppress(Exception):  # the caller's loop is over: nobody waits
            soon(done.set)

    future.add_done_callback(wake)
    try:
        await done.wait()
    except BaseException:
        future.cancel()
        raise
    return future.result()
