"""What ``async with ctxeval.stream(...)`` gives: :class:`RowStream`, the rows in input order."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence

from ctxeval._results.columns import RowBlock
from ctxeval._results.results import MetricResult
from ctxeval._run.progress import Progress, ProgressTracker

__all__ = ["RowStream"]


class RowStream(AsyncIterator[MetricResult]):
    """The rows of a run in input order (what ``async with stream(...)`` gives).

    Iterate it row by row, or with :meth:`batches` as lists of the rows ready at once (less
    overhead per row on large runs); use one or the other on a stream, not both.

    Attributes:
        metrics: the row names of the run's metrics, in order.
    """

    def __init__(
        self,
        batches: AsyncIterator[Sequence[MetricResult]],
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

    async def batches(self) -> AsyncIterator[list[MetricResult]]:
        """The rows in lists, as the run hands them over (each list in input order)."""
        async for batch in self._batches:
            yield batch if type(batch) is list else list(batch)

    async def parts(self) -> AsyncIterator[Sequence[MetricResult]]:
        """The rows as the run hands them over, each part a read-only sequence in input order
        (the deterministic fast path's are :class:`~ctxeval._results.columns.RowBlock` columns,
        whose rows are built when read: the cheapest way to keep every row of a large run).
        A block's samples, parsed for scoring, go with it until the next part is asked for
        (a writer reads its rows' evidence from them); a block kept longer holds its lines."""
        last: Sequence[MetricResult] | None = None
        async for part in self._batches:
            if isinstance(last, RowBlock):
                last.parsed = None
            last = part
            yield part
        if isinstance(last, RowBlock):
            last.parsed = None

    def progress(self) -> Progress:
        """The progress of the run now."""
        return self._tracker.snapshot()
