"""How a session scores one sample: the rows scored in the calling thread
(:class:`InlineScorer`), and the rows scored in the session's event loop (:class:`LoopScorer`).

A deterministic metric that is cheap to call (a pipeline of deterministic parts: the ID
metrics, the string-similarity metrics, compositions of such parts) is scored where
``score()`` or ``ascore()`` is called, with no hand-over at all: a few microseconds per row
beyond the metric's own work. So is a third party's deterministic metric when the session has
no ``metric_timeout``. The other metrics (LLM-judged, calling an endpoint, or a third party's
synchronous ``score`` under a ``metric_timeout``) are scored in the session's loop, through
its one :class:`~ctxeval._calls.scheduler.Scheduler`: their calls from every thread and every
caller's loop share one budget of calls in flight, one rate, one cost cap, one HTTP client,
one cache and one judge's provenance. There, each async metric call is cut at
``metric_timeout`` and watched for holding the loop (:class:`~ctxeval._run.watchdog.Watchdog`),
and a synchronous ``score`` is made in a worker thread of the session and cut there
(:class:`~ctxeval._run.worker.SyncWorker`), as in a run.

Whatever a row does, it is that row's ``error`` result: a missing field, a metric that raises
or returns something that is not a result, an LLM call failing for good, the cost cap reached.
A permanent failure of the LLM (a refused key, an unknown model) closes the scheduler's gate,
so every later row of that LLM is an error with the same reason, at once and unsent.
"""

from __future__ import annotations

import operator
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Final, cast

import anyio

from ctxeval._calls.scheduler import Scheduler
from ctxeval._data.sample import Sample, id_for_message
from ctxeval._errors import BudgetExceededError, DataError
from ctxeval._pipeline.deterministic import DeterministicPipelineMetric
from ctxeval._plugins.protocols import Metric
from ctxeval._results.results import MetricResult
from ctxeval._run.plan import RunPlan
from ctxeval._run.rows import checked, failure, missing_field_error, sync_scorer
from ctxeval._run.state import timed_out, with_provenance
from ctxeval._run.watchdog import Watchdog
from ctxeval._run.worker import TIMED_OUT, SyncWorker

__all__ = ["InlineScorer", "LoopScorer", "Rows"]

Rows = list[MetricResult | None]
"""A sample's rows while it is scored: one per metric, None until scored."""

JOIN_WAIT: Final = 5.0
"""Seconds :meth:`LoopScorer.join` waits for each of its threads."""


def _inline(metric: Metric, metric_timeout: float | None) -> Callable[[Sample], object] | None:
    """``metric.score`` when the calling thread scores ``metric`` (see the module), else
    None."""
    score = sync_scorer(metric)
    if score is None:
        return None
    if metric_timeout is None or isinstance(metric, DeterministicPipelineMetric):
        return score
    return None


def _fields_of(requires: tuple[str, ...]) -> Callable[[Sample], tuple[object, ...]] | None:
    """A function giving a sample's values of the fields ``requires`` names (as a tuple), or
    None when it names none."""
    if not requires:
        return None
    values = operator.attrgetter(*requires)
    if len(requires) == 1:
        return lambda sample: (values(sample),)
    return values  # (a tuple for two names or more)


class InlineScorer:
    """Reads a sample and scores the rows the calling thread scores (see the module)."""

    def __init__(self, plan: RunPlan) -> None:
        self.metrics: tuple[Metric, ...] = plan.metrics
        self.names: tuple[str, ...] = plan.names
        timeout = plan.settings.metric_timeout
        self._plan = tuple(
            (metric, _inline(metric, timeout), _fields_of(tuple(metric.requires)))
            for metric in self.metrics
        )

    def read(self, item: object, position: int) -> tuple[Sample, str] | list[MetricResult]:
        """The sample of ``item`` and its id (``position`` as text when it has none), or,
        when it cannot be read, its error rows (one per metric).

        Raises:
            DataError: ``item`` is neither a :class:`~ctxeval.Sample` nor a mapping.
        """
        if type(item) is Sample:
            return item, item.id if item.id is not None else str(position)
        if not isinstance(item, (Sample, Mapping)):
            raise DataError(
                f"a sample is a ctxeval.Sample or a mapping of its fields (user_input, "
                f"retrieved_contexts, ...), got {type(item).__name__}"
            )
        try:
            sample = item if isinstance(item, Sample) else Sample.from_dict(item)
        except DataError as exc:
            given = item.get("id") if isinstance(item, Mapping) else None
            shown = id_for_message(given)
            sample_id = shown if shown is not None and shown == given else str(position)
            row = MetricResult.error(f"the sample could not be read: {exc}")
            return [row.labelled(sample_id, name) for name in self.names]
        return sample, sample.id if sample.id is not None else str(position)

    def score(self, sample: Sample, sample_id: str, rows: Rows) -> list[int]:
        """Fill ``rows`` with what the calling thread scores: a missing field's error row,
        and the rows of the metrics it scores; the positions of the others (to score in the
        loop)."""
        waiting: list[int] = []
        for position, (metric, score, fields) in enumerate(self._plan):
            if fields is not None and None in fields(sample):
                missing = sample.missing(metric.requires)
                row = missing_field_error(sample, metric, missing)
                rows[position] = row.labelled(sample_id, metric.name)
                continue
            if score is None:
                waiting.append(position)
                continue
            try:
                result = score(sample)
            except Exception as exc:  # a plugin's failure is its row's
                result = failure(exc, metric)
            rows[position] = checked(result, metric, sample_id)
        return waiting


