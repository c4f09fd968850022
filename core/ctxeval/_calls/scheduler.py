"""The scheduler of a run: the one owner of every outside call.

One :class:`Scheduler` per run holds one :class:`~ctxeval._calls.limits.Gate` per resource (a model
at an endpoint) shared by all metrics and samples, and owns everything that decides when a call is
sent: the concurrency and rate limits (through the gates), the per-call timeout, retries with
exponential backoff and jitter (:meth:`Scheduler.backoff`, on tenacity), the ``Retry-After`` of
a 429, and the run's cost budget (:meth:`Scheduler.check_budget`). It also runs blocking work in
worker threads. Plugins reach it through their :class:`~ctxeval._calls.context.RowContext`.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import anyio

from ctxeval._calls.context import RowContext
from ctxeval._calls.deadline import AttemptClock, Deadlines
from ctxeval._calls.failures import classify, label_of, retry_after_of
from ctxeval._calls.limits import WAIT, Gate, Limits
from ctxeval._calls.meter import ATTEMPT, Meter
from ctxeval._errors import (
    BudgetExceededError,
    CallTimeoutError,
    ConnectionFailedError,
    EndpointUnreachableError,
    EndpointUnresponsiveError,
    MalformedOutputError,
    UnusableLLMError,
)
from ctxeval._plugins.hooks import AsyncCloseable
from ctxeval._plugins.registry import Registry, default_registry
from ctxeval._run.settings import RunSettings

if TYPE_CHECKING:
    from ctxeval._data.sample import Sample

__all__ = ["Scheduler"]

logger = logging.getLogger(__name__)

T = TypeVar("T")


def _log_retry(resource: str, attempt: int, exc: BaseException | None, sleep: float) -> None:
    logger.info(
        "%s: attempt %d failed (%s: %s); retrying in %.2f s",
        resource, attempt, type(exc).__name__, exc, sleep,
    )  # fmt: skip


class _CallClock:
    """One call's retry state: the time it has taken (its attempts and the waits between
    them), its failures since the resource last answered anyone else, and what each failed
    attempt failed with (for the message of a call its deadline ends)."""

    __slots__ = ("cut", "expired", "failures", "last", "mark", "spent", "streak")

    def __init__(self) -> None:
        self.spent = 0.0
        self.streak = 0
        self.mark = -1
        self.failures: list[str] = []
        """The failure of each failed attempt, in a few words (:func:`label_of`)."""
        self.last: BaseException | None = None
        """The last failure that was not a cut at the deadline."""
        self.cut = False
        """The last attempt was cut at the deadline (with what was left of it)."""
        self.expired = False
        """The deadline ended the call: no time left for another attempt."""

    def note(self, exc: BaseException) -> None:
        """Count the failed attempt that raised ``exc``."""
        self.failures.append(label_of(exc))
        self.last = exc

    def failed(self, gate: Gate) -> int:
        """Count a failure; returns the failures in a row with no success of any call to the
        resource in between (an isolated failure, while others succeed, restarts at 1)."""
        self.streak = 1 if gate.successes > self.mark >= 0 else self.streak + 1
        self.mark = gate.successes
        return self.streak


def _deadline_error(resource: str, deadline: float, clock: _CallClock) -> CallTimeoutError:
    """The error of a call its deadline ended: it names the deadline (not what was left of it
    for the last attempt) and counts what the attempts failed with, e.g. ``no answer from R
    within its 1 s deadline (3 attempts: HTTP 500 x3; last: HTTP 500 from ...)``."""
    attempts = len(clock.failures) + clock.cut
    counts: dict[str, int] = {}
    for label in clock.failures:
        counts[label] = counts.get(label, 0) + 1
    kinds = ", ".join(f"{label} x{n}" for label, n in counts.items())
    if clock.cut:
        kinds = f"{kinds}, then cut at the deadline" if kinds else "cut at the deadline"
    said = f"{attempts} attempt{'s' if attempts != 1 else ''}: {kinds}"
    if clock.last is not None:
        said += f"; last: {clock.last}"
    return CallTimeoutError(
        f"no answer from {resource} within its {deadline:g} s deadline ({said})"
    )


class Scheduler:
    """The run-wide services: gates per resource, retries, timeouts, cost budget, threads.

    Args:
        registry: where plugin names are resolved (None: the default registry, read when a
            plugin first asks for it, so that a run whose plugins never do, such as a worker
            of the ``processes`` runner scoring ID metrics, does not discover the plugins).
        settings: the run's settings (limits, retry policy, timeout, cache, cost cap).
        llm: the LLM configuration of the run, for the plugins that need one.
        cpu_workers: blocking jobs at once in worker threads.
    """

    def __init__(
        self,
        registry: Registry | None,
        settings: RunSettings | None = None,
        *,
        llm: Any = None,
        cpu_workers: int = 2,
    ) -> None:
        settings = settings or RunSettings()
        self._limits: Mapping[str, Limits] = settings.resource_limits
        self._registry = registry
        self.retry = settings.retry
        self.timeout = settings.timeout
        self.llm = llm
        self.cache = settings.cache
        self.run_folder: Path | None = (
            Path(settings.journal).parent if settings.journal is not None else None
        )
        """The folder of the run's journal, where plugins keep resumable state; None without
        a journal."""
        self.shared_limits = settings.shared_limits
        self._gates: dict[str, Gate] = {}
        self._shared: dict[str, Any] = {}
        self.max_cost: float | None = settings.max_cost_usd
        """Stop sending requests once this much (USD) has been spent."""
        self.spent = 0.0
        """USD spent so far by every row of the run (requests with a known price)."""
        self._cpu = anyio.CapacityLimiter(cpu_workers)
        self._random = random.Random()
        self.deadlines = Deadlines()
        """The one timer on the loop that keeps every attempt's deadline (asyncio)."""

    @property
    def registry(self) -> Registry:
        """Where plugin names are resolved."""
        if self._registry is None:
            self._registry = default_registry()
        return self._registry

    # --- the cost budget -------------------------------------------------------------------

    def spend(self, cost_usd: float | None) -> None:
        """Count ``cost_usd`` (of a request with a known price) against the budget."""
        if cost_usd:
            self.spent += cost_usd
            if self.shared_limits is not None:
                self.shared_limits.spend(cost_usd)

    def check_budget(self) -> None:
        """Raise :class:`~ctxeval.BudgetExceededError` once the run has spent its
        ``max_cost_usd`` (checked before each request is sent and each sample is started)."""
        if self.max_cost is not None and self.spent >= self.max_cost:
            raise BudgetExceededError(self.spent, self.max_cost)

    def gate(self, resource: str) -> Gate:
        """The gate of ``resource``, made on first use with its limits."""
        gate = self._gates.get(resource)
        if gate is None:
            limits = self._limits.get(resource, self._limits["default"])
            gate = self._gates[resource] = Gate(resource, limits, self.shared_limits)
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
            if isinstance(value, AsyncCloseable):
                with anyio.CancelScope(shield=True):
                    await value.aclose()

    def context(self, sample: Sample | None = None) -> RowContext:
        """A fresh run context for one metric call on ``sample``."""
        return RowContext(self, sample)

    def backoff(self, attempt: int, exc: BaseException) -> float:
        """Seconds to wait after the ``attempt``-th failure in a row (1-based) with ``exc``.

        Exponential backoff with jitter, and at least the ``Retry-After`` of a 429. The
        scheduler counts a call's failures in a row only while no other call to the resource
        succeeds: an isolated failure (a random 500 while the others get through) waits the
        initial backoff again, while an outage backs off exponentially.
        """
        policy = self.retry
        wait: float = min(policy.max_backoff, policy.initial_backoff * 2.0 ** (attempt - 1))
        wait += self._random.uniform(0, policy.jitter)
        if classify(exc) == "rate_limit":
            asked = retry_after_of(exc)
            if asked is not None:
                wait = max(wait, min(asked, policy.max_retry_after))
        return wait

    def limits_of(self, resource: str) -> Limits:
        """The limits of ``resource`` (its own, else the run's default)."""
        return self._limits.get(resource, self._limits["default"])

    def _attempt_limit(self, timeout: float | None, spent: float) -> float | None:
        """The timeout of the next attempt: the call timeout, cut to what is left of the
        deadline."""
        deadline = self.retry.deadline
        if deadline is None:
            return timeout
        left = max(deadline - spent, 0.001)
        return left if timeout is None else min(timeout, left)

    async def call(
        self,
        func: Callable[[], Awaitable[T]],
        *,
        resource: str,
        tokens: float,
        timeout: float | None,
        meter: Meter,
    ) -> T:
        """Await ``func()`` through the gate of ``resource``, retrying transient failures.

        Transient errors and 429s are retried until the call succeeds or its deadline
        (``retry.deadline``: the time of its attempts and of the waits between them) or
        ``retry.max_attempts`` is spent; malformed answers up to
        ``retry.max_malformed_retries`` times; fatal errors never. An
        :class:`~ctxeval.UnusableLLMError` (a refused key, an unknown model, an endpoint no
        connection ever reached) closes the gate: later calls fail at once, unsent, and the
        runner stops the run. Retries run on tenacity's ``AsyncRetrying``, sleeping through
        anyio (so trio works).

        A call its deadline ends (no time left for another attempt, or its last attempt cut at
        what was left) raises :class:`~ctxeval.CallTimeoutError` naming the deadline, not that
        leftover, and counting what the attempts failed with (:func:`_deadline_error`); out of
        ``max_attempts``, the last failure is raised as it was.
        """
        outside = _Call(self, func, resource, tokens, timeout, meter)
        clock, gate, policy = outside.clock, outside.gate, self.retry
        try:
            # The first attempt runs bare: most calls succeed, and tenacity's set-up is not free.
            try:
                return await outside.attempt()
            except Exception as exc:
                if not outside.should_retry(exc):
                    raise
                first_wait = self.backoff(clock.failed(gate), exc)
                if outside.out_of_time(1, first_wait):
                    raise
                _log_retry(resource, 1, exc, first_wait)
            await anyio.sleep(first_wait)
            clock.spent += first_wait
            return await self._retry(
                outside.attempt,
                outside.should_retry,
                outside.out_of_time,
                clock,
                gate,
                resource,
                meter,
            )
        except Exception as exc:
            final = exc
            if clock.expired and policy.deadline is not None and exc is clock.last:
                final = _deadline_error(resource, policy.deadline, clock)
            self._count_unanswered(gate, clock, final)
            if final is exc:
                raise
            raise final from exc

    def _count_unanswered(self, gate: Gate, clock: _CallClock, exc: BaseException) -> None:
        """A call to ``gate``'s resource failed with ``exc``: while no call to it ever
        succeeded, count the calls in a row that ended at their deadline or on a malformed
        answer (none refused with a 429: rate limits are waited out, not a dead judge), and
        stop the run at ``retry.unanswered_after`` of them with
        :class:`~ctxeval.EndpointUnresponsiveError`, closing the gate (later calls fail at
        once, unsent). Any other failure ends the streak."""
        if gate.successes or gate.refused is not None or isinstance(exc, ConnectionFailedError):
            return  # (a connection failure counts towards unreachable_after instead)
        if not isinstance(exc, (CallTimeoutError, MalformedOutputError)) or (
            "HTTP 429" in clock.failures
        ):
            gate.unanswered = 0
            return
        gate.unanswered += 1
        if gate.unanswered < self.retry.unanswered_after:
            return
        what = "malformed" if isinstance(exc, MalformedOutputError) else "at its deadline"
        stop = EndpointUnresponsiveError(
            f"{gate.name} never gave a usable answer: {gate.unanswered} calls in a row ended "
            f"at their deadline or on a malformed answer, and none ever succeeded (the last "
            f"ended {what}: {exc}); check that the server at the endpoint (api_base / "
            "--api-base) is the model server and is working, or raise the timeout "
            "(--timeout, LLMConfig(timeout=...)) for a judge slow to answer its first request "
            "(RetryPolicy(unanswered_after=...) sets how many such calls stop the run)"
        )
        gate.on_refused(stop)
        raise stop from exc

    async def _retry(
        self,
        attempt: Callable[[], Awaitable[T]],
        should_retry: Callable[[BaseException], bool],
        out_of_time: Callable[[int, float], bool],
        clock: _CallClock,
        gate: Gate,
        resource: str,
        meter: Meter,
    ) -> T:
        """Attempts 2 and later on tenacity's ``AsyncRetrying`` (sleeping via anyio), until
        ``out_of_time(attempts so far, next wait)``."""
        from tenacity import AsyncRetrying, RetryCallState, retry_if_exception

        def wait(state: RetryCallState) -> float:
            exc = state.outcome.exception() if state.outcome is not None else None
            assert exc is not None
            return self.backoff(clock.failed(gate), exc)

        def stop(state: RetryCallState) -> bool:
            return out_of_time(state.attempt_number + 1, state.upcoming_sleep)

        def before_sleep(state: RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome is not None else None
            sleep = state.next_action.sleep if state.next_action is not None else 0.0
            _log_retry(resource, state.attempt_number + 1, exc, sleep)

        async def sleep(seconds: float) -> None:
            await anyio.sleep(seconds)
            clock.spent += seconds

        retrying = AsyncRetrying(
            sleep=sleep,
            stop=stop,
            wait=wait,
            retry=retry_if_exception(should_retry),
            before_sleep=before_sleep,
            reraise=True,
        )
        async for retry in retrying:
            with retry:
                meter.retries += 1
                return await attempt()
        raise AssertionError(
            "unreachable: tenacity either returns or re-raises"
        )  # pragma: no cover

    async def run_cpu(self, func: Callable[..., T], *args: Any) -> T:
        """Run ``func(*args)`` in a worker thread, at most ``cpu_workers`` at once."""
        return await anyio.to_thread.run_sync(func, *args, limiter=self._cpu)


class _Call(Generic[T]):
    """One call through the :class:`Scheduler`: its state across attempts (its gate, its
    clock, the malformed answers so far) and its steps: one attempt (sent through the gate,
    timed, each failure told to the gate), whether a failure is retried, whether the call is
    out of time."""

    __slots__ = (
        "clock", "func", "gate", "limit", "malformed", "meter", "policy", "resource",
        "scheduler", "timing", "tokens",
    )  # fmt: skip

    def __init__(
        self,
        scheduler: Scheduler,
        func: Callable[[], Awaitable[T]],
        resource: str,
        tokens: float,
        timeout: float | None,
        meter: Meter,
    ) -> None:
        self.scheduler = scheduler
        self.func = func
        self.resource = resource
        self.tokens = tokens
        self.meter = meter
        self.gate = scheduler.gate(resource)
        self.policy = scheduler.retry
        self.limit = scheduler.timeout if timeout is None else timeout
        self.malformed = 0
        self.clock = _CallClock()  # this call's own time: its attempts and the waits between
        self.timing = AttemptClock(scheduler.deadlines)  # the loop's clock, the run's timer

    async def attempt(self) -> T:
        """One attempt: a slot of the gate, the budget checked at send time, ``func()``
        awaited within what is left of the call's time, the outcome told to the gate."""
        gate, clock, meter = self.gate, self.clock, self.meter
        retry = bool(clock.failures)
        lease = gate.enter_now(self.tokens, retry)  # (gate.slot(), without its awaits)
        if lease is WAIT:
            lease = await gate._enter(self.tokens, retry)
        try:
            sent_with = gate.in_flight
            self.scheduler.check_budget()  # checked at send time
            meter.requests += 1
            cut = self.scheduler._attempt_limit(self.limit, clock.spent)
            started = self.timing.now()
            sent = [True]  # until the transport says its request never left
            sending = ATTEMPT.set(sent)
            try:
                if cut is None:
                    result = await self.func()
                else:  # cut at started + cut (a TimeoutError); (inline: a coroutine less)
                    with self.timing.cut_at(started + cut) as timer:
                        result = await self.func()
                    if timer.cancelled_caught:  # (only its deadline cancels it)
                        raise TimeoutError
            except TimeoutError as exc:
                timed_out = self._timed_out(exc, cut)
                if timed_out is None:
                    raise
                raise timed_out from None
            except UnusableLLMError as exc:
                gate.on_refused(exc)
                raise
            except ConnectionFailedError as exc:
                stop = self._not_connected(exc)
                if stop is None:
                    raise
                raise stop from None
            except Exception as exc:
                self._failed(exc, sent_with)
                raise
            except BaseException:  # cancelled (a sibling failed, the run stopped)
                if not sent[0]:  # before its request left: not a request sent
                    meter.requests -= 1
                raise
            finally:
                ATTEMPT.reset(sending)
                took = self.timing.now() - started
                clock.spent += took
            # inside the slot: it counts the calls in flight with this one
            gate.on_success(sent_with, took)
            return result
        finally:
            if not gate.leave_now(lease):
                await gate._leave(lease)

    def _timed_out(self, exc: TimeoutError, cut: float | None) -> BaseException | None:
        """What an attempt that timed out raises: the deadline's error when the attempt was
        cut to what was left of it, else a CallTimeoutError naming the attempt's timeout;
        None: ``exc`` itself (a transport's CallTimeoutError)."""
        clock = self.clock
        if isinstance(exc, CallTimeoutError):
            clock.note(exc)
            return None
        if cut is not None and cut != self.limit:  # cut to what was left of the deadline
            clock.cut = True
            return _deadline_error(self.resource, self.policy.deadline or cut, clock)
        timed_out = CallTimeoutError(f"no answer from {self.resource} within {cut:g} s")
        clock.note(timed_out)
        return timed_out

    def _not_connected(self, exc: ConnectionFailedError) -> BaseException | None:
        """A connection failed: while the resource never answered, the gate counts it, and
        at ``unreachable_after`` in a row the run stops (the error returned, the gate
        closed); None: ``exc`` itself."""
        self.clock.note(exc)
        gate = self.gate
        if gate.answered != 0:
            return None
        failures = gate.on_connect_failure()
        if failures < self.policy.unreachable_after:
            return None
        stop = EndpointUnreachableError(
            f"cannot reach {self.resource}: {failures} connections failed in a "
            f"row and none ever got an answer (last: {exc}); check the "
            "endpoint (api_base / --api-base) and that the server is running"
        )
        gate.on_refused(stop)
        return stop

    def _failed(self, exc: Exception, sent_with: int | None) -> None:
        """Any other failure: noted, and told to the gate (a 429 and its Retry-After, or an
        answer that came)."""
        self.clock.note(exc)
        if classify(exc) == "rate_limit":
            self.gate.on_rate_limit(retry_after_of(exc), sent_with)
        else:
            self.gate.on_answer()

    def should_retry(self, exc: BaseException) -> bool:
        """Whether a failed attempt is tried again: malformed answers up to
        ``max_malformed_retries`` times, fatal errors never, the others always."""
        kind = classify(exc)
        if kind == "malformed":
            self.malformed += 1
            return self.malformed <= self.policy.max_malformed_retries
        return kind != "fatal"

    def out_of_time(self, attempts: int, sleep: float) -> bool:
        """Whether the call stops after ``attempts`` attempts rather than wait ``sleep``
        seconds for another: out of attempts, or of its deadline."""
        clock, policy = self.clock, self.policy
        if clock.cut:  # (the attempt cut at the deadline raised the deadline's error)
            return True
        if policy.max_attempts is not None and attempts >= policy.max_attempts:
            return True
        clock.expired = policy.deadline is not None and clock.spent + sleep >= policy.deadline
        return clock.expired
