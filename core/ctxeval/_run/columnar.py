"""The columnar path of a run: a source that gives its queries as ranked columns (the TREC
files of the command line, :class:`~ctxeval._data.trec_columns.TrecSource`), scored by
metrics that score such columns (:class:`~ctxeval.plugin.hooks.ScoresRankedColumns`), a
chunk at a time, without a :class:`~ctxeval.Sample` per query.

The rows are those of the sample path (:mod:`ctxeval._run.fastpath`), row by row: the metrics
give the scores of the plain ``ok`` rows, and the rows of the queries a metric leaves (nothing
retrieved, nothing relevant) whole (reasons, details) when it can without a sample per query
(:class:`~ctxeval.plugin.hooks.ScoresRankedEdges`: one row per class of equal queries); the
queries some row of is still missing are built as samples and scored through the sample path.
A row block keeps the chunk's samples lazily (each built when its evidence is read). A metric
call that fails sends its chunk (or its left queries) through the sample path.
"""

from __future__ import annotations

import functools
import logging
import math
from array import array
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ctxeval._data.collector import collector_paused
from ctxeval._data.ranked import RankedColumns, RankedSource
from ctxeval._plugins.hooks import ScoresRankedColumns, ScoresRankedEdges, ranked_column_scorer
from ctxeval._results.columns import Column, RowBlock, Scores
from ctxeval._results.results import MetricResult, _make
from ctxeval._run.fastpath import Pace, call_sync_of, chunk_columns, score_chunk

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from ctxeval._run.state import Run

    _Values = tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]
    """A metric's scores of a chunk, and where each is a plain ``ok`` row's (a float in
    [0, 1])."""
else:
    _Values = Any

__all__ = ["ranked_file", "ranked_scorers", "score_ranked_in_chunks"]

logger = logging.getLogger(__name__)

RANKED_CHUNK = 16_384
"""The most queries scored per call on the columnar path (a query's work is a few array
elements per measure: larger chunks than the sample path's share each call's cost)."""


def ranked_scorers(run: Run, samples: object) -> list[ScoresRankedColumns] | None:
    """The metrics of ``run`` as ranked-column scorers when ``samples`` gives ranked columns
    and every metric scores them (then the run takes the columnar path), else None."""
    if not isinstance(samples, RankedSource) or run.journaled:
        return None
    return _scorers(run)


def ranked_file(run: Run, samples: object) -> RankedSource | None:
    """``samples``, a JSONL file's stream not read yet, as ranked columns when every metric
    of ``run`` scores them and every line of the file is a plain ID sample (read in bulk:
    :mod:`ctxeval._data.jsonl_columns`), else None (the stream untouched)."""
    from ctxeval._data.loading import SampleStream

    if not isinstance(samples, SampleStream) or run.journaled or run.first_index:
        return None
    if not samples._may_be_ranked() or _scorers(run) is None:
        return None
    source: RankedSource | None = samples._ranked()
    return source


def _scorers(run: Run) -> list[ScoresRankedColumns] | None:
    scorers = [ranked_column_scorer(metric) for metric in run.metrics]
    if not scorers or any(s is None for s in scorers):
        return None
    return [s for s in scorers if s is not None]


async def score_ranked_in_chunks(
    run: Run, source: RankedSource, scorers: list[ScoresRankedColumns]
) -> None:
    """Score ``source`` a chunk of queries at a time and send the rows (see the module)."""
    pace = Pace(most=RANKED_CHUNK)
    start, total = 0, len(source)
    while start < total:
        with collector_paused():
            chunk = source.ranked(start, start + pace.size)
            await pace.checkpoint()
            block = await _ranked_block(run, scorers, chunk, pace)
            del chunk
        await pace.checkpoint()
        with pace.away():
            await run.emitter.send_now(block)
        read = len(block.sample_ids)
        pace.next_size(read)
        start += read


async def _ranked_block(
    run: Run, scorers: list[ScoresRankedColumns], chunk: RankedColumns, pace: Pace
) -> RowBlock:
    """The rows of a chunk, journaled and counted (as :func:`~ctxeval._run.fastpath.
    score_chunk` makes them), each column's scores in one array from the start."""
    import numpy as np

    call_sync = call_sync_of(run, pace)
    made = await call_sync([s.score_ranked_columns for s in scorers], [chunk] * len(scorers))
    size = len(chunk.ids)
    values = [_values(outcome, size, scorer) for outcome, scorer in zip(made, scorers, strict=True)]
    if any(v is None for v in values):  # a call failed: the chunk through the sample path
        return await score_chunk(run, list(chunk.samples), chunk.ids, pace=pace)
    scores = [v for v in values if v is not None]
    left = _left(scores, size).nonzero()[0].tolist()
    columns = [_column(scorer, run.metrics[p].name) for p, scorer in enumerate(scorers)]
    finals = [np.where(plain, values, np.nan) for values, plain in scores]  # (NaN: left)
    if left:
        left = await _edge_rows(call_sync, scorers, chunk, scores, columns)
    if left:
        samples = [chunk.samples[i] for i in left]
        ids = [chunk.ids[i] for i in left]
        scored = await chunk_columns(run, samples, ids, pace=pace)
        for column, final, whole in zip(columns, finals, scored, strict=True):
            _fill(column, final, whole, left)
    for column, final in zip(columns, finals, strict=True):
        column.scores = Scores(array("d", final.tobytes()))
    block = RowBlock(chunk.ids, chunk.samples, columns)
    run.finish_rows(block, chunk.samples)  # type: ignore[arg-type]
    return block


