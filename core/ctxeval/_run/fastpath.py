"""The fast path of a run whose metrics are all deterministic.

Samples go through each metric in chunks of at most :data:`CHUNK`: a metric with ``score_batch``
(:class:`~ctxeval.BatchMetric`; every built-in deterministic metric, through its pipeline's
batch form) scores a whole chunk per call, the others sample by sample with ``score``. A
``score_batch`` that fails, or gives a different number of results, is replaced for that chunk
by ``score`` sample by sample, so a failure stays with its sample; a ``score_batch`` cut at
``metric_timeout`` is not used again in the run. The calls are made in the run's worker thread
(:mod:`ctxeval._run.worker`), one hand-over per metric and chunk. Rows leave a chunk at a time.
See docs/decisions/0002-deterministic-fast-path.md.

The rest of a chunk's work is done on the run's event loop: reading and checking the samples,
building the rows, journaling, counting and sending them. So that the loop's other tasks (a
harness serving requests beside the run) are not held for long, that work is cut at
checkpoints (before and after the worker's part, after the rows are sent), and the size of the
next chunk follows how long the last one held the loop (:class:`Pace`): at most
:data:`LOOP_TIME` per chunk, as many samples as fit, up to :data:`CHUNK`. A run of plain
samples keeps chunks of :data:`CHUNK`; one whose samples are large, or whose rows are
journaled, takes smaller ones.
"""

from __future__ import annotations

import functools
import itertools
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final

import anyio.lowlevel

from ctxeval._data.collector import collector_paused
from ctxeval._data.loading import SampleStream
from ctxeval._data.sample import Sample
from ctxeval._errors import DataError, InvalidResultError
from ctxeval._pipeline.deterministic import DeterministicPipelineMetric
from ctxeval._plugins.hooks import ScoresColumnsTogether
from ctxeval._plugins.protocols import Metric
from ctxeval._results.columns import Column, RowBlock, Source
from ctxeval._results.results import LazyDetails, MetricResult
from ctxeval._run.rows import (
    SampleInput,
    checked,
    identify,
    lacking,
    missing_field_error,
    unreadable,
)
from ctxeval._run.worker import TIMED_OUT

if TYPE_CHECKING:
    from ctxeval._run.state import Run

__all__ = [
    "CHUNK",
    "LOOP_TIME",
    "Pace",
    "call_sync_of",
    "chunk_columns",
    "collector_paused",
    "score_chunk",
    "score_in_chunks",
]

logger = logging.getLogger(__name__)

CHUNK = 2048
"""The most samples scored per call when every metric of a run is deterministic."""
FIRST_CHUNK: Final = 256
"""The samples of a run's first chunk (or :data:`CHUNK` when smaller); later chunks follow
:class:`Pace`."""
LOOP_TIME: Final = 0.02
"""Seconds of a chunk's work on the event loop aimed at (cut in two or more stretches at
checkpoints): what sizes the next chunk."""


class Pace:
    """Measures how long a chunk's work holds the event loop and sizes the next chunk by it.

    The loop is *held* from one :meth:`checkpoint` to the next, except within :meth:`away`
    (an await that lets the loop run: the worker's part, a send the reader is slow to take).
    :meth:`next_size` then gives as many samples as fit in :data:`LOOP_TIME` at the last
    chunk's rate, between 1 and :data:`CHUNK`, at most twice the last size (one quick chunk
    does not make the next one huge).
    """

    __slots__ = ("_since", "held", "most", "size")

    def __init__(self, most: int | None = None) -> None:
        self.most = CHUNK if most is None else most
        """The most samples a chunk takes (:data:`CHUNK` unless given)."""
        self.size = max(1, min(FIRST_CHUNK, self.most))
        """The samples the next chunk takes."""
        self.held = 0.0
        """Seconds the current chunk has held the loop so far."""
        self._since = time.perf_counter()

    async def checkpoint(self) -> None:
        """Let the loop run its other tasks (and a cancellation in)."""
        now = time.perf_counter()
        self.held += now - self._since
        await anyio.lowlevel.checkpoint()
        self._since = time.perf_counter()

    @contextmanager
    def away(self) -> Iterator[None]:
        """The time of the ``with`` block (an await that lets the loop run) is not held."""
        self.held += time.perf_counter() - self._since
        try:
            yield
        finally:
            self._since = time.perf_counter()

    def next_size(self, samples: int) -> int:
        """The size of the next chunk, after one of ``samples`` samples that held the loop
        :attr:`held` seconds in all (then reset)."""
        held, self.held = self.held + time.perf_counter() - self._since, 0.0
        self._since = time.perf_counter()
        if samples > 0:
            fits = int(LOOP_TIME * samples / held) if held > 0 else CHUNK
            self.size = max(1, min(fits, 2 * self.size, self.most))
        return self.size


