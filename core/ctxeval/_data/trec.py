"""TREC files in: qrels and runs as trec_eval reads them, and the dict forms of pytrec_eval,
ranx and ir_measures.

* **qrels**: ``query_id iteration doc_id relevance`` per line; the relevance is an integer
  grade (0: judged not relevant; a negative grade: in the pool but not judged, left out).
* **run**: ``query_id Q0 doc_id rank score run_name`` per line (more columns are ignored).
  As trec_eval does, the rank column is ignored too: documents are ranked by score, highest
  first, ties broken by doc_id in descending order. A document listed twice for one query is
  refused, as trec_eval refuses it.

Both files may hold comment lines starting with ``#`` and blank lines. Each query becomes one
:class:`~ctxeval.Sample` (``id`` = the query id, ``retrieved_context_ids`` = the ranked run,
``reference_context_ids`` = the graded qrels). As trec_eval evaluates them, only queries that
are in both files are kept; with ``complete=True`` (trec_eval's ``-c``), queries of the qrels
missing from the run are kept too, with nothing retrieved.

:func:`load_trec` reads the two files in bulk (:mod:`ctxeval._data.trec_bulk`: whole blocks of
bytes split in C, straight into each query's ranked and judged documents) and falls back to the
line-by-line reader here for a file the bulk reader does not take (a malformed line, a comment,
a lone carriage return...), which then names the file and line that is wrong. Both read a
file to the same samples.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path

from ctxeval._data.sample import GradedIDs, Sample, checked_id_sample
from ctxeval._errors import DataError

__all__ = ["load_trec", "read_qrels", "read_run", "samples_from_dicts"]


_ASCII_BLANKS = " \t\n\r\f\v"
_ASCII_SPACE = re.compile(r"[ \t\n\r\f\v]+")
"""What separates columns, as trec_eval reads them: ASCII white space only (an id may hold a
no-break space, U+2028 or U+3000, which ``str.split()`` would split on)."""
_INTEGER = re.compile(r"[+-]?[0-9]+")
_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
"""A finite number in ASCII digits (``nan``, ``inf``, ``1_000`` and other scripts' digits are
not scores)."""


def _lines(path: Path) -> Iterator[tuple[int, list[str]]]:
    try:
        handle = path.open(encoding="utf-8")
    except FileNotFoundError:
        raise DataError("no such file", path=str(path)) from None
    with handle:
        try:
            for number, line in enumerate(handle, start=1):
                fields = _ASCII_SPACE.split(line.strip(_ASCII_BLANKS))
                if line.startswith("#") or fields == [""]:
                    continue
                yield number, fields
        except UnicodeDecodeError as exc:
            raise DataError(f"not UTF-8 text ({exc.reason})", path=str(path)) from None


def read_qrels(path: str | os.PathLike[str]) -> dict[str, dict[str, int]]:
    """``{query_id: {doc_id: grade}}`` from a qrels file (judged documents only).

    Raises:
        DataError: naming the file and line of a malformed line or a document judged twice.
    """
    where = Path(path)
    qrels: dict[str, dict[str, int]] = {}
    for number, fields in _lines(where):
        if len(fields) != 4:
            raise DataError(
                f"expected 4 columns (query_id iteration doc_id relevance), got {len(fields)}",
                path=str(where),
                line=number,
            )
        query, _, doc, grade_text = fields
        if not _INTEGER.fullmatch(grade_text):
            raise DataError(
                f"relevance {grade_text!r} is not an integer", path=str(where), line=number
            )
        grade = int(grade_text)
        judged = qrels.setdefault(query, {})
        if doc in judged:
            raise DataError(
                f"document {doc!r} is judged twice for query {query!r}",
                path=str(where),
                line=number,
            )
        if grade >= 0:  # a negative grade: in the pool, not judged
            judged[doc] = grade
    return qrels


def read_run(path: str | os.PathLike[str]) -> dict[str, dict[str, float]]:
    """``{query_id: {doc_id: score}}`` from a run file (the rank column is not used).

    Raises:
        DataError: naming the file and line of a malformed line or a document listed twice.
    """
    where = Path(path)
    run: dict[str, dict[str, float]] = {}
    for number, fields in _lines(where):
        if len(fields) < 6:
            raise DataError(
                f"expected 6 columns (query_id Q0 doc_id rank score run_name), got {len(fields)}",
                path=str(where),
                line=number,
            )
        query, _, doc, _, score_text = fields[:5]  # as trec_eval, what follows the run name
        # is ignored
        if not _NUMBER.fullmatch(score_text):
            raise DataError(
                f"score {score_text!r} is not a finite number", path=str(where), line=number
            )
        score = float(score_text)
        if not math.isfinite(score):  # 1e999
            raise DataError(
                f"score {score_text!r} is not a finite number", path=str(where), line=number
            )
        ranked = run.setdefault(query, {})
        if doc in ranked:
            raise DataError(
                f"document {doc!r} is listed twice for query {query!r}",
                path=str(where),
                line=number,
                hint="trec_eval refuses such a run too",
            )
        ranked[doc] = score
    return run


def _ranked(scored: Mapping[str, float]) -> list[str]:
    """trec_eval's order: score descending, ties by doc_id descending."""
    return sorted(scored, key=lambda doc: (scored[doc], doc), reverse=True)


