"""Run metrics over samples: :func:`stream`, :func:`aevaluate` (async) and :func:`evaluate`.

Rows come out in input order: sample by sample, and within a sample in the order the metrics
were given, as soon as every earlier row is out. Nothing is dropped: a sample that lacks a field
a metric requires, a metric that raises or returns something that is not a valid
:class:`MetricResult`, an LLM call that fails for good, each gives an ``error`` row with the
reason, and the run goes on.

How the work is done:

* Deterministic metrics (those with a synchronous ``score``) are called directly.
* The others run concurrently, each sample in its own task, at most ``samples_in_flight``
  samples at once (a sample's slot frees when its rows are *emitted*, so memory stays bounded
  even behind one slow sample). Their outside calls pass through the shared
  :class:`~ctxeval.context.Scheduler`: one concurrency limit and rate budget per resource,
  timeouts and retries.
* With ``journal=``, every row is appended to the journal as it finishes; ``resume=True`` reuses
  the ``ok`` and ``undefined`` rows of an earlier, interrupted run.
"""

from __future__ import annotations

import difflib
import functools
import gc
import itertools
import logging
import operator
import os
import sys
import threading
import time
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
    Sized,
)
from contextlib import asynccontextmanager, contextmanager
from typing import Any, Literal, TypeVar

import anyio
from anyio.abc import ObjectSendStream, TaskGroup

from .context import Scheduler
from .errors import BudgetExceededError, ConfigError, CtxevalError, DataError
from .evaluation import Evaluation
from .journal import Journal
from .limits import Limits
from .progress import Progress, ProgressTracker
from .protocols import Metric
from .registry import PluginInfo, Registry, default_registry
from .results import MetricResult
from .retry import RetryPolicy
from .sample import SAMPLE_FIELDS, Sample

__all__ = ["RowStream", "aevaluate", "evaluate", "get_metric", "plugins", "stream"]

logger = logging.getLogger(__name__)

Backend = Literal["asyncio", "trio"]
T = TypeVar("T")

_BATCH_ROWS = 256
"""Rows handed to the reader at once (samples that waited for outside calls go at once)."""
_BATCH_SECONDS = 0.05
"""The longest a finished row waits in a batch while the run keeps producing."""
_CHUNK = 2048
"""Samples scored per call when every metric of a run is deterministic."""
SampleInput = Sample | Mapping[str, Any]


def get_metric(name: str, /, *, registry: Registry | None = None, **options: Any) -> Metric:
    """Build the metric registered under ``name`` (or an alias) with ``options``.

    Example:
        >>> m = get_metric("id_precision_at_k", k=5)
        >>> m.name
        'id_precision_at_5'

    Raises:
        UnknownNameError: no metric has that name (the message suggests the closest ones).
        ConfigError: an option is unknown or has a bad value.
        MissingExtraError: the metric needs an extra that is not installed (with the command).
        PluginError: the plugin failed to load.
    """
    return (registry or default_registry()).get_metric(name, **options)


def plugins(*, registry: Registry | None = None) -> list[PluginInfo]:
    """Every registered plugin with its group, name, distribution, version and status."""
    return (registry or default_registry()).plugins()


def _resolve(metrics: Sequence[str | Metric], registry: Registry) -> list[Metric]:
    if isinstance(metrics, (str, bytes)) or not isinstance(metrics, Iterable):
        raise ConfigError("metrics must be a list of metric names or Metric objects")
    resolved: list[Metric] = []
    for spec in metrics:
        if isinstance(spec, str):
            resolved.append(registry.get_metric(spec))
        elif isinstance(spec, Metric):
            resolved.append(spec)
        else:
            raise ConfigError(
                f"{spec!r} is neither a metric name nor a Metric "
                "(an object with name, requires and ascore)"
            )
    if not resolved:
        raise ConfigError("no metric given; pass metrics=[...] (see ctxeval.plugins())")
    names = [m.name for m in resolved]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ConfigError(
            f"metric name(s) {', '.join(map(repr, repeated))} given more than once; give each "
            "a distinct name, e.g. get_metric('non_llm_context_recall', name='recall_partial', "
            "measure='partial')"
        )
    for metric in resolved:
        unknown = [f for f in metric.requires if f not in SAMPLE_FIELDS]
        if unknown:
            raise ConfigError(
                f"metric {metric.name!r} requires unknown sample field(s) {unknown}; "
                f"sample fields are {', '.join(SAMPLE_FIELDS)}"
            )
    return resolved