async def score_in_chunks(run: Run, samples: Iterable[SampleInput]) -> None:
    """Read, score and send ``samples`` a chunk at a time (every metric deterministic).

    From a :class:`~ctxeval.SampleStream`, the rows keep each sample's source (the JSON line
    it was read from, see :class:`~ctxeval._results.columns.RowBlock`) rather than the sample."""
    reader = _Reader(run, samples)
    pace = Pace()
    while True:
        taken: list[SampleInput] = []
        sources: list[Source] = []
        chunk = _Chunk()
        error: Exception | None = None
        with collector_paused():
            try:
                read = reader.take(pace.size, taken, sources)
            except Exception as exc:  # the rows of the samples before the bad one still go out
                error = exc
                read = len(taken)
            try:
                reader.identify(taken, sources, chunk)
            except Exception as exc:  # an earlier sample than a read error's: it comes first
                error = exc
            rows: Sequence[MetricResult] = []
            if chunk.samples:
                await pace.checkpoint()
                rows = await score_chunk(
                    run,
                    chunk.samples,
                    chunk.ids,
                    chunk.sources if reader.stream is not None else None,
                    pace=pace,
                )
            bad = chunk.bad
            del taken, sources, chunk  # freed before the collector resumes (not walked)
            if bad:
                rows = _with_bad_rows(rows, bad, len(run.metrics))
        await pace.checkpoint()
        with pace.away():
            await run.emitter.send_now(rows)
        pace.next_size(read)
        if error is not None:
            raise error
        if not read:
            return


class _Chunk:
    """The samples of one chunk as :meth:`_Reader.identify` leaves them: the ones to score
    with their ids (and sources, from a stream), and the error rows of the unreadable ones."""

    __slots__ = ("bad", "ids", "samples", "sources")

    def __init__(self) -> None:
        self.samples: list[Sample] = []
        self.ids: list[str] = []
        self.sources: list[Source] = []  # the sources of the samples in `samples`
        self.bad: list[tuple[int, list[MetricResult]]] = []  # (position in chunk, error rows)


