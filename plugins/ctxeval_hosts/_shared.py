"""One :class:`ctxeval.Session` shared by the host metrics of one adapter, a row scored once.

Hosts call one metric at a time (MLflow one scorer per thread, DeepEval one ``a_measure`` per
metric and test case), while a session scores every metric of a row in one call, with one
budget. :class:`SharedSession` sits between: the first host metric that asks for a row scores
it (every metric of the session), the others of the same row wait for that result and take
their own metric's row from it. So a row costs one ``Session.score`` whatever the number of
host metrics, and the requests are exactly those ``ctxeval.evaluate`` sends.

A row waits in the table until every host metric made from this object took its result; at
most ``capacity`` rows wait (the oldest is dropped past that: a host that skips a metric for
a row never makes the table grow without bound).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from typing import Any

import anyio.to_thread

import ctxeval
from ctxeval import ConfigError, MetricResult, Sample
from ctxeval.plugin import NeedsLLM, current_async_library

__all__ = ["SharedSession"]

_Future = concurrent.futures.Future


class _Row:
    __slots__ = ("future", "pending")

    def __init__(self, pending: set[str]) -> None:
        self.future: concurrent.futures.Future[list[MetricResult]] = _Future()
        self.pending = pending


class SharedSession:
    """A :class:`ctxeval.Session` and the rows its host metrics are waiting for.

    Build it with :meth:`build` (metrics and settings, as :func:`ctxeval.evaluate` takes
    them) or around a session of your own (``SharedSession(session)``).
    """

    def __init__(
        self,
        session: Any,
        *,
        llm_metrics: frozenset[str] | None = None,
        capacity: int = 10_000,
    ) -> None:
        self.session = session
        self.metrics: tuple[str, ...] = tuple(session.metrics)
        self._index = {name: i for i, name in enumerate(self.metrics)}
        self._llm_metrics = llm_metrics
        self._capacity = capacity
        self._lock = threading.Lock()
        self._rows: OrderedDict[Hashable, _Row] = OrderedDict()
        self._wanted: set[str] = set()

    @classmethod
    def build(
        cls,
        metrics: Sequence[Any],
        *,
        llm: Any = None,
        registry: Any = None,
        settings: Any = None,
        **overrides: Any,
    ) -> SharedSession:
        """A new session of ``metrics`` (names or :func:`ctxeval.get_metric` objects)."""
        if isinstance(metrics, str):
            metrics = [metrics]
        resolved: list[Any] = [
            ctxeval.get_metric(m, registry=registry) if isinstance(m, str) else m for m in metrics
        ]
        llm_metrics = frozenset(str(m.name) for m in resolved if _needs_llm(m))
        session = ctxeval.Session(
            resolved, llm=llm, registry=registry, settings=settings, **overrides
        )
        return cls(session, llm_metrics=llm_metrics)

    # --- what the adapters ask --------------------------------------------------------------

    def want(self, metric: str) -> str:
        """Note that a host metric reads ``metric`` from each row; returns the name.

        Raises:
            ConfigError: the session has no such metric (the message lists its metrics).
        """
        if metric not in self._index:
            raise ConfigError(
                f"the session has no metric {metric!r}; its metrics are "
                f"{', '.join(self.metrics)}; build the adapter's session with that metric"
            )
        with self._lock:
            self._wanted.add(metric)
        return metric

    def llm_judged(self, metric: str) -> bool | None:
        """Whether ``metric`` calls an LLM (None when unknown: decided by each row)."""
        return None if self._llm_metrics is None else metric in self._llm_metrics

    def error_rows(self, reason: str, sample_id: str = "") -> list[MetricResult]:
        """One ``error`` row per metric: a row the host's fields could not make a sample of."""
        return [MetricResult.error(reason).labelled(sample_id, m) for m in self.metrics]

    def result(self, sample: Sample, metric: str) -> MetricResult:
        """``metric``'s row for ``sample`` (from any thread), the row scored once."""
        owner, row = self._claim(sample, metric)
        if owner:
            try:
                results = self.session.score(sample)
            except BaseException as exc:
                self._fail(sample, row, exc)
                raise
            row.future.set_result(list(results))
        return row.future.result()[self._index[metric]]

    async def aresult(self, sample: Sample, metric: str) -> MetricResult:
        """``metric``'s row for ``sample`` (from any event loop), the row scored once."""
        owner, row = self._claim(sample, metric)
        if owner:
            try:
                results = await self.session.ascore(sample)
            except BaseException as exc:
                self._fail(sample, row, exc)
                raise
            row.future.set_result(list(results))
        elif not row.future.done():
            await _wait(row.future)
        return row.future.result()[self._index[metric]]

    def close(self) -> None:
        """Close the session (what it scored stays in :meth:`evaluation`)."""
        self.session.close()

    def evaluation(self) -> Any:
        """The rows scored so far, as a :class:`ctxeval.Evaluation`."""
        return self.session.evaluation()

    # --- the table of rows ------------------------------------------------------------------

    @staticmethod
    def _key(sample: Sample) -> Hashable | None:
        try:
            return (sample, sample.id)
        except TypeError:  # pragma: no cover - a sample's fields are all hashable
            return None

    def _claim(self, sample: Sample, metric: str) -> tuple[bool, _Row]:
        key = self._key(sample)
        with self._lock:
            row = None if key is None else self._rows.get(key)
            owner = row is None or metric not in row.pending
            if row is None or owner:
                row = _Row(set(self._wanted or self.metrics))
                if key is not None:
                    self._rows[key] = row
                    while len(self._rows) > self._capacity:
                        self._rows.popitem(last=False)
            row.pending.discard(metric)
            if not row.pending and key is not None and self._rows.get(key) is row:
                del self._rows[key]
        return owner, row

    def _fail(self, sample: Sample, row: _Row, exc: BaseException) -> None:
        key = self._key(sample)
        with self._lock:
            if key is not None and self._rows.get(key) is row:
                del self._rows[key]
        if isinstance(exc, Exception):
            row.future.set_exception(exc)
        else:  # cancelled: the metrics waiting for this row say so
            row.future.set_exception(RuntimeError(f"scoring this row was stopped ({exc!r})"))


def _needs_llm(metric: object) -> bool:
    return isinstance(metric, NeedsLLM) and bool(metric.needs_llm)


async def _wait(future: concurrent.futures.Future[list[MetricResult]]) -> None:
    """Until ``future`` is done, woken through the caller's own loop (no thread held per
    waiting row: a worker thread each would cap the rows in flight at anyio's 40)."""
    library = current_async_library()
    if library == "asyncio":
        await asyncio.wrap_future(future)
    elif library == "trio":
        import trio

        token = trio.lowlevel.current_trio_token()
        done = trio.Event()

        def wake(_: object) -> None:
            with contextlib.suppress(trio.RunFinishedError):
                token.run_sync_soon(done.set)

        future.add_done_callback(wake)
        await done.wait()
    else:  # pragma: no cover - anyio runs on asyncio or trio
        await anyio.to_thread.run_sync(future.result, abandon_on_cancel=True)
