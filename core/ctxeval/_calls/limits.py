"""Shared limits on a resource (one LLM model at one endpoint): concurrency and rates.

A :class:`Gate` is what every call to a resource passes through, whatever metric or sample it
serves:

* at most ``max_concurrency`` calls in flight (:class:`Slots`);
* optional requests-per-minute and tokens-per-minute budgets (:class:`TokenBucket`);
* overload: the call that got a 429 waits its ``Retry-After`` out before its retry (without
  holding a slot), and, unless the resource lately answered calls with as many in flight as
  there are now (as many taken as refused, of the latest calls), the allowed concurrency drops
  to the calls it is still taking (the others in flight): a provider that caps the calls in
  flight is held at its cap, while refusals at random (a busy shared provider) leave the
  concurrency alone. A second 429 in a
  row to a call that was alone in flight (the resource refuses everyone, as when a quota is
  spent) makes every new call wait the ``Retry-After`` out too;
* adaptive concurrency: each run of successes as long as the current limit raises it by one,
  back up to ``max_concurrency`` (four times as long a run to try again the concurrency a 429
  last refused), when calls wait for a slot: enough of them to keep the slots busy while a
  refused try waits out the last ``Retry-After`` (near the end of the work, a refused try would
  only make the run longer). With ``adaptive=False`` the limit stays, and two 429s in a
  row (no success in between) pause the resource.

With :class:`SharedLimits` (``RunSettings(shared_limits=...)``), the concurrency, rates, pauses
and cost cap are counted across every process that shares them (``ctxeval_ray``'s budget actor
is one): each call also holds a lease from it while in flight, and the gate's own rate budgets
are left to it.
"""

from __future__ import annotations

import logging
import math
from collections import deque
from contextlib import AbstractAsyncContextManager
from typing import Protocol, runtime_checkable

import anyio
import attrs

from ctxeval._plugins.validators import boolean, optional_positive_number, positive_int

__all__ = ["WAIT", "Gate", "Limits", "SharedLimits", "Slots", "TokenBucket"]

WAIT = object()
"""What :meth:`Gate.enter_now` gives when the slot must be waited for."""

logger = logging.getLogger(__name__)


@attrs.frozen(kw_only=True)
class Limits:
    """The limits of one resource.

    Attributes:
        max_concurrency: calls in flight at once (default 16).
        requests_per_minute: requests started per minute, or None for no limit.
        tokens_per_minute: tokens (as estimated by the caller) per minute, or None.
        adaptive: back off on 429 and climb back afterwards (default True).
    """

    max_concurrency: int = attrs.field(default=16, validator=positive_int)
    requests_per_minute: float | None = attrs.field(
        default=None, validator=optional_positive_number
    )
    tokens_per_minute: float | None = attrs.field(default=None, validator=optional_positive_number)
    adaptive: bool = attrs.field(default=True, validator=boolean)


@runtime_checkable
class SharedLimits(Protocol):
    """Limits shared with other processes: one budget for every worker of a cluster.

    A gate with shared limits asks them for a lease before each request is sent and gives it
    back when the request ends; everything else stays per process (retries, the adaptive
    concurrency below the shared cap). ``ctxeval_ray.SharedBudget`` is the implementation
    behind a Ray actor; any object with these methods works.
    """

    async def acquire(self, resource: str, tokens: float) -> object:
        """Wait until a request to ``resource`` (estimated at ``tokens`` tokens) fits every
        sharer's limits: calls in flight, requests and tokens per minute, a pause. Returns a
        lease for :meth:`release`; raises :class:`~ctxeval.BudgetExceededError` once the
        shared cost cap is reached."""
        ...

    async def release(self, resource: str, lease: object) -> None:
        """The request holding ``lease`` ended (whatever its outcome)."""
        ...

    def pause(self, resource: str, seconds: float) -> None:
        """A ``Retry-After`` came back: every sharer waits ``seconds`` before its next request
        to ``resource`` (returns at once; the pause applies as soon as it arrives)."""
        ...

    def spend(self, cost_usd: float) -> None:
        """Count ``cost_usd`` against the shared cost cap (returns at once)."""
        ...


