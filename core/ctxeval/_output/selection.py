"""The samples a report shows in full: :class:`ReportSelection`, chosen as the rows stream by,
in bounded memory, whatever the run's size.

A small run's report shows every sample (up to :data:`ALL_UP_TO` samples and
:data:`ALL_BYTES` of their rows). A larger one shows the samples a person should look at
first, each with its texts and evidence, and says how many it leaves out (``ctxeval view``
shows them all):

- ``worst``: per metric, the :data:`WORST` lowest ``ok`` scores (ties: the earlier sample);
- ``unsure``: per metric, the :data:`UNSURE` scores nearest 0.5 strictly between 0 and 1;
- ``disputed``: the first :data:`DISPUTED` rows whose votes (a jury, repeats) disagree;
- ``failed``: per metric and reason, the first :data:`FAILED_PER_REASON` error rows (of the
  first :data:`FAILED_REASONS` reasons);
- ``random``: :data:`RANDOM` samples drawn at random, seeded by the samples' ids (the same
  ids are drawn whatever runner scored the run and however it cut the input).

Only candidates are looked at row by row: a part's scores are compared with each list's
current bar as numpy arrays, so a million samples cost a few passes over arrays.
"""

from __future__ import annotations

import heapq
import json
import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np
import orjson

from ctxeval._output.lines import evidence_of, forget_evidence
from ctxeval._results.columns import RowBlock, Source, _held
from ctxeval._results.results import MetricResult, Status, _plain

__all__ = [
    "ALL_BYTES",
    "ALL_UP_TO",
    "DISPUTED",
    "FAILED_PER_REASON",
    "FAILED_REASONS",
    "RANDOM",
    "UNSURE",
    "WORST",
    "ReportSelection",
    "Shown",
]

ALL_UP_TO = 5_000
"""A run of at most this many samples shows every one of them (see :data:`ALL_BYTES`)."""
ALL_BYTES = 6_000_000
"""...and whose rows' JSON is at most this many bytes."""
WORST = 50
UNSURE = 20
DISPUTED = 50
FAILED_PER_REASON = 10
FAILED_REASONS = 30
RANDOM = 300

TAGS = {
    "worst": "the lowest scores of {metric}",
    "unsure": "the scores of {metric} nearest 0.5",
    "disputed": "the votes on {metric} disagree (a jury, repeats)",
    "failed": "error rows of {metric}",
    "random": "drawn at random (seeded by the sample ids)",
}
"""What each reason a sample is shown for means, as the report says it."""


class Shown:
    """A sample the report shows: its rows (as the explorer reads them), where to read its
    texts, and why it is shown.

    Attributes:
        sample_id: its id.
        position: its place in the input (0 the first).
        rows: per metric, ``{status, score, reason, details}``.
        source: the sample, or its JSON line, when the run had it (else its texts are read
            from the data file by id).
        why: the reasons it is shown (keys of :data:`TAGS`), each with the metric.
    """

    __slots__ = ("holders", "position", "rows", "sample_id", "size", "source", "why")

    def __init__(
        self, sample_id: str, position: int, rows: dict[str, Any], source: Source | None
    ) -> None:
        self.sample_id = sample_id
        self.position = position
        self.rows = rows
        self.source = source
        self.why: dict[str, None] = {}
        self.holders = 0
        try:
            self.size = len(orjson.dumps(rows, default=repr))
        except TypeError:  # a plugin's lone surrogate, a number beyond 64 bits
            self.size = len(json.dumps(rows, default=repr, ensure_ascii=True))
        if isinstance(source, bytes):  # (its texts go in the report too)
            self.size += len(source)
        elif source is not None:
            self.size += sum(len(str(v)) for v in source.to_dict().values())


def _row_dict(row: MetricResult) -> dict[str, Any]:
    return {
        "status": row.status.value,
        "score": row.score,
        "reason": row.reason,
        "details": row.to_dict()["details"],  # (safe on what JSON cannot hold)
    }


class _Bottom:
    """The ``size`` smallest keys seen (with their positions); ``bar``: the key a newcomer
    must be below to enter (inf while there is room)."""

    __slots__ = ("_heap", "size")

    def __init__(self, size: int) -> None:
        self.size = size
        self._heap: list[tuple[float, int]] = []  # (-key, -position): a max-heap

    @property
    def bar(self) -> float:
        return -self._heap[0][0] if len(self._heap) >= self.size else np.inf

    def offer(self, key: float, position: int) -> tuple[bool, int | None]:
        """Whether ``(key, position)`` entered, and the position it pushed out (if any)."""
        item = (-key, -position)
        if len(self._heap) < self.size:
            heapq.heappush(self._heap, item)
            return True, None
        if item <= self._heap[0]:  # not smaller than the largest kept (ties: the earlier)
            return False, None
        out = heapq.heapreplace(self._heap, item)
        return True, -out[1]

    def positions(self) -> list[int]:
        return sorted(-p for _, p in self._heap)