class LoopScorer:
    """Scores the rows of the metrics the session's loop scores (see the module). Made in
    any thread; :meth:`start` and :meth:`aclose` in the loop."""

    def __init__(self, plan: RunPlan, record: Callable[[Sequence[MetricResult]], None]) -> None:
        self._plan = plan
        self._record = record
        self.metrics = plan.metrics
        self.timeout = plan.settings.metric_timeout
        self._sync = [sync_scorer(metric) for metric in plan.metrics]
        self._scheduler: Scheduler | None = None
        self.worker = SyncWorker(name="ctxeval-session-sync")
        self.watchdog = Watchdog(self.timeout)
        self._threads: list[threading.Thread] = []

    @property
    def scheduler(self) -> Scheduler:
        """The session's one scheduler (made in the loop by :meth:`start`)."""
        assert self._scheduler is not None, "LoopScorer.start() makes the scheduler"
        return self._scheduler

    def start(self) -> None:
        """Make the scheduler and start the watchdog (in the loop)."""
        plan = self._plan
        self._scheduler = Scheduler(plan.resolved_registry, plan.settings, llm=plan.llm)
        if any(score is None for score in self._sync):  # plugin coroutines run in the loop
            self.watchdog.start()

    async def aclose(self) -> None:
        """Stop the watchdog and the worker, close the scheduler's clients (in the loop)."""
        self.watchdog.stop()
        worker = self.worker.close()
        if worker is not None:
            self._threads.append(worker)
        if self._scheduler is not None:
            await self._scheduler.aclose()

    def join(self) -> None:
        """Wait for the watchdog's and the worker's threads to end (after :meth:`aclose`)."""
        self.watchdog.join(JOIN_WAIT)
        for thread in self._threads:
            thread.join(JOIN_WAIT)

    async def score(
        self, sample: Sample, sample_id: str, rows: Rows, waiting: list[int]
    ) -> list[MetricResult]:
        """Score the metrics at ``waiting`` on ``sample`` into ``rows``, record the sample's
        rows, and return them."""
        try:
            self.scheduler.check_budget()
        except BudgetExceededError as exc:  # no request is sent: the cap is reached
            for position in waiting:
                metric = self.metrics[position]
                rows[position] = checked(failure(exc, metric), metric, sample_id)
        else:
            if len(waiting) == 1:
                await self._one(sample, sample_id, rows, waiting[0])
            else:
                async with anyio.create_task_group() as group:
                    for position in waiting:
                        group.start_soon(self._one, sample, sample_id, rows, position)
        done = cast("list[MetricResult]", rows)  # (every row is scored now)
        self._record(done)
        return done

    async def _one(self, sample: Sample, sample_id: str, rows: Rows, position: int) -> None:
        metric = self.metrics[position]
        score = self._sync[position]
        if score is not None:  # a third party's synchronous score, cut at metric_timeout
            (made,) = await self.worker.run([score], [sample], self.timeout)
            rows[position] = checked(self._outcome(made, metric), metric, sample_id)
            return
        ctx = self.scheduler.context(sample)
        result: object = None
        with anyio.move_on_after(self.timeout) as scope:
            try:
                result = await self.watchdog.ascore(metric, sample, ctx)
            except Exception as exc:  # the row's error, with who was asked
                result = with_provenance(failure(exc, metric), metric, ctx)
        if scope.cancelled_caught:
            result = timed_out(metric, self.timeout)
        row = checked(result, metric, sample_id)
        spent = ctx.usage
        if spent is not None:
            row = row.with_usage(spent if row.usage.is_zero else row.usage + spent)
        rows[position] = row

    def _outcome(self, made: object, metric: Metric) -> object:
        if made is TIMED_OUT:
            return timed_out(metric, self.timeout)
        if isinstance(made, BaseException):
            return failure(made, metric)
        return made
