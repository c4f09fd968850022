"""The run context a run hands to every plugin it calls (see :class:`~ctxeval.RunContext`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio

from .registry import Registry

__all__ = ["Context"]

T = TypeVar("T")


class Context:
    """The services of one run: shared limits per resource, worker threads, the registry.

    One instance serves a whole run; plugins reach it as the ``ctx`` argument and use
    :meth:`call` for anything that spends a shared resource (an LLM's requests) and
    :meth:`run_cpu` for blocking work.

    Args:
        registry: where plugin names are resolved.
        max_concurrency: calls in flight at once, per resource.
        cpu_workers: blocking jobs at once in worker threads.
        llm: the LLM configuration of the run, for the plugins that need one.
    """

    def __init__(
        self,
        registry: Registry,
        *,
        max_concurrency: int = 16,
        cpu_workers: int = 2,
        llm: Any = None,
    ) -> None:
        self._registry = registry
        self._max_concurrency = max_concurrency
        self._limiters: dict[str, anyio.CapacityLimiter] = {}
        self._cpu = anyio.CapacityLimiter(cpu_workers)
        self.llm = llm

    @property
    def registry(self) -> Registry:
        return self._registry

    def limiter(self, resource: str) -> anyio.CapacityLimiter:
        """The shared limiter of ``resource``, created on first use."""
        limiter = self._limiters.get(resource)
        if limiter is None:
            limiter = self._limiters[resource] = anyio.CapacityLimiter(self._max_concurrency)
        return limiter

    async def call(self, func: Callable[[], Awaitable[T]], *, resource: str = "default") -> T:
        """Await ``func()`` while holding a slot of ``resource``'s limiter."""
        async with self.limiter(resource):
            return await func()

    async def run_cpu(self, func: Callable[..., T], *args: Any) -> T:
        """Run ``func(*args)`` in a worker thread so the event loop keeps going."""
        return await anyio.to_thread.run_sync(func, *args, limiter=self._cpu)