class ReportSelection:
    """Chooses, as parts stream by, the samples a report shows (see the module's
    description). :meth:`add` each part in input order; then :attr:`shown`."""

    def __init__(self, metrics: Sequence[str]) -> None:
        self.metrics = list(metrics)
        self.samples = 0
        self.rows = 0
        self._all: dict[int, Shown] | None = {}  # every sample, while the run is small
        self._all_bytes = 0
        self._kept: dict[int, Shown] = {}  # the chosen ones, by position
        self._worst = {m: _Bottom(WORST) for m in self.metrics}
        self._unsure = {m: _Bottom(UNSURE) for m in self.metrics}
        self._random = _Bottom(RANDOM)
        self._disputed = 0
        self._failed: dict[tuple[str, str], int] = {}
        self.failed_rows = 0

    # --- adding ------------------------------------------------------------------------------

    def add(self, part: Sequence[MetricResult]) -> None:
        """Look at the rows of ``part`` (whole samples, in input order)."""
        first = self.samples
        self.rows += len(part)
        if isinstance(part, RowBlock):
            self.samples += len(part.sample_ids)
            self._add_block(part, first)
        else:
            self._add_rows(part, first)

    def _add_block(self, block: RowBlock, first: int) -> None:
        ids = block.sample_ids
        n = len(ids)

        def entry(i: int) -> Shown:
            return self._entry(first + i, lambda: _block_rows(block, i), block.sources[i], ids[i])

        if self._all is not None:  # every sample, while the run is small: rows in a batch
            room = max(0, ALL_UP_TO + 1 - len(self._all))
            for i, rows in enumerate(_block_rows_batch(block, min(n, room))):
                if self._all is None:
                    break
                self._keep_all(Shown(ids[i], first + i, rows, block.sources[i]))
        for column in block.columns:
            metric = column.metric
            if metric not in self._worst:
                continue
            scores = np.array(
                [np.nan if s is None else s for s in column.scores]
                if column.rows
                else column.scores,
                dtype=np.float64,
            )
            for position, row in column.rows.items():
                if row.score is not None:
                    scores[position] = row.score
                elif row.status is Status.ERROR:
                    self._offer_failed(row, lambda p=position: entry(p))
            self._offer_scores(metric, scores, first, entry)
        keys = np.fromiter(map(_random_key, ids), dtype=np.float64, count=n)
        for i in np.nonzero(keys < self._random.bar)[0].tolist():
            self._offer(self._random, "random", float(keys[i]), first + i, lambda i=i: entry(i))

    def _offer_scores(self, metric: str, scores: Any, first: int, entry: Any) -> None:
        worst = self._worst[metric]
        for i in np.nonzero(scores < worst.bar)[0].tolist():
            self._offer(worst, f"worst:{metric}", float(scores[i]), first + i, lambda i=i: entry(i))
        unsure = self._unsure[metric]
        distance = np.abs(scores - 0.5)
        inside = (scores > 0.0) & (scores < 1.0)
        for i in np.nonzero(inside & (distance < unsure.bar))[0].tolist():
            self._offer(
                unsure, f"unsure:{metric}", float(distance[i]), first + i, lambda i=i: entry(i)
            )

    def _add_rows(self, rows: Sequence[MetricResult], first: int) -> None:
        groups: list[list[MetricResult]] = []
        for row in rows:
            if groups and groups[-1][0].sample_id == row.sample_id:
                groups[-1].append(row)
            else:
                groups.append([row])
        self.samples += len(groups)
        for i, group in enumerate(groups):
            position = first + i
            sample_id = group[0].sample_id or ""

            def entry(group: list[MetricResult] = group, position: int = position) -> Shown:
                return self._entry(
                    position,
                    lambda: {r.metric or "": _row_dict(r) for r in group},
                    None,
                    group[0].sample_id or "",
                )

            if self._all is not None:
                self._keep_all(entry())
            for row in group:
                metric = row.metric or ""
                if row.status is Status.ERROR:
                    self._offer_failed(row, entry)
                elif row.score is not None and metric in self._worst:
                    self._offer_scores(metric, np.array([row.score]), position, lambda _i: entry())
                if self._disputed < DISPUTED and _disputed(row):
                    shown = self._kept.get(position) or entry()
                    self._hold(shown, f"disputed:{metric}")
                    self._disputed += 1
            key = _random_key(sample_id)
            if key < self._random.bar:
                self._offer(self._random, "random", key, position, entry)

    # --- keeping -----------------------------------------------------------------------------

    def _entry(self, position: int, rows: Any, source: Source | None, sample_id: str) -> Shown:
        if self._all is not None and position in self._all:
            return self._all[position]
        kept = self._kept.get(position)
        return kept if kept is not None else Shown(sample_id, position, rows(), source)

    def _keep_all(self, shown: Shown) -> None:
        assert self._all is not None
        self._all[shown.position] = shown
        self._all_bytes += shown.size
        if len(self._all) > ALL_UP_TO or self._all_bytes > ALL_BYTES:
            self._all = None  # too large to show whole: the chosen ones only

    def _hold(self, shown: Shown, why: str) -> None:
        if shown.position not in self._kept:
            self._kept[shown.position] = shown
        shown.why[why] = None
        shown.holders += 1

    def _release(self, position: int, why: str) -> None:
        shown = self._kept[position]
        shown.holders -= 1
        shown.why.pop(why, None)
        if shown.holders <= 0:
            del self._kept[position]

    def _offer(self, bottom: _Bottom, why: str, key: float, position: int, entry: Any) -> None:
        if key >= bottom.bar:
            return
        entered, out = bottom.offer(key, position)
        if not entered:
            return
        self._hold(self._kept.get(position) or entry(), why)
        if out is not None:
            self._release(out, why)

    def _offer_failed(self, row: MetricResult, entry: Any) -> None:
        self.failed_rows += 1
        key = (row.metric or "", row.reason or "")
        count = self._failed.get(key)
        if count is None:
            if len(self._failed) >= FAILED_REASONS:
                return
            count = 0
        if count >= FAILED_PER_REASON:
            return
        self._failed[key] = count + 1
        self._hold(entry(), f"failed:{key[0]}")

    # --- reading -----------------------------------------------------------------------------

    @property
    def complete(self) -> bool:
        """Whether every sample is shown."""
        return self._all is not None

    @property
    def shown(self) -> list[Shown]:
        """The samples to show, in input order."""
        chosen = self._all if self._all is not None else self._kept
        if self._all is not None:  # the reasons the chosen ones would have had
            for position, shown in self._kept.items():
                self._all[position].why.update(shown.why)
        return [chosen[p] for p in sorted(chosen)]

    @property
    def left_out(self) -> int:
        """How many samples the report does not show."""
        return self.samples - len(self._all if self._all is not None else self._kept)


