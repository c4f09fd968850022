"""The state of one run inside the local runner: :class:`Run`, its metrics, scheduler, sink,
emitter and worker, and how one sample is scored (:meth:`Run.score_now`,
:meth:`Run.score_later`). The local runner (:mod:`ctxeval._run.local`) drives it sample by
sample; the fast path (:mod:`ctxeval._run.fastpath`) a chunk at a time.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import anyio

from ctxeval._calls.scheduler import Scheduler
from ctxeval._data.sample import Sample
from ctxeval._errors import (
    BudgetExceededError,
    CtxevalError,
    MissingExtraError,
    UnusableLLMError,
)
from ctxeval._output.files import UnwritableFolderError
from ctxeval._pipeline.deterministic import DeterministicPipelineMetric
from ctxeval._plugins.hooks import ReportsProvenance, ScoresColumn
from ctxeval._plugins.protocols import Metric, RunContext
from ctxeval._results.results import MetricResult
from ctxeval._run.emission import Emitter
from ctxeval._run.journal import sample_digest
from ctxeval._run.plan import RunPlan
from ctxeval._run.rows import (
    batch_scorer,
    checked,
    column_scorer,
    failure,
    leaves,
    missing_field_error,
    sync_scorer,
)
from ctxeval._run.sink import RowSink
from ctxeval._run.watchdog import EventLoopBlockedError, Watchdog
from ctxeval._run.worker import TIMED_OUT, SyncWorker

__all__ = ["Run", "timed_out"]

logger = logging.getLogger(__name__)

_STOPS_THE_RUN = (UnusableLLMError, MissingExtraError, EventLoopBlockedError)
"""Errors no row of the run can get past: the run stops at the first (see :meth:`Run.stop`)."""


class Run:
    """The state of one run: its metrics, scheduler, journal, progress and emitter."""

    def __init__(
        self,
        plan: RunPlan,
        scheduler: Scheduler,
        sink: RowSink,
        emitter: Emitter,
        *,
        first_index: int = 0,
    ) -> None:
        self.plan = plan
        self.metrics: list[Metric] = list(plan.metrics)
        self.scheduler = scheduler
        self.sink = sink
        self.journaled = sink.journaled
        """Whether rows go to a journal (then each row's sample digest is computed)."""
        self.previous = plan.previous
        self.stale = 0
        """Rows of the journal not reused because their sample changed since."""
        self.tracker = sink.tracker
        self.emitter = emitter
        self.metric_timeout = plan.settings.metric_timeout
        self.lenient = plan.settings.lenient
        self.first_index = first_index
        """The position in the whole input of this run's first sample (a worker scoring a
        part of the input: positional ids count from here)."""
        self.sync_score: list[Callable[[Sample], object] | None] = [
            sync_scorer(m) for m in self.metrics
        ]
        self.batch_score: list[Callable[[Sequence[Sample]], Sequence[object]] | None] = [
            batch_scorer(m) for m in self.metrics
        ]
        self.column_score: list[ScoresColumn | None] = [
            None if isinstance(m, DeterministicPipelineMetric) else column_scorer(m)
            for m in self.metrics
        ]
        """Per metric: itself when it scores a chunk as a column (set to None once its
        ``score_column`` has failed: its ``score_batch`` or ``score`` from then on)."""
        self.judging_keys: list[tuple[object, ...] | None] = [
            m.judging_key() if isinstance(m, DeterministicPipelineMetric) else None
            for m in self.metrics
        ]
        """Per metric: its judging key (metrics with equal keys are judged once per chunk)."""
        self.failure: BaseException | None = None
        """What stopped the run, handed to the reader once the rows before it are out."""
        self.budget_hit: BudgetExceededError | None = None
        self.stopped: CtxevalError | UnwritableFolderError | None = None
        """The error that made every further call pointless (an unusable LLM, a missing
        package), when one did."""
        self.stop_scope: anyio.CancelScope | None = None
        self.worker = SyncWorker()
        """Where synchronous plugin calls are made (when there is a ``metric_timeout``)."""
        self.watchdog = Watchdog(self.metric_timeout)
        """Through which async plugin calls are made: one that holds the event loop is cut."""

    def scorer(self, position: int) -> Callable[[Sample], object]:
        """The ``score`` of the deterministic metric at ``position``."""
        score = self.sync_score[position]
        assert score is not None
        return score

    def batch_scorer(self, position: int) -> Callable[[Sequence[Sample]], Sequence[object]]:
        """The ``score_batch`` of the metric at ``position``, which has one."""
        batch = self.batch_score[position]
        assert batch is not None
        return batch

    async def call_sync(
        self, functions: Sequence[Callable[[Any], object]], arguments: Sequence[Any]
    ) -> list[object]:
        """``functions[i](arguments[i])`` for each ``i`` (synchronous plugin calls), each cut
        at ``metric_timeout``: their results, the exceptions they raised, or
        :data:`~ctxeval._run.worker.TIMED_OUT`."""
        if self.metric_timeout is not None:
            return await self.worker.run(functions, arguments, self.metric_timeout)
        out: list[object] = []
        for function, argument in zip(functions, arguments, strict=True):
            try:  # no bound: in this thread, as the caller asked
                out.append(function(argument))
            except Exception as exc:
                out.append(exc)
        return out

    def outcome(self, result: object, metric: Metric) -> object:
        """The result of a synchronous call, with its failure or time-out as an error row."""
        if result is TIMED_OUT:
            return timed_out(metric, self.metric_timeout)
        if isinstance(result, BaseException):
            return failure(result, metric)
        return result

    def stop(self, exc: CtxevalError | UnwritableFolderError) -> None:
        """Stop the run at once: no request of it can succeed. The rows finished so far are
        journaled; the others are not written, so that a resume scores them."""
        if self.stopped is None:
            self.stopped = getattr(exc, "original", None) or exc  # the first, not a copy
            logger.info("stopping the run: %s", exc)  # the error itself tells the user
        if self.stop_scope is not None:
            self.stop_scope.cancel()

    @property
    def all_deterministic(self) -> bool:
        """Whether every metric scores synchronously (then samples go in chunks)."""
        return all(score is not None for score in self.sync_score)

    def digest(self, sample: Sample) -> str:
        """The sample's digest, when a journal needs it (else empty)."""
        return sample_digest(sample) if self.journaled or self.previous else ""

    def finish_row(self, row: MetricResult, digest: str) -> MetricResult:
        """Journal (with its sample's ``digest``) and count one finished row."""
        self.sink.record((row,), (digest,))
        return row

    def finish_rows(self, rows: Sequence[MetricResult], samples: list[Sample]) -> None:
        """Journal and count the finished rows of ``samples`` (sample by sample, metric by
        metric)."""
        each = len(self.metrics)
        if self.journaled:
            digests = [d for d in map(sample_digest, samples) for _ in range(each)]
            self.sink.record(rows, digests)
        else:
            self.sink.record(rows, None)

    def finish_rows_of_unreadable(self, rows: list[MetricResult]) -> None:
        """Journal and count the error rows of a sample that could not be read (it has no
        digest: a resume computes error rows again anyway)."""
        self.sink.record(rows, [""] * len(rows))

    async def score_now(
        self, sample: Sample, sample_id: str
    ) -> tuple[list[MetricResult | None], list[int]]:
        """The rows of the metrics that need no outside calls (resumed, lacking a field, or
        deterministic), and the indexes of the metrics still to run."""
        rows: list[MetricResult | None] = [None] * len(self.metrics)
        results: list[object] = [None] * len(self.metrics)
        waiting: list[int] = []
        deterministic: list[int] = []
        digest = self.digest(sample)
        for position, metric in enumerate(self.metrics):
            earlier = self.previous.get((sample_id, metric.name)) if self.previous else None
            if earlier is not None:
                if earlier[1] == digest:
                    rows[position] = earlier[0]
                    self.tracker.add(earlier[0], resumed=True)
                    continue
                self.stale += 1  # the sample changed under the same id: score it again
            missing = sample.missing(metric.requires)
            if missing:
                results[position] = missing_field_error(sample, metric, missing)
            elif self.sync_score[position] is None:
                waiting.append(position)
            else:
                deterministic.append(position)
        if deterministic:
            made = await self.call_sync(
                [self.scorer(p) for p in deterministic], [sample] * len(deterministic)
            )
            for position, result in zip(deterministic, made, strict=True):
                results[position] = self.outcome(result, self.metrics[position])
        for position, metric in enumerate(self.metrics):
            if rows[position] is None and position not in waiting:
                row = checked(results[position], metric, sample_id)
                rows[position] = self.finish_row(row, digest)
        return rows, waiting

    async def score_later(
        self,
        index: int,
        sample: Sample,
        sample_id: str,
        rows: list[MetricResult | None],
        waiting: list[int],
    ) -> None:
        """Run the metrics that wait for outside calls on one sample, then emit it."""

        digest = self.digest(sample)

        async def one(position: int) -> None:
            metric = self.metrics[position]
            ctx = self.scheduler.context(sample)
            result: object = None
            with anyio.move_on_after(self.metric_timeout) as scope:
                try:
                    result = await self.watchdog.ascore(metric, sample, ctx)
                except Exception as exc:
                    unusable = next((e for e in leaves(exc) if isinstance(e, _STOPS_THE_RUN)), None)
                    if unusable is not None:
                        self.stop(unusable)
                        return  # no row: a resume scores it
                    budget = next(
                        (e for e in leaves(exc) if isinstance(e, BudgetExceededError)), None
                    )
                    if budget is not None and self.budget_hit is None:
                        self.budget_hit = budget  # raised to the reader once the rows are out
                    result = with_provenance(failure(exc, metric), metric, ctx)
            if scope.cancelled_caught:
                result = timed_out(metric, self.metric_timeout)
            row = checked(result, metric, sample_id)
            spent = ctx.usage
            if spent is not None:
                row = row.with_usage(spent if row.usage.is_zero else row.usage + spent)
            try:
                rows[position] = self.finish_row(row, digest)
            except UnwritableFolderError as exc:  # the journal cannot be written: a full disk
                self.stop(exc)  # (raised as it is, not in an exception group)

        if len(waiting) == 1:
            await one(waiting[0])
        else:
            async with anyio.create_task_group() as group:
                for position in waiting:
                    group.start_soon(one, position, name="ctxeval: a metric")
        await self.emitter.done(index, rows, eager=True)  # type: ignore[arg-type]


def with_provenance(row: MetricResult, metric: Metric, ctx: RunContext) -> MetricResult:
    """An error row with who was asked (the metric's ``provenance(ctx)``: the judge's model,
    endpoint, output mode...), as a scored row has it: an error is read with its judge."""
    said = None
    if isinstance(metric, ReportsProvenance):
        try:
            said = metric.provenance(ctx)
        except Exception:  # the row says what failed; a provenance that fails adds nothing
            logger.debug("provenance of %s failed", metric.name, exc_info=True)
    return row.with_details(provenance=said) if said else row


def timed_out(metric: Metric, timeout: float | None) -> MetricResult:
    """The error row of a metric call cut at ``metric_timeout``."""
    return MetricResult.error(
        f"metric {metric.name!r} did not finish within {timeout:g} s (metric_timeout); "
        "the plugin may hang"
    )
