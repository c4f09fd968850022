"""The outcome of a run: :class:`RunResults`, its rows and its per-metric
:class:`MetricSummary` (gathered in a :class:`Summary`).

:class:`RunResults` is everything :class:`~ctxeval.Evaluation` does but write its run folder:
the public class (:mod:`ctxeval._output.evaluation`) adds :meth:`~ctxeval.Evaluation.write`,
a layer above, so that what writes the run folder (:mod:`ctxeval._output`) reads the rows
through this class and nothing here imports back up (docs/decisions/0008-a-house-in-layers.md).

An evaluation and its summary print as the command line's summary table (``print(ev)``), show
as a rich table in a rich console and as an HTML table in a notebook.
"""

from __future__ import annotations

import collections
import json
import math
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import anyio.to_thread
import attrs

from ctxeval._data.collector import collector_paused
from ctxeval._data.sample import Sample
from ctxeval._judge.labels import Labels
from ctxeval._results.columns import RowBlock, Tally, metrics_of, scores_of, tally, tally_of
from ctxeval._results.display import number as shown_number
from ctxeval._results.display import (
    plain_text,
    span,
    summary_html,
    summary_table,
    usage_line,
)
from ctxeval._results.judges import SCRIPTED_WARNING, JudgeLog
from ctxeval._results.results import MetricResult, Status, Usage
from ctxeval._results.stats import mean_ci
from ctxeval._results.table import ROW_COLUMNS, row_columns

if TYPE_CHECKING:
    from rich.console import RenderableType

    from ctxeval._judge.trust import JudgeTrust
    from ctxeval._plugins.metric_names import MetricNames

__all__ = ["MetricSummary", "RunResults", "Summary"]

_R = TypeVar("_R", bound="RunResults")


@attrs.frozen(slots=True)
class MetricSummary:
    """How one metric did over all samples.

    Attributes:
        metric: the metric's row name.
        mean: mean score over the ``ok`` rows (None when there is none).
        n_ok, n_undefined, n_error: rows of each status.
        ci95: a 95% confidence interval of the mean (a seeded percentile bootstrap, see
            ``ci95_method``); None with fewer than two ``ok`` rows. The same numbers as
            ``summary.json``, the report and the terminal.
        usage: what the metric's rows cost, summed.
        ci95_method: how ``ci95`` was computed, in words.
    """

    metric: str
    mean: float | None
    n_ok: int
    n_undefined: int
    n_error: int
    ci95: tuple[float, float] | None
    usage: Usage
    ci95_method: str | None = None

    @property
    def n(self) -> int:
        """All rows of the metric."""
        return self.n_ok + self.n_undefined + self.n_error

    def to_dict(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "mean": self.mean,
            "n_ok": self.n_ok,
            "n_undefined": self.n_undefined,
            "n_error": self.n_error,
            "ci95": list(self.ci95) if self.ci95 is not None else None,
            "ci95_method": self.ci95_method,
            "usage": self.usage.to_dict(),
        }

    def __str__(self) -> str:
        """One line, the numbers rounded as the summary table shows them: ``id_mrr: mean 0.300
        (95% CI 0.200-0.400), 3 ok, 0 undefined, 0 errors`` (an en dash between the bounds)."""
        return (
            f"{self.metric}: mean {shown_number(self.mean)} (95% CI {span(self.ci95)}), "
            f"{self.n_ok} ok, {self.n_undefined} undefined, {self.n_error} "
            f"error{'' if self.n_error == 1 else 's'}"
        )


