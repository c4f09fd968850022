"""The fast path of a run whose metrics are all deterministic.

Samples go through each metric in chunks of :data:`CHUNK`: a metric with ``score_batch``
(:class:`~ctxeval.BatchMetric`; every built-in deterministic metric, through its pipeline's
batch form) scores a whole chunk per call, the others sample by sample with ``score``. A
``score_batch`` that fails, or gives a different number of results, is replaced for that chunk
by ``score`` sample by sample, so a failure stays with its sample. Rows leave a chunk at a time.
See docs/decisions/0002-deterministic-fast-path.md.
"""

from __future__ import annotations

import gc
import itertools
import logging
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

from .errors import DataError
from .results import MetricResult
from .rows import (
    SampleInput,
    checked,
    failure,
    identify,
    lacking,
    missing_field_error,
    unreadable,
)
from .sample import Sample

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
            rows = score_chunk(run, chunk, ids) if chunk else []
            width = len(run.metrics)
            for position, rows_of_bad in reversed(bad):  # in input order among the others
                rows[position * width : position * width] = rows_of_bad
        await run.emitter.send_now(rows)
        if error is not None:
            raise error
        if not read:
            return


def score_chunk(run: Run, samples: list[Sample], ids: list[str]) -> list[MetricResult]:
    """Every row of ``samples``, in emission order (sample by sample, metric by metric)."""
    missing: dict[tuple[str, ...], list[int]] = {}  # per `requires`: samples lacking some
    columns = [
        _column(run, position, samples, ids, missing) for position in range(len(run.metrics))
    ]
    rows = [row for per_sample in zip(*columns, strict=True) for row in per_sample]
    run.finish_rows(rows, samples)
    return rows


def _column(
    run: Run,
    position: int,
    samples: list[Sample],
    ids: list[str],
    missing: dict[tuple[str, ...], list[int]],
) -> list[MetricResult]:
    """The rows of one metric for ``samples``."""
    metric = run.metrics[position]
    requires = tuple(metric.requires)
    if requires not in missing:
        missing[requires] = lacking(samples, requires)
    column: list[MetricResult | None] = [None] * len(samples)
    for i in missing[requires]:
        row = missing_field_error(samples[i], metric, samples[i].missing(requires))
        column[i] = row.labelled(ids[i], metric.name)
    if missing[requires]:
        skip = set(missing[requires])
        ready = [i for i in range(len(samples)) if i not in skip]
        todo = [samples[i] for i in ready]
    else:
        ready, todo = list(range(len(samples))), samples
    for i, result in zip(ready, _score_all(run, position, todo), strict=True):
        column[i] = checked(result, metric, ids[i])
    return column  # type: ignore[return-value]


def _score_all(run: Run, position: int, samples: Sequence[Sample]) -> Sequence[object]:
    metric = run.metrics[position]
    batch = run.batch_score[position]
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
    score = run.sync_score[position]
    assert score is not None
    out: list[object] = []
    for sample in samples:
        try:
            out.append(score(sample))
        except Exception as exc:
            out.append(failure(exc, metric))
    return out


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
