"""The row sink: where a runner hands the rows it scored, and core takes over.

A runner scores; everything a run must do with rows whatever runs it stays in core, in the
:class:`RowSink`: each row of a metric that calls out is journaled (so that an interrupted run
resumes without paying for it twice; deterministic rows are scored again), counted (progress,
errors, tokens and cost), checked (no sample id scored twice, the cost cap), and passed on to
the reader in input order. A runner hands rows in *parts*: part ``0`` holds the first rows of
the input, part ``1`` the next, and so on, a part being one sample's rows or a whole chunk's.
Parts may arrive in any order (one worker finishes before another); the sink passes them on in
the order of their numbers, holding the early ones. A runner that has handed part ``n`` out of
order is made to wait in :meth:`RowSink.put` while too many parts are held, so memory stays
bounded behind a slow part.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Any, Protocol

import anyio

from ctxeval._errors import BudgetExceededError, ConfigError, DataError
from ctxeval._results.columns import RowBlock
from ctxeval._results.results import MetricResult
from ctxeval._run.plan import RunPlan
from ctxeval._run.progress import ProgressTracker
from ctxeval._run.rows import DUPLICATE_ID_HINT, SET_ASIDE, repeat_name

__all__ = ["GatheredParts", "RowLog", "RowReceiver", "RowSink", "SampleDigests"]

logger = logging.getLogger(__name__)


class RowReceiver(Protocol):
    """Where the sink passes the rows on, in input order (the reader's stream)."""

    async def send(self, item: Sequence[MetricResult], /) -> None: ...


class RowLog(Protocol):
    """Where the sink journals rows (a :class:`~ctxeval._run.journal.Journal`)."""

    def write_many(self, rows: Sequence[MetricResult], digests: Sequence[str]) -> None: ...


class RowSink:
    """Takes a runner's rows: journals, counts and checks them, and passes them on in input
    order (see the module's description). Made by core for each run; a runner only calls
    :meth:`put`.

    Attributes:
        plan: the run's plan.
        tracker: the run's progress (rows done, errors, usage).
    """

    def __init__(
        self,
        plan: RunPlan,
        send: RowReceiver,
        tracker: ProgressTracker,
        journal: RowLog | None,
        *,
        max_held: int = 64,
    ) -> None:
        self.plan = plan
        self.tracker = tracker
        self._send = send
        self._keep = plan.journaled  # the metrics whose rows the journal keeps
        self._journal = journal if self._keep else None
        self._held: dict[int, Sequence[MetricResult]] = {}
        self._next = 0
        self._passing = False
        self._room = anyio.Condition()
        self._max_held = max(1, max_held)
        self._seen: set[str | None] = set()
        self._repeats: dict[str, int] = {}  # (lenient) the repeats of each id set aside
        self._previous = plan.previous
        self._cap = plan.settings.max_cost_usd
        self._spent = 0.0
        self._last = math.inf  # the part that ended early, if one did
        self.journaled_rows = 0
        """The rows this run wrote to its journal (those of metrics that call out)."""

    async def put(
        self,
        part: int,
        rows: Sequence[MetricResult],
        digests: Sequence[str] | None = None,
        *,
        last: bool = False,
    ) -> None:
        """Hand over part ``part`` of the run's rows: the rows of one or more whole samples,
        sample by sample and, within a sample, in the order of the plan's metrics.

        ``digests``: for each row, the digest of the sample it scored
        (:meth:`RunPlan.digest <ctxeval.runners.RunPlan.digest>`), so that a resumed run
        reuses the row only for the same sample; without it the rows are journaled as not
        reusable. A row taken from :meth:`RunPlan.reusable` is not journaled again.

        ``last``: this part ended early (a failure stopped it; the runner raises it next): the
        reader gets no row of a later part, as a local run gives none after its failure. The
        rows of later parts are still journaled (a resume reuses them).

        Raises:
            DataError: a sample id of these rows was in an earlier part (two samples with one
                id), or ``part`` was handed over before.
            BudgetExceededError: the rows handed over so far cost more than the run's
                ``max_cost_usd`` (the rows are kept; stop taking new samples).
            ConfigError: ``digests`` does not have one digest per row.
        """
        if part < self._next or part in self._held or part == self._last:
            raise DataError(f"the runner handed part {part} of the rows twice")
        if digests is not None and len(digests) != len(rows):
            raise ConfigError(
                f"RowSink.put: {len(digests)} digest(s) for {len(rows)} row(s); give one per row"
            )
        rows, digests = self._check_ids(rows, digests)
        self.record(rows, digests)
        if last:
            self._last = min(part, self._last)
            for later in [p for p in self._held if p > part]:
                del self._held[later]  # journaled already; not for the reader
        if part > self._last:
            return
        while part != self._next and len(self._held) >= self._max_held:
            async with self._room:
                await self._room.wait()
        self._held[part] = rows
        await self._pass_on()
        self._check_budget(rows)

    def record(self, rows: Sequence[MetricResult], digests: Sequence[str] | None) -> None:
        """Journal and count ``rows`` (a row reused from an interrupted run is counted as
        resumed, not journaled again; ``digests``: each row's sample digest, or None)."""
        if self._previous:
            sums: Sequence[str | None] = digests if digests is not None else [None] * len(rows)
            reused = [self._reused(r, d) for r, d in zip(rows, sums, strict=True)]
            if any(reused):
                self.tracker.add_many(
                    [r for r, old in zip(rows, reused, strict=True) if old], resumed=True
                )
                if digests is not None:
                    digests = [d for d, old in zip(digests, reused, strict=True) if not old]
                rows = [r for r, old in zip(rows, reused, strict=True) if not old]
        if self._journal is not None and rows and not isinstance(rows, RowBlock):
            given: Sequence[str] = digests if digests is not None else [""] * len(rows)
            keep = self._keep
            kept = [(r, d) for r, d in zip(rows, given, strict=True) if r.metric in keep]
            if kept:
                self._journal.write_many([r for r, _ in kept], [d for _, d in kept])
                self.journaled_rows += len(kept)
        if rows:
            self.tracker.add_many(rows)

    def _reused(self, row: MetricResult, digest: str | None) -> bool:
        """Whether ``row`` is the journaled row of an interrupted run, reused (the same object,
        or, from another process, an equal row of a sample with the same digest)."""
        earlier = self._previous.get((row.sample_id or "", row.metric or ""))
        if earlier is None:
            return False
        if earlier[0] is row:
            return True
        return (digest is None or digest == earlier[1]) and earlier[0] == row

    def _check_ids(
        self, rows: Sequence[MetricResult], digests: Sequence[str] | None
    ) -> tuple[Sequence[MetricResult], Sequence[str] | None]:
        """``rows`` and their digests, checked for an id an earlier part had: refused, or, in a
        lenient run, the later sample's rows made error rows under an id of their own (as a
        local run makes them)."""
        if isinstance(rows, RowBlock):
            ids: Sequence[str | None] | set[str | None] = rows.sample_ids  # one per sample
        else:
            ids = {r.sample_id for r in rows}
        seen = self._seen
        if not seen.isdisjoint(ids):  # (a part holds each id once: its runner checked)
            twice = sorted(str(i) for i in ids if i in seen)
            if not self.plan.settings.lenient:
                raise DataError(f"two samples have the id {twice[0]!r} ({DUPLICATE_ID_HINT})")
            rows, digests = self._set_aside(list(rows), digests, set(twice))
            ids = {r.sample_id for r in rows}
        seen.update(ids)  # (the ids' hashes are cached by now)
        return rows, digests

    def _set_aside(
        self, rows: list[MetricResult], digests: Sequence[str] | None, twice: set[str]
    ) -> tuple[list[MetricResult], Sequence[str] | None]:
        """The rows of samples whose id an earlier part had, as error rows under a new id
        (a lenient run's duplicate, named by :func:`~ctxeval._run.rows.repeat_name`); their
        digests emptied (not reusable)."""
        renamed: dict[str, str] = {}
        here = {r.sample_id for r in rows}  # (never a copy of every id seen: linear time)
        out: list[MetricResult] = []
        new_digests = None if digests is None else list(digests)
        for position, row in enumerate(rows):
            sample_id = row.sample_id
            if sample_id is None or sample_id not in twice:
                out.append(row)
                continue
            if sample_id not in renamed:
                renamed[sample_id] = new = repeat_name(sample_id, self._repeats, self._seen, here)
                here.add(new)
            reason = f"set aside: {SET_ASIDE.format(sample_id)}"
            out.append(MetricResult.error(reason).labelled(renamed[sample_id], row.metric or ""))
            if new_digests is not None:
                new_digests[position] = ""
        return out, new_digests

    def _check_budget(self, rows: Sequence[MetricResult]) -> None:
        if self._cap is None:
            return
        for row in rows if not isinstance(rows, RowBlock) else ():
            cost = row.usage.cost_usd
            if cost is not None and math.isfinite(cost):
                self._spent += cost
        if self._spent >= self._cap > 0 or (self._cap == 0 and self._spent > 0):
            raise BudgetExceededError(self._spent, self._cap)

    async def _pass_on(self) -> None:
        if self._passing:
            return  # the task passing parts on will take this one too
        self._passing = True
        try:
            while self._next in self._held:
                rows = self._held.pop(self._next)
                self._next += 1
                async with self._room:
                    self._room.notify_all()
                if rows:
                    await self._send.send(rows)
        finally:
            self._passing = False

    async def send_in_order(self, rows: Sequence[MetricResult]) -> None:
        """Pass ``rows`` on as they are: rows already in input order and already recorded
        (core's own local runner orders its rows itself)."""
        if rows:
            await self._send.send(rows)

    @property
    def journaled(self) -> bool:
        """Whether the run journals rows (a runner then gives each row's sample digest): it
        has a journal and a metric that calls out (deterministic rows are not journaled:
        :attr:`RunPlan.journaled <ctxeval.runners.RunPlan.journaled>`)."""
        return self._journal is not None

    @property
    def parts_passed(self) -> int:
        """How many parts have been passed on (the next part expected)."""
        return self._next


class GatheredParts:
    """A :class:`RowReceiver` that keeps the parts passed on, in order: what a worker scoring
    a part of the input hands back (``score_part``, the ``processes`` runner's workers)."""

    def __init__(self) -> None:
        self.parts: list[Sequence[MetricResult]] = []

    async def send(self, item: Sequence[MetricResult], /) -> None:
        self.parts.append(item)


class SampleDigests:
    """A :class:`RowLog` that keeps the digest of each sample whose rows were recorded, in
    place of a journal: a worker gives them back with its rows, for the driving process's
    journal. ``previous`` (the rows of an interrupted run) gives the digest of a sample whose
    rows were all reused (nothing recorded for it)."""

    def __init__(self, previous: Any) -> None:
        self.of: dict[str | None, str] = {}
        self.previous = previous

    def write_many(self, rows: Sequence[MetricResult], digests: Sequence[str]) -> None:
        if isinstance(rows, RowBlock):
            width = len(rows.columns)
            self.of.update(zip(rows.sample_ids, digests[::width], strict=True))
        else:
            self.of.update((r.sample_id, d) for r, d in zip(rows, digests, strict=True))

    def per_row(self, rows: Sequence[MetricResult]) -> list[str]:
        """The digest of each of ``rows``' samples, one per row (empty when unknown)."""
        if isinstance(rows, RowBlock):
            width = len(rows.columns)
            return [self.of.get(s, "") for s in rows.sample_ids for _ in range(width)]
        return [self._of_row(row) for row in rows]

    def _of_row(self, row: MetricResult) -> str:
        digest = self.of.get(row.sample_id)
        if digest is None:  # every row of its sample was reused: its journaled digest
            earlier = self.previous.get((row.sample_id or "", row.metric or ""))
            digest = earlier[1] if earlier is not None and earlier[0] is row else ""
        return digest
