"""A run's graded judgements as TREC qrels: :class:`QrelsFile` and :func:`write_qrels`
(``ctxeval evaluate --write-qrels FILE``).

A metric that grades documents (an LLM judge such as ``context_relevance``) puts its grades in
each row's details as ``details["qrels"] = [[doc_id, grade], ...]``, with who judged in
``details["provenance"]``. Each grade becomes one qrels line::

    query_id 0 doc_id grade

the query id being the row's sample id. The file is what ``--qrels`` reads back, so IR
measures (``nDCG@10``, ``AP``, ``Judged@10``...) can be computed from the judge's grades.

* **Constant memory**: lines are written as the rows come, a part at a time; what is kept is
  the grades of the sample being read (a sample's rows come together, as a run gives them), to
  write one line per document when two metrics grade the same one. Two grades that differ
  keep the first (counted, and said once at the end).
* **Whole or not at all**: the lines go to a temporary file beside ``FILE``; :meth:`finish`
  writes the header, then the lines, into another one, flushed to disk and renamed over
  ``FILE`` (0600, never written through a link, as every run file:
  :mod:`ctxeval._output.files`). :meth:`QrelsFile.abort` removes both.
* **Header**: comment lines (``# ...``) with the ctxeval version, the metrics and judges the
  grades come from, and the counts. ctxeval's reader skips them; trec_eval and ir_measures
  do not read comments (``grep -v '^#' FILE`` gives them the lines only), and no header line
  has four words, so none can pass for a judgement in them.
* **What cannot be a TREC line is left out**, counted and named at the end: an id that is
  empty or holds white space, a query id starting with ``#`` (a comment), a grade that is not
  an integer from -127 to 127 (trec_eval's range), an entry that is not ``[doc_id, grade]``.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from ctxeval._output.files import new_temporary, write_whole
from ctxeval._results.columns import RowBlock
from ctxeval._results.results import MetricResult, json_line

if TYPE_CHECKING:
    from ctxeval._results.evaluation import RunResults

__all__ = ["QRELS_DETAIL", "QrelsFile", "write_qrels"]

logger = logging.getLogger(__name__)

QRELS_DETAIL = "qrels"
"""The key of a row's details that holds its grades: ``[[doc_id, grade], ...]``."""

GRADE_RANGE = range(-127, 128)
"""The grades trec_eval reads (``an integer between -127 and 127``)."""

_BLANK = re.compile(r"[ \t\n\r\f\v\x00]")
"""What a TREC id cannot hold: the ASCII white space that separates columns, and NUL."""

_ASCII_SPACE = re.compile(r"[ \t\n\r\f\v]+")

_JUDGES_SHOWN = 20
"""The distinct judges named in the header (the others are counted)."""


def _id_problem(value: str, what: str) -> str | None:
    """Why ``value`` cannot be a TREC id column, or None when it can."""
    if not value:
        return f"the {what} is empty"
    if _BLANK.search(value):
        return f"the {what} {_brief(value)} holds white space"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return f"the {what} {_brief(value)} is not valid Unicode"
    return None


