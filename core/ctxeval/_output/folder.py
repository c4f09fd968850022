"""The run folder, written as the rows come: :class:`RunFolder` takes each part of a run's rows
once, in input order, and writes ``results.jsonl``, ``summary.json``, ``report.html``
(:data:`DEFAULT_FORMATS`) and the files of the writers a run asks for, in constant memory:
rows go to disk a part at a time, the numbers come from columns of scores
(:class:`~ctxeval._results.totals.RunTotals`), the report from the samples chosen as they
pass (:class:`~ctxeval._output.selection.ReportSelection`). :func:`write_outputs` writes the
folder of an :class:`~ctxeval.Evaluation` through the same path.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ctxeval._output.files import write_text
from ctxeval._output.lines import forget_evidence
from ctxeval._output.report import SampleLookup, render_page
from ctxeval._output.selection import ReportSelection
from ctxeval._output.summary import summary_dict
from ctxeval._plugins.protocols import RowFile, StreamingWriter, SummaryWriter
from ctxeval._results.columns import RowBlock
from ctxeval._results.evaluation import Evaluation
from ctxeval._results.results import MetricResult
from ctxeval._results.totals import RunTotals

__all__ = ["DEFAULT_FORMATS", "RunFolder", "UnwritableFolderError", "write_outputs"]

logger = logging.getLogger(__name__)

WRITE_SAMPLES = 256
"""The writers take a deterministic block this many samples at a time: the evidence of a few
hundred samples is made, written and freed, and the memory it took serves the next (a whole
block's at once costs fresh memory, page by page)."""

DEFAULT_FORMATS = ("jsonl", "summary", "html")
"""The writers every run folder gets: ``results.jsonl``, ``summary.json``, ``report.html``."""


class UnwritableFolderError(OSError):
    """A file of the run folder could not be written (a full disk, a planted link, no
    permission): the ``OSError`` it came from (its ``errno``, ``strerror`` and ``filename``),
    told apart from an error reading the input."""


@contextlib.contextmanager
def _writing() -> Iterator[None]:
    try:
        yield
    except UnwritableFolderError:
        raise
    except OSError as exc:
        raise UnwritableFolderError(exc.errno, exc.strerror, exc.filename) from exc


class RunFolder:
    """A run folder being written: :meth:`add` each part of the rows (whole samples, in input
    order) as it comes, then :meth:`finish` with the summary (or :meth:`abort`; leaving a
    ``with`` block on an exception aborts).

    Example::

        async with ctxeval.stream(samples, metrics) as rows:
            with ctxeval.RunFolder("run", rows.metrics, title="nightly") as folder:
                async for part in rows.parts():
                    folder.add(part)
                paths = folder.finish()

    Rows are written as they come by the writers that stream (``results.jsonl``, and
    ``results.csv`` / ``results.parquet`` when asked); a writer plugin without ``open`` is
    given, at the end, an :class:`~ctxeval.Evaluation` read back from ``results.jsonl``.

    Attributes:
        path: the folder.
        totals: the run's numbers so far (summaries, usage, errors, the judge's trust).
        selection: the samples the report will show.
    """

    def __init__(
        self,
        folder: str | os.PathLike[str],
        metrics: Sequence[str],
        *,
        title: str,
        formats: Sequence[str] = (),
        totals: RunTotals | None = None,
        lookup: SampleLookup | None = None,
    ) -> None:
        from ctxeval._plugins.registry import default_registry

        registry = default_registry()
        self.path = Path(folder)
        self.title = title
        self.metrics = list(metrics)
        self.totals = totals if totals is not None else RunTotals(metrics)
        self.selection = ReportSelection(metrics)
        self.lookup = lookup
        writers = [registry.get_writer(n) for n in dict.fromkeys((*DEFAULT_FORMATS, *formats))]
        self._later: list[Any] = []  # writers given the whole rows at the end
        self._files: dict[str, RowFile] = {}
        self._html = None
        try:
            with _writing():  # (mkdir too: a folder that cannot be made is as unwritable)
                if not self.path.exists():
                    self.path.mkdir(parents=True, mode=0o700)  # a user's own folder is kept
                for writer in writers:
                    if writer.name == "html" and type(writer).__module__.startswith("ctxeval."):
                        self._html = writer
                    elif isinstance(writer, StreamingWriter):
                        self._files[writer.name] = writer.open(
                            self.path, title=title, metrics=self.metrics
                        )
                    else:
                        self._later.append(writer)
        except BaseException:
            self.abort()
            raise

    def __enter__(self) -> RunFolder:
        return self

    def __exit__(self, kind: type[BaseException] | None, *rest: object) -> None:
        """A failure inside the block removes the files begun (see :meth:`abort`)."""
        if kind is not None:
            self.abort()

    def add(self, part: Sequence[MetricResult]) -> None:
        """Write ``part``'s rows and count them."""
        self.totals.add(part)
        self.selection.add(part)
        pieces = part.split(WRITE_SAMPLES) if isinstance(part, RowBlock) else (part,)
        for piece in pieces:
            try:
                with _writing():
                    for file in self._files.values():
                        file.add(piece)
            finally:
                forget_evidence(piece)  # (computed once for every writer)

    def summary(self, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """``summary.json``'s content for the rows added (with ``extra`` keys)."""
        return summary_dict(self.totals, extra=extra)

    def finish(self, summary: Mapping[str, Any] | None = None) -> dict[str, Path]:
        """Finish every file (``summary``: :meth:`summary`'s output when the caller has it);
        each file's path by writer name (the default three also as ``results``, ``summary``
        and ``report``)."""
        if summary is None:
            summary = self.summary()
        paths: dict[str, Path] = {}
        try:
            with _writing():
                for name, file in list(self._files.items()):
                    paths[name] = file.finish()
                    del self._files[name]
        except BaseException:
            self.abort()
            raise
        with _writing():
            self._finish_summaries(summary, paths)
        paths.update(results=paths["jsonl"], report=paths["html"])
        return paths

    def _finish_summaries(self, summary: Mapping[str, Any], paths: dict[str, Path]) -> None:
        """The files made at the end: the report, the summaries, writers without ``open``."""
        if self._html is not None:
            page = render_page(
                self.selection,
                summary,
                title=self.title,
                scores=self.totals.scores,
                lookup=self.lookup,
                folder=str(self.path),
            )
            paths[self._html.name] = write_text(self.path / self._html.filename, page)
        rows: Evaluation | None = None
        writer: Any
        for writer in self._later:
            writer_name: str = writer.name
            if isinstance(writer, SummaryWriter):
                paths[writer_name] = writer.write_summary(summary, self.path, title=self.title)
                continue
            if rows is None:
                logger.info(
                    "writer %s has no open(): reading every row back from results.jsonl for it",
                    writer_name,
                )
                rows = Evaluation.from_jsonl(paths["jsonl"])
            paths[writer_name] = writer.write(rows, summary, self.path, title=self.title)

    def abort(self) -> None:
        """The run failed: remove the files begun (the folder's finished files are kept)."""
        for file in self._files.values():
            try:
                file.abort()
            except OSError as exc:  # (a full disk, say: the first failure is the one to tell)
                logger.warning("could not remove a partial file in %s: %s", self.path, exc)
        self._files.clear()


def write_outputs(
    evaluation: Evaluation,
    folder: str | os.PathLike[str],
    *,
    title: str,
    summary: Mapping[str, Any] | None = None,
    formats: Sequence[str] = (),
    lookup: Callable[..., Any] | None = None,
) -> dict[str, Path]:
    """Write the run folder of ``evaluation``: ``results.jsonl``, ``summary.json``,
    ``report.html`` and the files of the writers named in ``formats`` (entry-point group
    ``ctxeval.writers``), through :class:`RunFolder`.

    ``summary`` is :func:`summary_dict`'s output when the caller has it already (its bootstrap
    intervals are not computed twice). Returns each file's path by writer name (the default
    three also as ``results``, ``summary`` and ``report``).
    """
    known = evaluation.samples
    with RunFolder(
        folder,
        evaluation.metrics,
        title=title,
        formats=formats,
        lookup=lookup or (lambda ids: {i: known[i] for i in ids if i in known}),
    ) as run:
        for part in evaluation._parts:
            run.add(part)
        return run.finish(summary if summary is not None else summary_dict(evaluation))
