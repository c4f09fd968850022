"""The public entry points: :func:`stream`, :func:`aevaluate`, :func:`evaluate`, and the
registry front end :func:`get_metric`, :func:`plugins` and :func:`load_traces` (samples from
traces, read by a trace reader plugin).

Rows come out in input order: sample by sample, and within a sample in the order the metrics
were given, as soon as every earlier row is out. Nothing is dropped: a sample that lacks a field
a metric requires, a metric that raises or returns something that is not a valid
:class:`MetricResult`, an LLM call that fails for good, each gives an ``error`` row with the
reason, and the run goes on.

How a run goes is set by one :class:`~ctxeval.RunSettings` (``settings=``); each of its fields
can also be given as a keyword argument, which overrides it.

:func:`stream` and :func:`aevaluate` run on the caller's event loop and leave it free for its
other tasks: what takes long runs in worker threads (the metrics' calls, the first discovery of
the installed plugins, the summary of an :func:`aevaluate`), and the rest is cut at
checkpoints (see :mod:`ctxeval._run.fastpath`).
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio.to_thread

from ctxeval._data.loading import SampleStream
from ctxeval._data.traces import samples_of_traces
from ctxeval._errors import ConfigError
from ctxeval._judge.labels import Labels
from ctxeval._output.evaluation import Evaluation
from ctxeval._plugins.protocols import Metric
from ctxeval._plugins.protocols import RunnerPlugin as Runner
from ctxeval._plugins.registry import PluginInfo, Registry, default_registry
from ctxeval._results.columns import kept
from ctxeval._run.bridge import Backend, run_sync
from ctxeval._run.checks import check_backend, check_run_inputs
from ctxeval._run.execute import execute, get_runner
from ctxeval._run.plan import RunPlan
from ctxeval._run.rows import SampleInput
from ctxeval._run.rowstream import RowStream
from ctxeval._run.settings import RunOptions, RunSettings

if TYPE_CHECKING:
    from typing_extensions import Unpack  # (typing's from 3.11; for type checkers and IDEs)

__all__ = ["aevaluate", "evaluate", "get_metric", "load_traces", "plugins", "stream"]

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


def load_traces(
    source: Any,
    *,
    format: str,
    mapping: Mapping[str, str] | None = None,
    references: str | os.PathLike[str] | None = None,
    join_on: str | None = None,
    strict: bool = True,
    registry: Any = None,
) -> SampleStream:
    """A lazy stream of the samples of the traces in ``source``, one per trace.

    Args:
        source: what the reader of ``format`` reads: a file, a folder of files, a DataFrame.
        format: the trace reader (``openinference``, ``mlflow``, ``langsmith``, ``phoenix``,
            or a plugin's; see ``ctxeval plugins``).
        mapping: the reader's choices, ``{FIELD: PATH}`` (``--map FIELD=PATH``): which span
            is the question, which retrieval is the retrieved context, which metadata key is
            the document id... (docs/traces.md lists each reader's keys and defaults).
        references: a qrels file, or a file of samples with reference fields, joined on
            ``join_on``.
        join_on: the trace attribute (a key of the sample's metadata) whose value is the
            reference's ``id`` (the qrels' query id); default ``trace_id``.
        strict: raise at the first trace that gives no sample (default); when False, skip it
            (kept in :attr:`SampleStream.errors`).
        registry: the registry to find the reader in (default: the installed plugins).

    Raises:
        UnknownNameError: no trace reader has that name.
        ConfigError: a mapping key the reader does not know, or a bad value.
        DataError: the source or the references cannot be read (at once), or a trace gives
            no sample (while iterating, strict mode).
    """
    reader = (registry if registry is not None else default_registry()).get_trace_reader(format)
    return samples_of_traces(
        reader,
        source,
        format=format,
        mapping=mapping,
        references=references,
        join_on=join_on,
        strict=strict,
    )


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
    runner: str | Runner | None = None,
    column_map: Mapping[str, str] | None = None,
    **overrides: Unpack[RunOptions],
) -> AsyncIterator[RowStream]:
    """Score samples and read the rows as they come, in input order.

    ::

        async with ctxeval.stream(samples, ["id_mrr"]) as rows:
            async for row in rows:
                ...

    Leaving the block early cancels the work still running. Arguments are those of
    :func:`aevaluate`.
    """
    samples = with_column_map(
        check_run_inputs(samples, llm=llm, registry=registry, labels=None), column_map
    )
    await _discover_plugins(registry)
    plan = RunPlan.build(metrics, llm=llm, registry=registry, settings=settings, **overrides)
    async with execute(plan, samples, get_runner(runner, registry=registry)) as rows:
        yield rows


async def aevaluate(
    samples: Iterable[SampleInput],
    metrics: Sequence[str | Metric],
    *,
    llm: Any = None,
    registry: Registry | None = None,
    settings: RunSettings | None = None,
    labels: Labels | str | os.PathLike[str] | None = None,
    runner: str | Runner | None = None,
    column_map: Mapping[str, str] | None = None,
    **overrides: Unpack[RunOptions],
) -> Evaluation:
    """Score every sample with every metric, inside a running anyio/asyncio/trio program.

    Args:
        samples: :class:`Sample` objects or dicts with sample field names, read lazily (an
            async iterable works too), or a pandas DataFrame or a dict of columns.
        metrics: metric names (with default options) or metrics from :func:`get_metric`.
        llm: the LLM configuration for metrics that need one (unused by the others).
        registry: resolve names here instead of the default registry.
        settings: how the run goes (limits, retries, timeouts, journal, cache, cost cap,
            progress): a :class:`~ctxeval.RunSettings`.
        labels: people's labels of judged items (a :class:`~ctxeval.Labels` or its file),
            read and checked before anything is scored; ``Evaluation.trust()`` then compares
            each judge with them and corrects its mean (see "How far to trust the judge").
        runner: where the run executes: ``"local"`` (this process, the default),
            ``"processes"`` (every core of this machine), ``"ray"``, a third party's runner
            name, or a runner object (:mod:`ctxeval.runners`, e.g.
            ``ProcessesRunner(workers=2)``). The rows are the same whatever runs them.
        column_map: sample field -> the column (key) that holds it, for a table or dicts
            whose columns have other names: ``{"user_input": "query", "retrieved_contexts":
            "chunks"}``; a field that is not a sample field is a ``ConfigError``.
        **overrides: any field of :class:`~ctxeval.RunSettings` (``max_concurrency=8``,
            ``journal="run.jsonl"``...), in place of the same field of ``settings``.

    Returns:
        An :class:`Evaluation` whose rows are in input order, its :meth:`~Evaluation.summary`
        computed already (in a worker thread, the loop free meanwhile): calling it returns at
        once.

    Raises:
        ConfigError: a metric is unknown, misconfigured or given twice; a bad or unknown
            setting or argument; an LLM metric without an LLM.
        DataError: a sample dict is malformed, or two samples share an id.
    """
    return await _aevaluate(
        samples,
        metrics,
        summarize=True,
        llm=llm,
        registry=registry,
        settings=settings,
        labels=labels,
        runner=runner,
        column_map=column_map,
        **overrides,
    )


async def _aevaluate(
    samples: Iterable[SampleInput],
    metrics: Sequence[str | Metric],
    *,
    summarize: bool,
    llm: Any = None,
    registry: Registry | None = None,
    settings: RunSettings | None = None,
    labels: Labels | str | os.PathLike[str] | None = None,
    runner: str | Runner | None = None,
    column_map: Mapping[str, str] | None = None,
    **overrides: Any,
) -> Evaluation:
    """:func:`aevaluate`; ``summarize``: compute the summary before returning, in a worker
    thread (:func:`evaluate` leaves it to the first :meth:`~Evaluation.summary`, as the
    loop it runs on has nothing else to do)."""
    samples = check_run_inputs(samples, llm=llm, registry=registry, labels=labels)
    samples = with_column_map(samples, column_map)
    await _discover_plugins(registry)
    plan = RunPlan.build(
        metrics, llm=llm, registry=registry, settings=settings, labels=labels, **overrides
    )
    evaluation = await evaluate_plan(plan, samples, get_runner(runner, registry=registry))
    if summarize:
        await evaluation.asummary()
    return evaluation


def with_column_map(samples: Any, column_map: Mapping[str, str] | None) -> Any:
    """``samples`` read through ``column_map`` (checked first), or as they are without one.

    Raises:
        ConfigError: a bad map, or samples it cannot apply to (a file's stream: give the map
            to ``load_samples``; an async iterable).
    """
    if column_map is None:
        return samples
    from ctxeval._data.column_map import check_column_map, map_columns
    from ctxeval._data.loading import SampleStream

    mapping = check_column_map(column_map)
    if isinstance(samples, SampleStream):
        raise ConfigError(
            "column_map: the samples are read from a file already; give the map to "
            "load_samples(path, column_map=...)"
        )
    if hasattr(samples, "__aiter__") and not hasattr(samples, "__iter__"):
        raise ConfigError("column_map applies to samples read in order: a list, a table, dicts")
    return map_columns(samples, mapping)


async def evaluate_plan(plan: RunPlan, samples: Any, runner: Runner) -> Evaluation:
    """Run ``plan`` on ``samples`` with ``runner`` and gather every row."""
    async with execute(plan, samples, runner) as rows:
        parts = [kept(batch) async for batch in rows.parts()]  # (each block made compact)
    return Evaluation.of_parts(
        parts, rows.metrics, labels=plan.labels, formulas=plan.formulas, names=plan.metric_names
    )


async def _discover_plugins(registry: Registry | None) -> None:
    """Build the default registry in a worker thread when a run needs it and it is not built
    yet (its first build reads every installed distribution's entry points: tens of ms that
    would hold the loop). Two runs starting at once may both build it; one of the two equal
    registries is kept."""
    if registry is None and default_registry.cache_info().currsize == 0:
        await anyio.to_thread.run_sync(default_registry)


def evaluate(
    samples: Iterable[SampleInput],
    metrics: Sequence[str | Metric],
    *,
    llm: Any = None,
    registry: Registry | None = None,
    settings: RunSettings | None = None,
    labels: Labels | str | os.PathLike[str] | None = None,
    runner: str | Runner | None = None,
    column_map: Mapping[str, str] | None = None,
    backend: Backend = "asyncio",
    **overrides: Unpack[RunOptions],
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
    check_backend(backend)
    run = functools.partial(
        _aevaluate,
        samples,
        metrics,
        summarize=False,
        llm=llm,
        registry=registry,
        settings=settings,
        labels=labels,
        runner=runner,
        column_map=column_map,
        **overrides,
    )
    return run_sync(run, backend=backend)