def _to_sample(item: SampleInput, index: int) -> Sample:
    if isinstance(item, Sample):
        return item
    try:
        return Sample.from_dict(item)
    except DataError as exc:
        sample_id = item.get("id") if isinstance(item, Mapping) else None
        raise exc.located(
            sample_id=str(sample_id) if sample_id is not None else str(index)
        ) from None


def _method(metric: Metric, name: str) -> Any:
    """``metric.name`` if the metric has such a method, else None."""
    method = getattr(metric, name, None)
    return method if callable(method) else None


def _lacking(samples: Sequence[Sample], requires: tuple[str, ...]) -> list[int]:
    """The positions of the samples that lack a field in ``requires``."""
    if not requires:
        return []
    values = operator.attrgetter(*requires)
    if len(requires) == 1:
        return [i for i, sample in enumerate(samples) if values(sample) is None]
    return [i for i, sample in enumerate(samples) if None in values(sample)]


def _identify(item: SampleInput, index: int, seen_ids: set[str]) -> tuple[Sample, str]:
    """The sample and its id (its position when it has none), refusing an id seen before."""
    sample = _to_sample(item, index)
    sample_id = sample.id if sample.id is not None else str(index)
    if sample_id in seen_ids:
        raise DataError(
            "two samples have this id",
            sample_id=sample_id,
            hint="sample ids must be unique; results and resumed runs are keyed by them",
        )
    seen_ids.add(sample_id)
    return sample, sample_id


def _missing_field_error(sample: Sample, metric: Metric, missing: list[str]) -> MetricResult:
    reason = (
        f"the sample has no {', '.join(repr(f) for f in missing)}, which {metric.name} requires"
    )
    typos = [
        f"{key!r} (did you mean {close[0]!r}?)"
        for key in sample.metadata
        for close in [difflib.get_close_matches(key, missing, n=1, cutoff=0.75)]
        if close
    ]
    if typos:
        reason += f"; the sample has a field {', '.join(typos)}"
    return MetricResult.error(reason, details={"missing_fields": missing})


def _checked(result: object, metric: Metric, sample_id: str) -> MetricResult:
    """The row for ``result``: labelled with sample and metric, or an error if it is no result."""
    if not isinstance(result, MetricResult):
        result = MetricResult.error(
            f"metric {metric.name!r} returned {type(result).__name__}, not a MetricResult"
        )
    elif result.sample_id == sample_id and result.metric == metric.name:
        return result  # a batch scorer labelled it already
    return result.labelled(sample_id, metric.name)


