"""The scheduler of a run, and the run context each metric call receives.

One :class:`Scheduler` owns every outside call of a run: one :class:`~ctxeval.limits.Gate` per
resource (a model at an endpoint), shared by all metrics and samples; the retry policy; the
per-call timeout; the worker threads for blocking work. Each metric call on a sample gets a
:class:`RowContext`, which is the :class:`~ctxeval.RunContext` a plugin sees: it goes through the
scheduler and counts what its row spent.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

import anyio

from .errors import AuthenticationError, BudgetExceededError, CallTimeoutError, ConfigError
from .limits import Gate, Limits
from .registry import Registry
from .results import Usage
from .retry import RetryPolicy, classify, retry_after_of

__all__ = ["RowContext", "Scheduler"]

logger = logging.getLogger(__name__)

T = TypeVar("T")


class Scheduler:
    """The run-wide services: gates per resource, retries, timeouts, worker threads.

    Args:
        registry: where plugin names are resolved.
        limits: the limits of every resource, or a mapping from resource name to limits
            (the key ``"default"`` applies to resources not named).
        retry: the retry policy.
        timeout: seconds one call attempt may take (None: no limit).
        cpu_workers: blocking jobs at once in worker threads.
        llm: the LLM configuration of the run, for the plugins that need one.
        cache: a cache for plugins to use (see :class:`~ctxeval.RunContext`), or None.
    """

    def __init__(
        self,
        registry: Registry,
        *,
        limits: Limits | Mapping[str, Limits] | None = None,
        retry: RetryPolicy | None = None,
        timeout: float | None = 120.0,
        cpu_workers: int = 2,
        llm: Any = None,
        cache: Any = None,
    ) -> None:
        if timeout is not None and not timeout > 0:
            raise ConfigError(f"timeout must be None or positive, got {timeout!r}")
        if isinstance(limits, Limits) or limits is None:
            self._limits: Mapping[str, Limits] = {"default": limits or Limits()}
        else:
            self._limits = dict(limits)
            self._limits.setdefault("default", Limits())
        self.registry = registry
        self.retry = retry or RetryPolicy()
        self.timeout = timeout
        self.llm = llm
        self.cache = cache
        self._gates: dict[str, Gate] = {}
        self._shared: dict[str, Any] = {}
        self.max_cost: float | None = None
        """Stop sending requests once this much (USD) has been spent."""
        self.spent = 0.0
        """USD spent so far by every row of the run (requests with a known price)."""
        self._cpu = anyio.CapacityLimiter(cpu_workers)
        self._random = random.Random()

    def gate(self, resource: str) -> Gate:
        """The gate of ``resource``, made on first use with its limits."""
        gate = self._gates.get(resource)
        if gate is None:
            limits = self._limits.get(resource, self._limits["default"])
            gate = self._gates[resource] = Gate(resource, limits)
        return gate

    @property
    def gates(self) -> Mapping[str, Gate]:
        """The gates made so far, by resource."""
        return dict(self._gates)

    def shared(self, key: str, factory: Callable[[], T]) -> T:
        """The run-wide object under ``key``, made by ``factory`` on first use.

        Objects with an ``aclose()`` (an HTTP client, say) are closed when the run ends.
        """
        if key not in self._shared:
            self._shared[key] = factory()
        value: T = self._shared[key]
        return value

    async def aclose(self) -> None:
        """Close the run-wide objects that can be closed."""
        shared, self._shared = self._shared, {}
        for value in shared.values():
            close = getattr(value, "aclose", None)
            if close is not None:
                with anyio.CancelScope(shield=True):
                    await close()

    def context(self) -> RowContext:
        """A fresh run context for one metric call on one sample."""
        return RowContext(self)

    def backoff(self, attempt: int, exc: BaseException) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based) with ``exc``.

        Exponential backoff with jitter, and at least the ``Retry-After`` of a 429.
        """
        policy = self.retry
        wait: float = min(policy.max_backoff, policy.initial_backoff * 2.0 ** (attempt - 1))
        wait += self._random.uniform(0, policy.jitter)
        if classify(exc) == "rate_limit":
            asked = retry_after_of(exc)
            if asked is not None:
                wait = max(wait, min(asked, policy.max_retry_after))
        return wait

    async def call(
        self,
        func: Callable[[], Awaitable[T]],
        *,
        resource: str,
        tokens: float,
        timeout: float | None,
        meter: _Meter,
    ) -> T:
        """Await ``func()`` through the gate of ``resource``, retrying transient failures.

        Retries run on tenacity's ``AsyncRetrying``, sleeping through anyio (so trio works):
        transient errors and 429s are retried up to ``retry.max_attempts`` attempts in all,
        malformed answers up to ``retry.max_malformed_retries`` times, fatal errors never.
        """
        gate = self.gate(resource)
        limit = self.timeout if timeout is None else timeout
        malformed = 0

        async def attempt() -> T:
            async with gate.slot(tokens):
                if self.max_cost is not None and self.spent >= self.max_cost:
                    raise BudgetExceededError(self.spent, self.max_cost)  # checked at send time
                meter.requests += 1
                try:
                    if limit is None:
                        return await func()
                    with anyio.fail_after(limit):
                        return await func()
                except TimeoutError as exc:
                    if isinstance(exc, CallTimeoutError):
                        raise
                    raise CallTimeoutError(
                        f"no answer from {resource} within {limit:g} s"
                    ) from None
                except Exception as exc:
                    if classify(exc) == "rate_limit":
                        gate.on_rate_limit(retry_after_of(exc))
                    elif isinstance(exc, AuthenticationError):
                        gate.on_refused(exc)
                    raise

        def should_retry(exc: BaseException) -> bool:
            nonlocal malformed
            kind = classify(exc)
            if kind == "malformed":
                malformed += 1
                return malformed <= self.retry.max_malformed_retries
            return kind != "fatal"

        # The first attempt runs bare: most calls succeed, and tenacity's set-up is not free.
        try:
            result = await attempt()
        except Exception as exc:
            if self.retry.max_attempts == 1 or not should_retry(exc):
                raise
            first_failure = exc
        else:
            gate.on_success()
            return result
        return await self._retry(attempt, first_failure, should_retry, resource, meter, gate)

    async def _retry(
        self,
        attempt: Callable[[], Awaitable[T]],
        first_failure: BaseException,
        should_retry: Callable[[BaseException], bool],
        resource: str,
        meter: _Meter,
        gate: Gate,
    ) -> T:
        """Attempts 2 to ``max_attempts`` on tenacity's ``AsyncRetrying`` (sleeping via anyio)."""
        from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt

        def log(number: int, exc: BaseException | None, sleep: float) -> None:
            logger.info(
                "%s: attempt %d failed (%s: %s); retrying in %.2f s",
                resource, number, type(exc).__name__, exc, sleep,
            )  # fmt: skip

        def wait(state: RetryCallState) -> float:  # tenacity counts from our second attempt
            exc = state.outcome.exception() if state.outcome is not None else None
            assert exc is not None
            return self.backoff(state.attempt_number + 1, exc)

        def before_sleep(state: RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome is not None else None
            sleep = state.next_action.sleep if state.next_action is not None else 0.0
            log(state.attempt_number + 1, exc, sleep)

        first_wait = self.backoff(1, first_failure)
        log(1, first_failure, first_wait)
        await anyio.sleep(first_wait)
        retrying = AsyncRetrying(
            sleep=anyio.sleep,
            stop=stop_after_attempt(self.retry.max_attempts - 1),
            wait=wait,
            retry=retry_if_exception(should_retry),
            before_sleep=before_sleep,
            reraise=True,
        )
        async for retry in retrying:
            with retry:
                meter.retries += 1
                result = await attempt()
                gate.on_success()
                return result
        raise AssertionError(
            "unreachable: tenacity either returns or re-raises"
        )  # pragma: no cover

    async def run_cpu(self, func: Callable[..., T], *args: Any) -> T:
        """Run ``func(*args)`` in a worker thread, at most ``cpu_workers`` at once."""
        return await anyio.to_thread.run_sync(func, *args, limiter=self._cpu)


class _Meter:
    """What one row has spent so far."""

    __slots__ = ("extra", "requests", "retries")

    def __init__(self) -> None:
        self.requests = 0
        self.retries = 0
        self.extra: Usage | None = None


class RowContext:
    """The :class:`~ctxeval.RunContext` of one metric call on one sample.

    Plugins use :meth:`call` for every request to a shared resource and :meth:`run_cpu` for
    blocking work, and report tokens, cost and cache hits with :meth:`add_usage`; the scheduler
    counts requests and retries itself. The row's ``usage`` is the sum.
    """

    def __init__(self, scheduler: Scheduler) -> None:
        self._scheduler = scheduler
        self._meter = _Meter()

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
            one when the retries are spent).
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

    def add_usage(self, usage: Usage) -> None:
        """Count ``usage`` (tokens, cost, cache hits) against this row."""
        extra = self._meter.extra
        self._meter.extra = usage if extra is None else extra + usage
        if usage.cost_usd:
            self._scheduler.spent += usage.cost_usd

    @property
    def usage(self) -> Usage | None:
        """What this row has spent so far; None when nothing."""
        meter = self._meter
        counted = Usage(requests=meter.requests, retries=meter.retries) if meter.requests else None
        if counted is None or meter.extra is None:
            return counted or meter.extra
        return meter.extra + counted