class _Reader:
    """A run's samples read a chunk at a time and identified: each given its id (positional
    ids count from the run's first sample), a repeated id refused (with ``lenient``, set
    aside as error rows, as an unreadable sample is)."""

    __slots__ = ("first", "index", "items", "repeats", "run", "seen_ids", "stream")

    def __init__(self, run: Run, samples: Iterable[SampleInput]) -> None:
        self.run = run
        self.seen_ids: set[str] = set()
        self.repeats: dict[str, int] = {}  # (lenient) the repeats of each id set aside so far
        self.index = 0
        self.first = run.first_index  # positional ids count from the run's first sample
        self.stream = samples if isinstance(samples, SampleStream) else None
        self.items = iter(samples)

    def take(self, size: int, taken: list[SampleInput], sources: list[Source]) -> int:
        """Read up to ``size`` samples into ``taken`` (and their ``sources``, from a stream),
        those read before a bad one kept when it raises; how many were read."""
        if self.stream is not None:
            read: int = self.stream._take(size, taken, sources, keep_bad=self.run.lenient)  # type: ignore[arg-type]
            return read
        taken.extend(itertools.islice(self.items, size))  # (kept when it raises)
        return len(taken)

    def identify(self, taken: list[SampleInput], sources: list[Source], chunk: _Chunk) -> None:
        """Put each of ``taken`` in ``chunk`` with its id; those identified before a bad one
        stay there when it raises."""
        run, seen_ids, first, index = self.run, self.seen_ids, self.first, self.index
        stream = self.stream
        samples, ids, kept = chunk.samples, chunk.ids, chunk.sources
        try:
            for position, item in enumerate(taken):
                if type(item) is Sample:  # the usual case, as `identify` decides it
                    sample_id = item.id if item.id is not None else str(first + index)
                    if sample_id not in seen_ids:
                        seen_ids.add(sample_id)
                        samples.append(item)
                        ids.append(sample_id)
                        if stream is not None:
                            kept.append(sources[position])
                        index += 1
                        continue
                try:
                    sample, sample_id = identify(item, first + index, seen_ids)
                except DataError as exc:
                    if not run.lenient:
                        raise
                    rows_of_bad = unreadable(
                        exc, first + index, seen_ids, self.repeats, run.metrics
                    )
                    run.finish_rows_of_unreadable(rows_of_bad)
                    chunk.bad.append((len(samples), rows_of_bad))
                    index += 1
                    continue
                samples.append(sample)
                ids.append(sample_id)
                if stream is not None:
                    kept.append(sources[position])
                index += 1
        finally:
            self.index = index


def _with_bad_rows(
    rows: Sequence[MetricResult], bad: list[tuple[int, list[MetricResult]]], width: int
) -> list[MetricResult]:
    """``rows`` with the error rows of each unreadable sample where it stood among the
    others (``width``: rows per sample)."""
    mixed = list(rows)
    for position, rows_of_bad in reversed(bad):  # in input order among the others
        mixed[position * width : position * width] = rows_of_bad
    return mixed


_Todo = list[tuple[list[int], list[Sample]]]
"""Per metric of a run: the positions in the chunk of the samples it scores, and them."""


async def score_chunk(
    run: Run,
    samples: list[Sample],
    ids: list[str],
    sources: list[Source] | None = None,
    *,
    pace: Pace | None = None,
) -> RowBlock:
    """Every row of ``samples``, in emission order (sample by sample, metric by metric); the
    block keeps ``sources`` for their evidence when given (else the samples). ``pace``: the
    run's, to which the waits for the worker are time the loop is free.

    The calls go to the run's worker in one hand-over for the batches (one per group of
    metrics that judge alike, see
    :meth:`~ctxeval._pipeline.pipeline.DeterministicPipelineMetric.judging_key`,
    and one per other ``score_batch``), and one more, when needed, for the metrics scored
    sample by sample.
    """
    columns = await chunk_columns(run, samples, ids, pace=pace)
    block = RowBlock(ids, samples if sources is None else sources, columns)
    if sources is not None:
        block.parsed = samples  # (until the reader has moved on: see RowBlock.parsed)
    run.finish_rows(block, samples)
    return block


async def chunk_columns(
    run: Run, samples: list[Sample], ids: list[str], *, pace: Pace | None = None
) -> list[Column]:
    """The columns of ``samples``' rows, one per metric of the run (what :func:`score_chunk`
    makes its block of; nothing journaled or counted)."""
    size = len(samples)
    missing: dict[tuple[str, ...], list[int]] = {}  # per `requires`: samples lacking some
    columns = [Column(metric.name, size) for metric in run.metrics]
    todo: _Todo = []
    for metric, column in zip(run.metrics, columns, strict=True):
        ready = _lacking_fields(metric, samples, ids, missing, column)
        todo.append((ready, samples if len(ready) == size else [samples[i] for i in ready]))
    call_sync = call_sync_of(run, pace)
    results, scored = await _score_batches(run, call_sync, todo, columns, ids)
    await _score_one_by_one(run, call_sync, todo, results, scored)
    for position, metric in enumerate(run.metrics):
        some_results = results[position]
        if some_results is None:
            continue
        rows = columns[position].rows
        for i, result in zip(todo[position][0], some_results, strict=True):
            rows[i] = checked(result, metric, ids[i])
    return columns


