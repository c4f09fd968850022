"""The row sink: where a runner hands the rows it scored, and core takes over.

A runner scores; everything a run must do with rows whatever runs it stays in core, in the
:class:`RowSink`: each row of a metric that calls out is journaled (so that an interrupted run
resumes without paying for it twice; deterministic rows are scored again), counted (progress,
errors, tokens and cost), checked (no sample id scored twice, the cost cap), and passed on to
the reader in input order. A runner hands rows in *parts*: part ``0`` holds the first rows of
the input, part ``1`` the next, and so on, a part being one sample's rows or a whole chunk's.
Parts may arrive in any order (one worker finishes before another); the sink passes them on in
the order of their numbers, holding the early ones. At most ``max_held`` parts are held: a part
beyond that, while the part to pass on next is missing, is refused with a
:class:`~ctxeval.RunnerError` naming the missing part (it waited here, and a runner that would
never hand the missing part hung for ever, #56), so memory stays bounded behind a slow part.

The sink checks what a runner hands it (the runner SPI is public; #56): each part is a whole
number not handed before; its rows are whole samples, each one row per metric of the plan, in
the plan's order and names (checked per part, on columns of the rows, not row by row in
Python); when the input is a list, each part passed on starts and ends with the samples of
the input at its place; and once ``run`` returns (:meth:`RowSink.finish`), no part is held
and, when the input's length is known, every sample has its rows. Anything else is a
:class:`~ctxeval.RunnerError` naming the runner, the part and the sample.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence, Sized
from operator import attrgetter
from typing import Any, Protocol

from ctxeval._data.sample import Sample
from ctxeval._errors import BudgetExceededError, ConfigError, DataError, RunnerError
from ctxeval._results.columns import RowBlock
from ctxeval._results.results import MetricResult
from ctxeval._run.plan import RunPlan
from ctxeval._run.progress import ProgressTracker
from ctxeval._run.rows import DUPLICATE_ID_HINT, SET_ASIDE, repeat_name

__all__ = ["GatheredParts", "RowLog", "RowReceiver", "RowSink", "SampleDigests"]

logger = logging.getLogger(__name__)

_METRIC = attrgetter("metric")
_SAMPLE_ID = attrgetter("sample_id")


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
        self._max_held = max(1, max_held)
        self._seen: set[str | None] = set()
        self._repeats: dict[str, int] = {}  # (lenient) the repeats of each id set aside
        self._previous = plan.previous
        self._cap = plan.settings.max_cost_usd
        self._spent = 0.0
        self._last = math.inf  # the part that ended early, if one did
        self._beyond: set[int] = set()  # parts handed after the one that ended early
        self._names = list(plan.names)
        self._samples = 0  # the samples of the parts passed on
        self._input: Sequence[Any] | None = None  # the input, when a list (its ids checked)
        self._expected: int | None = None  # the input's samples, when known
        self.runner = "the runner"
        """Who hands the rows (named in a :class:`~ctxeval.RunnerError`)."""
        self.journaled_rows = 0
        """The rows this run wrote to its journal (those of metrics that call out)."""

    def expect(self, samples: Any, runner: str) -> None:
        """The input the runner named ``runner`` scores: its length, when it has one, is the
        samples :meth:`finish` expects rows of; a list's ids are checked part by part."""
        self.runner = f"runner {runner!r}"
        if isinstance(samples, Sized) and not isinstance(samples, (str, bytes, Mapping)):
            self._expected = len(samples)
        if isinstance(samples, (list, tuple)):
            self._input = samples

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
            RunnerError: ``part`` is not a whole number from 0, was handed before, or is more
                than ``max_held`` parts ahead of a missing one; or the rows are not whole
                samples with one row per metric of the plan, in its order; or the samples
                are not those of the input at the part's place (see the module).
            DataError: a sample id of these rows was in an earlier part (two samples with one
                id).
            BudgetExceededError: the rows handed over so far cost more than the run's
                ``max_cost_usd`` (the rows are kept; stop taking new samples).
            ConfigError: ``digests`` does not have one digest per row.
        """
        self._check_part(part)
        if digests is not None and len(digests) != len(rows):
            raise ConfigError(
                f"RowSink.put: {len(digests)} digest(s) for {len(rows)} row(s); give one per row"
            )
        self._check_rows(part, rows)
        if part > self._last:
            self._beyond.add(part)  # (counted before anything else: no await in between)
        elif part != self._next and len(self._held) >= self._max_held:
            raise RunnerError(
                f"{self.runner} handed part {part} while part {self._next}, the next to pass "
                f"on, is missing and {len(self._held)} later parts are held already (at most "
                f"{self._max_held}, samples_in_flight): part {self._next} was never handed, or "
                "is too far behind; hand every part, at most that many ahead of the first "
                "missing one"
            )
        rows, digests = self._check_ids(rows, digests)
        self.record(rows, digests)
        if last:
            self._last = min(part, self._last)
            for later in [p for p in self._held if p > part]:
                del self._held[later]  # journaled already; not for the reader
                self._beyond.add(later)
        if part > self._last:
            self._beyond.add(part)
            return
        self._held[part] = rows
        await self._pass_on()
        self._check_budget(rows)

    def _check_part(self, part: object) -> None:
        """Refuse a part number that is not a whole number from 0, or was handed before."""
        if type(part) is not int or part < 0:
            raise RunnerError(
                f"{self.runner} handed part {part!r}: parts are numbered 0, 1, 2... in input order"
            )
        if part < self._next or part in self._held or part == self._last or part in self._beyond:
            raise RunnerError(f"{self.runner} handed part {part} of the rows twice")

    def _check_rows(self, part: int, rows: Sequence[MetricResult]) -> None:
        """Refuse rows that are not whole samples, each one row per metric of the plan in its
        order (on the rows' columns: a few list operations per part, not a loop per row)."""
        names = self._names
        if isinstance(rows, RowBlock):
            given = [column.metric for column in rows.columns]
            if given != names:
                first = rows.sample_ids[0] if len(rows.sample_ids) else None
                raise RunnerError(
                    f"{self.runner}, part {part}, sample {first!r}: the rows are of the "
                    f"metrics {given}, not of the plan's {names}"
                )
            return
        width = len(names)
        metrics = list(map(_METRIC, rows))
        if metrics != names * (len(rows) // width) or len(rows) % width:
            at = _first_difference(metrics, names * (len(rows) // width + 1))
            sample = rows[at - at % width].sample_id  # (the sample whose rows are wrong)
            found = metrics[at - at % width : at - at % width + width]
            raise RunnerError(
                f"{self.runner}, part {part}, sample {sample!r}: its rows are of the metrics "
                f"{found}, not one row for each metric of the plan, {names}, in that order (a "
                "row lost, added, or of a metric the plan lacks)"
            )
        if width > 1:
            ids = list(map(_SAMPLE_ID, rows))
            firsts = ids[::width]
            for offset in range(1, width):
                if ids[offset::width] != firsts:
                    at = _first_difference(firsts, ids[offset::width])
                    raise RunnerError(
                        f"{self.runner}, part {part}, sample {firsts[at]!r}: its "
                        f"{names[offset]!r} row is of sample {ids[at * width + offset]!r} (a "
                        "sample's rows go together, one per metric)"
                    )

    def _check_place(self, part: int, rows: Sequence[MetricResult]) -> None:
        """Count the samples of ``part`` (passed on now, in order) and, when the input is a
        list, check that its first and last samples are the input's at that place."""
        width = len(self._names)
        if isinstance(rows, RowBlock):
            ids: Sequence[str | None] = rows.sample_ids
            count = len(ids)
        else:
            count = len(rows) // width
            ids = [rows[0].sample_id, rows[-1].sample_id] if rows else []
        start, self._samples = self._samples, self._samples + count
        if self._expected is not None and self._samples > self._expected:
            raise RunnerError(
                f"{self.runner}, part {part}: rows of {self._samples} samples passed on so far, "
                f"and the input has {self._expected} (a sample scored twice, or rows made up)"
            )
        if self._input is None or not count:
            return
        for position, given in ((start, ids[0]), (start + count - 1, ids[-1])):
            expected = _input_id(self._input[position], position)
            if expected is None or given is None or given == expected:
                continue
            if given.rstrip("#") != expected:  # (a lenient run's repeated id: "q3#")
                raise RunnerError(
                    f"{self.runner}, part {part}, sample {given!r}: at this place of the input "
                    f"(sample {position + 1}) is sample {expected!r}: parts must hold the "
                    "samples in input order, part 0 the first"
                )

    def finish(self) -> None:
        """After the runner's ``run`` returned: every part up to the last passed on, none
        held, and, when the input's length is known, rows for every sample.

        Raises:
            RunnerError: naming the runner, the part missing and the sample.
        """
        if self._held:
            after = sorted(self._held)
            raise RunnerError(
                f"{self.runner} returned without handing part {self._next}: part(s) "
                f"{', '.join(map(str, after[:3]))}{'...' if len(after) > 3 else ''} came after "
                f"it and were never passed on (sample {self._samples + 1} of the input on)"
            )
        if self._last != math.inf or self._expected is None:
            return
        if self._samples != self._expected:
            at = self._samples
            named = _input_id(self._input[at], at) if self._input is not None else None
            which = f"sample {at + 1}" + (f" ({named!r})" if named is not None else "")
            raise RunnerError(
                f"{self.runner} returned having handed rows of {self._samples} of the "
                f"{self._expected} samples (parts 0 to {self._next - 1}): part {self._next}, "
                f"from {which} on, was never handed"
                if self._next
                else f"{self.runner} returned without handing any part: part 0, from {which} "
                f"on, was never handed ({self._expected} samples)"
            )

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
        if isinstance(rows, RowBlock):  # one id per sample (made once, for both passes)
            ids: Sequence[str | None] | set[str | None] = list(rows.sample_ids)
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
                self._check_place(self._next, rows)
                self._next += 1
                if rows:
                    await self._send.send(rows)
        finally:
            self._passing = False

    async def send_in_order(self, rows: Sequence[MetricResult]) -> None:
        """Pass ``rows`` on as they are: rows already in input order and already recorded
        (core's own local runner orders its rows itself)."""
        if rows:
            self._samples += (
                len(rows.sample_ids)
                if isinstance(rows, RowBlock)
                else len(rows) // len(self._names)
            )
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


def _first_difference(found: Sequence[Any], expected: Sequence[Any]) -> int:
    """The first position where ``found`` differs from ``expected`` (the length of ``found``
    when it is a beginning of ``expected``)."""
    for position, (one, other) in enumerate(zip(found, expected, strict=False)):
        if one != other:
            return position
    return len(found)


def _input_id(item: Any, position: int) -> str | None:
    """The id the run gives the input ``item`` at ``position`` (its own, else its position),
    or None when it cannot be told cheaply (an item the run converts)."""
    given = (
        item.id
        if isinstance(item, Sample)
        else item.get("id", None)
        if isinstance(item, Mapping)
        else ...
    )
    if given is ...:
        return None
    return str(position) if given is None else given if isinstance(given, str) else None


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
