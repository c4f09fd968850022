"""The files of a run folder, as writer plugins (entry-point group ``ctxeval.writers``).

A writer turns the rows of a run and its summary into one file of the run folder. The built-in
ones that hold rows stream (:class:`~ctxeval.plugin.StreamingWriter`: each file written under
``NAME.partial`` as the rows come, in constant memory, and renamed when whole); those that
hold the summary only are given the summary (:class:`~ctxeval.plugin.SummaryWriter`).
``ctxeval evaluate --out DIR`` always runs ``jsonl``, ``summary`` and ``html``; ``--format``
adds others, built-in or from any installed package. The built-in writers make their files
readable by their owner only (0600): they hold the data and the judge's reasons.

==============  ===================  =========================================================
writer          file                 what it holds
==============  ===================  =========================================================
``jsonl``       ``results.jsonl``    one JSON object per row (sample, metric, status, score,
                                     reason, details, usage)
``summary``     ``summary.json``     per metric: mean, counts, 95% CI and its method, usage;
                                     gates; usage totals
``html``        ``report.html``      the report, one self-contained page
``csv``         ``results.csv``      one line per row; ``details`` as JSON, usage in columns
``parquet``     ``results.parquet``  the same as a Parquet table (needs ``pyarrow``)
``markdown``    ``summary.md``       the summary table (for a pull request or a wiki)
==============  ===================  =========================================================
"""

from __future__ import annotations

import csv
import json
import operator
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, ClassVar

import attrs
import orjson

from ctxeval._output.files import (
    NOFOLLOW,
    AtomicFile,
    check_writable_name,
    private_open,
    write_text,
)
from ctxeval._output.lines import arrow_row_fields, evidence_of, forget_evidence, write_jsonl
from ctxeval._plugins.base import Dependency
from ctxeval._plugins.protocols import RowFile
from ctxeval._results.columns import RowBlock, _held
from ctxeval._results.evaluation import RunResults
from ctxeval._results.results import NO_USAGE, MetricResult, json_line

__all__ = [
    "CSVWriter",
    "HTMLWriter",
    "JSONLWriter",
    "MarkdownWriter",
    "ParquetWriter",
    "RawCSVWriter",
    "SummaryWriter",
    "private_open",
    "write_text",
]

_USAGE = ("requests", "retries", "prompt_tokens", "completion_tokens", "cost_usd", "cache_hits")


class _PartialFile(AtomicFile):
    """A run folder's file, written as the rows come under ``NAME.partial`` (0600) and given
    its name when finished, so that a file of a run folder is whole or not there."""

    def __init__(self, path: Path, *, text: bool = False) -> None:
        partial = path.with_name(path.name + ".partial")
        check_writable_name(path)  # (a device or a FIFO there would be replaced)
        if not partial.is_symlink():  # a file left there (or a hard link planted) is
            partial.unlink(missing_ok=True)  # not reused; a link there is refused below
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW  # (never through a link)
        descriptor = os.open(partial, flags, 0o600)
        os.fchmod(descriptor, 0o600)
        handle: IO[Any] = (
            os.fdopen(descriptor, "w", encoding="utf-8", errors="backslashreplace", newline="")
            if text
            else os.fdopen(descriptor, "wb", buffering=1 << 20)
        )
        super().__init__(path, partial, handle)

    @property
    def partial(self) -> Path:
        """The file being written (``NAME.partial``): :attr:`temporary`."""
        return self.temporary


class _JSONLFile(_PartialFile):
    def add(self, rows: Sequence[MetricResult]) -> None:
        write_jsonl(rows, self.handle.write)


@attrs.frozen(kw_only=True)
class JSONLWriter:
    """Writer ``jsonl``: ``results.jsonl``, written as the rows come."""

    registry_name: ClassVar[str] = "jsonl"
    name: str = "jsonl"
    filename: str = "results.jsonl"

    def open(self, folder: Path, *, title: str, metrics: Sequence[str]) -> RowFile:
        return _JSONLFile(folder / self.filename)

    def write(
        self, evaluation: RunResults, summary: Mapping[str, Any], folder: Path, *, title: str
    ) -> Path:
        return _write_all(self, evaluation, folder, title=title)


