"""The fast path of a run whose metrics are all deterministic.

Samples go through each metric in chunks of :data:`CHUNK`: a metric with ``score_batch``
(:class:`~ctxeval.BatchMetric`; every built-in deterministic metric, through its pipeline's
batch form) scores a whole chunk per call, the others sample by sample with ``score``. A
``score_batch`` that fails, or gives a different number of results, is replaced for that chunk
by ``score`` sample by sample, so a failure stays with its sample; a ``score_batch`` cut at
``metric_timeout`` is not used again in the run. The calls are made in the run's worker thread
(:mod:`ctxeval.worker`), one hand-over per metric and chunk. Rows leave a chunk at a time.
See docs/decisions/0002-deterministic-fast-path.md.
"""

from __future__ import annotations

import gc
import itertools
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

from .errors import DataError
from .protocols import Metric
from .results import MetricResult
from .rows import (
    SampleInput,
    checked,
    identify,
    lacking,
    missing_field_error,
    unreadable,
)
from .sample import Sample
from .worker import TIMED_OUT

if TYPE_CHECKING:
    from .runner import Run

__all__ = ["CHUNK", "collector_paused", "score_chunk", "score_in_chunks"]

logger = logging.getLogger(__name__)

CHUNK = 2048
"""Samples scored per call when every metric of a run is deterministic."""


async def score_in_chunks(run: Run, samples: Iterable[SampleInput]) -> None:
    """Read, score and send ``samples`` a chunk at a time (every metric deterministic)."""
    seen_ids: set[str] = set()
    index = 0
    items = iter(samples)
    while True:
        chunk: list[Sample] = []
        ids: list[str] = []
        error: Exception | None = None
        bad: list[tuple[int, list[MetricResult]]] = []  # (position in chunk, error rows)
        read = 0
        with collector_paused():
            try:
                for item in itertools.islice(items, CHUNK):
                    read += 1
                    try:
                        sample, sample_id = identify(item, index, seen_ids)
                    except DataError as exc:
                        if not run.lenient:
                            raise
                        rows_of_bad = unreadable(exc, index, seen_ids, run.metrics)
                        run.finish_rows_of_unreadable(rows_of_bad)
                        bad.append((len(chunk), rows_of_bad))
                        index += 1
                        continue
                    chunk.append(sample)
                    ids.append(sample_id)
                    index += 1
            except Exception as exc:  # the rows of the samples before the bad one still go out
                error = exc
            rows = await score_chunk(run, chunk, ids) if chunk else []
            width = len(run.metrics)
            for position, rows_of_bad in reversed(bad):  # in input order among the others
                rows[position * width : position * width] = rows_of_bad
        await run.emitter.send_now(rows)
        if error is not None:
            raise error
        if not read:
            return


async def score_chunk(run: Run, samples: list[Sample], ids: list[str]) -> list[MetricResult]:
    """Every row of ``samples``, in emission order (sample by sample, metric by metric).

    The calls go to the run's worker in one hand-over for the ``score_batch`` of every
    metric, and one more, when needed, for the metrics scored sample by sample.
    """
    missing: dict[tuple[str, ...], list[int]] = {}  # per `requires`: samples lacking some
    columns: list[list[MetricResult | None]] = []
    todo: list[tuple[list[int], list[Sample]]] = []  # per metric: positions and samples to score
    for metric in run.metrics:
        column, ready = _lacking_fields(metric, samples, ids, missing)
        columns.append(column)
        todo.append((ready, samples if len(ready) == len(samples) else [samples[i] for i in ready]))
    results: list[Sequence[object] | None] = [None] * len(run.metrics)
    batched = [
        position
        for position, (_, some) in enumerate(todo)
        if some and run.batch_score[position] is not None
    ]
    made = await run.call_sync(
        [run.batch_scorer(p) for p in batched], [todo[p][1] for p in batched]
    )
    for position, outcome in zip(batched, made, strict=True):
        results[position] = _batch_results(run, position, outcome, len(todo[position][1]))
    one_by_one = [p for p, (_, some) in enumerate(todo) if some and results[p] is None]
    functions: list[Callable[[Sample], object]] = []
    arguments: list[Sample] = []
    for position in one_by_one:
        functions += [run.scorer(position)] * len(todo[position][1])
        arguments += todo[position][1]
    made = await run.call_sync(functions, arguments)
    start = 0
    for position in one_by_one:
        end = start + len(todo[position][1])
        metric = run.metrics[position]
        results[position] = [run.outcome(result, metric) for result in made[start:end]]
        start = end
    for position, metric in enumerate(run.metrics):
        column, (ready, _) = columns[position], todo[position]
        for i, result in zip(ready, results[position] or (), strict=True):
            column[i] = checked(result, metric, ids[i])
    rows: list[MetricResult] = [
        row  # (every slot is filled by now)
        for per_sample in zip(*columns, strict=True)
        for row in per_sample
    ]
    run.finish_rows(rows, samples)
    return rows


def _lacking_fields(
    metric: Metric,
    samples: list[Sample],
    ids: list[str],
    missing: dict[tuple[str, ...], list[int]],
) -> tuple[list[MetricResult | None], list[int]]:
    """The column of ``metric`` with the error rows of the samples lacking a field it
    requires, and the positions of the others."""
    requires = tuple(metric.requires)
    if requires not in missing:
        missing[requires] = lacking(samples, requires)
    column: list[MetricResult | None] = [None] * len(samples)
    for i in missing[requires]:
        row = missing_field_error(samples[i], metric, samples[i].missing(requires))
        column[i] = row.labelled(ids[i], metric.name)
    if not missing[requires]:
        return column, list(range(len(samples)))
    skip = set(missing[requires])
    return column, [i for i in range(len(samples)) if i not in skip]


def _batch_results(
    run: Run, position: int, results: object, expected: int
) -> Sequence[object] | None:
    """What a ``score_batch`` call gave, when usable (else None: score one by one)."""
    metric = run.metrics[position]
    if results is TIMED_OUT:
        logger.warning(
            "metric %s: score_batch() did not finish within %g s (metric_timeout) for %d "
            "sample(s); scoring sample by sample from now on",
            metric.name, run.metric_timeout, expected,
        )  # fmt: skip
        run.batch_score[position] = None
    elif isinstance(results, BaseException):
        logger.debug("metric %s: score_batch() failed; scoring one by one", metric.name)
    elif isinstance(results, Sequence) and len(results) == expected:
        return results
    else:
        logger.warning(
            "metric %s: score_batch() gave %s for %d sample(s); scoring them one by one",
            metric.name, _count(results), expected,
        )  # fmt: skip
    return None


def _count(results: object) -> str:
    if isinstance(results, Sequence):
        return f"{len(results)} result(s)"
    return f"a {type(results).__name__}, not a sequence"


@contextmanager
def collector_paused() -> Iterator[None]:
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