def call_sync_of(run: Run, pace: Pace | None) -> _CallSync:
    """How a chunk's calls go to the run's worker (their waits not held by ``pace``)."""
    return run.call_sync if pace is None else functools.partial(_away, run, pace)


_CallSync = Callable[[Sequence[Callable[[Any], object]], Sequence[Any]], Awaitable[list[object]]]


async def _score_batches(
    run: Run, call_sync: _CallSync, todo: _Todo, columns: list[Column], ids: list[str]
) -> tuple[list[Sequence[object] | None], set[int]]:
    """Score with ``score_batch`` (one call per group of metrics judging alike, one per
    metric scoring a column, one per other metric; a failed group's or column's metrics then
    each with its own ``score_batch``): per metric, its results or None; and the metrics
    whose column a group or ``score_column`` filled in ``columns``."""
    groups, columned, batched = _batch_calls(run, todo)
    calls: list[Callable[[list[Sample]], object]] = [
        functools.partial(_score_group, run, group, columns, todo[group[0]][0], ids)
        for group in groups
    ]
    calls += [
        functools.partial(_score_columns, run, group, columns, todo[group[0]][0], ids)
        for group in columned
    ]
    calls += [run.batch_scorer(p) for p in batched]
    inputs = [todo[group[0]][1] for group in groups + columned]
    inputs += [todo[p][1] for p in batched]
    made = await call_sync(calls, inputs)
    split = len(groups) + len(columned)
    results: list[Sequence[object] | None] = [None] * len(run.metrics)
    for position, outcome in zip(batched, made[split:], strict=True):
        results[position] = _batch_results(run, position, outcome, len(todo[position][1]))
    scored: set[int] = set()  # the metrics whose column a group or score_column filled
    retry: list[int] = []
    for number, (group, outcome) in enumerate(zip(groups + columned, made[:split], strict=True)):
        if isinstance(outcome, list):
            for position, column in zip(group, outcome, strict=True):
                columns[position] = column
            scored.update(group)
            continue
        for position in group:  # each its own score_batch: the group's call failed or was cut
            if number < len(groups):
                _batch_results(run, position, outcome, len(todo[position][1]))
            else:
                _column_failed(run, position, outcome, len(todo[position][1]))
        retry += [p for p in group if run.batch_score[p] is not None]
    if retry:  # each its own score_batch
        made = await call_sync([run.batch_scorer(p) for p in retry], [todo[p][1] for p in retry])
        for position, outcome in zip(retry, made, strict=True):
            results[position] = _batch_results(run, position, outcome, len(todo[position][1]))
    return results, scored


def _batch_calls(run: Run, todo: _Todo) -> tuple[list[list[int]], list[list[int]], list[int]]:
    """The metrics (positions) to score a chunk in batches: the groups that judge alike (by
    judging key), the groups that score their columns together (by column group; a metric
    alone otherwise), the others with a ``score_batch``."""
    groups: dict[tuple[object, ...], list[int]] = {}
    columned: dict[object, list[int]] = {}
    batched: list[int] = []
    for position, (_, some) in enumerate(todo):
        if not some:
            continue
        scorer = run.column_score[position]
        if scorer is not None:
            requires = tuple(run.metrics[position].requires)
            group: object = position  # (alone)
            if isinstance(scorer, ScoresColumnsTogether):
                group = (scorer.column_group(), requires)
            columned.setdefault(group, []).append(position)
            continue
        if run.batch_score[position] is None:
            continue
        key = run.judging_keys[position]
        if key is None:
            batched.append(position)
        else:
            groups.setdefault((key, tuple(run.metrics[position].requires)), []).append(position)
    return list(groups.values()), list(columned.values()), batched