def _write_all(writer: Any, evaluation: RunResults, folder: Path, *, title: str) -> Path:
    """A streaming writer's file for a whole evaluation at once."""
    file = writer.open(folder, title=title, metrics=evaluation.metrics)
    try:
        for part in evaluation.parts:
            file.add(part)
    except BaseException:
        file.abort()
        raise
    path: Path = file.finish()
    return path


@attrs.frozen(kw_only=True)
class SummaryWriter:
    """Writer ``summary``: ``summary.json``."""

    registry_name: ClassVar[str] = "summary"
    name: str = "summary"
    filename: str = "summary.json"

    def write_summary(self, summary: Mapping[str, Any], folder: Path, *, title: str) -> Path:
        text = json.dumps(summary, indent=2, ensure_ascii=False) + "\n"
        return write_text(folder / self.filename, text)

    def write(
        self, evaluation: RunResults, summary: Mapping[str, Any], folder: Path, *, title: str
    ) -> Path:
        return self.write_summary(summary, folder, title=title)


@attrs.frozen(kw_only=True)
class HTMLWriter:
    """Writer ``html``: ``report.html`` (a run folder's report is made from the samples chosen
    as the rows stream by: :class:`~ctxeval._output.folder.RunFolder`)."""

    registry_name: ClassVar[str] = "html"
    name: str = "html"
    filename: str = "report.html"

    def write(
        self, evaluation: RunResults, summary: Mapping[str, Any], folder: Path, *, title: str
    ) -> Path:
        from ctxeval._output.report import render_report

        return write_text(folder / self.filename, render_report(evaluation, summary, title=title))


def _flat(row: MetricResult) -> dict[str, Any]:
    record = row.to_dict()
    usage = record.pop("usage")
    record["details"] = json_line(record["details"])
    record.update({key: usage[key] for key in _USAGE})
    return record


_ZERO = {key: NO_USAGE.to_dict()[key] for key in _USAGE}


def _records(rows: Sequence[MetricResult]) -> Iterator[tuple[Any, ...]]:
    """Each row as a flat record (``_flat``'s values in :data:`_COLUMNS` order): a
    deterministic block's plain rows without building them, their details from
    :func:`evidence_of` (shared with ``results.jsonl``)."""
    if not isinstance(rows, RowBlock):
        yield from map(_in_order, map(_flat, rows))
        return
    samples, details = evidence_of(rows)
    dumps = orjson.dumps
    zero = tuple(_ZERO[key] for key in _USAGE)
    for position, sample_id in enumerate(rows.sample_ids):
        for column, evidence in zip(rows.columns, details, strict=True):
            score = column.scores[position]
            if score is None:  # a row kept whole
                yield _in_order(_flat(column.rows[position]))
                continue
            sample = samples[position] if samples is not None else _held(rows.sources[position])
            if evidence is None:  # no batch form: the row, built
                yield _in_order(_flat(column.row(position, sample_id, sample)))
                continue
            try:
                text = dumps(evidence[position]).decode("utf-8")
            except TypeError:  # what orjson refuses: json_line knows what to do
                text = json_line(column.row(position, sample_id, sample).details)
            yield (sample_id, column.metric, "ok", score, None, text, *zero)


_COLUMNS = ("sample_id", "metric", "status", "score", "reason", "details", *_USAGE)
_in_order = operator.itemgetter(*_COLUMNS)


_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
"""What makes a spreadsheet read a cell as a formula (OWASP's CSV injection list)."""


def _neutralised(record: tuple[Any, ...]) -> tuple[Any, ...]:
    """``record`` with each text cell a spreadsheet would run as a formula (a sample id or
    metric name starting with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return) prefixed
    with ``'``, as OWASP advises: shown as text, not run. Numbers are left alone."""
    if not any(isinstance(v, str) and v.startswith(_FORMULA_STARTS) for v in record):
        return record
    return tuple(
        "'" + v if isinstance(v, str) and v.startswith(_FORMULA_STARTS) else v for v in record
    )


