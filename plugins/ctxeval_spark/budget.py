"""One budget for every Spark task of a run: :class:`BudgetService` on the driver, and the
:class:`ServiceLimits` each task reaches it through.

By default the ``spark`` runner divides the run's limits and cost cap among its workers. With
``SparkRunner(shared=True)`` the driver holds them instead, in one
:class:`~ctxeval.runners.BudgetLedger` behind a small HTTP endpoint (aiohttp, in a thread of
the driver), and every task's every request takes a lease from it before it is sent: never
more calls in flight than ``max_concurrency`` across the cluster, whatever the number of
tasks or partitions; one even request and token rate; a ``Retry-After`` pauses every task; the
cost cap counts what the whole cluster spent. The endpoint asks for a random token that only
the run's tasks hold.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import os
import secrets
import socket
import threading
import uuid
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import anyio
import anyio.to_thread
import httpx
from aiohttp import web

from ctxeval.plugin import BudgetExceededError, Limits
from ctxeval.runners import BudgetLedger

__all__ = ["BudgetService", "ServiceLimits"]

logger = logging.getLogger(__name__)


class BudgetService:
    """The run's one budget on the driver: a :class:`~ctxeval.runners.BudgetLedger` served
    over HTTP at :attr:`url`. :meth:`limits` gives the picklable
    :class:`~ctxeval.runners.SharedLimits` the tasks use; :meth:`close` stops it.

    Args:
        limits: the run's limits per resource (``RunSettings.resource_limits``).
        max_cost_usd: the cluster's cost cap (None: none).
        lease_seconds: how long a lease lasts when its task never gives it back (a task that
            died): the request timeout plus a margin.
        host: the address the tasks reach the driver at (``127.0.0.1`` in local mode).
    """

    def __init__(
        self,
        limits: Mapping[str, Limits],
        *,
        max_cost_usd: float | None,
        lease_seconds: float,
        host: str = "127.0.0.1",
    ) -> None:
        self.max_cost_usd = max_cost_usd
        self._token = secrets.token_urlsafe(24)
        self._ledger_args = (dict(limits), max_cost_usd, lease_seconds, socket.gethostname())
        self._ledger: BudgetLedger | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopped: asyncio.Event | None = None
        started = threading.Event()
        self._port = 0
        self._host = host
        self._failure: BaseException | None = None
        self._thread = threading.Thread(
            target=self._main, args=(started,), name="ctxeval-spark-budget", daemon=True
        )
        self._thread.start()
        started.wait()
        if self._failure is not None:
            raise self._failure

    @property
    def url(self) -> str:
        return f"http://{self._host}:{self._port}"

    def limits(self) -> ServiceLimits:
        """What the tasks use: ``RunSettings(shared_limits=service.limits())``."""
        return ServiceLimits(self.url, self._token, self.max_cost_usd)

    def stats(self) -> dict[str, Any]:
        """What the budget saw (:meth:`BudgetLedger.stats`)."""
        assert self._loop is not None
        assert self._ledger is not None
        ledger = self._ledger
        future = asyncio.run_coroutine_threadsafe(_call(ledger.stats), self._loop)
        stats: dict[str, Any] = future.result(10)
        return stats

    def close(self) -> None:
        if self._loop is not None and self._stopped is not None:
            self._loop.call_soon_threadsafe(self._stopped.set)
        self._thread.join(10)

    def _main(self, started: threading.Event) -> None:
        try:
            asyncio.run(self._serve(started))
        except BaseException as exc:  # raised in the constructor
            self._failure = exc
            started.set()

    async def _serve(self, started: threading.Event) -> None:
        self._ledger = BudgetLedger(*self._ledger_args)
        self._loop = asyncio.get_running_loop()
        self._stopped = asyncio.Event()
        app = web.Application()
        app.add_routes([web.post("/{method}", self._handle)])
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, self._host, 0)
        await site.start()
        self._port = int(runner.addresses[0][1])
        logger.info("the run's budget is served at %s", self.url)
        started.set()
        try:
            await self._stopped.wait()
        finally:
            await runner.cleanup()

    async def _handle(self, request: web.Request) -> web.Response:
        given = request.headers.get("Authorization", "")
        if not hmac.compare_digest(given.encode(), f"Bearer {self._token}".encode()):
            return web.json_response({"error": "not this run's budget"}, status=403)
        ledger = self._ledger
        assert ledger is not None
        body = await request.json()
        method = request.match_info["method"]
        if method == "acquire":
            lease, spent, _ = await ledger.acquire(
                body["resource"],
                float(body["tokens"]),
                (str(body["node"]), int(body["pid"])),
                str(body["reporter"]),
                float(body["spent"]),
            )
            return web.json_response({"lease": lease, "spent": spent})
        if method == "release":
            ledger.release(body["resource"], body["lease"])
        elif method == "pause":
            ledger.pause(body["resource"], float(body["seconds"]))
        elif method == "spend":
            ledger.spend(str(body["reporter"]), float(body["spent"]))
        else:
            return web.json_response({"error": f"no method {method!r}"}, status=404)
        return web.json_response({})


async def _call(func: Any) -> Any:
    return func()


class ServiceLimits:
    """The :class:`~ctxeval.runners.SharedLimits` of a :class:`BudgetService`: picklable, sent
    with the plan to every task. Its requests to the driver run in worker threads (one
    ``httpx.Client`` per process), so any event loop, asyncio or trio, can wait on them."""

    def __init__(self, url: str, token: str, max_cost_usd: float | None) -> None:
        self.url = url
        self._token = token
        self.max_cost_usd = max_cost_usd
        self._fresh()

    def _fresh(self) -> None:
        self._reporter = uuid.uuid4().hex
        self._spent = 0.0
        self._client: httpx.Client | None = None
        self._lock = threading.Lock()
        self._background: ThreadPoolExecutor | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"url": self.url, "token": self._token, "max_cost_usd": self.max_cost_usd}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.url = state["url"]
        self._token = state["token"]
        self.max_cost_usd = state["max_cost_usd"]
        self._fresh()

    def __repr__(self) -> str:
        return f"ServiceLimits({self.url!r})"

    def _post(self, method: str, body: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            if self._client is None:
                self._client = httpx.Client(
                    base_url=self.url,
                    headers={"Authorization": f"Bearer {self._token}"},
                    timeout=httpx.Timeout(None, connect=10.0),
                    trust_env=False,  # the driver, never through a proxy
                )
            client = self._client
        answer = client.post(f"/{method}", json=body)
        answer.raise_for_status()
        result: dict[str, Any] = answer.json()
        return result

    def _later(self, method: str, body: dict[str, Any]) -> None:
        with self._lock:
            if self._background is None:
                self._background = ThreadPoolExecutor(1, thread_name_prefix="ctxeval-budget")
            self._background.submit(self._post, method, body)

    async def acquire(self, resource: str, tokens: float) -> object:
        body = {
            "resource": resource,
            "tokens": tokens,
            "node": socket.gethostname(),
            "pid": os.getpid(),
            "reporter": self._reporter,
            "spent": self._spent,
        }
        answer = await anyio.to_thread.run_sync(self._post, "acquire", body)
        if answer["lease"] is None:
            raise BudgetExceededError(float(answer["spent"]), self.max_cost_usd or 0.0)
        return answer["lease"]

    async def release(self, resource: str, lease: object) -> None:
        with anyio.CancelScope(shield=True):  # a cancelled request gives its lease back too
            await anyio.to_thread.run_sync(
                self._post, "release", {"resource": resource, "lease": lease}
            )

    def pause(self, resource: str, seconds: float) -> None:
        self._later("pause", {"resource": resource, "seconds": seconds})

    def spend(self, cost_usd: float) -> None:
        self._spent += cost_usd
        self._later("spend", {"reporter": self._reporter, "spent": self._spent})