async def _score_one_by_one(
    run: Run,
    call_sync: _CallSync,
    todo: _Todo,
    results: list[Sequence[object] | None],
    scored: set[int],
) -> None:
    """Score sample by sample (one hand-over for them all) every metric ``results`` has
    nothing for and no group ``scored``, its results put there."""
    one_by_one = [
        p for p, (_, some) in enumerate(todo) if some and results[p] is None and p not in scored
    ]
    functions: list[Callable[[Sample], object]] = []
    arguments: list[Sample] = []
    for position in one_by_one:
        functions += [run.scorer(position)] * len(todo[position][1])
        arguments += todo[position][1]
    made = await call_sync(functions, arguments)
    start = 0
    for position in one_by_one:
        end = start + len(todo[position][1])
        metric = run.metrics[position]
        results[position] = [run.outcome(result, metric) for result in made[start:end]]
        start = end


async def _away(
    run: Run, pace: Pace, functions: Sequence[Callable[[Any], object]], arguments: Sequence[Any]
) -> list[object]:
    """``run.call_sync``, its time not held by the loop when the calls go to the worker thread
    (with no ``metric_timeout`` they are made in the loop's thread: held)."""
    if not functions or run.metric_timeout is None:
        return await run.call_sync(functions, arguments)
    with pace.away():
        return await run.call_sync(functions, arguments)


def _score_group(
    run: Run,
    group: list[int],
    columns: list[Column],
    positions: list[int],
    ids: list[str],
    samples: list[Sample],
) -> list[Column]:
    """The columns of the metrics at ``group`` (equal judging keys), ``samples`` judged once
    for all of them (in the run's worker thread; the rows of samples lacking a field are
    copied from ``columns``, which it does not change)."""
    metrics = [run.metrics[p] for p in group]
    first = metrics[0]
    assert isinstance(first, DeterministicPipelineMetric)
    key = run.judging_keys[group[0]]
    assert key is not None
    sides = {m.pipeline.formula.judged for m in metrics}  # type: ignore[attr-defined]
    judged = first.judge_batch(samples, whole=key[-1] is None, sides=sides)  # (key: depth last)
    if judged is None:
        raise TypeError(f"metric {first.name}: a judging key but no batch judgement")
    out: list[Column] = []
    for position, metric in zip(group, metrics, strict=True):
        assert isinstance(metric, DeterministicPipelineMetric)
        column = Column(metric.name, len(columns[position]))
        column.rows.update(columns[position].rows)
        metric.fill_column(column, samples, judged, positions, ids)
        out.append(column)
    return out


def _score_columns(
    run: Run,
    group: list[int],
    columns: list[Column],
    positions: list[int],
    ids: list[str],
    samples: list[Sample],
) -> list[Column]:
    """The columns of the metrics at ``group`` (:class:`~ctxeval.plugin.hooks.ScoresColumn`;
    several: one ``score_columns`` call for them all) for ``samples`` (at ``positions`` of
    the chunk), in the run's worker thread."""
    first = run.column_score[group[0]]
    assert first is not None
    if len(group) == 1:
        made: Sequence[Sequence[object]] = [first.score_column(samples)]
    else:
        assert isinstance(first, ScoresColumnsTogether)
        made = first.score_columns([run.metrics[p] for p in group], samples)
        if len(made) != len(group):
            raise ValueError(f"score_columns() gave {len(made)} column(s) for {len(group)}")
    return [
        _filled(run, position, columns[position], values, positions, ids, samples)
        for position, values in zip(group, made, strict=True)
    ]


