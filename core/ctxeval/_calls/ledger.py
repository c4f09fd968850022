"""One budget of outside calls shared by the workers of a cluster: :class:`BudgetLedger`.

A provider's limits are per key, not per worker: N workers each holding "16 in flight, 600
requests a minute" send up to 16N and 600N. A ledger holds the run's
:class:`~ctxeval.Limits` for the whole cluster, and each worker's gates ask it for a lease
before every request (through a :class:`~ctxeval.runners.SharedLimits` that reaches it: a Ray
actor, an HTTP service on a Spark driver):

* calls in flight: at most ``max_concurrency`` across the cluster;
* requests and tokens per minute: buckets that hold one request (one second of tokens) at
  most, so the rate is even from the start instead of a minute's worth at once per worker;
* a ``Retry-After`` from the provider pauses every worker's next request to that resource;
* the cost cap: once the cluster has spent ``max_cost_usd`` no lease is given; the requests in
  flight then finish, as in one process.

A lease is given back when its request ends. A worker that dies holding leases cannot give them
back: the ledger takes them back as soon as it sees the worker's process gone (a worker on the
ledger's own host), else when they expire, ``lease_seconds`` after they were given.
"""

from __future__ import annotations

import asyncio
import math
import os
import time
import uuid
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from ctxeval._calls.limits import Limits, TokenBucket

__all__ = ["BudgetLedger"]


