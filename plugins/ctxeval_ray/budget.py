"""One budget for every worker of a cluster: :class:`SharedBudget` and its Ray actor.

A provider's limits are per key, not per worker: N workers each holding "16 in flight, 600
requests a minute" send up to 16N and 600N. The budget actor holds the run's
:class:`~ctxeval.Limits` for the whole cluster, and each worker's gates ask it for a lease
before every request (``RunSettings(shared_limits=...)``, the
:class:`~ctxeval.runners.SharedLimits` interface):

* calls in flight: at most ``max_concurrency`` across the cluster;
* requests and tokens per minute: buckets that hold one request (one second of tokens) at
  most, so the rate is even from the start instead of a minute's worth at once per worker;
* a ``Retry-After`` from the provider pauses every worker's next request to that resource;
* the cost cap: once the cluster has spent ``max_cost_usd`` no lease is given; the requests in
  flight then finish, as in one process.

A lease is given back when its request ends. A worker that dies holding leases cannot give them
back: the actor takes them back as soon as it sees the worker's process gone (a worker on the
actor's own machine), else when they expire, ``lease_seconds`` after they were given (the
request timeout plus a margin: no request holds its slot longer).
"""

from __future__ import annotations

import math
import os
import time
import uuid
from collections.abc import Mapping
from typing import Any

from ctxeval.plugin import BudgetExceededError, Limits
from ctxeval.runners import TokenBucket

__all__ = ["BudgetActor", "SharedBudget"]


class _Resource:
    """The cluster-wide state of one resource (a model at an endpoint)."""

    def __init__(self, limits: Limits) -> None:
        import asyncio

        self.slots = asyncio.Semaphore(limits.max_concurrency)
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


class BudgetActor:
    """The state behind :class:`SharedBudget`, run as a Ray actor (async: one event loop, no
    locks needed). Made by :meth:`SharedBudget.start`."""

    def __init__(
        self, limits: Mapping[str, Limits], max_cost_usd: float | None, lease_seconds: float
    ) -> None:
        self._limits = dict(limits)
        self._resources: dict[str, _Resource] = {}
        self._leases: dict[str, tuple[str, float, tuple[str, int]]] = {}
        """Lease id -> (resource, expiry, holder: node address and process id)."""
        self._here = _node_address()
        self._lease_seconds = lease_seconds
        self.max_cost = max_cost_usd
        self.spent = 0.0

    def _resource(self, name: str) -> _Resource:
        found = self._resources.get(name)
        if found is None:
            limits = self._limits.get(name, self._limits["default"])
            found = self._resources[name] = _Resource(limits)
        return found

    async def acquire(
        self, name: str, tokens: float, holder: tuple[str, int] = ("", 0)
    ) -> tuple[str | None, float]:
        """A lease for one request to ``name`` once every limit allows it, and the spend so
        far; no lease (None) once the cost cap is reached."""
        import asyncio

        resource = self._resource(name)
        self._reap()
        if self.max_cost is not None and self.spent >= self.max_cost:
            return None, self.spent
        await self._wait_for_pause(resource)
        if resource.requests is not None:
            await resource.requests.take(1)
        if resource.tokens is not None and tokens > 0:
            await resource.tokens.take(tokens)
        while True:  # a slot; expired leases of dead workers are taken back meanwhile
            try:
                await asyncio.wait_for(resource.slots.acquire(), timeout=1.0)
                break
            except asyncio.TimeoutError:
                self._reap()
        await self._wait_for_pause(resource)  # a 429 may have come while this one queued
        if self.max_cost is not None and self.spent >= self.max_cost:  # reached meanwhile
            resource.slots.release()
            return None, self.spent
        lease = uuid.uuid4().hex
        now = time.monotonic()
        self._leases[lease] = (name, now + self._lease_seconds, holder)
        resource.in_flight += 1
        resource.peak_in_flight = max(resource.peak_in_flight, resource.in_flight)
        resource.granted += 1
        resource.first_grant = now if resource.first_grant is None else resource.first_grant
        resource.last_grant = now
        return lease, self.spent

    def release(self, name: str, lease: str) -> None:
        """The request holding ``lease`` ended."""
        if self._leases.pop(lease, None) is not None:
            resource = self._resource(name)
            resource.in_flight -= 1
            resource.slots.release()

    def pause(self, name: str, seconds: float) -> None:
        """Hold every next request to ``name`` for ``seconds``."""
        resource = self._resource(name)
        resource.paused_until = max(resource.paused_until, time.monotonic() + seconds)
        resource.pauses += 1

    def spend(self, cost_usd: float) -> None:
        self.spent += cost_usd

    def stats(self) -> dict[str, Any]:
        """What the budget saw, per resource: peak in flight, leases given, their rate."""
        out: dict[str, Any] = {"spent_usd": self.spent, "resources": {}}
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
        import asyncio

        while (delay := resource.paused_until - time.monotonic()) > 0:
            await asyncio.sleep(delay)

    def _reap(self) -> None:
        """Take back the leases of workers that died holding them: past their expiry, or
        held by a process of this machine that is gone."""
        now = time.monotonic()
        for lease, (name, expiry, (node, pid)) in list(self._leases.items()):
            if expiry < now or (node == self._here and pid and not _alive(pid)):
                self.release(name, lease)


def _node_address() -> str:
    import ray.util

    return str(ray.util.get_node_ip_address())  # type: ignore[no-untyped-call]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: alive
        return True
    return True


class SharedBudget:
    """A :class:`~ctxeval.runners.SharedLimits` backed by a :class:`BudgetActor`: give it to
    every worker (``RunSettings(shared_limits=budget)``); it pickles as the actor's handle.

    Use :meth:`start` to make one (``ray.init`` first).
    """

    def __init__(self, actor: Any, max_cost_usd: float | None) -> None:
        self._actor = actor
        self._max_cost = max_cost_usd
        self._holder: tuple[str, int] | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"_actor": self._actor, "_max_cost": self._max_cost, "_holder": None}

    @classmethod
    def start(
        cls,
        limits: Mapping[str, Limits],
        *,
        max_cost_usd: float | None = None,
        lease_seconds: float = 300.0,
    ) -> SharedBudget:
        """Start the budget actor for ``limits`` (by resource, with a ``"default"``)."""
        import ray

        actor_class: Any = ray.remote(BudgetActor)
        actor = actor_class.options(num_cpus=0, max_concurrency=10_000).remote(
            limits, max_cost_usd, lease_seconds
        )
        return cls(actor, max_cost_usd)

    async def acquire(self, resource: str, tokens: float) -> object:
        if self._holder is None or self._holder[1] != os.getpid():
            self._holder = (_node_address(), os.getpid())
        lease, spent = await self._actor.acquire.remote(resource, tokens, self._holder)
        if lease is None:
            raise BudgetExceededError(spent, self._max_cost if self._max_cost is not None else 0)
        return lease

    async def release(self, resource: str, lease: object) -> None:
        self._actor.release.remote(resource, lease)  # (no need to wait for it)

    def pause(self, resource: str, seconds: float) -> None:
        self._actor.pause.remote(resource, seconds)

    def spend(self, cost_usd: float) -> None:
        self._actor.spend.remote(cost_usd)

    def stats(self) -> dict[str, Any]:
        """What the budget saw (see :meth:`BudgetActor.stats`)."""
        import ray

        stats: dict[str, Any] = ray.get(self._actor.stats.remote())
        return stats

    def close(self) -> None:
        """Stop the budget actor (at the end of the run that started it)."""
        import ray

        ray.kill(self._actor)