def _filled(
    run: Run,
    position: int,
    column: Column,
    values: Sequence[object],
    positions: list[int],
    ids: list[str],
    samples: list[Sample],
) -> Column:
    """The column of the metric at ``position`` from ``values`` (one per sample): its ``ok``
    floats as scores, its other values as rows (checked and labelled as any row); the rows
    of samples lacking a field are copied from ``column``, which it does not change."""
    scorer = run.column_score[position]
    assert scorer is not None
    metric = run.metrics[position]
    if len(values) != len(samples):
        raise ValueError(f"score_column() gave {len(values)} value(s) for {len(samples)}")
    evidence = scorer.column_details
    out = Column(metric.name, len(column), evidence=evidence)
    out.rows.update(column.rows)
    scores, rows = out.scores, out.rows
    assert isinstance(scores, list)  # (a column being filled: a kept one is compact)
    for j, value in enumerate(values):
        i = positions[j]
        if type(value) is float and 0.0 <= value <= 1.0:
            scores[i] = value
        elif isinstance(value, MetricResult):
            rows[i] = checked(value, metric, ids[i])
        else:  # a number of another type: converted (or refused) as MetricResult.ok does
            rows[i] = _column_row(value, metric, evidence, samples[j], ids[i])
    return out


def _column_row(
    value: object,
    metric: Metric,
    evidence: Callable[[Sample], Mapping[str, Any]],
    sample: Sample,
    sample_id: str,
) -> MetricResult:
    """The ``ok`` row of a ``score_column`` value that is not a float in [0, 1], or the
    error row saying why it is none."""
    try:
        row = MetricResult.ok(value, details=LazyDetails(evidence, sample))  # type: ignore[arg-type]
    except (InvalidResultError, TypeError, ValueError) as exc:
        row = MetricResult.error(f"metric {metric.name!r}: score_column() gave {exc}")
    return row.labelled(sample_id, metric.name)


def _column_failed(run: Run, position: int, outcome: object, expected: int) -> None:
    """Say that ``score_column`` failed (or was cut: then not called again in the run)."""
    then = "scoring with score_batch"
    if _call_failed(run, position, outcome, expected, "score_column", then):
        run.column_score[position] = None


def _call_failed(
    run: Run, position: int, outcome: object, expected: int, hook: str, then: str
) -> bool:
    """Log that the ``hook`` call of the metric at ``position`` for ``expected`` samples
    failed (``outcome``: its exception) or was cut at ``metric_timeout`` (then True: the
    caller stops using it; ``then``: what the run does instead)."""
    metric = run.metrics[position]
    if outcome is TIMED_OUT:
        logger.warning(
            "metric %s: %s() did not finish within %g s (metric_timeout) for %d sample(s); "
            "%s from now on",
            metric.name, hook, run.metric_timeout, expected, then,
        )  # fmt: skip
        return True
    logger.debug("metric %s: %s() failed (%r); %s", metric.name, hook, outcome, then)
    return False


def _lacking_fields(
    metric: Metric,
    samples: list[Sample],
    ids: list[str],
    missing: dict[tuple[str, ...], list[int]],
    column: Column,
) -> list[int]:
    """Put the error rows of the samples lacking a field ``metric`` requires in its
    ``column``; the positions of the others."""
    requires = tuple(metric.requires)
    if requires not in missing:
        missing[requires] = lacking(samples, requires)
    for i in missing[requires]:
        row = missing_field_error(samples[i], metric, samples[i].missing(requires))
        column.rows[i] = row.labelled(ids[i], metric.name)
    if not missing[requires]:
        return list(range(len(samples)))
    skip = set(missing[requires])
    return [i for i in range(len(samples)) if i not in skip]


def _batch_results(
    run: Run, position: int, results: object, expected: int
) -> Sequence[object] | None:
    """What a ``score_batch`` call gave, when usable (else None: score one by one)."""
    metric = run.metrics[position]
    if results is TIMED_OUT or isinstance(results, BaseException):
        then = "scoring one by one"
        if _call_failed(run, position, results, expected, "score_batch", then):
            run.batch_score[position] = None
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