class _Slots:
    """Calls in flight against a maximum, first come first served. Unlike a semaphore it can
    count leases beyond the maximum (those a worker gives back to a restarted actor): no new
    slot is given until the calls in flight are below the maximum again."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.taken = 0
        self._waiters: deque[asyncio.Future[None]] = deque()

    async def take(self, meanwhile: Callable[[], None]) -> None:
        """Wait for a slot; ``meanwhile`` runs every second of the wait."""
        if self.taken < self.size and not self._waiters:
            self.taken += 1
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            while not waiter.done():
                await asyncio.wait({waiter}, timeout=1.0)
                if not waiter.done():
                    meanwhile()
        except BaseException:  # cancelled while waiting: a slot given meanwhile goes back
            if waiter.done() and not waiter.cancelled():
                self.give()
            else:
                waiter.cancel()
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
            raise

    def count(self) -> None:
        """Count a call in flight without waiting (it is in flight already)."""
        self.taken += 1

    def give(self) -> None:
        self.taken -= 1
        while self._waiters and self.taken < self.size:
            waiter = self._waiters.popleft()
            if not waiter.done():
                self.taken += 1
                waiter.set_result(None)


class _Resource:
    """The cluster-wide state of one resource (a model at an endpoint)."""

    def __init__(self, limits: Limits) -> None:
        self.slots = _Slots(limits.max_concurrency)
        rpm, tpm = limits.requests_per_minute, limits.tokens_per_minute
        self.requests = TokenBucket(rpm, burst=1.0) if rpm else None
        self.tokens = TokenBucket(tpm, burst=max(1.0, tpm / 60.0)) if tpm else None
        self.paused_until = 0.0
        self.in_flight = 0
        self.peak_in_flight = 0
        self.granted = 0
        self.first_grant: float | None = None
        self.last_grant = 0.0
        self.pauses = 0


class BudgetLedger:
    """One budget of outside calls for every worker of a cluster, held in one place: the
    state behind a :class:`~ctxeval.runners.SharedLimits` service (``ctxeval_ray``'s budget
    actor, ``ctxeval_spark``'s budget service on the driver). Async, on one asyncio event
    loop: no locks needed.

    A host that restarts it (Ray restarts its actor) makes a new one: it has a new
    ``generation`` and learns the spend and the leases in flight from the workers (each call
    carries the caller's running total; :meth:`adopt` takes the leases a worker holds).

    Args:
        limits: the limits per resource (``"default"`` for any other).
        max_cost_usd: the cost cap of the whole cluster (None: none).
        lease_seconds: how long a lease lasts when its holder never gives it back.
        node: this host's address: a lease held by a process of this host that is gone is
            taken back at once.
    """

    def __init__(
        self,
        limits: Mapping[str, Limits],
        max_cost_usd: float | None,
        lease_seconds: float,
        node: str = "",
    ) -> None:
        self._limits = dict(limits)
        self._resources: dict[str, _Resource] = {}
        self._leases: dict[str, tuple[str, float, tuple[str, int]]] = {}
        """Lease id -> (resource, expiry, holder: node address and process id)."""
        self._here = node
        self._lease_seconds = lease_seconds
        self.max_cost = max_cost_usd
        self.generation = uuid.uuid4().hex
        """This incarnation of the actor (a restart makes another)."""
        self._spent_by: dict[str, float] = {}
        """What each worker (its :class:`SharedBudget`) has spent so far, as it reported."""
        self._earlier: set[str] = set()
        """The generations before this one that workers had talked to: the restarts seen."""
        self.adopted = 0

    @property
    def spent(self) -> float:
        return math.fsum(self._spent_by.values())

    def _report(self, reporter: str, total: float) -> None:
        """``reporter`` has spent ``total`` so far (a running total: a call run twice, or
        again after a restart, counts once)."""
        if total > self._spent_by.get(reporter, 0.0):
            self._spent_by[reporter] = total

    def _resource(self, name: str) -> _Resource:
        found = self._resources.get(name)
        if found is None:
            limits = self._limits.get(name, self._limits["default"])
            found = self._resources[name] = _Resource(limits)
        return found

    def current_generation(self) -> str:
        return self.generation

    async def acquire(
        self,
        name: str,
        tokens: float,
        holder: tuple[str, int] = ("", 0),
        reporter: str = "",
        spent_by_reporter: float = 0.0,
        generation: str | None = None,
    ) -> tuple[str | None, float, str]:
        """A lease for one request to ``name`` once every limit allows it, the spend so far
        and this actor's generation; no lease (None) once the cost cap is reached, or when the
        caller last talked to another generation (an actor before a restart): the caller then
        hands its leases over (:meth:`adopt`) and asks again."""
        self._report(reporter, spent_by_reporter)
        if generation is not None and generation != self.generation:
            return None, self.spent, self.generation
        resource = self._resource(name)
        self._reap()
        if self.max_cost is not None and self.spent >= self.max_cost:
            return None, self.spent, self.generation
        await self._wait_for_pause(resource)
        if resource.requests is not None:
            await resource.requests.take(1)
        if resource.tokens is not None and tokens > 0:
            await resource.tokens.take(tokens)
        # a slot; expired leases of dead workers are taken back meanwhile
        await resource.slots.take(self._reap)
        await self._wait_for_pause(resource)  # a 429 may have come while this one queued
        if self.max_cost is not None and self.spent >= self.max_cost:  # reached meanwhile
            resource.slots.give()
            return None, self.spent, self.generation
        lease = uuid.uuid4().hex
        now = time.monotonic()
        self._hold(name, lease, holder)
        resource.granted += 1
        resource.first_grant = now if resource.first_grant is None else resource.first_grant
        resource.last_grant = now
        return lease, self.spent, self.generation

    def _hold(self, name: str, lease: str, holder: tuple[str, int]) -> None:
        resource = self._resource(name)
        self._leases[lease] = (name, time.monotonic() + self._lease_seconds, holder)
        resource.in_flight += 1
        resource.peak_in_flight = max(resource.peak_in_flight, resource.in_flight)

    def adopt(
        self,
        leases: Mapping[str, str],
        holder: tuple[str, int],
        reporter: str,
        spent_by_reporter: float,
        earlier_generation: str,
    ) -> str:
        """A worker that held ``leases`` (lease id -> resource) from the actor before a restart
        hands them over: they count as in flight (even beyond ``max_concurrency``: no new lease
        is given until the calls in flight are below it) until released or expired."""
        self._report(reporter, spent_by_reporter)
        if earlier_generation != self.generation:
            self._earlier.add(earlier_generation)
        for lease, name in leases.items():
            if lease not in self._leases:
                self._hold(name, lease, holder)
                self._resource(name).slots.count()
                self.adopted += 1
        return self.generation

    def release(self, name: str, lease: str) -> None:
        """The request holding ``lease`` ended (a lease this actor does not know, given before a
        restart and not handed over, is ignored)."""
        if self._leases.pop(lease, None) is not None:
            resource = self._resource(name)
            resource.in_flight -= 1
            resource.slots.give()

    def pause(self, name: str, seconds: float) -> None:
        """Hold every next request to ``name`` for ``seconds``."""
        resource = self._resource(name)
        resource.paused_until = max(resource.paused_until, time.monotonic() + seconds)
        resource.pauses += 1

    def spend(self, reporter: str, total: float) -> None:
        """``reporter`` has spent ``total`` so far (its running total)."""
        self._report(reporter, total)

    def stats(self) -> dict[str, Any]:
        """What the budget saw, per resource: peak in flight, leases given, their rate; the
        spend, this actor's generation and the restarts the workers saw."""
        out: dict[str, Any] = {
            "spent_usd": self.spent,
            "generation": self.generation,
            "restarts": len(self._earlier),
            "adopted_leases": self.adopted,
            "resources": {},
        }
        for name, resource in self._resources.items():
            span = (resource.last_grant - resource.first_grant) if resource.first_grant else 0.0
            out["resources"][name] = {
                "peak_in_flight": resource.peak_in_flight,
                "in_flight": resource.in_flight,
                "granted": resource.granted,
                "per_minute": (resource.granted - 1) / span * 60 if span > 0 else math.nan,
                "pauses": resource.pauses,
            }
        return out

    async def _wait_for_pause(self, resource: _Resource) -> None:
        while (delay := resource.paused_until - time.monotonic()) > 0:
            await asyncio.sleep(delay)

    def _reap(self) -> None:
        """Take back the leases of workers that died holding them: past their expiry, or
        held by a process of this machine that is gone."""
        now = time.monotonic()
        for lease, (name, expiry, (node, pid)) in list(self._leases.items()):
            if expiry < now or (node == self._here and pid and not _alive(pid)):
                self.release(name, lease)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: alive
        return True
    return True
