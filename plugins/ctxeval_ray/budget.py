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

The actor dying does not stop the run. Ray restarts it (``max_restarts=-1``) and runs the calls
it had not answered again (``max_task_retries=-1``); the restarted actor starts empty, so each
worker gives it back what the worker knows: every call carries what the worker has spent so
far (a running total, counted once whatever the retries), and a worker whose next call finds
another actor (a new *generation*) hands it the leases it holds before it asks for another. A
restart forgets only Retry-After pauses, the rate buckets' state (they start again at one
request) and the spend of workers that died before it, and, until each worker's next call to
it, that worker's spend and requests in flight. An actor that cannot come back (killed for
good, or reported unavailable for :data:`RESTART_WAIT_SECONDS`) leaves each worker with
per-worker limits (one warning per worker): see :class:`SharedBudget`.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Mapping
from typing import Any

import anyio

from ctxeval.plugin import BudgetExceededError, Limits
from ctxeval.runners import BudgetLedger

__all__ = ["ACTOR_NAME_PREFIX", "RESTART_WAIT_SECONDS", "BudgetActor", "SharedBudget"]

logger = logging.getLogger(__name__)

ACTOR_NAME_PREFIX = "ctxeval-budget-"
"""The budget actor's name starts with this (then a random part): ``ray.get_actor(name)``
finds it, in the namespace of the process that started it."""

RESTART_WAIT_SECONDS = 60.0
"""How long a worker keeps asking a budget actor Ray reports unavailable before it holds the
limits on its own. (While Ray restarts the actor, the calls to it wait without an error.)"""

LOCAL_LEASE = "local"
"""The lease of a worker holding the limits on its own (the budget actor gone)."""


class BudgetActor(BudgetLedger):
    """The state behind :class:`SharedBudget`, run as a Ray actor
    (:class:`~ctxeval.runners.BudgetLedger` on the actor's node). Made by
    :meth:`SharedBudget.start`; Ray runs the constructor again when it restarts the actor."""

    def __init__(
        self, limits: Mapping[str, Limits], max_cost_usd: float | None, lease_seconds: float
    ) -> None:
        super().__init__(limits, max_cost_usd, lease_seconds, node=_node_address())


def _node_address() -> str:
    import ray.util

    return str(ray.util.get_node_ip_address())  # type: ignore[no-untyped-call]


def _one_line(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())


class _ActorGoneError(Exception):
    """The budget actor cannot be reached (dead for good, or not back in time)."""


class _LocalLimits:
    """The limits one worker holds on its own once the budget actor is gone: the rates (even,
    one request or one second of tokens at a time) and ``Retry-After`` pauses of this worker
    only. Its gates keep ``max_concurrency`` for it. No lock and no event-loop object: a
    worker scores each batch in an event loop of its own."""

    def __init__(self, limits: Mapping[str, Limits]) -> None:
        self._limits = limits
        self._next: dict[tuple[str, str], float] = {}
        """(resource, "requests" or "tokens") -> when the next one may start."""
        self._paused_until: dict[str, float] = {}

    async def wait(self, resource: str, tokens: float) -> None:
        limits = self._limits.get(resource, self._limits["default"])
        delay = self._reserve((resource, "requests"), 1.0, limits.requests_per_minute)
        if tokens > 0:
            delay = max(
                delay, self._reserve((resource, "tokens"), tokens, limits.tokens_per_minute)
            )
        delay = max(delay, self._paused_until.get(resource, 0.0) - time.monotonic())
        if delay > 0:
            await anyio.sleep(delay)

    def _reserve(self, key: tuple[str, str], amount: float, per_minute: float | None) -> float:
        """Book ``amount`` of a rate of ``per_minute``: the seconds to wait for it."""
        if not per_minute:
            return 0.0
        now = time.monotonic()
        start = max(now, self._next.get(key, now))
        self._next[key] = start + amount * 60.0 / per_minute
        return start - now

    def pause(self, resource: str, seconds: float) -> None:
        until = time.monotonic() + seconds
        self._paused_until[resource] = max(self._paused_until.get(resource, 0.0), until)