class Slots:
    """At most :attr:`total` holders at once, served first come, first served, except that
    a call's retry goes before the calls not started yet (``acquire(retry=True)``).

    Retries first: a call's deadline counts its own attempts and the waits between them, not
    its turns in the queue, so a retry queued behind every call not yet started (FIFO) made
    each call's deadline take N / concurrency turns of the queue: 200 calls to a judge that
    never answers all in progress at once, none ending before all had been tried, the run
    lasting about N x the deadline / concurrency (#56). Served first, the calls started end
    within about their deadline, and new ones start in the gaps (a retry's backoff).

    :attr:`total` may change while slots are held: raised, it lets waiters in at once;
    lowered below the slots held, newcomers wait until enough holders have left.
    :class:`anyio.CapacityLimiter` does the same, but yields to the event loop on every
    acquisition, a free slot or not (anyio's rule that every ``await`` is a checkpoint): one
    more turn of the event loop for each LLM request a run sends. A free slot is taken here
    without one; a call that waits, waits on an :class:`anyio.Event` (trio as asyncio), and a
    call cancelled while it waits, or just after a slot was handed to it, leaves none held.
    """

    def __init__(self, total: int) -> None:
        self._total = total
        self._held = 0
        self._waiting: deque[anyio.Event] = deque()
        self._retries: deque[anyio.Event] = deque()  # served before _waiting

    @property
    def total(self) -> int:
        """The slots there are (holders allowed at once)."""
        return self._total

    @total.setter
    def total(self, value: int) -> None:
        self._total = value
        self._hand_over()

    @property
    def held(self) -> int:
        """The slots held now."""
        return self._held

    @property
    def waiting(self) -> int:
        """The calls waiting for a slot."""
        return len(self._waiting) + len(self._retries)

    def take_now(self, retry: bool = False) -> bool:
        """Take a slot if :meth:`acquire` would take it at once; whether it did."""
        if self._held < self._total and not self._retries and (retry or not self._waiting):
            self._held += 1
            return True
        return False

    async def acquire(self, retry: bool = False) -> None:
        """Take a slot: at once when one is free and nobody waits (no retry, for a retry),
        else in turn; a ``retry`` (of a call already started) before the others."""
        if self.take_now(retry):
            return
        turn = anyio.Event()
        queue = self._retries if retry else self._waiting
        queue.append(turn)
        try:
            await turn.wait()
        except BaseException:  # cancelled: give back the slot handed over meanwhile, if one was
            if turn.is_set():
                self.release()
            else:
                queue.remove(turn)
            raise

    def release(self) -> None:
        """Give a slot back (the next waiter gets it)."""
        self._held -= 1
        self._hand_over()

    def _hand_over(self) -> None:
        while self._held < self._total and (self._retries or self._waiting):
            self._held += 1  # held for the waiter, which is woken holding it
            (self._retries or self._waiting).popleft().set()

    async def __aenter__(self) -> None:
        await self.acquire()

    async def __aexit__(self, *exc: object) -> None:
        self.release()


class _Slot:
    """:meth:`Gate.slot`: a class, not an ``asynccontextmanager`` (one per LLM request; a
    generator's set-up costs twice as much)."""

    __slots__ = ("_gate", "_lease", "_retry", "_tokens")

    def __init__(self, gate: Gate, tokens: float, retry: bool) -> None:
        self._gate = gate
        self._tokens = tokens
        self._retry = retry
        self._lease: object = None

    async def __aenter__(self) -> int:
        self._lease = await self._gate._enter(self._tokens, self._retry)
        return self._gate.in_flight

    async def __aexit__(self, *exc: object) -> None:
        await self._gate._leave(self._lease)


class TokenBucket:
    """A budget of ``per_minute`` units that refills continuously; :meth:`take` waits for units.

    It holds at most ``burst`` units (default: a minute's worth), and starts full.
    """

    def __init__(self, per_minute: float, burst: float | None = None) -> None:
        self.capacity = float(per_minute if burst is None else burst)
        self.rate = float(per_minute) / 60.0
        self._tokens = self.capacity
        self._stamp: float | None = None
        self._lock = anyio.Lock()

    def _refill(self) -> None:
        now = anyio.current_time()
        if self._stamp is not None:
            self._tokens = min(self.capacity, self._tokens + (now - self._stamp) * self.rate)
        self._stamp = now

    async def take(self, amount: float = 1.0) -> None:
        """Wait until ``amount`` units are available and spend them (first come, first served)."""
        amount = min(float(amount), self.capacity)
        async with self._lock:
            self._refill()
            while self._tokens < amount:
                await anyio.sleep((amount - self._tokens) / self.rate)
                self._refill()
            self._tokens -= amount