class Summary(dict[str, MetricSummary]):
    """Each metric's :class:`MetricSummary` by row name (what :meth:`Evaluation.summary`
    returns): a dict as before (``summary["id_mrr"].mean``, equal to a plain dict of the same
    items) that prints as the command line's summary table.

    ``print(summary)`` (and ``repr``) shows the table as text, a rich console shows it as a
    rich table, a notebook as an HTML table: per metric the mean and its 95% confidence
    interval to three decimals (the values kept are exact), and the counts of ``ok``,
    ``undefined`` and ``error`` rows.
    """

    __slots__ = ()

    @property
    def usage(self) -> Usage:
        """What every metric's rows cost, summed."""
        total = Usage()
        for summary in self.values():
            if not summary.usage.is_zero:
                total = total + summary.usage
        return total

    @property
    def n_samples(self) -> int:
        """How many samples the rows are of (each metric has one row per sample)."""
        return max((summary.n for summary in self.values()), default=0)

    def to_dict(self) -> dict[str, dict[str, Any]]:
        """Each metric's numbers as ``summary.json`` holds them (JSON values)."""
        out = {}
        for name, summary in self.items():
            entry = summary.to_dict()
            del entry["metric"]
            out[name] = entry
        return out

    def to_pandas(self) -> Any:
        """A ``pandas.DataFrame`` with one row per metric (needs pandas), indexed by metric:
        ``mean``, ``ci95_low``, ``ci95_high``, ``n_ok``, ``n_undefined``, ``n_error``."""
        from ctxeval._data.optional import require_pandas

        require_pandas("Summary.to_pandas()")
        import pandas as pd

        records = [
            {
                "metric": name,
                "mean": s.mean,
                "ci95_low": s.ci95[0] if s.ci95 is not None else None,
                "ci95_high": s.ci95[1] if s.ci95 is not None else None,
                "n_ok": s.n_ok,
                "n_undefined": s.n_undefined,
                "n_error": s.n_error,
            }
            for name, s in self.items()
        ]
        columns = ["metric", "mean", "ci95_low", "ci95_high", "n_ok", "n_undefined", "n_error"]
        return pd.DataFrame.from_records(records, columns=columns).set_index("metric")

    def _notes(self) -> list[str]:
        notes = [line for line in (usage_line(self.usage),) if line]
        errors = sum(summary.n_error for summary in self.values())
        if errors:
            notes.append(f"{errors} error row(s): Evaluation.errors() lists them with the reason")
        return notes

    def __rich__(self) -> RenderableType:
        from rich.console import Group

        return Group(summary_table(self), *self._notes())

    def __str__(self) -> str:
        return plain_text(summary_table(self), *self._notes())

    __repr__ = __str__

    def _repr_html_(self) -> str:
        return summary_html(self, notes=self._notes())


def _summarize(metric: str, all_scores: Sequence[float | None], counts: Tally) -> MetricSummary:
    scores = [s for s in all_scores if s is not None]
    n = len(scores)
    mean = math.fsum(scores) / n if n else None
    interval = mean_ci(scores)
    ci95, method = interval if interval is not None else (None, None)
    return MetricSummary(
        metric=metric,
        mean=mean,
        n_ok=n,
        n_undefined=counts.undefined,
        n_error=counts.errors,
        ci95=ci95,
        usage=counts.usage,
        ci95_method=method,
    )


