"""What a streamed run keeps of its rows: :class:`RunTotals`, the numbers of every output
(summaries, usage, errors by reason, the judge's trust) from columns of scores, never from a
list of every row.

A run that writes its rows to a folder as they come (``ctxeval evaluate --out``) hands each
part to :meth:`RunTotals.add` and drops it. What stays is one float per ``ok`` row (a numpy
array per metric: 8 bytes a row), the counts of the other rows, the error rows' reasons
grouped with a count and an example, and the few rows the judge's trust is computed from (rows
with votes: repeats and juries; the rows of samples people labelled). The summaries are the
same numbers, to the bit, as :meth:`Evaluation.summary <ctxeval.Evaluation.summary>` gives for
the same rows: the scores go to the same functions in the same order.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ctxeval._results.columns import RowBlock, Tally
from ctxeval._results.evaluation import MetricSummary, _summarize
from ctxeval._results.judges import JudgeLog
from ctxeval._results.results import MetricResult, Status, Usage

if TYPE_CHECKING:
    from ctxeval._judge.labels import Labels
    from ctxeval._judge.trust import JudgeTrust

__all__ = ["MAX_ERROR_GROUPS", "ErrorGroup", "RunTotals", "ScoreColumn"]

MAX_ERROR_GROUPS = 1000
"""The distinct (metric, reason) groups of error rows a run keeps; the error rows of other
reasons past them are counted together (:data:`OTHER_REASONS`): memory stays bounded when each
reason names its line (a million rows set aside by ``--lenient``)."""
OTHER_REASONS = (
    f"other reasons (past the first {MAX_ERROR_GROUPS} distinct ones; see results.jsonl)"
)


class ScoreColumn:
    """One metric's scores in input order, ``nan`` for rows without one (undefined, error),
    held as numpy arrays appended a part at a time (8 bytes a row), with its rows' counts
    (:attr:`tally`: errors, undefined rows, usage)."""

    __slots__ = ("_chunks", "_size", "tally")

    def __init__(self) -> None:
        self._chunks: list[np.ndarray[Any, np.dtype[np.float64]]] = []
        self._size = 0
        self.tally = Tally()

    def __len__(self) -> int:
        return self._size

    def extend(self, scores: Sequence[float | None]) -> None:
        """Append ``scores`` (None for a row without a score)."""
        try:
            array = np.fromiter(scores, dtype=np.float64, count=len(scores))
        except TypeError:  # some are None
            array = np.array([np.nan if s is None else s for s in scores], dtype=np.float64)
        self._chunks.append(array)
        self._size += len(array)
        if len(self._chunks) > 64:  # few, large arrays
            self._chunks = [np.concatenate(self._chunks)]

    def all(self) -> np.ndarray[Any, np.dtype[np.float64]]:
        """Every score, in input order (``nan`` where a row has none)."""
        if not self._chunks:
            return np.empty(0, dtype=np.float64)
        if len(self._chunks) > 1:
            self._chunks = [np.concatenate(self._chunks)]
        scores: np.ndarray[Any, np.dtype[np.float64]] = self._chunks[0]
        return scores

    def ok_scores(self) -> np.ndarray[Any, np.dtype[np.float64]]:
        """The scores of the ``ok`` rows, in input order."""
        scores = self.all()
        ok: np.ndarray[Any, np.dtype[np.float64]] = scores[~np.isnan(scores)]
        return ok


class ErrorGroup:
    """The error rows of one metric with one reason: how many, and the first one's sample."""

    __slots__ = ("count", "example", "metric", "reason")

    def __init__(self, metric: str, reason: str, example: str) -> None:
        self.metric = metric
        self.reason = reason
        self.example = example
        self.count = 0


