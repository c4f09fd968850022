"""The run context each metric call receives: :class:`RowContext`.

Each metric call on a sample gets its own :class:`RowContext`, the
:class:`~ctxeval.RunContext` a plugin sees: its calls go through the run's
:class:`~ctxeval._calls.scheduler.Scheduler` (limits, retries, timeouts, budget), and it counts what
its row spent. The scheduler passes itself in; this module knows it only as the
:class:`CallServices` it needs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ctxeval._calls.meter import Meter
from ctxeval._results.results import Usage

if TYPE_CHECKING:
    from ctxeval._calls.limits import Limits
    from ctxeval._data.sample import Sample
    from ctxeval._plugins.registry import Registry

__all__ = ["CallServices", "RowContext"]

T = TypeVar("T")


class CallServices(Protocol):
    """What a :class:`RowContext` asks of the run: the services of
    :class:`~ctxeval._calls.scheduler.Scheduler`, which passes itself in."""

    llm: Any
    cache: Any
    run_folder: Path | None

    @property
    def registry(self) -> Registry: ...

    async def call(
        self,
        func: Callable[[], Awaitable[T]],
        *,
        resource: str,
        tokens: float,
        timeout: float | None,
        meter: Meter,
    ) -> T: ...

    async def run_cpu(self, func: Callable[..., T], *args: Any) -> T: ...

    def shared(self, key: str, factory: Callable[[], T]) -> T: ...

    def limits_of(self, resource: str) -> Limits: ...

    def spend(self, cost_usd: float | None) -> None: ...


class RowContext:
    """The :class:`~ctxeval.RunContext` of one metric call on one sample.

    Plugins use :meth:`call` for every request to a shared resource and :meth:`run_cpu` for
    blocking work, and report tokens, cost and cache hits with :meth:`add_usage`; the scheduler
    counts requests and retries itself. The row's ``usage`` is the sum.
    """

    def __init__(self, scheduler: CallServices, sample: Sample | None = None) -> None:
        self._scheduler = scheduler
        self._sample = sample
        self._meter = Meter()

    @property
    def registry(self) -> Registry:
        return self._scheduler.registry

    @property
    def llm(self) -> Any:
        """The run's LLM configuration (``llm=`` of :func:`ctxeval.evaluate`), or None."""
        return self._scheduler.llm

    @property
    def cache(self) -> Any:
        """The run's cache, or None."""
        return self._scheduler.cache

    @property
    def run_folder(self) -> Path | None:
        """The folder of the run's journal, or None (see :attr:`RunContext.run_folder`)."""
        return self._scheduler.run_folder

    @property
    def sample(self) -> Sample | None:
        """The sample being scored."""
        return self._sample

    async def call(
        self,
        func: Callable[[], Awaitable[T]],
        *,
        resource: str = "default",
        tokens: float = 0.0,
        timeout: float | None = None,
    ) -> T:
        """Await ``func()`` under the shared limits of ``resource``, with timeout and retries.

        Args:
            func: makes one attempt (one request); called again for each retry.
            resource: what the call spends, e.g. ``"gpt-4o-mini@https://api.openai.com/v1"``;
                calls with the same resource share one concurrency limit and rate budget.
            tokens: the tokens the call will use, estimated, for a tokens-per-minute budget.
            timeout: seconds one attempt may take (default: the run's timeout).

        Raises:
            the last error when the call failed for good (a fatal error at once; a transient
            one when ``max_attempts`` is spent), or a :class:`~ctxeval.CallTimeoutError` when
            its deadline ended it, which names the deadline and counts what the attempts
            failed with (``no answer from R within its 1 s deadline (3 attempts: HTTP 500 x3;
            last: ...)``).
        """
        return await self._scheduler.call(
            func, resource=resource, tokens=tokens, timeout=timeout, meter=self._meter
        )

    async def run_cpu(self, func: Callable[..., T], *args: Any) -> T:
        """Run blocking ``func(*args)`` in a worker thread, off the event loop."""
        return await self._scheduler.run_cpu(func, *args)

    def shared(self, key: str, factory: Callable[[], T]) -> T:
        """A run-wide object (e.g. an HTTP client), made once by ``factory``, closed at the end."""
        return self._scheduler.shared(key, factory)

    def limits(self, resource: str) -> Limits:
        """The limits the run applies to ``resource``."""
        return self._scheduler.limits_of(resource)

    def add_usage(self, usage: Usage) -> None:
        """Count ``usage`` (tokens, cost, cache hits) against this row."""
        extra = self._meter.extra
        self._meter.extra = usage if extra is None else extra + usage
        self._scheduler.spend(usage.cost_usd)

    @property
    def usage(self) -> Usage | None:
        """What this row has spent so far; None when nothing."""
        meter = self._meter
        counted = Usage(requests=meter.requests, retries=meter.retries) if meter.requests else None
        if counted is None or meter.extra is None:
            return counted or meter.extra
        return meter.extra + counted
