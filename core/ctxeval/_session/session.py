"""A long-lived scoring session for host harnesses: :class:`Session`.

``evaluate()`` scores a whole list. The harnesses where RAG teams evaluate (MLflow, DeepEval,
Inspect AI, LangSmith, Braintrust, Phoenix, promptfoo) call a metric one row at a time, from
their own thread pools or inside their own running event loop. A :class:`Session` is built once
(metrics resolved once, settings checked once) and scores one sample per call, from any thread
(:meth:`Session.score`) or any event loop, asyncio or trio (:meth:`Session.ascore`); the calls
of every thread and loop share one scheduler (see :mod:`ctxeval._session.scoring` for what is
scored where, and :mod:`ctxeval._run.loop_thread` for the session's own event loop).
"""

from __future__ import annotations

import concurrent.futures
import itertools
import logging
import threading
import weakref
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any, Final, cast

import anyio.lowlevel
import anyio.to_thread

from ctxeval._data.sample import Sample
from ctxeval._errors import ConfigError, SessionClosedError
from ctxeval._output.evaluation import Evaluation
from ctxeval._plugins.protocols import Metric
from ctxeval._plugins.registry import Registry
from ctxeval._results.results import MetricResult
from ctxeval._run.checks import check_run_inputs
from ctxeval._run.loop_thread import LoopThread, wait_for
from ctxeval._run.plan import RunPlan
from ctxeval._run.settings import RunSettings
from ctxeval._session.scoring import InlineScorer, LoopScorer, Rows
from ctxeval._session.store import RowStore

__all__ = ["Session"]

logger = logging.getLogger(__name__)

CLOSE_WAIT: Final = 10.0
"""Seconds :meth:`Session.close` waits for the session's loop to end."""


def _check_settings(settings: RunSettings) -> None:
    """Refuse the settings a session cannot honour (it scores one sample per call)."""
    if settings.journal is not None:
        raise ConfigError(
            "a Session keeps no journal (journal=, resume=): its rows are in "
            "session.evaluation(), which evaluation().write(folder) saves; give a journal to "
            "ctxeval.evaluate() for a batch run that can resume"
        )
    if settings.on_progress is not None:
        raise ConfigError(
            "a Session takes no on_progress= (it scores the rows its caller asks for, one call "
            "at a time): count the calls in your harness, or use ctxeval.evaluate()"
        )


def _end(loop: LoopThread, scorer: LoopScorer) -> None:
    """End a session's loop and threads (see :meth:`Session.close`)."""
    if loop.in_loop():  # (the last reference dropped in the loop itself: it ends after)
        loop.stop(0)
        return
    if not loop.stop(CLOSE_WAIT):
        logger.warning(
            "the session's event loop did not end within %g s of close() (a plugin holds "
            "it); it is a daemon thread, left behind", CLOSE_WAIT,
        )  # fmt: skip
        return
    scorer.join()