def samples_from_dicts(
    qrels: Mapping[str, Mapping[str, int]],
    run: Mapping[str, Mapping[str, float]],
    *,
    complete: bool = False,
) -> list[Sample]:
    """One sample per query from the dict forms pytrec_eval, ranx and ir_measures use:
    ``qrels = {query_id: {doc_id: grade}}`` and ``run = {query_id: {doc_id: score}}``.

    Queries in both are kept, in the run's order; with ``complete=True``, queries of the qrels
    missing from the run too, with nothing retrieved, after them.
    """
    samples = []
    for query, scored in run.items():
        judged = qrels.get(query)
        if judged is None:
            continue  # trec_eval leaves out a query without judgements
        samples.append(_sample(str(query), _ranked(scored), judged))
    if complete:
        for query, judged in qrels.items():
            if query not in run:
                samples.append(_sample(str(query), [], judged))
    return samples


def _sample(query: str, ranked: list[str], judged: Mapping[str, int]) -> Sample:
    ids = tuple(str(doc) for doc in judged)
    return Sample(
        id=query,
        retrieved_context_ids=ranked,
        reference_context_ids=GradedIDs(ids, tuple(int(g) for g in judged.values())),
    )


BULK_FROM = 1 << 16
"""Bytes of the two files from which :func:`load_trec` reads them in bulk (smaller ones are read
line by line: as fast, without importing numpy)."""


def _size(path: str | os.PathLike[str]) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0  # (the reader says what is wrong)


def load_trec(
    qrels: str | os.PathLike[str],
    run: str | os.PathLike[str],
    *,
    complete: bool = False,
) -> list[Sample]:
    """The samples of a qrels file and a run file, as trec_eval pairs them (see the module).

    Example::

        samples = ctxeval.load_trec("qrels.test", "results.test")
        ev = ctxeval.evaluate(samples, ["nDCG@10", "AP", "P@5"])

    Raises:
        DataError: naming the file and line that is wrong.
    """
    if _size(qrels) + _size(run) < BULK_FROM:
        return samples_from_dicts(read_qrels(qrels), read_run(run), complete=complete)
    from ctxeval._data.collector import collector_paused

    with collector_paused():  # (what is made here stays alive or is freed by its count)
        samples = _load_in_bulk(Path(qrels), Path(run), complete=complete)
    if samples is None:  # the line reader: the same samples, or the error and its line
        return samples_from_dicts(read_qrels(qrels), read_run(run), complete=complete)
    return samples


def _load_in_bulk(qrels: Path, run: Path, *, complete: bool) -> list[Sample] | None:
    """:func:`load_trec` through the bulk reader, or None when it does not take a file."""
    from ctxeval._data.trec_bulk import read_qrels_bulk, read_run_bulk, small_pages

    with small_pages():
        judged = read_qrels_bulk(qrels)
        ranked = None if judged is None else read_run_bulk(run)
    if judged is None or ranked is None:
        return None
    references = {
        query: GradedIDs(docs, grades)
        for query, docs, grades in zip(judged.queries, judged.docs, judged.grades, strict=True)
    }
    samples = [
        checked_id_sample(query, docs, references[query])
        for query, docs in zip(ranked.queries, ranked.ranked, strict=True)
        if query in references  # trec_eval leaves out a query without judgements
    ]
    if complete:
        in_run = set(ranked.queries)
        samples += [
            checked_id_sample(query, (), reference)
            for query, reference in references.items()
            if query not in in_run
        ]
    return samples
