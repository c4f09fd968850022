"""One run: samples in, every metric on every sample, rows out to the :class:`Emitter`.

How the work is done:

* Deterministic metrics (those with a synchronous ``score``) are called in the run's worker
  thread, each call cut at ``metric_timeout`` (:mod:`ctxeval._run.worker`; with no timeout, in the
  run's own thread); when every metric of the run is deterministic, samples go in chunks
  (:mod:`ctxeval._run.fastpath`).
* The others run concurrently, each sample in its own task, within the emitter's window of
  samples in flight. Their outside calls pass through the run's
  :class:`~ctxeval._calls.scheduler.Scheduler` (limits, retries, timeouts, cost budget), each metric
  call with a :class:`~ctxeval._calls.context.RowContext` of its own, cut at ``metric_timeout``.
* Every finished row goes to the journal (when there is one) and the progress tracker; rows of
  an earlier, interrupted run are reused when resuming.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from typing import Any

import anyio
from anyio.abc import ObjectSendStream, TaskGroup

from ctxeval._calls.scheduler import Scheduler
from ctxeval._data.sample import Sample
from ctxeval._errors import (
    BudgetExceededError,
    CtxevalError,
    DataError,
    MissingExtraError,
    UnusableLLMError,
)
from ctxeval._pipeline.pipeline import DeterministicPipelineMetric
from ctxeval._plugins.protocols import Metric
from ctxeval._results.results import MetricResult
from ctxeval._run.emission import Emitter
from ctxeval._run.fastpath import score_in_chunks
from ctxeval._run.journal import Journal, Previous, sample_digest
from ctxeval._run.progress import ProgressTracker
from ctxeval._run.rows import (
    SampleInput,
    checked,
    failure,
    identify,
    leaves,
    method,
    missing_field_error,
    unreadable,
)
from ctxeval._run.worker import TIMED_OUT, SyncWorker

__all__ = ["Run", "produce", "timed_out"]

logger = logging.getLogger(__name__)

_STOPS_THE_RUN = (UnusableLLMError, MissingExtraError)
"""Errors no row of the run can get past: the run stops at the first (see :meth:`Run.stop`)."""


class Run:
    """The state of one run: its metrics, scheduler, journal, progress and emitter."""

    def __init__(
        self,
        metrics: list[Metric],
        scheduler: Scheduler,
        journal: Journal | None,
        previous: Previous,
        tracker: ProgressTracker,
        emitter: Emitter,
        metric_timeout: float | None,
        lenient: bool = False,
    ) -> None:
        self.metrics = metrics
        self.scheduler = scheduler
        self.journal = journal
        self.previous = previous
        self.stale = 0
        """Rows of the journal not reused because their sample changed since."""
        self.tracker = tracker
        self.emitter = emitter
        self.metric_timeout = metric_timeout
        self.lenient = lenient
        self.sync_score: list[Callable[[Sample], object] | None] = [
            method(m, "score") for m in metrics
        ]
        self.batch_score: list[Callable[[Sequence[Sample]], Sequence[object]] | None] = [
            method(m, "score_batch") for m in metrics
        ]
        self.judging_keys: list[tuple[object, ...] | None] = [
            m.judging_key() if isinstance(m, DeterministicPipelineMetric) else None for m in metrics
        ]
        """Per metric: its judging key (metrics with equal keys are judged once per chunk)."""
        self.failure: BaseException | None = None
        """What stopped the run, handed to the reader once the rows before it are out."""
        self.budget_hit: BudgetExceededError | None = None
        self.stopped: CtxevalError | None = None
        """The error that made every further call pointless (an unusable LLM, a missing
        package), when one did."""
        self.stop_scope: anyio.CancelScope | None = None
        self.worker = SyncWorker()
        """Where synchronous plugin calls are made (when there is a ``metric_timeout``)."""

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

    def stop(self, exc: CtxevalError) -> None:
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
        return sample_digest(sample) if self.journal is not None or self.previous else ""

    def finish_row(self, row: MetricResult, digest: str) -> MetricResult:
        """Journal (with its sample's ``digest``) and count one finished row."""
        if self.journal is not None:
            self.journal.write(row, digest)
        self.tracker.add(row)
        return row

    def finish_rows(self, rows: Sequence[MetricResult], samples: list[Sample]) -> None:
        """Journal and count the finished rows of ``samples`` (sample by sample, metric by
        metric)."""
        each = len(self.metrics)
        if self.journal is not None:
            digests = [d for d in map(sample_digest, samples) for _ in range(each)]
            self._finish(rows, digests)
        else:
            self.tracker.add_many(rows)

    def finish_rows_of_unreadable(self, rows: list[MetricResult]) -> None:
        """Journal and count the error rows of a sample that could not be read (it has no
        digest: a resume computes error rows again anyway)."""
        self._finish(rows, [""] * len(rows))

    def _finish(self, rows: Sequence[MetricResult], digests: list[str]) -> None:
        if self.journal is not None:
            self.journal.write_many(rows, digests)
        self.tracker.add_many(rows)

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
                    result = await metric.ascore(sample, ctx)
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
                    result = failure(exc, metric)
            if scope.cancelled_caught:
                result = timed_out(metric, self.metric_timeout)
            row = checked(result, metric, sample_id)
            spent = ctx.usage
            if spent is not None:
                row = row.with_usage(spent if row.usage.is_zero else row.usage + spent)
            rows[position] = self.finish_row(row, digest)

        if len(waiting) == 1:
            await one(waiting[0])
        else:
            async with anyio.create_task_group() as group:
                for position in waiting:
                    group.start_soon(one, position)
        await self.emitter.done(index, rows, eager=True)  # type: ignore[arg-type]


async def produce(
    run: Run, samples: Iterable[SampleInput] | Any, send: ObjectSendStream[list[MetricResult]]
) -> None:
    """Read ``samples``, score them and send the rows; the stream closes at the end.

    A cost limit lets the samples already started finish, then stops; an LLM no request can
    succeed with (:class:`~ctxeval.UnusableLLMError`) stops the run at once; any other failure
    (a malformed sample, two samples with one id) cancels the run and is handed to the reader
    as it is.
    """
    async with send:
        try:
            await _produce(run, samples)
        finally:
            run.worker.close()


async def _produce(run: Run, samples: Iterable[SampleInput] | Any) -> None:
    async with anyio.create_task_group() as group:
        run.stop_scope = group.cancel_scope
        try:
            await _read_samples(run, samples, group)
        except BudgetExceededError as exc:  # the samples already started finish, then stop
            run.failure = exc
        except Exception as exc:  # handed to the reader as it is (not in an exception group)
            run.failure = exc
            group.cancel_scope.cancel()
    if run.stopped is not None:
        run.failure = run.stopped
    if run.failure is None and run.budget_hit is not None:
        run.failure = run.budget_hit
    if run.failure is None or isinstance(run.failure, BudgetExceededError):
        await run.emitter.flush()


async def _read_samples(run: Run, samples: Any, group: TaskGroup) -> None:
    if run.all_deterministic and not run.previous and not hasattr(samples, "__aiter__"):
        await score_in_chunks(run, samples)
        return
    seen_ids: set[str] = set()
    index = 0
    async for item in _iterate(samples):
        run.scheduler.check_budget()
        try:
            sample, sample_id = identify(item, index, seen_ids)
        except DataError as exc:
            if not run.lenient:
                raise
            await run.emitter.admit()
            bad = unreadable(exc, index, seen_ids, run.metrics)
            run.finish_rows_of_unreadable(bad)
            await run.emitter.done(index, bad, eager=False)
            index += 1
            continue
        await run.emitter.admit()
        rows, waiting = await run.score_now(sample, sample_id)
        if waiting:
            group.start_soon(run.score_later, index, sample, sample_id, rows, waiting)
        else:
            await run.emitter.done(index, rows, eager=False)  # type: ignore[arg-type]
        index += 1


def timed_out(metric: Metric, timeout: float | None) -> MetricResult:
    """The error row of a metric call cut at ``metric_timeout``."""
    return MetricResult.error(
        f"metric {metric.name!r} did not finish within {timeout:g} s (metric_timeout); "
        "the plugin may hang"
    )


async def _iterate(samples: Any) -> AsyncIterator[SampleInput]:
    if hasattr(samples, "__aiter__"):
        async for item in samples:
            yield item
    else:
        for item in samples:
            yield item