def _block_rows_batch(block: RowBlock, count: int) -> list[dict[str, Any]]:
    """:func:`_block_rows` of the block's first ``count`` samples, the plain rows' details
    from the writers' :func:`~ctxeval._output.lines.evidence_of` (the same details, made at
    once; left on the block only when a writer had them there already)."""
    if not count:
        return []
    had = block.evidence is not None
    samples, details = evidence_of(block)
    try:
        ids = block.sample_ids
        out: list[dict[str, Any]] = []
        for i in range(count):
            rows: dict[str, Any] = {}
            for column, evidence in zip(block.columns, details, strict=True):
                score = column.scores[i]
                if score is not None and evidence is not None:
                    rows[column.metric] = {
                        "status": "ok",
                        "score": score,
                        "reason": None,
                        "details": _plain(evidence[i]),
                    }
                    continue
                held = samples[i] if samples is not None else _held(block.sources[i])
                row = column.rows[i] if score is None else column.row(i, ids[i], held)
                rows[column.metric] = _row_dict(row)
            out.append(rows)
    finally:
        if not had:
            forget_evidence(block)
    return out


def _block_rows(block: RowBlock, position: int) -> dict[str, Any]:
    sample_id = block.sample_ids[position]
    held = _held(block.sources[position])
    return {
        column.metric: _row_dict(column.row(position, sample_id, held)) for column in block.columns
    }


def _random_key(sample_id: str) -> float:
    """A number in [0, 1) drawn from the sample's id (seeded: the same id, the same draw)."""
    return zlib.crc32(b"ctxeval-report\x00" + sample_id.encode("utf-8", "replace")) / 2**32


def _disputed(row: MetricResult) -> bool:
    """Whether ``row``'s votes (a jury, repeats) disagree on an item."""
    details = row.details
    if not details or "votes" not in details:
        return False
    from ctxeval._judge.evidence import votes_of

    for entry in details.get("votes") or ():
        try:
            values = {v for votes in votes_of(entry).values() for v in votes}
        except (TypeError, KeyError, AttributeError):
            continue
        if len(values) > 1:
            return True
    return False
