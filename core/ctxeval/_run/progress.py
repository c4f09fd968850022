"""Progress of a run, as events a front end can render (the library itself never prints)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import attrs

from ctxeval._results.columns import tally
from ctxeval._results.results import MetricResult, Usage

__all__ = ["Progress", "ProgressTracker"]


@attrs.frozen(slots=True)
class Progress:
    """A snapshot of a run.

    Attributes:
        done: rows finished (one per sample and metric).
        total: rows the run will make, when the number of samples is known in advance.
        errors: ``error`` rows so far.
        undefined: ``undefined`` rows so far.
        resumed: rows taken from the journal of an earlier run instead of computed.
        usage: what the finished rows spent (requests, retries, tokens, cost, cache hits).
        elapsed: seconds since the run started.
        finished: True on the last event of a run.
    """

    done: int
    total: int | None
    errors: int
    undefined: int
    resumed: int
    usage: Usage
    elapsed: float
    finished: bool = False

    @property
    def rate(self) -> float:
        """Rows per second so far."""
        return self.done / self.elapsed if self.elapsed > 0 else 0.0

    @property
    def eta(self) -> float | None:
        """Seconds left at the current rate, when the total is known."""
        if self.total is None or self.done == 0 or self.elapsed <= 0:
            return None
        return max(0.0, (self.total - self.done) / self.rate)


class ProgressTracker:
    """Counts finished rows and calls ``callback`` at most every ``interval`` seconds.

    The last event (``finished=True``) is always sent.
    """

    def __init__(
        self,
        callback: Callable[[Progress], object] | None,
        total: int | None,
        *,
        interval: float = 0.1,
    ) -> None:
        self._callback = callback
        self.total = total
        self._interval = interval
        self._start = time.monotonic()
        self._last = -float("inf")
        self.done = 0
        self.errors = 0
        self.undefined = 0
        self.resumed = 0
        self.usage = Usage()

    def add(self, row: MetricResult, *, resumed: bool = False) -> None:
        """Count a finished row (``resumed``: reused from an earlier run, its cost not counted
        again)."""
        self.add_many((row,), resumed=resumed)

    def add_many(self, rows: Sequence[MetricResult], *, resumed: bool = False) -> None:
        """Count finished rows at once."""
        self.done += len(rows)
        if resumed:
            self.resumed += len(rows)
        counts = tally(rows)  # (a block of rows is counted from its columns)
        self.errors += counts.errors
        self.undefined += counts.undefined
        if not resumed and not counts.usage.is_zero:
            self.usage = self.usage + counts.usage
        if self._callback is not None:
            now = time.monotonic()
            if now - self._last >= self._interval:
                self._last = now
                self._callback(self.snapshot())

    def snapshot(self, *, finished: bool = False) -> Progress:
        return Progress(
            done=self.done,
            total=self.total,
            errors=self.errors,
            undefined=self.undefined,
            resumed=self.resumed,
            usage=self.usage,
            elapsed=time.monotonic() - self._start,
            finished=finished,
        )

    def finish(self) -> None:
        """Send the last event."""
        if self._callback is not None:
            self._callback(self.snapshot(finished=True))