class RunTotals:
    """The numbers of a run whose rows are not kept: add each part as it comes.

    Reads as an :class:`~ctxeval.Evaluation` reads for :func:`summary_dict
    <ctxeval._output.summary.summary_dict>`, the gates and the judge's trust
    (:meth:`summary`, :attr:`usage`, :meth:`trust`, :meth:`rows`, :meth:`judged_rows`), from
    columns of scores.

    Attributes:
        metrics: the metric row names, in the order they were asked for.
        n_samples: how many samples' rows were added.
        rows_added: how many rows were added.
    """

    def __init__(
        self,
        metrics: Sequence[str],
        *,
        labels: Labels | None = None,
        formulas: Mapping[str, Any] | None = None,
    ) -> None:
        self.metrics: tuple[str, ...] = tuple(metrics)
        self.labels = labels
        self._formulas: Mapping[str, Any] = formulas or {}
        self._columns: dict[str, ScoreColumn] = {m: ScoreColumn() for m in self.metrics}
        self._errors: dict[tuple[str, str], ErrorGroup] = {}
        self._labelled = (
            {(metric, sample) for metric, sample in labels.items} if labels is not None else set()
        )
        self._kept: dict[str, list[MetricResult]] = {}  # rows the trust is computed from
        self._judged: dict[str, list[MetricResult]] = {}
        self._summary: dict[str, MetricSummary] | None = None
        self._trust: dict[str, JudgeTrust] | None = None
        self.n_samples = 0
        self.rows_added = 0
        self._judges = JudgeLog()

    # --- adding ------------------------------------------------------------------------------

    def add(self, part: Sequence[MetricResult]) -> None:
        """Add the rows of ``part`` (whole samples, in input order)."""
        self._summary = self._trust = None
        self.rows_added += len(part)
        if isinstance(part, RowBlock):
            self.n_samples += len(part.sample_ids)
            for column in part.columns:
                target = self._column(column.metric)
                rows = column.rows
                if rows:
                    scores = list(column.scores)
                    for i, row in rows.items():  # (rows whole where the column has no score)
                        if scores[i] is None:
                            scores[i] = math.nan if row.score is None else row.score
                        self._count(target, row)
                    target.extend(scores)
                else:
                    target.extend(column.scores)
            return
        by_metric: dict[str, list[float | None]] = {}
        last = None
        for row in part:
            if row.sample_id != last:
                self.n_samples += 1
                last = row.sample_id
            metric = row.metric or ""
            by_metric.setdefault(metric, []).append(row.score)
            self._count(self._column(metric), row)
            self._judges.add(row)
            if row.status is not Status.ERROR and _voted(row):
                self._judged.setdefault(metric, []).append(row)
            if (metric, row.sample_id) in self._labelled:
                self._kept.setdefault(metric, []).append(row)
        for metric, scores in by_metric.items():
            self._columns[metric].extend(scores)

    def _column(self, metric: str) -> ScoreColumn:
        column = self._columns.get(metric)
        if column is None:  # a plugin's row under another name
            column = self._columns[metric] = ScoreColumn()
        return column

    def _count(self, column: ScoreColumn, row: MetricResult) -> None:
        column.tally.add(row)
        if row.status is Status.ERROR:
            key = (row.metric or "", row.reason or "")
            group = self._errors.get(key)
            if group is None:
                if len(self._errors) >= MAX_ERROR_GROUPS:  # (each reason naming its line)
                    key = (key[0], OTHER_REASONS)
                    group = self._errors.get(key)
                if group is None:
                    group = self._errors[key] = ErrorGroup(key[0], key[1], row.sample_id or "")
            group.count += 1

    # --- reading -----------------------------------------------------------------------------

    def summary(self) -> dict[str, MetricSummary]:
        """Per metric: mean, counts, 95% CI and usage (:meth:`Evaluation.summary`'s numbers)."""
        if self._summary is None:
            out = {}
            for metric, column in self._columns.items():
                out[metric] = _summarize(metric, column.ok_scores().tolist(), column.tally)
            self._summary = out
        return dict(self._summary)

    def scores(self, metric: str) -> np.ndarray[Any, np.dtype[np.float64]]:
        """The ``ok`` scores of ``metric``, in input order."""
        column = self._columns.get(metric)
        return column.ok_scores() if column is not None else np.empty(0, dtype=np.float64)

    def judges(self) -> JudgeLog:
        """Who judged the rows (their ``details["provenance"]``), per metric."""
        return self._judges

    @property
    def usage(self) -> Usage:
        """What the whole run cost."""
        total = Usage()
        for column in self._columns.values():
            if not column.tally.usage.is_zero:
                total = total + column.tally.usage
        return total

    @property
    def ok(self) -> bool:
        """True when no row is an error."""
        return not self._errors

    @property
    def error_count(self) -> int:
        return sum(g.count for g in self._errors.values())

    def error_groups(self) -> list[ErrorGroup]:
        """The error rows grouped by metric and reason, most frequent first."""
        return sorted(self._errors.values(), key=lambda g: -g.count)

    @property
    def samples(self) -> Mapping[str, Any]:
        """The samples kept: none (a streamed run keeps its rows' numbers only)."""
        return {}

    def rows(self, metric: str) -> list[MetricResult]:
        """The rows of ``metric`` kept for the judge's trust: those of labelled samples."""
        return list(self._kept.get(metric, ()))

    def judged_rows(self, metric: str) -> list[MetricResult]:
        """The rows of ``metric`` with votes (repeats, a jury), for the judge's trust."""
        return list(self._judged.get(metric, ()))

    def trust(self) -> dict[str, JudgeTrust]:
        """How far to trust each judged metric's judge (:meth:`Evaluation.trust`)."""
        from ctxeval._judge.trust import judge_trust

        if self._trust is None:
            self._trust = judge_trust(self, self.labels, formulas=self._formulas)
        return dict(self._trust)


def _voted(row: MetricResult) -> bool:
    """Whether ``row``'s details hold votes (repeats, a jury): the judge's trust reads them."""
    details = row.details
    return bool(details) and ("votes" in details or "provenance" in details)