class SharedBudget:
    """A :class:`~ctxeval.runners.SharedLimits` backed by a :class:`BudgetActor`: give it to
    every worker (``RunSettings(shared_limits=budget)``); it pickles as the actor's handle, and
    each process that unpickles it is one worker to the actor.

    Use :meth:`start` to make one (``ray.init`` first).

    When the actor dies, Ray restarts it and the worker's calls wait for it (or are run again);
    the worker then hands the new actor what it spent and the leases it holds (see the module's
    description). If the actor cannot come back (stopped for good by ``ray.kill(actor)``, or
    reported unavailable by Ray for :data:`RESTART_WAIT_SECONDS`), this worker holds the
    limits on its own for the rest of the run, with one warning: ``max_concurrency`` (its
    gates keep it), the rates and the ``Retry-After`` pauses of this worker only (N workers: up
    to N times the limits), and the cost cap counted as what the
    cluster had spent at this worker's last answer from the actor plus what this worker
    spent since (the other workers' spend since is not seen: each may spend up to the rest
    of the cap).
    """

    def __init__(
        self,
        actor: Any,
        max_cost_usd: float | None,
        limits: Mapping[str, Limits] | None = None,
        name: str | None = None,
    ) -> None:
        self._actor = actor
        self._max_cost = max_cost_usd
        self._limits: dict[str, Limits] = dict(limits) if limits else {"default": Limits()}
        self.name = name
        """The actor's name (``ray.get_actor(name)`` in the namespace of the process that
        started it), when :meth:`start` made it."""
        self._first_generation: Any = None
        self._fresh()

    def _fresh(self) -> None:
        """The state of this process's worker (not pickled)."""
        self._holder: tuple[str, int] | None = None
        self._reporter = uuid.uuid4().hex
        self._spent = 0.0
        """What this process spent (its running total, reported with every call)."""
        self._others = 0.0
        """What the other processes had spent, at the actor's last answer."""
        self._generation: str | None = None
        """The actor's generation this process last talked to."""
        self._held: dict[str, tuple[str, str]] = {}
        """The leases this process holds: lease -> (resource, generation that gave it)."""
        self._local: _LocalLimits | None = None
        """Per-worker limits, once the actor is gone."""

    def __getstate__(self) -> dict[str, Any]:
        return {
            "_actor": self._actor,
            "_max_cost": self._max_cost,
            "_limits": self._limits,
            "name": self.name,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._first_generation = None
        self._fresh()

    @classmethod
    def start(
        cls,
        limits: Mapping[str, Limits],
        *,
        max_cost_usd: float | None = None,
        lease_seconds: float = 300.0,
    ) -> SharedBudget:
        """Start the budget actor for ``limits`` (by resource, with a ``"default"``), named
        :data:`ACTOR_NAME_PREFIX` and a random part, restarted by Ray when it dies."""
        import ray

        name = f"{ACTOR_NAME_PREFIX}{uuid.uuid4().hex[:12]}"
        actor_class: Any = ray.remote(BudgetActor)
        actor = actor_class.options(
            name=name,
            num_cpus=0,
            max_concurrency=10_000,
            max_restarts=-1,
            max_task_retries=-1,
        ).remote(limits, max_cost_usd, lease_seconds)
        budget = cls(actor, max_cost_usd, limits, name)
        # its first generation, to tell a restart at the end (not waited for here)
        budget._first_generation = actor.current_generation.remote()
        return budget

    async def _call(self, method: str, *args: Any) -> Any:
        """``method`` of the actor, waiting while it is unavailable (Ray restarting it) for
        up to :data:`RESTART_WAIT_SECONDS`; :class:`_ActorGoneError` when it cannot be reached."""
        from ray.exceptions import ActorDiedError, RayActorError

        deadline: float | None = None
        while True:
            try:
                return await getattr(self._actor, method).remote(*args)
            except ActorDiedError as exc:  # dead for good: Ray restarts it otherwise
                raise _ActorGoneError(_one_line(exc)) from exc
            except RayActorError as exc:  # unavailable for a moment
                now = time.monotonic()
                deadline = now + RESTART_WAIT_SECONDS if deadline is None else deadline
                if now >= deadline:
                    raise _ActorGoneError(_one_line(exc)) from exc
                logger.debug("the budget actor is unavailable (%s); waiting for it", exc)
                await anyio.sleep(0.5)

    async def acquire(self, resource: str, tokens: float) -> object:
        if self._local is None:
            try:
                return await self._acquire_shared(resource, tokens)
            except _ActorGoneError as gone:
                self._fall_back(str(gone))
        return await self._acquire_local(resource, tokens)

    async def _acquire_shared(self, resource: str, tokens: float) -> str:
        if self._holder is None or self._holder[1] != os.getpid():
            self._holder = (_node_address(), os.getpid())
        while True:
            asked, reported = self._generation, self._spent
            lease, spent, generation = await self._call(
                "acquire", resource, tokens, self._holder, self._reporter, reported, asked
            )
            if asked is not None and generation != asked:  # the actor was restarted
                await self._adopt(generation)
                continue
            self._generation = self._generation or generation
            self._others = max(self._others, spent - reported)
            if lease is None:
                raise BudgetExceededError(spent, self._cap)
            self._held[lease] = (resource, generation)
            return str(lease)

    async def _adopt(self, generation: str) -> None:
        """Hand the restarted actor (of ``generation``) the leases this process holds."""
        earlier = self._generation
        leases = {
            lease: resource
            for lease, (resource, given_by) in self._held.items()
            if given_by != generation
        }
        assert self._holder is not None
        assert earlier is not None
        await self._call("adopt", leases, self._holder, self._reporter, self._spent, earlier)
        for lease in leases:
            if lease in self._held:
                self._held[lease] = (self._held[lease][0], generation)
        if self._generation == earlier:  # (not already done by a concurrent call)
            self._generation = generation
            logger.warning(
                "the budget actor was restarted; this worker gave it back its spend "
                "(%.6f USD) and its %d requests in flight",
                self._spent,
                len(leases),
            )

    def _fall_back(self, why: str) -> None:
        if self._local is not None:
            return
        self._local = _LocalLimits(self._limits)
        self._held.clear()
        logger.warning(
            "the budget actor is gone (%s): this worker holds the limits on its own for the "
            "rest of the run (per-worker limits: the workers together may send up to their "
            "number times them; the cost cap counted from the %.6f USD the cluster had spent "
            "at this worker's last answer, plus what this worker spends)",
            why,
            self._spent + self._others,
        )

    @property
    def _cap(self) -> float:
        return self._max_cost if self._max_cost is not None else 0.0

    def _check_cost(self) -> None:
        spent = self._spent + self._others
        if self._max_cost is not None and spent >= self._max_cost:
            raise BudgetExceededError(spent, self._max_cost)

    async def _acquire_local(self, resource: str, tokens: float) -> str:
        assert self._local is not None
        self._check_cost()
        await self._local.wait(resource, tokens)
        self._check_cost()  # reached meanwhile
        return LOCAL_LEASE

    async def release(self, resource: str, lease: object) -> None:
        if self._held.pop(str(lease), None) is None or self._local is not None:
            return
        try:
            self._actor.release.remote(resource, lease)  # (no need to wait for it)
        except Exception as exc:  # Ray going away: the lease expires with the actor
            logger.debug("could not give back a lease: %s", exc)

    def pause(self, resource: str, seconds: float) -> None:
        if self._local is not None:
            self._local.pause(resource, seconds)
            return
        try:
            self._actor.pause.remote(resource, seconds)
        except Exception as exc:
            logger.debug("could not pass on a pause: %s", exc)

    def spend(self, cost_usd: float) -> None:
        self._spent += cost_usd
        if self._local is not None:
            return
        try:  # the running total: a retry, or a restarted actor, counts it once
            self._actor.spend.remote(self._reporter, self._spent)
        except Exception as exc:  # the next acquire carries the total anyway
            logger.debug("could not report a spend: %s", exc)

    def stats(self, timeout: float = RESTART_WAIT_SECONDS) -> dict[str, Any]:
        """What the budget saw (see :meth:`BudgetActor.stats`). Never raises: an actor that
        cannot be reached gives ``{"unavailable": why}``. ``restarts`` counts a restart also
        when no worker talked to the actor after it (its first generation is not this one)."""
        import ray

        try:
            stats: dict[str, Any] = ray.get(self._actor.stats.remote(), timeout=timeout)
            if self._first_generation is not None:
                first = ray.get(self._first_generation, timeout=timeout)
                if first != stats.get("generation"):
                    stats["restarts"] = max(1, int(stats.get("restarts", 0)))
        except Exception as exc:  # dead for good, Ray going away, or not back in time
            logger.debug("the budget actor's stats are not available: %s", exc)
            return {"unavailable": _one_line(exc)}
        return stats

    def close(self) -> None:
        """Stop the budget actor (at the end of the run that started it); never raises (an
        actor already gone is left as it is)."""
        import ray

        try:
            ray.kill(self._actor)
        except Exception as exc:
            logger.debug("the budget actor could not be stopped: %s", exc)