class _CSVFile(_PartialFile):
    def __init__(self, path: Path, *, neutralise: bool = True) -> None:
        super().__init__(path, text=True)
        self.writer = csv.writer(self.handle)
        self.writer.writerow(_COLUMNS)
        self.neutralise = neutralise

    def add(self, rows: Sequence[MetricResult]) -> None:
        records = _records(rows)
        self.writer.writerows(map(_neutralised, records) if self.neutralise else records)


@attrs.frozen(kw_only=True)
class CSVWriter:
    """Writer ``csv``: ``results.csv``, one line per row, written as the rows come.

    A text cell a spreadsheet would run as a formula (``=HYPERLINK(...)`` as a sample id) is
    written with a ``'`` before it (OWASP's rule); the writer ``csv_raw`` writes such cells as
    they are, for a program that reads the file and not a spreadsheet."""

    registry_name: ClassVar[str] = "csv"
    name: str = "csv"
    filename: str = "results.csv"
    neutralise_formulas: bool = True
    """Prefix a cell that starts like a formula with ``'`` (False: write every cell as is)."""

    def open(self, folder: Path, *, title: str, metrics: Sequence[str]) -> RowFile:
        return _CSVFile(folder / self.filename, neutralise=self.neutralise_formulas)

    def write(
        self, evaluation: RunResults, summary: Mapping[str, Any], folder: Path, *, title: str
    ) -> Path:
        return _write_all(self, evaluation, folder, title=title)


@attrs.frozen(kw_only=True)
class RawCSVWriter(CSVWriter):
    """Writer ``csv_raw``: ``results.csv`` with every cell as it is, a formula-like sample id
    included (for a program that reads it; open it in a spreadsheet at your own risk)."""

    registry_name: ClassVar[str] = "csv_raw"
    name: str = "csv_raw"
    neutralise_formulas: bool = False


PARQUET_ROWS = 65_536
"""Rows per row group of ``results.parquet`` (what the writer holds before writing)."""


def arrow_schema() -> Any:
    """The columns of ``results.parquet``, :meth:`Evaluation.to_arrow
    <ctxeval.Evaluation.to_arrow>` and the batch scorer's tables (needs pyarrow): a row's
    fields, its details as JSON text, its usage flattened."""
    import pyarrow as pa

    return pa.schema(
        [
            *arrow_row_fields(pa),
            ("requests", pa.int64()),
            ("retries", pa.int64()),
            ("prompt_tokens", pa.int64()),
            ("completion_tokens", pa.int64()),
            ("cost_usd", pa.float64()),
            ("cache_hits", pa.int64()),
        ]
    )


def arrow_table(parts: Iterable[Sequence[MetricResult]], *, details: bool = True) -> Any:
    """The rows of ``parts`` as one ``pyarrow.Table`` of :func:`arrow_schema` (needs pyarrow),
    a record batch per part: the rows a run keeps as columns are read from them, not built.
    ``details=False``: without the ``details`` column (the rows' evidence not computed)."""
    import pyarrow as pa

    schema = arrow_schema()
    names: tuple[str, ...] = _COLUMNS
    if not details:
        schema = schema.remove(schema.get_field_index("details"))
        names = tuple(c for c in _COLUMNS if c != "details")
    batches = []
    for part in parts:
        held = list(_records(part) if details else _records_without_details(part))
        forget_evidence(part)  # (the block's samples and details: not kept past its batch)
        if held:
            columns = {c: [r[i] for r in held] for i, c in enumerate(names)}
            batches.append(pa.RecordBatch.from_pydict(columns, schema=schema))
    return pa.Table.from_batches(batches, schema=schema)


_DETAILS_AT = _COLUMNS.index("details")


def _records_without_details(rows: Sequence[MetricResult]) -> Iterator[tuple[Any, ...]]:
    """Each row as :func:`_records` gives it, without its details (a block's plain rows
    without building them or computing their evidence)."""

    def cut(record: tuple[Any, ...]) -> tuple[Any, ...]:
        return record[:_DETAILS_AT] + record[_DETAILS_AT + 1 :]

    if not isinstance(rows, RowBlock):
        yield from (cut(_in_order(_flat(row))) for row in rows)
        return
    zero = tuple(_ZERO[key] for key in _USAGE)
    for position, sample_id in enumerate(rows.sample_ids):
        for column in rows.columns:
            score = column.scores[position]
            if score is None:  # a row kept whole
                yield cut(_in_order(_flat(column.rows[position])))
            else:
                yield (sample_id, column.metric, "ok", score, None, *zero)


