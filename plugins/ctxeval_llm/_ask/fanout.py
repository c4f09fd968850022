"""Fan-out: one row's requests (a verdict per chunk, per statement, per entity list) sent at
once, a task each, a failure cancelling the others.

On trio (and anything that is not an asyncio task) this is an anyio task group. On asyncio the
tasks are the loop's own: anyio's task handle costs a cancel scope, an event and two
backend lookups per task, about 8% of a request's CPU at zero latency (bench/llm_throughput.py;
80 k of 960 k instructions per request, measured with callgrind). The asyncio path keeps the
task group's behaviour:

* the tasks are created in order, now, so they reach the judge's gate before the next row's
  (rows finish in order, and ``--max-cost`` stops between rows);
* the first failure cancels the others, and every task has ended before this returns or
  raises;
* failures are raised as a task group raises them: a :class:`BaseExceptionGroup` of the
  tasks' errors (cancellations left out);
* a cancellation from outside (a cancel scope of the run, the row's ``metric_timeout``)
  cancels the tasks, waits for them shielded, and is raised again (or the group of what the
  tasks raised meanwhile, as a task group does).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

import anyio

if sys.version_info < (3, 11):  # pragma: no cover - the backport
    from exceptiongroup import BaseExceptionGroup

__all__ = ["at_once"]

_GROUP_MESSAGE = "unhandled errors in a TaskGroup"  # (as anyio's on asyncio)


async def at_once(
    func: Callable[..., Coroutine[Any, Any, None]], calls: Sequence[tuple[Any, ...]], name: str
) -> None:
    """``func(*args)`` for each ``args`` of ``calls``, all at once: one task each (named
    ``name``), so a failure cancels the others; a single call runs in this task. (Running one
    of several here would save a task, but it would reach the judge's gate before its
    siblings and the earlier rows' calls, and rows would no longer finish in order: the
    ``--max-cost`` run of tests/test_cli.py finished none.)"""
    if len(calls) == 1:
        await func(*calls[0])
        return
    loop = asyncio._get_running_loop()
    if loop is None or asyncio.current_task(loop) is None:  # trio, or trio in guest mode
        async with anyio.create_task_group() as group:
            for args in calls:
                group.start_soon(func, *args, name=name)
        return
    tasks = [loop.create_task(func(*args), name=name) for args in calls]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    except BaseException:  # cancelled from outside: end the tasks, then go
        await _end(tasks)
        _raise_errors(tasks)
        raise
    if not all(task.done() for task in tasks):  # one failed: the others are cancelled
        await _end(tasks)
    _raise_errors(tasks)


async def _end(tasks: list[asyncio.Task[None]]) -> None:
    """Cancel the tasks not done and wait until they are, shielded from further cancellation
    (what a task group does on its way out)."""
    for task in tasks:
        task.cancel()
    cancelled: BaseException | None = None
    with anyio.CancelScope(shield=True):  # (shields from anyio's scopes, not task.cancel())
        while True:
            try:
                await asyncio.wait(tasks)
                break
            except asyncio.CancelledError as exc:  # a native cancel: wait on, then raise it
                cancelled = exc
    if cancelled is not None:
        raise cancelled


def _raise_errors(tasks: list[asyncio.Task[None]]) -> None:
    errors = [
        error for task in tasks if not task.cancelled() and (error := task.exception()) is not None
    ]
    if errors:
        raise BaseExceptionGroup(_GROUP_MESSAGE, errors) from None