def _brief(value: Any) -> str:
    """``repr(value)``, cut to 80 characters (a message names it)."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _comment(text: str) -> str:
    """``text`` as a header line. trec_eval reads a line of four words as a judgement (it has
    no comments): a four-word line gets a fifth, so that trec_eval refuses it instead."""
    line = "# " + " ".join(text.splitlines())
    if len(_ASCII_SPACE.split(line.strip(" \t\r\f\v"))) == 4:  # (words as trec_eval splits them)
        line += " ."
    return line + "\n"


class QrelsFile:
    """A qrels file being written from a run's rows: :meth:`add` each part as it comes, then
    :meth:`finish` (or :meth:`abort`; leaving a ``with`` block on an exception aborts).

    Example::

        with QrelsFile("judged.qrels") as qrels:
            for part in parts:
                qrels.add(part)
            qrels.finish()

    Attributes:
        path: the file.
        lines: the qrels lines written (one per query and document).
        queries: the queries with at least one line.
        conflicts: documents graded twice for a query with different grades (the first kept).
        skipped: grades left out, each not writable as a TREC line.
        notes: what the caller should tell (conflicts, grades left out, no grades at all),
            set by :meth:`finish`.

    Raises:
        OSError: the temporary file beside ``path`` (made at the first line) or the file
            cannot be written.
    """

    def __init__(
        self, path: str | os.PathLike[str], *, provenance: Mapping[str, Any] | None = None
    ) -> None:
        self.path = Path(path)
        self.provenance = dict(provenance or {})
        self._lines_path: Path | None = None  # made (a new file) at the first line
        self._handle: IO[str] | None = None  # the lines' file, made at the first line
        self._done = False
        self.error: OSError | None = None
        """What stopped the file being written when it was fed through :meth:`feeding`."""
        self.lines = 0
        self.queries = 0
        self.conflicts = 0
        self.skipped = 0
        self.notes: list[str] = []
        self._first_conflict: str | None = None
        self._first_skipped: str | None = None
        self._metrics: dict[str, None] = {}
        self._judges: dict[str, None] = {}
        self._judged_with: dict[str, None] = {}
        self._query: str | None = None
        self._grades: dict[str, tuple[int, str]] = {}  # the current query's: doc -> grade, by

    def __enter__(self) -> QrelsFile:
        return self

    def __exit__(self, kind: type[BaseException] | None, *rest: object) -> None:
        if kind is not None:
            self.abort()

    # --- the rows ------------------------------------------------------------------------------

    def add(self, rows: Iterable[MetricResult]) -> None:
        """Write the grades of ``rows`` (those whose details hold :data:`QRELS_DETAIL`).

        A block of the deterministic fast path (:class:`~ctxeval._results.columns.RowBlock`)
        is passed over: its metrics judge nothing, and reading its rows would build each."""
        if self._done:
            raise ValueError("this qrels file is finished or aborted")
        if isinstance(rows, RowBlock):
            return
        for row in rows:
            details = row.details
            if not details or QRELS_DETAIL not in details:
                continue
            graded = details[QRELS_DETAIL]
            query = row.sample_id or ""
            if query != self._query:
                self._query, self._grades = query, {}
                counted = False
            else:
                counted = bool(self._grades)
            problem = _id_problem(query, "query id") or (
                f"the query id {_brief(query)} starts with '#' (a comment line)"
                if query.startswith("#")
                else None
            )
            if problem is None and not isinstance(graded, (list, tuple)):
                problem = f"details['qrels'] is {type(graded).__name__}, not a list"
            if problem is not None:
                self._skip(row, problem, len(graded) if isinstance(graded, (list, tuple)) else 1)
                continue
            self._judged_by(row, details)
            for entry in graded:
                line = self._line(row, query, entry)
                if line is not None:
                    self._write(line)
                    self.lines += 1
                    if not counted:
                        self.queries += 1
                        counted = True

    def feeding(
        self, consume: Callable[[Sequence[MetricResult]], None]
    ) -> Callable[[Sequence[MetricResult]], None]:
        """``consume`` with each part's grades written here first (a run's ``consume``). A
        failure to write (a full disk) does not stop the run: the file is aborted and the
        error kept in :attr:`error`."""

        def both(part: Sequence[MetricResult]) -> None:
            if self.error is None:
                try:
                    self.add(part)
                except OSError as exc:
                    self.error = exc
                    self.abort()
            consume(part)

        return both

    def _write(self, line: str) -> None:
        if self._handle is None:
            self._lines_path, self._handle = new_temporary(self.path, ".part")
        self._handle.write(line)

    def _line(self, row: MetricResult, query: str, entry: Any) -> str | None:
        """The qrels line of one ``[doc_id, grade]`` entry; None when it is left out (counted)
        or the query has it already."""
        if not isinstance(entry, (list, tuple)) or len(entry) != 2:
            self._skip(row, f"an entry {_brief(entry)} is not [doc_id, grade]")
            return None
        doc, grade = entry
        if isinstance(doc, int) and not isinstance(doc, bool):
            doc = str(doc)  # IDs compare as strings
        if not isinstance(doc, str):
            self._skip(row, f"the doc id {_brief(doc)} is not a string")
            return None
        problem = _id_problem(doc, "doc id")
        if problem is not None:
            self._skip(row, problem)
            return None
        if isinstance(grade, bool) or not isinstance(grade, int) or grade not in GRADE_RANGE:
            self._skip(
                row,
                f"the grade {_brief(grade)} of {_brief(doc)} is not an integer from -127 to 127",
            )
            return None
        metric = row.metric or "?"
        first = self._grades.get(doc)
        if first is not None:
            if first[0] != grade:
                self.conflicts += 1
                if self._first_conflict is None:
                    self._first_conflict = (
                        f"query {_brief(query)}, doc {_brief(doc)}: {first[0]} by {first[1]}, "
                        f"{grade} by {metric}"
                    )
            return None
        self._grades[doc] = (grade, metric)
        return f"{query} 0 {doc} {grade}\n"

    def _skip(self, row: MetricResult, why: str, count: int = 1) -> None:
        self.skipped += count
        if self._first_skipped is None:
            self._first_skipped = f"{why} (sample {row.sample_id!r}, metric {row.metric})"

    def _judged_by(self, row: MetricResult, details: Mapping[str, Any]) -> None:
        """Note the metric and the judges (``details["provenance"]``) of a graded row."""
        self._metrics.setdefault(row.metric or "?", None)
        provenance = details.get("provenance")
        if not isinstance(provenance, Mapping):
            return
        version = provenance.get("ctxeval")
        if isinstance(version, str):
            self._judged_with.setdefault(version, None)
        judges = provenance.get("judges")
        for judge in judges if isinstance(judges, list) else []:
            if len(self._judges) > _JUDGES_SHOWN:
                return
            self._judges.setdefault(json_line(judge), None)

    # --- the file ------------------------------------------------------------------------------

    def header(self) -> str:
        """The header's comment lines (for the rows added so far)."""
        from ctxeval._version import __version__

        lines = [
            f"TREC qrels written by ctxeval {__version__} (--write-qrels); the lines are: "
            "query_id 0 doc_id grade",
            f"{self.lines} judgements of {self.queries} queries, graded by the metric(s) "
            + (", ".join(self._metrics) or "(none: no row held details['qrels'])"),
        ]
        judged_with = [v for v in self._judged_with if v != __version__]
        if judged_with:
            lines.append(f"some rows were judged with ctxeval {', '.join(judged_with)}")
        judges = list(self._judges)
        shown = judges[:_JUDGES_SHOWN]
        lines += [f"judge: {judge}" for judge in shown]
        if len(judges) > len(shown):
            lines.append("and more judges (see each row's details['provenance'])")
        if not judges:
            lines.append("judge: not recorded (no row named one in details['provenance'])")
        lines += [f"{key}: {json_line(value)}" for key, value in self.provenance.items()]
        if self.conflicts:
            lines.append(
                f"{self.conflicts} documents graded differently by two metrics: the first "
                "grade is kept"
            )
        if self.skipped:
            lines.append(f"{self.skipped} grades left out: not writable as TREC lines")
        lines.append("trec_eval and ir_measures read no comments: grep -v '^#' gives the lines")
        return "".join(map(_comment, lines))

    def finish(self) -> Path:
        """Write the file: the header, then every line, under a temporary name flushed to disk
        and renamed over :attr:`path`; sets :attr:`notes`. Returns :attr:`path`."""
        if self._done:
            raise ValueError("this qrels file is finished or aborted")
        self._done = True
        handle, self._handle = self._handle, None
        try:
            if handle is not None:
                handle.close()
            lines_path = self._lines_path

            def write(out: IO[str]) -> None:
                out.write(self.header())
                if lines_path is not None:
                    with lines_path.open(encoding="utf-8") as lines:
                        shutil.copyfileobj(lines, out)

            write_whole(self.path, write)  # (renamed into place once on disk)
        except BaseException:
            self.abort()
            raise
        if self._lines_path is not None:
            self._lines_path.unlink(missing_ok=True)
        self.notes = self._notes()
        return self.path

    def _notes(self) -> list[str]:
        notes = []
        if not self.lines and not self.skipped:
            notes.append(
                f"{self.path}: no row held graded judgements (details['qrels']): the file "
                "has its header only; a metric that grades documents (context_relevance) "
                "writes them"
            )
        if self.conflicts:
            notes.append(
                f"{self.path}: {self.conflicts} documents were graded differently by two "
                f"metrics; the first grade is kept (e.g. {self._first_conflict})"
            )
        if self.skipped:
            notes.append(
                f"{self.path}: {self.skipped} grades left out, not writable as TREC lines "
                f"(e.g. {self._first_skipped})"
            )
        return notes

    def abort(self) -> None:
        """Remove the temporary files (again: nothing); :attr:`path` is left as it was."""
        self._done = True
        handle, self._handle = self._handle, None
        if handle is not None:
            handle.close()
        if self._lines_path is not None:
            self._lines_path.unlink(missing_ok=True)