class RunResults:
    """Every :class:`MetricResult` of a run, in input order (sample by sample, metric by metric):
    what :class:`~ctxeval.Evaluation` is, but for writing its run folder.

    Held in memory only: nothing is saved unless asked (:meth:`Evaluation.write
    <ctxeval.Evaluation.write>` writes the run folder ``ctxeval evaluate --out`` writes,
    :meth:`to_jsonl` the rows). ``print(ev)`` shows the
    summary table (as the command line prints it), a rich console a rich table, a notebook an
    HTML table.

    Attributes:
        results: the rows (a tuple; built on first read when the run kept them as columns).
        metrics: the metric row names, in the order they were asked for.
        samples: the samples by id, when kept (for the report); else empty.
    """

    def __init__(
        self,
        results: Sequence[MetricResult],
        metrics: Sequence[str],
        *,
        samples: Mapping[str, Sample] | None = None,
        labels: Labels | None = None,
        formulas: Mapping[str, Any] | None = None,
        names: MetricNames | None = None,
    ) -> None:
        self._parts: tuple[Sequence[MetricResult], ...] = (tuple(results),)
        self._results: tuple[MetricResult, ...] | None = self._parts[0]
        self.metrics: tuple[str, ...] = tuple(metrics)
        self.samples: Mapping[str, Sample] = samples or {}
        """The scored samples by id, when the caller kept them (the command line does): the
        report shows their texts beside the evidence."""
        self.labels: Labels | None = labels
        """People's labels of judged items, when the run was given some (``labels=``)."""
        self._formulas: Mapping[str, Any] = formulas or {}
        self._names = names if names is not None and names.names == self.metrics else None
        self._summary: dict[str, MetricSummary] | None = None
        self._trust: dict[str, JudgeTrust] | None = None

    @classmethod
    def of_parts(
        cls: type[_R],
        parts: Sequence[Sequence[MetricResult]],
        metrics: Sequence[str],
        *,
        samples: Mapping[str, Sample] | None = None,
        labels: Labels | None = None,
        formulas: Mapping[str, Any] | None = None,
        names: MetricNames | None = None,
    ) -> _R:
        """An evaluation of the rows of ``parts`` (read-only sequences of rows, in order:
        what :meth:`RowStream.parts <ctxeval.RowStream.parts>` gives). The rows of
        :class:`~ctxeval._results.columns.RowBlock` parts are built only when :attr:`results` is
        first read; :meth:`summary`, :meth:`scores`, ``len`` and :attr:`ok` read the
        columns."""
        evaluation = cls(
            (), metrics, samples=samples, labels=labels, formulas=formulas, names=names
        )
        evaluation._parts = tuple(parts)
        evaluation._results = None
        return evaluation

    @property
    def metric_names(self) -> MetricNames:
        """The index of the metrics' names (the run plan's, when the run made this
        evaluation; else one of :attr:`metrics`): where labels, ``assert_metric``, compare
        and trust find a metric by any of its names."""
        if self._names is None:
            from ctxeval._plugins.metric_names import MetricNames

            self._names = MetricNames(self.metrics)
        return self._names

    @property
    def parts(self) -> tuple[Sequence[MetricResult], ...]:
        """The rows as the run kept them: read-only sequences in order, a deterministic run's
        as :class:`~ctxeval._results.columns.RowBlock` columns (what the writers read without
        building the rows)."""
        return self._parts

    @property
    def results(self) -> tuple[MetricResult, ...]:
        """The rows, in input order (sample by sample, metric by metric)."""
        if self._results is None:
            with collector_paused():  # (building rows by the hundred thousand: see there)
                self._results = tuple(row for part in self._parts for row in part)
            self._parts = (self._results,)
        return self._results

    def __len__(self) -> int:
        return sum(map(len, self._parts))

    def __iter__(self) -> Iterator[MetricResult]:
        """The rows in order; those the run kept as columns built one by one as the iteration
        reaches them (not kept: :attr:`results` keeps them)."""
        if self._results is not None:
            return iter(self._results)
        return (row for part in self._parts for row in part)

    def __repr__(self) -> str:
        judge = " NOT A REAL JUDGE (ctxeval serve-judge)" if self._scripted() else ""
        return f"<Evaluation {len(self)} rows, metrics={list(self.metrics)}{judge}>"

    def _scripted(self) -> bool:
        """Whether ``ctxeval serve-judge`` (NOT A REAL JUDGE) judged any row."""
        return self.judges().scripted

    # --- shown: print(ev), a rich console, a notebook ----------------------------------------

    def _caption(self, summary: Summary) -> str:
        n = summary.n_samples
        m = len(summary)
        times = "\u00d7"  # (a multiplication sign)
        return f"{n} sample{'' if n == 1 else 's'} {times} {m} metric{'' if m == 1 else 's'}"

    def _notes(self, summary: Summary, *, limit: int = 3) -> list[str]:
        """The lines under the table: the LLM usage, and the error rows grouped by metric and
        reason (most frequent first, at most ``limit`` reasons)."""
        notes = [line for line in (usage_line(summary.usage),) if line]
        if self._scripted():
            notes.insert(0, SCRIPTED_WARNING)
        errors = self.errors() if not self.ok else []
        if errors:
            groups: collections.Counter[tuple[str, str]] = collections.Counter()
            example: dict[tuple[str, str], str] = {}
            for row in errors:
                key = (row.metric, row.reason or "")
                groups[key] += 1
                example.setdefault(key, row.sample_id or "")
            notes.append(f"{len(errors)} error row(s) (ev.errors() lists them), by reason:")
            for (metric, reason), count in groups.most_common(limit):
                shown = reason if len(reason) <= 160 else reason[:157] + "..."
                notes.append(
                    f"  {count:>5}  {metric}: {shown} (e.g. sample {example[metric, reason]})"
                )
            if len(groups) > limit:
                notes.append(f"  ... and {len(groups) - limit} more reason(s)")
        return notes

    def __str__(self) -> str:
        """The summary table (as ``ctxeval evaluate`` prints it), the LLM usage and the
        reasons of the error rows, as plain text."""
        summary = self.summary()
        table = summary_table(summary, title=f"summary: {self._caption(summary)}")
        return plain_text(table, *self._notes(summary))

    def __rich__(self) -> RenderableType:
        """:meth:`__str__` as a rich renderable (a rich console, ``rich.print(ev)``)."""
        from rich.console import Group
        from rich.text import Text

        summary = self.summary()
        table = summary_table(summary, title=f"summary: {self._caption(summary)}")
        notes = [
            Text(note, style="bold yellow" if note == SCRIPTED_WARNING else "")
            for note in self._notes(summary)
        ]
        return Group(table, *notes)

    def _repr_html_(self) -> str:
        """The notebook view: the summary table as a small self-contained HTML table."""
        summary = self.summary()
        notes = self._notes(summary)
        warning = notes.pop(0) if notes[:1] == [SCRIPTED_WARNING] else None
        return summary_html(
            summary, caption=f"ctxeval: {self._caption(summary)}", notes=notes, warning=warning
        )

    def rows(self, metric: str) -> list[MetricResult]:
        """The rows of one metric, in input order."""
        self._check_metric(metric)
        if self._results is not None:
            return [r for r in self._results if r.metric == metric]
        found: list[MetricResult] = []
        for part in self._parts:  # a block's column read alone: the other rows not built
            if isinstance(part, RowBlock):
                column = part.column(metric)
                found += part.rows_of(column) if column is not None else []
            else:
                found += [r for r in part if r.metric == metric]
        return found

    def errors(self) -> list[MetricResult]:
        """The ``error`` rows, in input order, read without building the other rows (a
        deterministic fast path's columns keep their error rows whole)."""
        found: list[MetricResult] = []
        for part in self._parts:
            if isinstance(part, RowBlock):
                kept = sorted(
                    (position, index, row)
                    for index, column in enumerate(part.columns)
                    for position, row in column.rows.items()
                    if row.status is Status.ERROR
                )
                found += [row for _, _, row in kept]
            else:
                found += [row for row in part if row.status is Status.ERROR]
        return found

    def judged_rows(self, metric: str) -> list[MetricResult]:
        """The rows of one metric a judge may have made, in input order: every row but those
        the deterministic fast path keeps as columns (no judge made them), which are not
        built."""
        self._check_metric(metric)
        return [
            r
            for part in self._parts
            if not isinstance(part, RowBlock)
            for r in part
            if r.metric == metric
        ]

    def judges(self) -> JudgeLog:
        """Who judged the rows (their ``details["provenance"]``), per metric: the rows the
        deterministic fast path keeps as columns are not read (no judge made them)."""
        log = JudgeLog()
        for part in self._parts:
            if not isinstance(part, RowBlock):
                log.extend(part)
        return log

    def scores(self, metric: str) -> list[float | None]:
        """The scores of one metric in input order (None for undefined and error rows)."""
        self._check_metric(metric)
        return scores_of(self._parts, metric)

    def summary(self) -> Summary:
        """Per metric: mean, n_ok, n_undefined, n_error, 95% CI (and how it was computed) and
        usage; computed once (the rows do not change). A :class:`Summary`: a dict of
        :class:`MetricSummary` by metric that prints as the command line's summary table.

        The bootstrap of the intervals takes a while on large runs (about 30 ms per metric
        of 5 000 scores): in async code, ``await`` :meth:`asummary` instead, which computes it
        in a worker thread. An evaluation from :func:`~ctxeval.aevaluate` has it computed
        already, off the loop: this returns at once.
        """
        if self._summary is None:
            self._summary = self._summaries()
        return Summary(self._summary)

    async def asummary(self) -> Summary:
        """:meth:`summary`, computed in a worker thread, so that the caller's event loop
        (asyncio or trio, through anyio) goes on meanwhile: the same numbers, bit for bit, and
        computed once for both. Cancelling the wait leaves the thread to finish on its own."""
        if self._summary is None:
            summary = await anyio.to_thread.run_sync(self._summaries, abandon_on_cancel=True)
            if self._summary is None:  # (unless a concurrent call got there first)
                self._summary = summary
        return Summary(self._summary)

    def _summaries(self) -> dict[str, MetricSummary]:
        """Every metric's summary, computed now (from one reading of the parts: safe in a
        worker thread while :attr:`results` replaces them)."""
        parts = self._parts
        names = list(dict.fromkeys([*self.metrics, *metrics_of(parts)]))
        return {
            metric: _summarize(metric, scores_of(parts, metric), tally_of(parts, metric))
            for metric in names
        }

    def trust(self, labels: Labels | str | os.PathLike[str] | None = None) -> dict[str, JudgeTrust]:
        """How far to trust each judged metric's judge (see :mod:`ctxeval._judge.trust`): agreement
        with people's labels and the mean corrected by them (PPI), flip rates over repeats,
        agreement within a jury. Only metrics with something to report are in it.

        Args:
            labels: people's labels (a :class:`~ctxeval.Labels` or a file); by default those
                the run was given.
        """
        from ctxeval._judge.trust import judge_trust

        if labels is not None:
            return self.with_labels(labels).trust()
        if self._trust is None:
            self._trust = judge_trust(self, self.labels, formulas=self._formulas)
        return dict(self._trust)

    def with_labels(
        self: _R,
        labels: Labels | str | os.PathLike[str] | None,
        *,
        formulas: Mapping[str, Any] | None = None,
    ) -> _R:
        """The same rows with people's labels attached (``Evaluation.from_jsonl(path)`` of an
        earlier run, say): :meth:`trust`, ``summary.json`` and the report then use them.

        Raises:
            DataError: the labels file is malformed (file, line and field named).
            ConfigError: labels for a metric the run does not score.
        """
        from ctxeval._judge.resolve import resolve_label_metrics

        if labels is not None:
            labels = resolve_label_metrics(labels, self.metric_names)
        return type(self).of_parts(
            self._parts,
            self.metrics,
            samples=self.samples,
            labels=labels,
            formulas=formulas or self._formulas,
            names=self._names,
        )

    @property
    def usage(self) -> Usage:
        """What the whole run cost."""
        total = Usage()
        for part in self._parts:
            counts = tally(part)
            if not counts.usage.is_zero:
                total = total + counts.usage
        return total

    @property
    def ok(self) -> bool:
        """True when no row is an error."""
        return all(tally(part).errors == 0 for part in self._parts)

    def to_jsonl(self, path: str | os.PathLike[str]) -> Path:
        """Write one JSON object per row (``results.jsonl`` format); returns the path."""
        target = Path(path)
        with target.open("w", encoding="utf-8") as handle:
            for row in self:  # (rows kept as columns built one at a time, not kept)
                handle.write(row.to_json())
                handle.write("\n")
        return target

    @classmethod
    def from_jsonl(cls: type[_R], path: str | os.PathLike[str]) -> _R:
        """Read back what :meth:`to_jsonl` wrote."""
        rows = []
        with Path(path).open(encoding="utf-8") as handle:
            for line in handle:
                if line.strip():
                    rows.append(MetricResult.from_dict(json.loads(line)))
        metrics = list(dict.fromkeys(r.metric for r in rows))
        return cls(rows, metrics)

    def to_pandas(self) -> Any:
        """A ``pandas.DataFrame`` with one row per result (needs pandas), made from the
        columns the evaluation keeps (rows kept as columns are not built).

        Columns: ``sample_id``, ``metric``, ``status``, ``score``, ``reason``, ``details``,
        and the usage fields (``requests``, ``retries``, ``prompt_tokens``,
        ``completion_tokens``, ``cost_usd``, ``cache_hits``).
        """
        from ctxeval._data.optional import require_pandas

        require_pandas("Evaluation.to_pandas()")
        import pandas as pd

        parts = self._parts if self._results is None else (self._results,)
        columns = row_columns(parts)
        if not columns["metric"]:  # (no row: the empty frame's columns are of objects)
            return pd.DataFrame.from_records([], columns=list(ROW_COLUMNS))
        return pd.DataFrame(columns, columns=list(ROW_COLUMNS))

    def _check_metric(self, metric: str) -> None:
        if metric not in self.metrics:
            from ctxeval._errors import ConfigError

            raise ConfigError(
                f"no metric {metric!r} in this evaluation; it has: {', '.join(self.metrics)}"
            )
