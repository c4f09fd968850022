"""A row's judge evidence as the judge reports read it: :func:`details_of`, :func:`votes_of`.

The ``details`` of a judged row carry ``flags`` (one verdict per judged item), ``votes`` (each
judge's votes per item) and ``provenance``; a row of the deterministic fast path has lazy
details and no judge, and reads as empty here. :data:`LISTED` caps the items each report lists.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ctxeval._results.results import LazyDetails, MetricResult

__all__ = ["LISTED", "details_of", "unused_labels", "votes_of"]

LISTED = 100
"""Unsure items and disagreements listed per metric in ``summary.json`` (all are counted)."""


def details_of(row: MetricResult) -> Mapping[str, Any]:
    """The row's details, or nothing for a row of the deterministic fast path: its evidence
    is computed only when read (no judge, no votes), and reading every row of a large run
    would cost seconds."""
    details = row.details
    if isinstance(details, LazyDetails) or not details:
        return {}
    return details


def votes_of(entry: Mapping[str, Any]) -> dict[str, list[int]]:
    """Each judge's votes (0 or 1) on one item of the ``votes`` evidence, by judge name."""
    judges = entry.get("judges") or {}
    return {str(k): [int(v) for v in vs] for k, vs in judges.items()}


def unused_labels(
    rows: Sequence[MetricResult], labelled: Mapping[str, Mapping[int, Any]]
) -> dict[str, int]:
    """The labels of ``labelled`` (by sample id, then item) not used so far, counted by
    reason: those of samples ``rows`` has no row of. Where a report of a judge against
    people's labels (0/1 or grades) begins its count."""
    skipped: dict[str, int] = {}
    ids = {row.sample_id for row in rows}
    for sample_id, items in labelled.items():
        if sample_id not in ids:
            skipped["sample not in the run"] = skipped.get("sample not in the run", 0) + len(items)
    return skipped
