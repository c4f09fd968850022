"""A run folder's report made again from its files: :func:`rebuild_report` reads
``results.jsonl`` a batch of whole samples at a time (:func:`read_parts`) through the same
selection and numbers a run uses, and finds the texts of the samples it shows in the data file
(:func:`file_lookup`), in constant memory whatever the run's size (``ctxeval report``).
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Collection, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import orjson

from ctxeval._data.sample import Sample
from ctxeval._errors import DataError
from ctxeval._output.files import write_text
from ctxeval._output.report import SampleLookup, render_page
from ctxeval._output.selection import ReportSelection
from ctxeval._output.summary import summary_dict
from ctxeval._results.results import MetricResult
from ctxeval._results.totals import RunTotals

__all__ = ["file_lookup", "read_parts", "rebuild_report"]

BATCH_ROWS = 8192
"""Rows read from ``results.jsonl`` before they are handed on (ended at a sample's last)."""


def read_parts(path: str | os.PathLike[str]) -> Iterator[list[MetricResult]]:
    """The rows of a ``results.jsonl`` in batches of whole samples (about
    :data:`BATCH_ROWS` rows each).

    Raises:
        DataError: a line is not a row (file and line named).
    """
    batch: list[MetricResult] = []
    with open(path, "rb") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = MetricResult.from_dict(orjson.loads(line))
            except (ValueError, KeyError, TypeError) as exc:
                raise DataError(
                    f"not a row of results.jsonl: {exc}",
                    path=str(path),
                    line=number,
                    hint="give a results.jsonl that ctxeval evaluate --out wrote",
                ) from None
            if len(batch) >= BATCH_ROWS and batch[-1].sample_id != row.sample_id:
                yield batch
                batch = []
            batch.append(row)
    if batch:
        yield batch


def file_lookup(source: str | os.PathLike[str] | Iterable[Sample] | None) -> SampleLookup:
    """Finds samples by id in ``source`` (a data file, read again up to the last sample
    wanted; or samples in memory); a sample without an id is known by its position."""

    def find(ids: Collection[str]) -> Mapping[str, Sample]:
        from ctxeval._data.loading import load_samples

        wanted = set(ids)
        found: dict[str, Sample] = {}
        if source is None or not wanted:
            return found
        opened = load_samples(source, strict=False) if isinstance(source, (str, Path)) else None
        samples: Iterable[Sample] = opened if opened is not None else source  # type: ignore[assignment]
        try:
            for position, sample in enumerate(samples):
                key = sample.id if sample.id is not None else str(position)
                if key in wanted:
                    found[key] = sample
                    if len(found) == len(wanted):
                        break
        finally:
            if opened is not None:
                opened.close()
        return found

    return find


def rebuild_report(
    folder: str | os.PathLike[str],
    *,
    data: str | os.PathLike[str] | None = None,
    output: str | os.PathLike[str] | None = None,
    title: str | None = None,
    summary: Mapping[str, Any] | None = None,
) -> Path:
    """Write the report of the run in ``folder`` again from its ``results.jsonl`` (and its
    ``summary.json`` when there, else the numbers computed again), the texts of the samples
    it shows read from ``data``. Returns the report's path (``output``, by default
    ``folder/report.html``)."""
    target = Path(folder)
    results = target / "results.jsonl"
    if summary is None:
        try:
            summary = json.loads((target / "summary.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            summary = None
    metrics = (
        list(summary["metrics"]) if summary and isinstance(summary.get("metrics"), dict) else []
    )
    parts = read_parts(results)
    first = next(parts, [])
    for row in first:  # (names of metrics the summary does not hold)
        if row.metric not in metrics:
            metrics.append(row.metric)
    selection = ReportSelection(metrics)
    totals = RunTotals(metrics)
    for part in itertools.chain([first] if first else [], parts):
        selection.add(part)
        totals.add(part)
    if summary is None:
        summary = summary_dict(totals)
    page = render_page(
        selection,
        summary,
        title=title or f"ctxeval: {target.resolve().name}",
        scores=totals.scores,
        lookup=file_lookup(data),
        folder=str(folder),
    )
    return write_text(Path(output) if output is not None else target / "report.html", page)
