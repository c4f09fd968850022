"""A run folder's report made again from its files: :func:`rebuild_report` reads
``results.jsonl`` a batch of whole samples at a time (:func:`read_parts`) through the same
selection and numbers a run uses, and finds the texts of the samples it shows in the data file
(:func:`file_lookup`), in constant memory whatever the run's size (``ctxeval report``).
:func:`write_report` is the same from Python (``ctxeval.write_report``).
"""

from __future__ import annotations

import itertools
import json
import logging
import os
from collections.abc import Collection, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import orjson

from ctxeval._data.sample import Sample
from ctxeval._errors import DataError
from ctxeval._output.files import write_text
from ctxeval._output.report import SampleLookup, render_page
from ctxeval._output.run_source import run_source
from ctxeval._output.selection import ReportSelection
from ctxeval._output.summary import summary_dict
from ctxeval._output.totals import RunTotals
from ctxeval._results.results import MetricResult

__all__ = ["file_lookup", "read_parts", "rebuild_report", "samples_in_memory", "write_report"]

logger = logging.getLogger(__name__)

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


def samples_in_memory(source: Any) -> Iterator[Sample | None]:
    """The samples of ``source`` held in memory (samples, dicts of their fields, or a table:
    a DataFrame, a dict of columns...), None for one that cannot be read (its position
    counts)."""
    from ctxeval._data.frames import table_rows

    rows = table_rows(source)
    for item in rows if rows is not None else source:
        if isinstance(item, Sample):
            yield item
            continue
        try:
            yield Sample.from_dict(item)
        except DataError:
            yield None


