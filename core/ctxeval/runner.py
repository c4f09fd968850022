"""Run metrics over samples: :func:`evaluate` (blocking) and :func:`aevaluate` (async).

Rows come back in input order: sample by sample, and within a sample in the order the
metrics were given. Nothing is dropped: a sample that lacks a field a metric requires, a
metric that raises or returns something that is not a valid :class:`MetricResult`, each gives
an ``error`` row with the reason, and the run goes on.

Deterministic metrics (those with a synchronous ``score``) are called directly; the others
run concurrently, several samples at once, under the run context's limits.
"""

from __future__ import annotations

import difflib
import functools
import logging
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

import anyio

from .context import Context
from .errors import ConfigError, CtxevalError, DataError
from .evaluation import Evaluation
from .protocols import Metric
from .registry import Registry, default_registry
from .results import MetricResult
from .sample import SAMPLE_FIELDS, Sample

__all__ = ["aevaluate", "evaluate", "get_metric", "plugins"]

logger = logging.getLogger(__name__)

Backend = Literal["asyncio", "trio"]


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


def plugins(*, registry: Registry | None = None) -> list[Any]:
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


def _to_sample(item: Sample | Mapping[str, Any], index: int) -> Sample:
    if isinstance(item, Sample):
        return item
    try:
        return Sample.from_dict(item)
    except DataError as exc:
        sample_id = item.get("id") if isinstance(item, Mapping) else None
        raise exc.located(
            sample_id=str(sample_id) if sample_id is not None else str(index)
        ) from None


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
    return result.labelled(sample_id, metric.name)


def _failure(exc: BaseException, metric: Metric) -> MetricResult:
    logger.debug("metric %s failed", metric.name, exc_info=exc)
    kind = type(exc).__name__
    if isinstance(exc, CtxevalError):
        return MetricResult.error(f"{kind}: {exc}")
    return MetricResult.error(f"{kind} in metric {metric.name!r}: {exc}")


async def aevaluate(
    samples: Iterable[Sample | Mapping[str, Any]],
    metrics: Sequence[str | Metric],
    *,
    llm: Any = None,
    registry: Registry | None = None,
    max_concurrency: int = 16,
    samples_in_flight: int = 256,
) -> Evaluation:
    """Score every sample with every metric, inside a running anyio/asyncio/trio program.

    Args:
        samples: :class:`Sample` objects or dicts with sample field names (read lazily).
        metrics: metric names (with default options) or metrics from :func:`get_metric`.
        llm: the LLM configuration for metrics that need one (unused by the others).
        registry: resolve names here instead of the default registry.
        max_concurrency: calls in flight at once per shared resource (e.g. one model).
        samples_in_flight: samples being scored at once by metrics that are not
            deterministic; bounds memory on large inputs.

    Returns:
        An :class:`Evaluation` whose rows are in input order.

    Raises:
        ConfigError: a metric is unknown, misconfigured or given twice.
        DataError: a sample dict is malformed, or two samples share an id.
    """
    if max_concurrency < 1 or samples_in_flight < 1:
        raise ConfigError("max_concurrency and samples_in_flight must be at least 1")
    registry = registry or default_registry()
    resolved = _resolve(metrics, registry)
    ctx = Context(registry, max_concurrency=max_concurrency, llm=llm)
    sync_score = [
        getattr(m, "score", None) if callable(getattr(m, "score", None)) else None for m in resolved
    ]
    rows: list[MetricResult] = []
    seen_ids: set[str] = set()
    window: list[tuple[str, Sample]] = []

    async def flush() -> None:
        slots: list[MetricResult | None] = [None] * (len(window) * len(resolved))

        async def run_one(slot: int, metric: Metric, sample: Sample, sample_id: str) -> None:
            try:
                result = await metric.ascore(sample, ctx)
            except Exception as exc:
                slots[slot] = _checked(_failure(exc, metric), metric, sample_id)
            else:
                slots[slot] = _checked(result, metric, sample_id)

        async with anyio.create_task_group() as tg:
            for position, (sample_id, sample) in enumerate(window):
                for m_index, metric in enumerate(resolved):
                    slot = position * len(resolved) + m_index
                    missing = sample.missing(metric.requires)
                    if missing:
                        slots[slot] = _checked(
                            _missing_field_error(sample, metric, missing), metric, sample_id
                        )
                        continue
                    score = sync_score[m_index]
                    if score is not None:
                        try:
                            slots[slot] = _checked(score(sample), metric, sample_id)
                        except Exception as exc:
                            slots[slot] = _checked(_failure(exc, metric), metric, sample_id)
                    else:
                        tg.start_soon(run_one, slot, metric, sample, sample_id)
        for row in slots:
            assert row is not None
            rows.append(row)
        window.clear()

    for index, item in enumerate(samples):
        sample = _to_sample(item, index)
        sample_id = sample.id if sample.id is not None else str(index)
        if sample_id in seen_ids:
            raise DataError(
                "two samples have this id",
                sample_id=sample_id,
                hint="sample ids must be unique; results and resumed runs are keyed by them",
            )
        seen_ids.add(sample_id)
        window.append((sample_id, sample))
        if len(window) >= samples_in_flight:
            await flush()
    if window:
        await flush()
    return Evaluation(rows, [m.name for m in resolved])


def _running_loop_in_this_thread() -> bool:
    try:
        import sniffio

        sniffio.current_async_library()
    except Exception:
        return False
    return True


def evaluate(
    samples: Iterable[Sample | Mapping[str, Any]],
    metrics: Sequence[str | Metric],
    *,
    llm: Any = None,
    registry: Registry | None = None,
    max_concurrency: int = 16,
    samples_in_flight: int = 256,
    backend: Backend = "asyncio",
) -> Evaluation:
    """Score every sample with every metric and wait for the result (see :func:`aevaluate`).

    Works from plain code and also where an event loop is already running in this thread
    (Jupyter, FastAPI handlers, async tests): the run then gets its own loop in a worker
    thread, without ``nest_asyncio``.

    Example:
        >>> ev = evaluate(
        ...     [{"retrieved_context_ids": ["doc_1", "doc_2", "doc_3", "doc_4"],
        ...       "reference_context_ids": ["doc_1", "doc_4", "doc_5", "doc_6"]}],
        ...     metrics=["id_based_context_precision"],
        ... )
        >>> ev.results[0].score
        0.5

    Args:
        backend: the event loop to run on, ``asyncio`` or ``trio``.
    """
    run = functools.partial(
        aevaluate,
        samples,
        metrics,
        llm=llm,
        registry=registry,
        max_concurrency=max_concurrency,
        samples_in_flight=samples_in_flight,
    )
    if not _running_loop_in_this_thread():
        return anyio.run(run, backend=backend)
    outcome: dict[str, Any] = {}

    def worker() -> None:
        try:
            outcome["value"] = anyio.run(run, backend=backend)
        except BaseException as exc:  # handed to the calling thread below
            outcome["error"] = exc

    thread = threading.Thread(target=worker, name="ctxeval-evaluate", daemon=True)
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    result: Evaluation = outcome["value"]
    return result
