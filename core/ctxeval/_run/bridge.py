"""Running a run from synchronous code: :func:`run_sync`, also where a loop is running.

``evaluate`` is synchronous. From plain code it starts an event loop (``anyio.run``); where a
loop is already running in this thread (Jupyter, FastAPI handlers, async tests) it runs the work
on its own loop in a worker thread and waits for it, without ``nest_asyncio``.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Awaitable, Callable
from typing import Any, Literal, TypeVar

import anyio

from ctxeval._calls.async_library import current_async_library

if sys.version_info < (3, 11):
    from exceptiongroup import BaseExceptionGroup

__all__ = ["Backend", "run_sync", "run_to_completion"]

Backend = Literal["asyncio", "trio"]
T = TypeVar("T")


def run_to_completion(func: Callable[[], Awaitable[T]], *, backend: Backend = "asyncio") -> T:
    """``anyio.run(func)``, with Ctrl-C raised as ``KeyboardInterrupt`` on every Python and
    backend (before 3.11, asyncio lets it out as a bare ``CancelledError``; trio as an
    exception group holding it)."""
    import asyncio

    try:
        return anyio.run(func, backend=backend)
    except asyncio.CancelledError:
        if sys.version_info >= (3, 11):
            raise
        raise KeyboardInterrupt from None
    except BaseExceptionGroup as group:
        if _only_interrupts(group):
            raise KeyboardInterrupt from None
        raise


def _only_interrupts(group: BaseExceptionGroup[BaseException]) -> bool:
    """Whether every exception of ``group`` (nested groups included) is a Ctrl-C
    (``KeyboardInterrupt``, or a cancellation that came of one)."""
    import asyncio

    _, rest = group.split((KeyboardInterrupt, asyncio.CancelledError))
    interrupts, _ = group.split(KeyboardInterrupt)
    return rest is None and interrupts is not None


def run_sync(func: Callable[[], Awaitable[T]], *, backend: Backend = "asyncio") -> T:
    """Run ``func()`` to completion from synchronous code, whether or not an event loop is
    running in this thread (then in a worker thread with a loop of its own)."""
    if current_async_library() is None:
        return run_to_completion(func, backend=backend)
    outcome: dict[str, Any] = {}

    def worker() -> None:
        try:
            outcome["value"] = run_to_completion(func, backend=backend)
        except BaseException as exc:  # handed to the calling thread below
            outcome["error"] = exc

    thread = threading.Thread(target=worker, name="ctxeval-evaluate", daemon=True)
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    value: T = outcome["value"]
    return value
