"""The files of a run folder, as writer plugins (entry-point group ``ctxeval.writers``).

A writer turns an :class:`~ctxeval.Evaluation` and its summary into one file of the run folder.
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
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import attrs

from ctxeval._output.files import private_open, write_text
from ctxeval._plugins.base import Dependency
from ctxeval._results.evaluation import Evaluation
from ctxeval._results.results import json_line

__all__ = [
    "CSVWriter",
    "HTMLWriter",
    "JSONLWriter",
    "MarkdownWriter",
    "ParquetWriter",
    "SummaryWriter",
    "private_open",
    "write_text",
]

_USAGE = ("requests", "retries", "prompt_tokens", "completion_tokens", "cost_usd", "cache_hits")


@attrs.frozen(kw_only=True)
class JSONLWriter:
    """Writer ``jsonl``: ``results.jsonl``."""

    registry_name: ClassVar[str] = "jsonl"
    name: str = "jsonl"
    filename: str = "results.jsonl"

    def write(
        self, evaluation: Evaluation, summary: Mapping[str, Any], folder: Path, *, title: str
    ) -> Path:
        path = folder / self.filename
        with private_open(path) as handle:
            for row in evaluation.results:
                handle.write(row.to_json())
                handle.write("\n")
        return path


@attrs.frozen(kw_only=True)
class SummaryWriter:
    """Writer ``summary``: ``summary.json``."""

    registry_name: ClassVar[str] = "summary"
    name: str = "summary"
    filename: str = "summary.json"

    def write(
        self, evaluation: Evaluation, summary: Mapping[str, Any], folder: Path, *, title: str
    ) -> Path:
        text = json.dumps(summary, indent=2, ensure_ascii=False) + "\n"
        return write_text(folder / self.filename, text)


@attrs.frozen(kw_only=True)
class HTMLWriter:
    """Writer ``html``: ``report.html``."""

    registry_name: ClassVar[str] = "html"
    name: str = "html"
    filename: str = "report.html"

    def write(
        self, evaluation: Evaluation, summary: Mapping[str, Any], folder: Path, *, title: str
    ) -> Path:
        from ctxeval._output.report import render_report

        return write_text(folder / self.filename, render_report(evaluation, summary, title=title))


def _flat(evaluation: Evaluation) -> list[dict[str, Any]]:
    records = []
    for row in evaluation.results:
        record = row.to_dict()
        usage = record.pop("usage")
        record["details"] = json_line(record["details"])
        record.update({key: usage[key] for key in _USAGE})
        records.append(record)
    return records


_COLUMNS = ("sample_id", "metric", "status", "score", "reason", "details", *_USAGE)


@attrs.frozen(kw_only=True)
class CSVWriter:
    """Writer ``csv``: ``results.csv``, one line per row."""

    registry_name: ClassVar[str] = "csv"
    name: str = "csv"
    filename: str = "results.csv"

    def write(
        self, evaluation: Evaluation, summary: Mapping[str, Any], folder: Path, *, title: str
    ) -> Path:
        path = folder / self.filename
        with private_open(path, newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=_COLUMNS)
            writer.writeheader()
            writer.writerows(_flat(evaluation))
        return path


@attrs.frozen(kw_only=True)
class ParquetWriter:
    """Writer ``parquet``: ``results.parquet`` (needs pyarrow)."""

    registry_name: ClassVar[str] = "parquet"
    dependencies: ClassVar[tuple[Dependency, ...]] = (
        Dependency("pyarrow", "pip install 'ctxeval[all]'  (or: pip install pyarrow)"),
    )
    name: str = "parquet"
    filename: str = "results.parquet"

    def write(
        self, evaluation: Evaluation, summary: Mapping[str, Any], folder: Path, *, title: str
    ) -> Path:
        import pyarrow as pa
        import pyarrow.parquet as pq

        records = _flat(evaluation)
        table = pa.table({column: [r[column] for r in records] for column in _COLUMNS})
        path = folder / self.filename
        with open(path, "wb", opener=lambda p, f: os.open(p, f, 0o600)) as handle:
            os.fchmod(handle.fileno(), 0o600)
            pq.write_table(table, handle)
        return path


@attrs.frozen(kw_only=True)
class MarkdownWriter:
    """Writer ``markdown``: ``summary.md``, the summary as a Markdown table."""

    registry_name: ClassVar[str] = "markdown"
    name: str = "markdown"
    filename: str = "summary.md"

    def write(
        self, evaluation: Evaluation, summary: Mapping[str, Any], folder: Path, *, title: str
    ) -> Path:
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