class Gate:
    """Every call to one resource passes through its gate (see the module's description)."""

    def __init__(self, name: str, limits: Limits, shared: SharedLimits | None = None) -> None:
        self.name = name
        self.limits = limits
        self.shared = shared
        """Limits shared with other processes, when there are (then they hold the rates)."""
        self._slots = Slots(limits.max_concurrency)
        local_rates = shared is None
        self._requests = (
            TokenBucket(limits.requests_per_minute)
            if limits.requests_per_minute and local_rates
            else None
        )
        self._tokens = (
            TokenBucket(limits.tokens_per_minute)
            if limits.tokens_per_minute and local_rates
            else None
        )
        self._paused_until = -math.inf
        self._successes = 0
        self._refused_at = math.inf  # the concurrency a 429 last said was too much
        self._retry_after_seen = 0.0  # the Retry-After of the last 429
        self._call_seconds = 0.0  # how long a successful call takes (smoothed)
        self.in_flight = 0
        """Calls in flight now."""
        self.peak_in_flight = 0
        """The most calls ever in flight at once."""
        self.rate_limited = 0
        """429 answers seen."""
        self._refusals_in_a_row = 0  # 429s since the last success
        self.refused: BaseException | None = None
        """The error that closed this gate (no request of the run can succeed), if one did."""
        self.answered = 0
        """Calls that got an answer (successes and refusals alike)."""
        self.successes = 0
        """Calls that succeeded."""
        self.connect_failures = 0
        """Connection failures in a row (reset by any answer)."""
        self.unanswered = 0
        """Calls in a row that ended at their deadline or malformed, while none succeeded."""
        self._recent: deque[tuple[int, bool]] = deque(maxlen=max(8, 2 * limits.max_concurrency))
        """The latest answers: the calls in flight with each, and whether it was taken."""

    @property
    def concurrency(self) -> int:
        """The concurrency allowed now (lower than the maximum after 429s)."""
        return self._slots.total

    def slot(self, tokens: float = 0.0, *, retry: bool = False) -> AbstractAsyncContextManager[int]:
        """Hold one call slot: waits out a pause, the rate budgets and the concurrency limit.

        Gives (``async with gate.slot() as sent_with``) the calls in flight as this one is
        sent, itself included (give it to :meth:`on_success`). Once the resource is known
        unusable (a refused key...), no further request is sent: the slot raises that error at
        once. A ``retry`` (an attempt after the first of a call) gets a slot before the calls
        not started yet (:class:`Slots`).
        """
        return _Slot(self, tokens, retry)

    def enter_now(self, tokens: float, retry: bool = False) -> object:
        """:meth:`_enter` when it has nothing to wait for (no pause, no rate budget, no shared
        limits, a free slot): the slot taken without an ``await`` (one LLM request each: a
        coroutine per layer of :meth:`slot` was a tenth of the scheduler's cost, #58);
        :data:`WAIT` when it would wait (then ``await`` :meth:`_enter`). Leave with
        :meth:`leave_now`, else :meth:`_leave`."""
        self._check_refused()
        if (
            self._paused_until != -math.inf
            or self._requests is not None
            or (self._tokens is not None and tokens > 0)
            or self.shared is not None
            or not self._slots.take_now(retry)
        ):
            return WAIT
        self.in_flight += 1
        if self.in_flight > self.peak_in_flight:
            self.peak_in_flight = self.in_flight
        return None

    def leave_now(self, lease: object) -> bool:
        """Give back a slot without an ``await`` when nothing shared is held (``lease`` is
        None); whether it did (else ``await`` :meth:`_leave`)."""
        if self.shared is not None:
            return False
        self.in_flight -= 1
        self._slots.release()
        return True

    async def _enter(self, tokens: float, retry: bool = False) -> object:
        """Wait for a slot and take it (see :meth:`slot`); the shared lease, if any."""
        self._check_refused()
        if self._paused_until != -math.inf:
            await self._wait_for_pause()
        if self._requests is not None:
            await self._requests.take(1)
        if self._tokens is not None and tokens > 0:
            await self._tokens.take(tokens)
        await self._slots.acquire(retry)
        try:
            self._check_refused()
            if self._paused_until != -math.inf:  # a 429 may have come in while we queued
                await self._wait_for_pause()
            lease = None if self.shared is None else await self.shared.acquire(self.name, tokens)
        except BaseException:
            self._slots.release()
            raise
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        return lease

    async def _leave(self, lease: object) -> None:
        """Give back the slot :meth:`_enter` took (and the shared lease)."""
        self.in_flight -= 1
        try:
            if self.shared is not None:
                with anyio.CancelScope(shield=True):
                    await self.shared.release(self.name, lease)
        finally:
            self._slots.release()

    async def _wait_for_pause(self) -> None:
        while True:
            delay = self._paused_until - anyio.current_time()
            if delay <= 0:
                self._paused_until = -math.inf  # over: not looked at again until the next
                return
            await anyio.sleep(delay)

    def on_rate_limit(self, retry_after: float | None, sent_with: int | None = None) -> None:
        """A 429 arrived (called inside the refused call's slot; ``sent_with`` is what
        :meth:`slot` yielded for it: the calls in flight when it was sent).

        Adaptive limits drop below what the resource refused (the calls in flight when the
        refused call was sent), unless, of the latest calls sent with as many in flight or
        more, the resource took at least as many as it refused: then the refusal was not about
        concurrency, and the limit stays. If this call
        was alone in flight and the last answer was a 429 too, the resource refuses everyone:
        new calls wait ``retry_after`` out. Fixed limits (``adaptive=False``) pause on the
        second 429 in a row, whatever is in flight.
        """
        self.rate_limited += 1
        self.on_answer()
        if retry_after:
            self._retry_after_seen = retry_after
            if self.shared is not None:  # every sharer waits it out
                self.shared.pause(self.name, retry_after)
        self._refusals_in_a_row += 1
        if self.limits.adaptive:
            level = self.in_flight if sent_with is None else sent_with
            self._recent.append((level, False))
            taken = max(1, level - 1)
            # the resource takes as many when, lately, calls sent with as many in flight were
            # taken at least as often as refused (a lucky call of a capped burst does not count)
            took = sum(1 if ok else -1 for at, ok in self._recent if at >= level)
            if taken < self.concurrency and took < 0:
                self._successes = 0  # the climb back starts again from here
                self._refused_at = level
                self._slots.total = taken
                logger.info("%s: rate limited; concurrency lowered to %d", self.name, taken)
            refused_everyone = self.in_flight <= 1 and self._refusals_in_a_row >= 2
        else:
            refused_everyone = self._refusals_in_a_row >= 2
        if retry_after and refused_everyone:
            self._paused_until = max(self._paused_until, anyio.current_time() + retry_after)

    def _check_refused(self) -> None:
        if self.refused is not None:
            error = type(self.refused)(
                f"{self.refused} (not sent: an earlier request to {self.name} was refused)"
            )
            error.original = self.refused  # type: ignore[attr-defined]  # what to report
            raise error

    def on_refused(self, exc: BaseException) -> None:
        """No request to the resource can succeed (refused key, unknown model, unreachable):
        fail every later call at once, without sending it."""
        if self.refused is None:
            self.refused = exc
            logger.info("%s: %s; failing the remaining calls without sending them", self.name, exc)

    def on_answer(self) -> None:
        """The resource answered (whatever the answer): it is reachable."""
        self.answered += 1
        self.connect_failures = 0

    def on_connect_failure(self) -> int:
        """A call could not connect; returns the connection failures in a row."""
        self.connect_failures += 1
        return self.connect_failures

    def on_success(self, sent_with: int | None = None, seconds: float | None = None) -> None:
        """A call succeeded (called inside its slot; ``sent_with`` is what :meth:`slot`
        yielded): after as many successes as the current limit, raise it by one.

        It records how many calls the resource took at once: the calls in flight both when
        this one was sent and when it was answered (the smaller of the two, so that calls
        refused meanwhile, or answered just before, are not counted).
        """
        self.on_answer()
        self.successes += 1
        if seconds is not None:  # how long a call takes, smoothed
            self._call_seconds = (
                seconds if not self._call_seconds else 0.9 * self._call_seconds + 0.1 * seconds
            )
        level = self.in_flight if sent_with is None else min(sent_with, self.in_flight)
        self._recent.append((level, True))
        self._refusals_in_a_row = 0
        if not self.limits.adaptive or self.concurrency >= self.limits.max_concurrency:
            return
        self._successes += 1
        # probing the concurrency that was refused last takes four times as long
        needed = self.concurrency * (4 if self.concurrency + 1 == self._refused_at else 1)
        if self._successes >= needed and self._worth_probing():
            self._successes = 0
            self._slots.total = self.concurrency + 1

    def _worth_probing(self) -> bool:
        """Whether a higher limit can pay: calls wait for a slot, enough of them to keep the
        current slots busy while a refused probe waits out the last ``Retry-After`` (else a
        refusal near the end of the work would only add that wait to the run)."""
        waiting = self._slots.waiting
        if waiting == 0:
            return False
        if not self._retry_after_seen or not self._call_seconds:
            return True
        return waiting >= self.concurrency * self._retry_after_seen / self._call_seconds