class Session:
    """Score samples one at a time from any thread or event loop, through one scheduler.

    ::

        with ctxeval.Session(["id_based_context_recall"]) as session:
            rows = session.score({"retrieved_context_ids": ["a"], "reference_context_ids": ["a"]})
            session.evaluation().summary()

    Args:
        metrics: metric names or metrics (:func:`ctxeval.get_metric`), as
            :func:`ctxeval.evaluate` takes them.
        llm: the LLM of the metrics that need one.
        registry: resolve names here instead of the default registry.
        settings: a :class:`~ctxeval.RunSettings` (limits, retries, timeouts, cache, cost cap);
            ``journal`` and ``on_progress`` have no meaning for a session and are refused.
        **overrides: any field of :class:`~ctxeval.RunSettings`, in place of the same field of
            ``settings`` (``max_concurrency=4``, ``cache=...``, ``max_cost_usd=...``).

    Every call of every thread and event loop shares one scheduler: one budget of calls in
    flight, one rate, the same ``Retry-After`` pauses, one cost cap, one LLM cache, one usage
    meter, one judge's provenance. A row's failure (a missing field, a metric that raises, an
    LLM call that fails for good) is that row's ``error`` result: nothing a row does stops
    the session. The session's event loop (a daemon thread) starts at the first row that
    needs it; :meth:`close` (or leaving a ``with``/``async with`` block) cancels what is in
    flight and ends it.

    Raises:
        ConfigError: a metric is unknown, misconfigured or given twice; a bad or unknown
            setting; an LLM metric without an LLM.
    """

    def __init__(
        self,
        metrics: Sequence[str | Metric],
        *,
        llm: Any = None,
        registry: Registry | None = None,
        settings: RunSettings | None = None,
        **overrides: Any,
    ) -> None:
        check_run_inputs((), llm=llm, registry=registry, labels=None)
        plan = RunPlan.build(metrics, llm=llm, registry=registry, settings=settings, **overrides)
        _check_settings(plan.settings)
        self._plan = plan
        self._inline = InlineScorer(plan)
        self._width = len(plan.metrics)
        self._positions = itertools.count()
        self._rows = RowStore()
        self._lock = threading.Lock()
        self._closed = False
        self._loop: LoopThread | None = None
        self._scorer: LoopScorer | None = None
        self._ending: weakref.finalize[[LoopThread, LoopScorer], Session] | None = None
        """Ends the loop: at close(), or when the session is collected or the interpreter
        exits (the loop's thread holds no reference to the session)."""

    @property
    def metrics(self) -> tuple[str, ...]:
        """The row names of the session's metrics, in the order of each sample's rows."""
        return self._plan.names

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<Session {state}, metrics={list(self.metrics)}, {len(self._rows)} rows>"

    # --- scoring -----------------------------------------------------------------------------

    def score(self, sample: Sample | Mapping[str, Any]) -> list[MetricResult]:
        """The rows of ``sample``, one per metric in the order of :attr:`metrics`.

        ``sample`` is a :class:`~ctxeval.Sample` or a mapping of its fields (the older names
        ``question``, ``answer``, ``ground_truth``, ``contexts`` too); one without an ``id``
        gets the number of this call in the session (``"0"``, ``"1"``, ...). Callable from any
        thread, also one whose own event loop is running (a notebook): it waits for the rows
        that need the session's loop, without using the caller's.

        Raises:
            SessionClosedError: the session is closed (or was closed while this sample was
                being scored).
            DataError: ``sample`` is neither a ``Sample`` nor a mapping. A mapping that is
                not a valid sample gives error rows instead.
        """
        begun = self._begin(sample)
        if isinstance(begun, list):
            return begun
        loop, scorer = self._running_loop()
        if loop.in_loop():
            raise ConfigError(
                "Session.score() was called from inside the session's own event loop (a "
                "metric of the session scoring with it): await session.ascore() there instead"
            )
        try:
            future = loop.submit(scorer.score, *begun)
        except RuntimeError:  # the loop was stopped meanwhile
            raise self._closed_error(begun[1]) from None
        try:
            return future.result()
        except concurrent.futures.CancelledError:
            raise self._closed_error(begun[1]) from None
        except BaseException:
            future.cancel()  # (a KeyboardInterrupt in the waiting thread: stop the work)
            raise

    async def ascore(self, sample: Sample | Mapping[str, Any]) -> list[MetricResult]:
        """:meth:`score`, awaited in any running event loop (asyncio or trio, the caller's
        own), which stays free meanwhile: the rows that need the session's loop are scored
        there, and their end wakes the caller through its own loop. Cancelling the call
        cancels the sample's work."""
        begun = self._begin(sample)
        if isinstance(begun, list):
            await anyio.lowlevel.checkpoint()
            return begun
        if self._loop is None:  # (its start takes a few ms: not on the caller's loop)
            loop, scorer = await anyio.to_thread.run_sync(self._running_loop)
        else:
            loop, scorer = self._running_loop()
        if loop.in_loop():  # (a metric of the session scoring with it)
            return await scorer.score(*begun)
        try:
            future = loop.submit(scorer.score, *begun)
        except RuntimeError:  # the loop was stopped meanwhile
            raise self._closed_error(begun[1]) from None
        try:
            return await wait_for(future)
        except concurrent.futures.CancelledError:
            raise self._closed_error(begun[1]) from None

    def _begin(
        self, item: Sample | Mapping[str, Any]
    ) -> list[MetricResult] | tuple[Sample, str, Rows, list[int]]:
        """Read ``item`` and score the rows the calling thread scores: every row of the
        sample (recorded), or what the session's loop is to score (the sample, its id, its
        rows so far and the positions of the rows still to score)."""
        if self._closed:
            raise self._closed_error(None)
        read = self._inline.read(item, next(self._positions))
        if isinstance(read, list):  # a mapping that is no valid sample: its error rows
            self._record(read)
            return read
        sample, sample_id = read
        rows: Rows = [None] * self._width
        waiting = self._inline.score(sample, sample_id, rows)
        if waiting:
            return sample, sample_id, rows, waiting
        done = cast("list[MetricResult]", rows)  # (every row is scored)
        self._record(done)
        return done

    def _record(self, rows: Sequence[MetricResult]) -> None:
        self._rows.add(rows)  # (no lock for threads to queue on: see RowStore)

    def _running_loop(self) -> tuple[LoopThread, LoopScorer]:
        """The session's event loop and what scores in it, started on first use."""
        loop, scorer = self._loop, self._scorer
        if loop is not None and scorer is not None:
            return loop, scorer
        with self._lock:
            if self._closed:
                raise self._closed_error(None)
            if self._loop is None or self._scorer is None:
                scorer = LoopScorer(self._plan, self._rows.add)  # (not self: see _end)
                started = LoopThread(
                    name="ctxeval-session", on_start=scorer.start, on_stop=scorer.aclose
                )
                started.start()
                self._scorer, self._loop = scorer, started
                self._ending = weakref.finalize(self, _end, started, scorer)
            return self._loop, self._scorer

    def _closed_error(self, sample_id: str | None) -> SessionClosedError:
        if sample_id is None:
            return SessionClosedError(
                f"this Session ({', '.join(self.metrics)}) is closed: make a new "
                "ctxeval.Session to score more samples (its rows so far are in "
                "session.evaluation())"
            )
        return SessionClosedError(
            f"the Session was closed while sample {sample_id!r} was being scored: its rows "
            "were not kept (the rows scored before are in session.evaluation())"
        )

    # --- the rows so far, and the end --------------------------------------------------------

    def evaluation(self) -> Evaluation:
        """The rows scored so far, sample by sample in the order their scoring ended (metric
        by metric within a sample), as an :class:`~ctxeval.Evaluation`: its ``summary()``,
        ``trust()``, ``write()``... Also after :meth:`close`."""
        rows = self._rows.rows()
        return Evaluation(
            rows, self.metrics, formulas=self._plan.formulas, names=self._plan.metric_names
        )

    def close(self) -> None:
        """Cancel the rows in flight (their callers get :class:`~ctxeval.SessionClosedError`),
        close the session's HTTP clients and end its loop and threads. The rows scored so far
        stay in :meth:`evaluation`. Closing again does nothing. (A session dropped without
        ``close()`` is closed when it is garbage-collected, or at the interpreter's exit.)"""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            ending = self._ending
        if ending is not None:
            ending()

    async def aclose(self) -> None:
        """:meth:`close`, awaited: the caller's loop stays free while the session's ends."""
        if self._loop is None:
            self.close()
        else:
            await anyio.to_thread.run_sync(self.close)

    def __enter__(self) -> Session:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> Session:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