async def _edge_rows(
    call_sync: Any,
    scorers: list[ScoresRankedColumns],
    chunk: RankedColumns,
    scores: list[_Values],
    columns: list[Column],
) -> list[int]:
    """Put in ``columns`` the rows of the queries each metric left that it gives without a
    sample (:class:`~ctxeval.plugin.hooks.ScoresRankedEdges`), labelled; the positions some
    metric's row of is still missing, in order (for the sample path)."""
    import numpy as np

    nans = [np.flatnonzero(~plain).tolist() for _, plain in scores]
    todo = [
        (p, scorer, mine)
        for p, (scorer, mine) in enumerate(zip(scorers, nans, strict=True))
        if mine and isinstance(scorer, ScoresRankedEdges)
    ]
    hooked = {p for p, _, _ in todo}
    still = {i for p, mine in enumerate(nans) if p not in hooked for i in mine}
    calls = [functools.partial(scorer.ranked_edge_rows, chunk) for _, scorer, _ in todo]
    made = await call_sync(calls, [mine for _, _, mine in todo]) if todo else []
    ids = chunk.ids
    for (p, scorer, mine), outcome in zip(todo, made, strict=True):
        if not isinstance(outcome, Mapping):  # (None, or the call failed: the sample path)
            if isinstance(outcome, BaseException):
                logger.debug("%r: ranked_edge_rows() failed (%r); the sample path", scorer, outcome)
            still.update(mine)
            continue
        rows, name = columns[p].rows, columns[p].metric
        for i in mine:
            row = outcome.get(i)
            if isinstance(row, MetricResult):  # (labelled: ``row.labelled`` inlined)
                rows[i] = _make(
                    row.status, row.score, row.reason, row.details, row.usage, ids[i], name
                )
            else:
                still.add(i)
    return sorted(still)


def _left(scores: list[_Values], size: int) -> npt.NDArray[np.bool_]:
    """Where some metric left the row to the sample path."""
    import numpy as np

    left = np.zeros(size, dtype=bool)
    for _, plain in scores:
        left |= ~plain
    return left


def _values(outcome: object, size: int, scorer: ScoresRankedColumns) -> _Values | None:
    """A metric's scores from its call, and which are plain (a float in [0, 1]: the others,
    NaN, the sample path scores); None when the call failed or gave the wrong count."""
    import numpy as np

    if isinstance(outcome, BaseException) or not hasattr(outcome, "__len__"):
        logger.debug("%r: score_ranked_columns() failed (%r); the sample path", scorer, outcome)
        return None
    if isinstance(outcome, np.ndarray) and outcome.dtype == np.float64 and outcome.ndim == 1:
        values = outcome
        plain = (values >= 0.0) & (values <= 1.0)  # (NaN: not)
    else:  # a sequence: its floats in [0, 1] (no other number taken for one)
        listed = list(outcome)  # type: ignore[call-overload]
        plain = np.array([type(v) is float and 0.0 <= v <= 1.0 for v in listed], dtype=bool)
        values = np.array([v if ok else 0.0 for v, ok in zip(listed, plain, strict=True)])
    if len(values) != size:
        logger.debug("score_ranked_columns() gave %d values for %d", len(values), size)
        return None
    return values, plain


def _column(scorer: ScoresRankedColumns, name: str) -> Column:
    """A metric's column of a chunk (its scores set when the chunk is scored)."""
    column = Column(name, 0, evidence=scorer.ranked_details)
    column.evidence_batch = scorer.ranked_details_batch
    return column


def _fill(column: Column, scores: Any, whole: Column, left: list[int]) -> None:
    """Put in ``column`` and its ``scores`` (an array, NaN where the metric left the row)
    the rows the sample path scored (``whole``: the column of the samples at positions
    ``left``): a plain ``ok`` row as its score, any other whole."""
    for j, i in enumerate(left):
        if scores[i] == scores[i] or i in column.rows:  # (scored, or its row given whole)
            continue
        score = whole.scores[j]
        if score is not None and not math.isnan(score):
            scores[i] = score
        else:
            column.rows[i] = whole.rows[j]
