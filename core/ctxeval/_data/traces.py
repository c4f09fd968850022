"""Samples from an application's traces: what :func:`~ctxeval.load_traces` reads.

A *trace reader* (entry-point group ``ctxeval.traces``; the built-in ones are ``openinference``,
``mlflow``, ``langsmith`` and ``phoenix``) turns each trace of a source (a file, a folder, a
DataFrame) into one sample row, or into the :class:`~ctxeval.DataError` that says why the trace
gives none, naming the trace and the span. :func:`load_traces` wraps the rows in a
:class:`~ctxeval.SampleStream`, read lazily as :func:`~ctxeval.load_samples` reads a file: a
strict read raises at the first bad trace; a lenient one (``load_traces(..., strict=False)``)
skips it; a lenient *run* (``--lenient``, ``RunSettings(lenient=True)``) makes it that sample's
error rows and scores the others.

Reference data is joined by key (``references=``, ``join_on=``): a TREC qrels file, or a JSONL /
JSON / CSV / Parquet file of samples whose ``id`` is the key and whose ``reference``,
``reference_contexts`` and ``reference_context_ids`` are given to the trace whose attribute
``join_on`` (looked up in the sample's metadata, where the readers put the trace id and the root
span's metadata) has that value. The references are held in memory (one dict); the traces are
not. A trace without a reference keeps no reference fields (the reference-free metrics score
it; the others give it a missing-field error row); how many had none is logged once at the end.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Final

from ctxeval._data.loading import FORMATS, Row, SampleStream, _Bad, load_samples
from ctxeval._errors import ConfigError, DataError

__all__ = ["REFERENCE_FIELDS", "read_references", "samples_of_traces"]

logger = logging.getLogger(__name__)

REFERENCE_FIELDS: Final = ("reference", "reference_contexts", "reference_context_ids")
"""The fields a references file gives a trace's sample."""


def samples_of_traces(
    reader: Any,
    source: Any,
    *,
    format: str,
    mapping: Mapping[str, str] | None,
    references: str | os.PathLike[str] | None,
    join_on: str | None,
    strict: bool,
) -> SampleStream:
    """The samples :func:`~ctxeval.load_traces` gives: the traces ``reader`` (the trace reader
    registered as ``format``) reads from ``source``, joined with ``references``. Finding the
    reader is the registry's (``ctxeval._run.api.load_traces``)."""
    choices = _mapping(mapping)
    if join_on is not None and references is None:
        raise ConfigError(
            "join_on= names the trace attribute to join references on: give references="
        )
    table = read_references(references) if references is not None else None
    rows = _rows(reader.read(source, choices), table, join_on or "trace_id")
    label = str(source) if isinstance(source, (str, os.PathLike)) else type(source).__name__
    return SampleStream(Path(label), f"traces:{format}", strict, rows)


def _mapping(mapping: Mapping[str, str] | None) -> dict[str, str]:
    if mapping is None:
        return {}
    if not isinstance(mapping, Mapping):
        raise ConfigError(f"mapping= is a dict of FIELD: PATH, got {type(mapping).__name__}")
    for key, value in mapping.items():
        if not isinstance(key, str) or not isinstance(value, str) or not key or not value:
            raise ConfigError(f"mapping= holds names: {key!r}: {value!r} is not FIELD: PATH")
    return dict(mapping)


def _rows(
    traces: Iterator[tuple[int, Any]], table: Mapping[str, dict[str, Any]] | None, key: str
) -> Iterator[Row]:
    """The readers' rows as a :class:`SampleStream` reads them, references joined in."""
    joined = missed = 0
    for position, row in traces:
        if isinstance(row, DataError):
            bad = _Bad(row.problem)
            bad.error = row
            yield position, bad, None
            continue
        if table is not None and isinstance(row, dict):
            value = _attribute(row, key)
            found = table.get(str(value)) if value is not None else None
            if found is None:
                missed += 1
            else:
                joined += 1
                row = {**row, **found}
        yield position, row, None
    if table is not None:
        logger.info("references joined on %r: %d traces, %d without one", key, joined, missed)
        if missed:
            logger.warning(
                "%d trace(s) had no reference (no row with their %r): they have no reference "
                "fields, so only reference-free metrics score them",
                missed, key,
            )  # fmt: skip


def _attribute(row: Mapping[str, Any], key: str) -> Any:
    """``key`` of the row's metadata (or of the row), a dotted path read as nested keys."""
    for where in (row.get("metadata"), row):
        if isinstance(where, Mapping):
            if key in where:
                return where[key]
            value: Any = where
            for part in key.split("."):
                value = value.get(part) if isinstance(value, Mapping) else None
            if value is not None:
                return value
    return None


def read_references(path: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """``{key: {reference fields}}`` from a qrels file (any suffix but a samples file's) or
    a file of samples (``.jsonl``, ``.json``, ``.csv``, ``.parquet``) with an ``id`` each.

    Raises:
        DataError: the file cannot be read, a row has no id, or an id is given twice.
    """
    file = Path(path)
    if file.suffix.lower() not in FORMATS:
        from ctxeval._data.trec import read_qrels

        return {
            query: {"reference_context_ids": dict(judged)}
            for query, judged in read_qrels(file).items()
        }
    table: dict[str, dict[str, Any]] = {}
    for position, sample in enumerate(load_samples(file), start=1):
        if sample.id is None:
            raise DataError(
                "a reference row needs an id (the value of the trace attribute it joins on)",
                path=str(file),
                line=position,
                field="id",
            )
        if sample.id in table:
            raise DataError(
                "an earlier reference row has this id", path=str(file), sample_id=sample.id
            )
        given = sample.to_dict()
        table[sample.id] = {k: given[k] for k in REFERENCE_FIELDS if k in given}
    return table