class _ParquetFile(_PartialFile):
    def __init__(self, path: Path) -> None:
        import pyarrow.parquet as pq

        super().__init__(path)
        self.schema = arrow_schema()
        self.writer = pq.ParquetWriter(self.handle, self.schema)
        self.held: list[tuple[Any, ...]] = []

    def add(self, rows: Sequence[MetricResult]) -> None:
        self.held += _records(rows)
        if len(self.held) >= PARQUET_ROWS:
            self._flush()

    def _flush(self) -> None:
        import pyarrow as pa

        if self.held:
            columns = {c: [r[i] for r in self.held] for i, c in enumerate(_COLUMNS)}
            self.writer.write_table(pa.table(columns, schema=self.schema))
            self.held = []

    def finish(self, *, replace: bool = True) -> Path:
        self._flush()
        self.writer.close()
        return super().finish(replace=replace)

    def abort(self) -> None:
        try:
            self.writer.close()
        except OSError:
            pass
        finally:
            super().abort()


@attrs.frozen(kw_only=True)
class ParquetWriter:
    """Writer ``parquet``: ``results.parquet`` (needs pyarrow), written in row groups of
    :data:`PARQUET_ROWS` rows as the rows come."""

    registry_name: ClassVar[str] = "parquet"
    dependencies: ClassVar[tuple[Dependency, ...]] = (
        Dependency("pyarrow", "pip install 'ctxeval[all]'  (or: pip install pyarrow)"),
    )
    name: str = "parquet"
    filename: str = "results.parquet"

    def open(self, folder: Path, *, title: str, metrics: Sequence[str]) -> RowFile:
        return _ParquetFile(folder / self.filename)

    def write(
        self, evaluation: RunResults, summary: Mapping[str, Any], folder: Path, *, title: str
    ) -> Path:
        return _write_all(self, evaluation, folder, title=title)


@attrs.frozen(kw_only=True)
class MarkdownWriter:
    """Writer ``markdown``: ``summary.md``, the summary as a Markdown table."""

    registry_name: ClassVar[str] = "markdown"
    name: str = "markdown"
    filename: str = "summary.md"

    def write(
        self, evaluation: RunResults, summary: Mapping[str, Any], folder: Path, *, title: str
    ) -> Path:
        return self.write_summary(summary, folder, title=title)

    def write_summary(self, summary: Mapping[str, Any], folder: Path, *, title: str) -> Path:
        def number(value: float | None) -> str:
            return "—" if value is None else f"{value:.3f}"

        lines = [
            f"# {title}",
            "",
            "| metric | mean | 95% CI | ok | undefined | error |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for name, s in summary["metrics"].items():
            ci = s["ci95"]
            interval = "—" if ci is None else f"{ci[0]:.3f}–{ci[1]:.3f}"
            lines.append(
                f"| `{name}` | {number(s['mean'])} | {interval} | {s['n_ok']} | "
                f"{s['n_undefined']} | {s['n_error']} |"
            )
        method = next(
            (s["ci95_method"] for s in summary["metrics"].values() if s["ci95_method"]), None
        )
        if method:
            lines += ["", f"95% CI: {method}."]
        gates = summary.get("gates") or []
        if gates:
            lines += ["", "| gate | value | threshold | result |", "|---|---:|---:|---|"]
            for g in gates:
                result = (
                    "pass"
                    if g["passed"]
                    else f"**fail**{': ' + g['reason'] if g['reason'] else ''}"
                )
                lines.append(
                    f"| `{g['metric']}` {g['on']} | {number(g['value'])} | "
                    f"{g['threshold']:.3f} | {result} |"
                )
        return write_text(folder / self.filename, "\n".join(lines) + "\n")