def _leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside (nested) exception groups, or ``[exc]``."""
    inner = getattr(exc, "exceptions", None)
    if isinstance(exc, Exception) and isinstance(inner, tuple) and inner:
        return [leaf for sub in inner for leaf in _leaves(sub)]
    return [exc]


def _failure(exc: BaseException, metric: Metric) -> MetricResult:
    """The error row for a metric that raised (the first failure inside a task group)."""
    logger.debug("metric %s failed", metric.name, exc_info=exc)
    leaves = _leaves(exc)
    first = leaves[0]
    kind = type(first).__name__
    more = f" (and {len(leaves) - 1} more failure(s))" if len(leaves) > 1 else ""
    if isinstance(first, CtxevalError):
        return MetricResult.error(f"{kind}: {first}{more}")
    return MetricResult.error(f"{kind} in metric {metric.name!r}: {first}{more}")


class _Run:
    """The state of one run: metrics, scheduler, journal, progress, order of emission."""

    def __init__(
        self,
        metrics: list[Metric],
        scheduler: Scheduler,
        journal: Journal | None,
        previous: dict[tuple[str, str], MetricResult],
        tracker: ProgressTracker,
        samples_in_flight: int,
    ) -> None:
        self.metrics = metrics
        self.scheduler = scheduler
        self.journal = journal
        self.previous = previous
        self.tracker = tracker
        self.window = anyio.Semaphore(samples_in_flight)
        self.sync_score: list[Callable[[Sample], object] | None] = [
            _method(m, "score") for m in metrics
        ]
        self.batch_score: list[Callable[[Sequence[Sample]], Sequence[object]] | None] = [
            _method(m, "score_batch") for m in metrics
        ]
        self.finished: dict[int, list[MetricResult]] = {}
        self.next_to_emit = 0
        self.emitting = False
        self.batch: list[MetricResult] = []
        self.last_flush = time.monotonic()
        self.failure: BaseException | None = None
        self.max_cost: float | None = None
        self.budget_hit: BudgetExceededError | None = None
        self.metric_timeout: float | None = None

    def _finish_row(self, row: MetricResult) -> MetricResult:
        if self.journal is not None:
            self.journal.write(row)
        self.tracker.add(row)
        return row

    def score_now(
        self, sample: Sample, sample_id: str
    ) -> tuple[list[MetricResult | None], list[int]]:
        """The rows that need no waiting, and the indexes of the metrics still to run."""
        rows: list[MetricResult | None] = [None] * len(self.metrics)
        waiting = []
        for position, metric in enumerate(self.metrics):
            reused = self.previous.get((sample_id, metric.name)) if self.previous else None
            if reused is not None:
                rows[position] = reused
                self.tracker.add(reused, resumed=True)
                continue
            missing = sample.missing(metric.requires)
            if missing:
                row = _missing_field_error(sample, metric, missing)
            else:
                score = self.sync_score[position]
                if score is None:
                    waiting.append(position)
                    continue
                try:
                    row = score(sample)  # type: ignore[assignment]
                except Exception as exc:
                    row = _failure(exc, metric)
            rows[position] = self._finish_row(_checked(row, metric, sample_id))
        return rows, waiting

    @property
    def all_deterministic(self) -> bool:
        """Whether every metric scores synchronously (then samples go in chunks)."""
        return all(score is not None for score in self.sync_score)

    def score_chunk(self, samples: list[Sample], ids: list[str]) -> list[MetricResult]:
        """Every row of ``samples`` (all metrics deterministic), in emission order."""
        lacking: dict[tuple[str, ...], list[int]] = {}  # per `requires`: samples lacking some
        columns = [
            self._column(position, samples, ids, lacking) for position in range(len(self.metrics))
        ]
        rows = [row for per_sample in zip(*columns, strict=True) for row in per_sample]
        if self.journal is not None:
            self.journal.write_many(rows)
        self.tracker.add_many(rows)
        return rows

    def _column(
        self,
        position: int,
        samples: list[Sample],
        ids: list[str],
        lacking: dict[tuple[str, ...], list[int]],
    ) -> list[MetricResult]:
        """The rows of one metric for ``samples``."""
        metric = self.metrics[position]
        requires = tuple(metric.requires)
        if requires not in lacking:
            lacking[requires] = _lacking(samples, requires)
        column: list[MetricResult | None] = [None] * len(samples)
        for i in lacking[requires]:
            missing = samples[i].missing(requires)
            column[i] = _missing_field_error(samples[i], metric, missing).labelled(
                ids[i], metric.name
            )
        if lacking[requires]:
            skip = set(lacking[requires])
            ready = [i for i in range(len(samples)) if i not in skip]
            todo = [samples[i] for i in ready]
        else:
            ready, todo = list(range(len(samples))), samples
        for i, result in zip(ready, self._score_all(position, todo), strict=True):
            column[i] = _checked(result, metric, ids[i])
        return column  # type: ignore[return-value]

    def _score_all(self, position: int, samples: Sequence[Sample]) -> Sequence[object]:
        metric = self.metrics[position]
        batch = self.batch_score[position]
        if batch is not None and samples:
            try:
                results = batch(samples)
                if len(results) == len(samples):
                    return results
                logger.warning(
                    "metric %s: score_batch() gave %d result(s) for %d sample(s); scoring them "
                    "one by one",
                    metric.name, len(results), len(samples),
                )  # fmt: skip
            except Exception:
                logger.debug("metric %s: score_batch() failed; scoring one by one", metric.name)
        score = self.sync_score[position]
        assert score is not None
        out: list[object] = []
        for sample in samples:
            try:
                out.append(score(sample))
            except Exception as exc:
                out.append(_failure(exc, metric))
        return out

    async def score_later(
        self,
        index: int,
        sample: Sample,
        sample_id: str,
        rows: list[MetricResult | None],
        waiting: list[int],
        send: ObjectSendStream[list[MetricResult]],
    ) -> None:
        async def one(position: int) -> None:
            metric = self.metrics[position]
            ctx = self.scheduler.context()
            result: object = None
            with anyio.move_on_after(self.metric_timeout) as scope:
                try:
                    result = await metric.ascore(sample, ctx)
                except Exception as exc:
                    leaves = _leaves(exc)
                    budget = next((e for e in leaves if isinstance(e, BudgetExceededError)), None)
                    if budget is not None and self.budget_hit is None:
                        self.budget_hit = budget  # raised to the reader once the rows are out
                    result = _failure(exc, metric)
            if scope.cancelled_caught:
                result = MetricResult.error(
                    f"metric {metric.name!r} did not finish within {self.metric_timeout:g} s "
                    "(metric_timeout); the plugin may hang"
                )
            row = _checked(result, metric, sample_id)
            spent = ctx.usage
            if spent is not None:
                row = row.with_usage(spent if row.usage.is_zero else row.usage + spent)
            rows[position] = self._finish_row(row)

        if len(waiting) == 1:
            await one(waiting[0])
        else:
            async with anyio.create_task_group() as group:
                for position in waiting:
                    group.start_soon(one, position)
        await self.done(index, rows, send, eager=True)

    async def done(
        self,
        index: int,
        rows: list[MetricResult | None],
        send: ObjectSendStream[list[MetricResult]],
        *,
        eager: bool,
    ) -> None:
        """Sample ``index`` is complete: emit it and every later one already complete, in order.

        Rows go out in batches (fewer hand-overs between tasks); ``eager`` sends at once, as
        the samples that waited for outside calls do. Only one task emits at a time: a task
        that finds another one emitting leaves its rows to it.
        """
        self.finished[index] = rows  # type: ignore[assignment]
        if self.emitting:
            return
        self.emitting = True
        try:
            while True:
                while self.next_to_emit in self.finished:
                    self.batch.extend(self.finished.pop(self.next_to_emit))
                    self.next_to_emit += 1
                    self.window.release()
                if self.batch and (
                    eager
                    or len(self.batch) >= _BATCH_ROWS
                    or time.monotonic() - self.last_flush >= _BATCH_SECONDS
                ):
                    await self.flush(send)
                    continue  # others may have finished while we waited
                break
        finally:
            self.emitting = False

    async def flush(self, send: ObjectSendStream[list[MetricResult]]) -> None:
        """Send the rows emitted so far to the reader."""
        batch, self.batch = self.batch, []
        self.last_flush = time.monotonic()
        if batch:
            await send.send(batch)


async def _produce(
    run: _Run,
    samples: Iterable[SampleInput] | Any,
    send: ObjectSendStream[list[MetricResult]],
) -> None:
    async with send:
        async with anyio.create_task_group() as group:
            try:
                await _read_samples(run, samples, send, group)
            except BudgetExceededError as exc:  # the samples already started finish, then stop
                run.failure = exc
            except Exception as exc:  # handed to the reader as it is (not in an exception group)
                run.failure = exc
                group.cancel_scope.cancel()
        if run.failure is None and run.budget_hit is not None:
            run.failure = run.budget_hit
        if run.failure is None or isinstance(run.failure, BudgetExceededError):
            await run.flush(send)


async def _read_samples(
    run: _Run, samples: Any, send: ObjectSendStream[list[MetricResult]], group: TaskGroup
) -> None:
    if run.all_deterministic and not run.previous and not hasattr(samples, "__aiter__"):
        await _score_in_chunks(run, samples, send)
        return
    seen_ids: set[str] = set()
    index = 0
    async for item in _iterate(samples):
        spent = run.scheduler.spent
        if run.max_cost is not None and spent >= run.max_cost:
            raise BudgetExceededError(spent, run.max_cost)
        sample, sample_id = _identify(item, index, seen_ids)
        try:
            run.window.acquire_nowait()
        except anyio.WouldBlock:
            await run.flush(send)
            await run.window.acquire()
        rows, waiting = run.score_now(sample, sample_id)
        if waiting:
            group.start_soon(run.score_later, index, sample, sample_id, rows, waiting, send)
        else:
            await run.done(index, rows, send, eager=False)
        index += 1


async def _score_in_chunks(
    run: _Run, samples: Iterable[SampleInput], send: ObjectSendStream[list[MetricResult]]
) -> None:
    """The fast path of a run whose metrics are all deterministic: ``_CHUNK`` samples at a
    time through each metric (``score_batch`` where it exists), rows sent a chunk at a time."""
    seen_ids: set[str] = set()
    index = 0
    items = iter(samples)
    while True:
        chunk: list[Sample] = []
        ids: list[str] = []
        error: Exception | None = None
        with _collector_paused():
            try:
                for item in itertools.islice(items, _CHUNK):
                    sample, sample_id = _identify(item, index, seen_ids)
                    chunk.append(sample)
                    ids.append(sample_id)
                    index += 1
            except Exception as exc:  # the rows of the samples before the bad one still go out
                error = exc
            rows = run.score_chunk(chunk, ids) if chunk else []
        if rows:
            await send.send(rows)
        if error is not None:
            raise error
        if not chunk:
            return


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause Python's cycle collector while a chunk is read and scored.

    A chunk allocates many small objects that all stay alive (samples, rows); with the
    collector on, each full collection walks every row of the run so far, which costs a
    third of a large deterministic run. Reference counting still frees what it can; cycles
    made meanwhile are collected when the collector resumes, a few milliseconds later, as
    :mod:`timeit` does around what it measures. It is left off if it was off.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


async def _iterate(samples: Any) -> AsyncIterator[SampleInput]:
    if hasattr(samples, "__aiter__"):
        async for item in samples:
            yield item
    else:
        for item in samples:
            yield item


class RowStream(AsyncIterator[MetricResult]):
    """The rows of a run in input order (what ``async with stream(...)`` gives).

    Iterate it row by row, or with :meth:`batches` as lists of the rows ready at once (less
    overhead per row on large runs); use one or the other on a stream, not both.

    Attributes:
        metrics: the row names of the run's metrics, in order.
    """

    def __init__(
        self,
        batches: AsyncIterator[list[MetricResult]],
        metrics: tuple[str, ...],
        tracker: ProgressTracker,
    ) -> None:
        self._batches = batches
        self._ready: Iterator[MetricResult] = iter(())
        self.metrics = metrics
        self._tracker = tracker

    def __aiter__(self) -> RowStream:
        return self

    async def __anext__(self) -> MetricResult:
        while True:
            row = next(self._ready, None)
            if row is not None:
                return row
            self._ready = iter(await self._batches.__anext__())

    def batches(self) -> AsyncIterator[list[MetricResult]]:
        """The rows in lists, as the run hands them over (each list in input order)."""
        return self._batches

    def progress(self) -> Progress:
        """The progress of the run now."""
        return self._tracker.snapshot()


@asynccontextmanager
async def stream(
    samples: Iterable[SampleInput],
    metrics: Sequence[str | Metric],
    *,
    llm: Any = None,
    registry: Registry | None = None,
    limits: Limits | Mapping[str, Limits] | None = None,
    max_concurrency: int | None = None,
    retry: RetryPolicy | None = None,
    timeout: float | None = 120.0,
    samples_in_flight: int = 256,
    journal: str | os.PathLike[str] | None = None,
    resume: bool = False,
    on_progress: Callable[[Progress], object] | None = None,
    cache: Any = None,
    max_cost_usd: float | None = None,
    metric_timeout: float | None = 3600.0,
) -> AsyncIterator[RowStream]:
    """Score samples and read the rows as they come, in input order.

    ::

        async with ctxeval.stream(samples, ["id_mrr"]) as rows:
            async for row in rows:
                ...

    Leaving the block early cancels the work still running. Arguments are those of
    :func:`aevaluate`.
    """
    if samples_in_flight < 1:
        raise ConfigError(f"samples_in_flight must be at least 1, got {samples_in_flight!r}")
    if max_concurrency is not None:
        if limits is not None:
            raise ConfigError("give either limits= or max_concurrency=, not both")
        limits = Limits(max_concurrency=max_concurrency)
    registry = registry or default_registry()
    resolved = _resolve(metrics, registry)
    scheduler = Scheduler(
        registry, limits=limits, retry=retry, timeout=timeout, llm=llm, cache=cache
    )
    total = len(samples) * len(resolved) if isinstance(samples, Sized) else None
    tracker = ProgressTracker(on_progress, total)
    open_journal: Journal | None = None
    previous: dict[tuple[str, str], MetricResult] = {}
    if journal is not None:
        open_journal, previous = Journal.open(journal, resolved, resume=resume)
        if previous:
            logger.info("%s: resuming; %d row(s) already done", journal, len(previous))
    elif resume:
        raise ConfigError("resume=True needs journal= (the journal of the run to resume)")
    run = _Run(resolved, scheduler, open_journal, previous, tracker, samples_in_flight)
    run.max_cost = scheduler.max_cost = max_cost_usd
    run.metric_timeout = metric_timeout
    send, receive = anyio.create_memory_object_stream[list[MetricResult]](
        max_buffer_size=max(1, samples_in_flight * len(resolved) // _BATCH_ROWS)
    )

    async def batches() -> AsyncIterator[list[MetricResult]]:
        async with receive:
            async for batch in receive:
                yield batch
        if run.failure is not None:
            raise run.failure
        tracker.finish()

    error: Exception | None = None
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(_produce, run, samples, send)
            try:
                yield RowStream(batches(), tuple(m.name for m in resolved), tracker)
            except Exception as exc:  # raised again below, not wrapped in an exception group
                error = exc
            finally:
                group.cancel_scope.cancel()
        if error is not None:
            raise error
    except BaseException:
        if open_journal is not None:
            logger.warning(
                "run stopped with %d row(s) saved in %s; run again with resume=True "
                "(ctxeval evaluate --resume) to finish it",
                tracker.done, open_journal.path,
            )  # fmt: skip
        raise
    finally:
        await scheduler.aclose()
        if open_journal is not None:
            open_journal.close()


async def aevaluate(
    samples: Iterable[SampleInput],
    metrics: Sequence[str | Metric],
    *,
    llm: Any = None,
    registry: Registry | None = None,
    limits: Limits | Mapping[str, Limits] | None = None,
    max_concurrency: int | None = None,
    retry: RetryPolicy | None = None,
    timeout: float | None = 120.0,
    samples_in_flight: int = 256,
    journal: str | os.PathLike[str] | None = None,
    resume: bool = False,
    on_progress: Callable[[Progress], object] | None = None,
    cache: Any = None,
    max_cost_usd: float | None = None,
    metric_timeout: float | None = 3600.0,
) -> Evaluation:
    """Score every sample with every metric, inside a running anyio/asyncio/trio program.

    Args:
        samples: :class:`Sample` objects or dicts with sample field names, read lazily (an
            async iterable works too).
        metrics: metric names (with default options) or metrics from :func:`get_metric`.
        llm: the LLM configuration for metrics that need one (unused by the others).
        registry: resolve names here instead of the default registry.
        limits: the limits of every resource, or per resource name (see
            :class:`~ctxeval.Limits`); default: 16 calls in flight per resource.
        max_concurrency: shortcut for ``limits=Limits(max_concurrency=...)``.
        retry: the retry policy for failed calls (see :class:`~ctxeval.RetryPolicy`).
        timeout: seconds one call attempt may take (None: no limit).
        samples_in_flight: samples being worked on at once; bounds memory on large inputs.
        journal: a file to append each finished row to, so an interrupted run can resume.
        resume: reuse the ``ok`` and ``undefined`` rows of ``journal`` (error rows are redone).
        on_progress: called with a :class:`~ctxeval.Progress` at most every 0.1 s and at the end.
        cache: a cache handed to plugins through the run context (e.g.
            :class:`ctxeval.cache.SQLiteCache`).
        max_cost_usd: stop taking new samples once the run has spent this much (the samples
            already started finish, and :class:`~ctxeval.BudgetExceededError` is raised; with a
            journal, the run can be resumed).
        metric_timeout: seconds one metric may take on one sample, retries included, before
            its row becomes an ``error`` (a plugin that hangs cannot hold the run; None: no
            limit).

    Returns:
        An :class:`Evaluation` whose rows are in input order.

    Raises:
        ConfigError: a metric is unknown, misconfigured or given twice; bad run options.
        DataError: a sample dict is malformed, or two samples share an id.
    """
    async with stream(
        samples,
        metrics,
        llm=llm,
        registry=registry,
        limits=limits,
        max_concurrency=max_concurrency,
        retry=retry,
        timeout=timeout,
        samples_in_flight=samples_in_flight,
        journal=journal,
        resume=resume,
        on_progress=on_progress,
        cache=cache,
        max_cost_usd=max_cost_usd,
        metric_timeout=metric_timeout,
    ) as rows:
        collected = []
        async for batch in rows.batches():
            collected.extend(batch)
    return Evaluation(collected, rows.metrics)


def run_to_completion(func: Callable[[], Awaitable[T]], *, backend: Backend = "asyncio") -> T:
    """``anyio.run(func)``, with Ctrl-C raised as ``KeyboardInterrupt`` on every Python
    (before 3.11, asyncio lets it out as a bare ``CancelledError``)."""
    import asyncio

    try:
        return anyio.run(func, backend=backend)
    except asyncio.CancelledError:
        if sys.version_info >= (3, 11):
            raise
        raise KeyboardInterrupt from None


def _loop_running_in_this_thread() -> bool:
    try:
        import sniffio

        sniffio.current_async_library()
    except Exception:
        return False
    return True


def evaluate(
    samples: Iterable[SampleInput],
    metrics: Sequence[str | Metric],
    *,
    backend: Backend = "asyncio",
    **options: Any,
) -> Evaluation:
    """Score every sample with every metric and wait for the result.

    Takes the arguments of :func:`aevaluate`, and ``backend`` (``asyncio`` or ``trio``).
    Works from plain code and also where an event loop is already running in this thread
    (Jupyter, FastAPI handlers, async tests): the run then gets its own loop in a worker thread,
    without ``nest_asyncio``.

    Example:
        >>> ev = evaluate(
        ...     [{"retrieved_context_ids": ["doc_1", "doc_2", "doc_3", "doc_4"],
        ...       "reference_context_ids": ["doc_1", "doc_4", "doc_5", "doc_6"]}],
        ...     metrics=["id_based_context_precision"],
        ... )
        >>> ev.results[0].score
        0.5
    """
    run = functools.partial(aevaluate, samples, metrics, **options)
    if not _loop_running_in_this_thread():
        return run_to_completion(run, backend=backend)
    outcome: dict[str, Any] = {}

    def worker() -> None:
        try:
            outcome["value"] = run_to_completion(run, backend=backend)
        except BaseException as exc:  # handed to the calling thread below
            outcome["error"] = exc

    thread = threading.Thread(target=worker, name="ctxeval-evaluate", daemon=True)
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    result: Evaluation = outcome["value"]
    return result