def file_lookup(
    source: str | os.PathLike[str] | Iterable[Any] | None,
    *,
    column_map: Mapping[str, str] | None = None,
) -> SampleLookup:
    """Finds samples by id in ``source`` (a data file, read again up to the last sample
    wanted, through ``column_map`` when the run read it so; or samples in memory: samples,
    dicts, a DataFrame, a dict of columns...); a sample without an id is known by its
    position."""

    def find(ids: Collection[str]) -> Mapping[str, Sample]:
        from ctxeval._data.loading import load_samples

        wanted = set(ids)
        found: dict[str, Sample] = {}
        if source is None or not wanted:
            return found
        on_disk = isinstance(source, (str, os.PathLike))
        opened = load_samples(source, column_map=column_map) if on_disk else None  # type: ignore[arg-type]
        samples: Iterable[Sample | Exception | None] = (
            opened._samples_and_errors() if opened is not None else samples_in_memory(source)
        )
        try:  # (a bad row keeps its place, as it does in a lenient run; the first id wins)
            for position, sample in enumerate(samples):
                if sample is None or isinstance(sample, Exception):
                    continue
                key = sample.id if sample.id is not None else str(position)
                if key in wanted and key not in found:
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
    data: str | os.PathLike[str] | Iterable[Any] | None = None,
    output: str | os.PathLike[str] | None = None,
    title: str | None = None,
    summary: Mapping[str, Any] | None = None,
    results: str | os.PathLike[str] | None = None,
) -> Path:
    """Write the report of the run in ``folder`` again from its ``results.jsonl`` (or
    ``results``: rows written elsewhere; and the folder's ``summary.json`` when there, else the
    numbers computed again), the texts of the samples it shows read from ``data`` (a file, or
    the samples in memory). Returns the report's path (``output``, by default
    ``folder/report.html``)."""
    target = Path(folder)
    rows_file = Path(results) if results is not None else target / "results.jsonl"
    if summary is None and results is None:
        try:
            summary = json.loads((target / "summary.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            summary = None
    metrics = (
        list(summary["metrics"]) if summary and isinstance(summary.get("metrics"), dict) else []
    )
    parts = read_parts(rows_file)
    first = next(parts, [])
    for row in first:  # (names of metrics the summary does not hold)
        if row.metric not in metrics:
            metrics.append(row.metric)
    selection = ReportSelection(metrics)
    totals = RunTotals(metrics)
    for part in itertools.chain([first] if first else [], parts):
        selection.add(part)
        totals.add(part)
    known = summary.get("metrics") if summary is not None else None
    lacking = [m for m in metrics if not isinstance(known, dict) or m not in known]
    if summary is None:
        lacking = []
    if lacking:  # (the summary is not these rows': another run's, or edited)
        logger.warning(
            "%s names no metric %r of %s: the report's numbers are computed again from the rows",
            target / "summary.json", lacking[0], rows_file,
        )  # fmt: skip
        summary = None
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


_DATA_START = '<script id="ctxeval-data" type="application/json">'


def texts_of_report(path: Path) -> list[dict[str, Any]] | None:
    """The samples' texts a report written by ctxeval shows (its explorer's data: each
    sample's id and texts, as cut there), or None when ``path`` is no such report or shows no
    text: what a report written again without its data keeps of the one it replaces."""
    from ctxeval._output.explorer import SAMPLE_TEXTS

    try:
        page = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    start = page.find(_DATA_START)
    end = page.find("</script>", start)
    if start < 0 or end < 0:
        return None
    try:
        data = json.loads(page[start + len(_DATA_START) : end])
    except ValueError:
        return None
    samples = data.get("samples") if isinstance(data, dict) else None
    found = [
        {k: v for k, v in entry.items() if k == "id" or k in SAMPLE_TEXTS}
        for entry in samples or ()
        if isinstance(entry, dict) and any(k in entry for k in SAMPLE_TEXTS)
    ]
    return found or None


def write_report(
    run: str | os.PathLike[str],
    out: str | os.PathLike[str] | None = None,
    *,
    data: str | os.PathLike[str] | Iterable[Any] | None = None,
    title: str | None = None,
) -> Path:
    """Write the HTML report of a run again, from its folder or its ``results.jsonl``: the page
    ``ctxeval report RUN`` writes (after an upgrade, the new page), in constant memory
    whatever the run's size.

    Args:
        run: a run folder (``Evaluation.write(FOLDER)``, ``ctxeval evaluate --out FOLDER``), or
            a ``results.jsonl`` (:meth:`Evaluation.to_jsonl`'s file, named anything); the
            numbers come from the ``summary.json`` beside a ``results.jsonl`` when there,
            else they are computed from the rows.
        out: the page to write; by default ``report.html`` in the run's folder.
        data: where the texts of the samples shown are read: their data file, or the samples
            in memory (a list, a DataFrame, a dict of columns...); by default the data file
            the run's ``summary.json`` names, when it is found, else the texts the report
            being replaced shows (a run written from samples in memory). Without any, the
            page shows scores and evidence without the texts.
        title: the page's title (by default ``ctxeval:`` and the data file's or folder's name).

    Returns:
        The report's path.

    Raises:
        DataError: ``run`` is missing, holds no ``results.jsonl``, or a line of it is not a
            row (file and line named).
    """
    given = Path(run)
    hint = "give a run folder (ev.write(FOLDER), ctxeval evaluate --out FOLDER) or a results.jsonl"
    if not given.exists():
        raise DataError("no such file or folder", path=str(given), hint=hint)
    if given.is_dir():
        folder, results = given, given / "results.jsonl"
        if not results.is_file():
            raise DataError("no results.jsonl in this folder", path=str(given), hint=hint)
    else:
        folder, results = given.parent, given
    summary: Mapping[str, Any] | None = None
    named: str | None = None
    if results.name == "results.jsonl":  # (a summary.json beside other rows is not theirs)
        source = run_source(folder)
        summary = source.summary if isinstance(source.summary.get("metrics"), dict) else None
        named = source.data_named
        if data is None and source.data is not None:
            data = source.data
    if data is None:  # the texts the report there shows, rather than none
        data = texts_of_report(Path(out) if out is not None else folder / "report.html")
        if data is not None:
            logger.info(
                "no data file%s: the texts are those the report of %s showed",
                f" ({named} was not found)" if named else "",
                given,
            )
    if data is None:
        where = f" ({named} was not found)" if named else ""
        logger.warning(
            "no data file%s: the report of %s shows scores and evidence without the samples' "
            "texts; pass data= (the data file, or the samples)",
            where,
            given,
        )
    if title is None:
        inside = isinstance(data, (str, os.PathLike)) and Path(data).parent == folder.resolve()
        # (the samples a run written from memory keeps in its folder: titled by the folder)
        file = named if named else data if isinstance(data, (str, os.PathLike)) else None
        file = None if inside and not named else file
        title = f"ctxeval: {Path(file).name}" if file else None
    return rebuild_report(
        folder, data=data, output=out, title=title, summary=summary, results=results
    )