def write_qrels(
    rows: RunResults | Iterable[MetricResult] | Iterable[Sequence[MetricResult]],
    path: str | os.PathLike[str],
    provenance: Mapping[str, Any] | None = None,
) -> QrelsFile:
    """Write the graded judgements of ``rows`` to ``path`` as TREC qrels (see the module), and
    log what was left out or graded twice differently. ``rows``: rows, or parts of rows (the
    parts of :meth:`RowStream.parts <ctxeval.RowStream.parts>`, an
    :class:`~ctxeval.Evaluation`), read once, in order; ``provenance``: more header lines,
    ``{name: value}`` (the data file, say). Returns the finished :class:`QrelsFile` (its
    counts and notes).

    Example::

        ev = ctxeval.evaluate(samples, ["context_relevance"], llm="openai/gpt-4o-mini")
        write_qrels(ev, "judged.qrels", {"data": "traces.jsonl"})
    """
    from ctxeval._results.evaluation import RunResults

    if isinstance(rows, RunResults):
        rows = rows.parts  # (its blocks of deterministic rows are passed over, not built)
    with QrelsFile(path, provenance=provenance) as qrels:
        for item in rows:
            if isinstance(item, MetricResult):
                qrels.add((item,))
            else:
                qrels.add(item)
        qrels.finish()
    for note in qrels.notes:
        logger.warning("%s", note)
    return qrels
