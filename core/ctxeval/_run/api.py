"""The public entry points: :func:`stream`, :func:`aevaluate`, :func:`evaluate`, and the
registry front end :func:`get_metric` and :func:`plugins`.

Rows come out in input order: sample by sample, and within a sample in the order the metrics
were given, as soon as every earlier row is out. Nothing is dropped: a sample that lacks a field
a metric requires, a metric that raises or returns something that is not a valid
:class:`MetricResult`, an LLM call that fails for good, each gives an ``error`` row with the
reason, and the run goes on.

How a run goes is set by one :class:`~ctxeval.RunSettings` (``settings=``); each of its fields
can also be given as a keyword argument, which overrides it.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import AsyncIterator, Iterable, Sequence, Sized
from contextlib import asynccontextmanager
from typing import Any

import anyio

from ctxeval._calls.scheduler import Scheduler
from ctxeval._errors import ConfigError, DataError, MissingExtraError, UnusableLLMError
from ctxeval._judge.labels import Labels
from ctxeval._judge.trust import formulas_of, resolve_label_metrics
from ctxeval._plugins.protocols import Metric
from ctxeval._plugins.registry import PluginInfo, Registry, default_registry
from ctxeval._results.evaluation import Evaluation
from ctxeval._results.results import MetricResult
from ctxeval._run.bridge import Backend, run_sync
from ctxeval._run.emission import BATCH_ROWS, Emitter
from ctxeval._run.journal import Journal, Previous
from ctxeval._run.local import Run, produce
from ctxeval._run.progress import ProgressTracker
from ctxeval._run.resolve import resolve_metrics
from ctxeval._run.rows import SampleInput
from ctxeval._run.rowstream import RowStream
from ctxeval._run.settings import RunSettings

__all__ = ["aevaluate", "evaluate", "get_metric", "plugins", "stream"]

logger = logging.getLogger(__name__)


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


@asynccontextmanager
async def stream(
    samples: Iterable[SampleInput],
    metrics: Sequence[str | Metric],
    *,
    llm: Any = None,
    registry: Registry | None = None,
    settings: RunSettings | None = None,
    **overrides: Any,
) -> AsyncIterator[RowStream]:
    """Score samples and read the rows as they come, in input order.

    ::

        async with ctxeval.stream(samples, ["id_mrr"]) as rows:
            async for row in rows:
                ...

    Leaving the block early cancels the work still running. Arguments are those of
    :func:`aevaluate`.
    """
    run_settings = RunSettings.build(settings, **overrides)
    registry = registry or default_registry()
    resolved = resolve_metrics(metrics, registry)
    scheduler = Scheduler(registry, run_settings, llm=llm)
    total = len(samples) * len(resolved) if isinstance(samples, Sized) else None
    tracker = ProgressTracker(run_settings.on_progress, total)
    journal: Journal | None = None
    previous: Previous = {}
    if run_settings.journal is not None:
        journal, previous = Journal.open(
            run_settings.journal, resolved, resume=run_settings.resume, llm=llm
        )
        if previous:
            logger.info("%s: resuming; %d row(s) already done", journal.path, len(previous))
    in_flight = run_settings.samples_in_flight
    send, receive = anyio.create_memory_object_stream[Sequence[MetricResult]](
        max_buffer_size=max(1, in_flight * len(resolved) // BATCH_ROWS)
    )
    run = Run(
        resolved,
        scheduler,
        journal,
        previous,
        tracker,
        Emitter(send, in_flight),
        run_settings.metric_timeout,
        run_settings.lenient,
    )

    async def batches() -> AsyncIterator[Sequence[MetricResult]]:
        async with receive:
            async for batch in receive:
                yield batch
        if run.stale:
            logger.warning(
                "%d row(s) of the journal were scored again: their sample changed since it was "
                "written (same id, other content)", run.stale,
            )  # fmt: skip
        if run.failure is not None:
            raise run.failure
        tracker.finish()

    error: Exception | None = None
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(produce, run, samples, send)
            try:
                yield RowStream(batches(), tuple(m.name for m in resolved), tracker)
            except Exception as exc:  # raised again below, not wrapped in an exception group
                error = exc
            finally:
                group.cancel_scope.cancel()
        if error is not None:
            raise error
    except BaseException as exc:
        if journal is not None and not isinstance(exc, (DataError, ConfigError)):
            # (after bad input, the error names the row to fix; resuming as it is cannot help)
            said = isinstance(exc, (UnusableLLMError, MissingExtraError))  # says what to fix
            logger.log(
                logging.INFO if said else logging.WARNING,
                "run stopped with %d row(s) saved in %s; run again with resume=True "
                "(ctxeval evaluate --resume) to finish it",
                tracker.done, journal.path,
            )  # fmt: skip
        raise
    finally:
        await scheduler.aclose()
        if journal is not None:
            journal.close()


async def aevaluate(
    samples: Iterable[SampleInput],
    metrics: Sequence[str | Metric],
    *,
    llm: Any = None,
    registry: Registry | None = None,
    settings: RunSettings | None = None,
    labels: Labels | str | os.PathLike[str] | None = None,
    **overrides: Any,
) -> Evaluation:
    """Score every sample with every metric, inside a running anyio/asyncio/trio program.

    Args:
        samples: :class:`Sample` objects or dicts with sample field names, read lazily (an
            async iterable works too).
        metrics: metric names (with default options) or metrics from :func:`get_metric`.
        llm: the LLM configuration for metrics that need one (unused by the others).
        registry: resolve names here instead of the default registry.
        settings: how the run goes (limits, retries, timeouts, journal, cache, cost cap,
            progress): a :class:`~ctxeval.RunSettings`.
        labels: people's labels of judged items (a :class:`~ctxeval.Labels` or its file),
            read and checked before anything is scored; ``Evaluation.trust()`` then compares
            each judge with them and corrects its mean (see "How far to trust the judge").
        **overrides: any field of :class:`~ctxeval.RunSettings` (``max_concurrency=8``,
            ``journal="run.jsonl"``...), in place of the same field of ``settings``.

    Returns:
        An :class:`Evaluation` whose rows are in input order.

    Raises:
        ConfigError: a metric is unknown, misconfigured or given twice; a bad or unknown
            setting.
        DataError: a sample dict is malformed, or two samples share an id.
    """
    resolved = resolve_metrics(metrics, registry or default_registry())
    names = [m.name for m in resolved]
    if labels is not None:
        labels = resolve_label_metrics(labels, names, registry)
    async with stream(
        samples, resolved, llm=llm, registry=registry, settings=settings, **overrides
    ) as rows:
        parts = [batch async for batch in rows.parts()]
    return Evaluation.of_parts(parts, rows.metrics, labels=labels, formulas=formulas_of(resolved))


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
    return run_sync(functools.partial(aevaluate, samples, metrics, **options), backend=backend)
