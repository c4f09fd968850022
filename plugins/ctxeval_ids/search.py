"""Metrics of a multi-step (agentic) search over context IDs (#55): the sample's
``retrieval_steps``, in the order the search calls were made, against its reference IDs.

A deep-research agent searches several times; what counts is whether the evidence was found in
*any* step, how early, at what cost, and how much of each step was new (BrowseComp-Plus,
arXiv 2508.06600, reports evidence recall over all search calls and the number of calls).

================================  ==============================================  ===========
metric                            score                                           undefined
================================  ==============================================  ===========
``search_evidence_recall``        relevant IDs found in any step / relevant IDs   no relevant
                                                                                  reference ID
``search_first_hit_step``         1 / the first step (1-based) that returns a     nothing
                                  relevant ID; details ``first_hit_step``         relevant found
``search_calls_to_full_recall``   1 / the first step after which every relevant   full recall
                                  ID has been returned; details ``calls``         never reached
``search_redundancy``             items returned again, already returned by an    nothing
                                  earlier step / items returned (lower is         returned
                                  better; no reference needed)
``search_step_precision``         mean over the steps that returned something of  nothing
                                  relevant / returned; details ``step_precision`` returned
                                  (one value per step, None for an empty step)
================================  ==============================================  ===========

Scores stay in [0, 1], higher better (redundancy aside), as every ctxeval score: a step count is
given as its reciprocal (1.0: the first call), the count itself in the row's details.

Relevance is the ID metrics' rule: a reference ID is relevant when its grade reaches
``relevance_level`` (1 by default; a plain list is grade 1 throughout). A reference that names no
ID, or judges every ID not relevant, makes the row ``undefined`` with a reason that says which.
Within a step a repeated ID counts once, at its first rank.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import attrs

from ctxeval.plugin import (
    BaseDeterministicMetric,
    LazyDetails,
    MetricResult,
    Sample,
    Status,
    policy,
    validators,
)

__all__ = [
    "SearchCallsToFullRecall",
    "SearchEvidenceRecall",
    "SearchFirstHitStep",
    "SearchRedundancy",
    "SearchStepPrecision",
]

_REFERENCE = "reference context IDs"
_RETRIEVED = "retrieved context IDs in any step"

Steps = list[Sequence[str]]
"""The IDs of each step, in step order (repeats within a step kept)."""
Relevant = frozenset[str]


def _steps(sample: Sample) -> Steps | MetricResult:
    """The IDs of each step of ``sample``, or the error row of a step without IDs."""
    out: Steps = [step.retrieved_context_ids for step in sample.retrieval_steps or ()]  # type: ignore[misc]
    if None in out:
        return MetricResult.error(
            f"retrieval_steps[{out.index(None)}] has no retrieved_context_ids: the search_* "  # type: ignore[arg-type]
            "metrics compare IDs (give each step its IDs)"
        )
    return out


def relevant_ids(sample: Sample, relevance_level: int) -> Relevant | MetricResult:
    """The relevant reference IDs of ``sample`` (grade ``>= relevance_level``; a plain list is
    grade 1); the ``undefined`` row when there are none."""
    judged = sample.reference_context_ids
    if not judged:
        return policy.no_reference(_REFERENCE)
    grades = getattr(judged, "grades", None)  # GradedIDs; a plain list is grade 1
    if grades is None:
        if relevance_level <= 1:
            return frozenset(judged)
        return MetricResult.undefined(
            "nothing to recall: the reference IDs carry no grades, so each counts as grade 1, "
            f"below relevance_level {relevance_level}"
        )
    relevant = frozenset(i for i, g in zip(judged, grades, strict=True) if g >= relevance_level)
    if relevant:
        return relevant
    return MetricResult.undefined(
        "nothing to recall: the reference judges every document not relevant "
        f"(grade below relevance_level {relevance_level})"
    )


def evidence(steps: Steps, relevant: Relevant, reference: Sequence[str]) -> dict[str, Any]:
    """Where each relevant ID was first found (its step, 1-based), and those never found, in
    the reference's order."""
    found_at: dict[str, int] = {}
    for number, ids in enumerate(steps, 1):
        for i in ids:
            if i in relevant and i not in found_at:
                found_at[i] = number
    missing = [i for i in dict.fromkeys(reference) if i in relevant and i not in found_at]
    return {"steps": len(steps), "found_at_step": found_at, "missing": missing}


Value = float | MetricResult
"""What a metric makes of a sample's steps: the score of its ``ok`` row (its details the
metric's :meth:`~_SearchMetric.details`), or its whole row."""


class Found:
    """What the steps of one sample found, judged once for every ``search_*`` metric of a
    run: the steps' IDs, the relevant IDs, the step (1-based) where each relevant ID was
    first returned (``first``, in no particular order) and, when asked for, each step's
    precision (``precisions``, see :func:`_step_precisions`)."""

    __slots__ = ("first", "precisions", "relevant", "steps")

    def __init__(self, steps: Steps, relevant: Relevant, *, precisions: bool) -> None:
        self.steps = steps
        self.relevant = relevant
        first: dict[str, int] = {}
        each: list[float | None] = []
        intersection = relevant.intersection
        for number, ids in enumerate(steps, 1):
            hits = intersection(ids)
            for i in hits:
                first.setdefault(i, number)
            if precisions:
                unique = len(set(ids))
                each.append(len(hits) / unique if unique else None)
        self.first = first
        self.precisions = each


@attrs.frozen(kw_only=True)
class _SearchMetric(BaseDeterministicMetric):
    """A metric of the steps against the relevant reference IDs: a subclass writes
    :meth:`measure` (the score, or the row, of a sample from what its steps :class:`Found`)
    and may add to :meth:`details`. Scored one sample at a time (:meth:`score`), a chunk at
    a time (:meth:`score_batch`) or, on the fast path, as columns of numbers judged once
    for all the ``search_*`` metrics of a run (:meth:`score_columns`, the rows built only
    when read): the same rows each way."""

    requires: ClassVar[tuple[str, ...]] = ("retrieval_steps", "reference_context_ids")
    uses_precisions: ClassVar[bool] = False
    """Whether :meth:`measure` reads :attr:`Found.precisions`."""

    relevance_level: int = attrs.field(default=1, validator=validators.positive_int)
    """For graded reference IDs: the least grade that counts as relevant (trec_eval's
    ``-l``)."""

    def score(self, sample: Sample) -> MetricResult:
        relevant = relevant_ids(sample, self.relevance_level)
        if type(relevant) is not frozenset:
            return relevant  # type: ignore[return-value]
        steps = _steps(sample)
        if type(steps) is not list:
            return steps  # type: ignore[return-value]
        found = Found(steps, relevant, precisions=self.uses_precisions)
        value = self.measure(found, sample)
        if type(value) is not float:
            return value  # type: ignore[return-value]
        return MetricResult.ok(value, details=self._lazy(steps, relevant, sample))

    def score_batch(self, samples: Sequence[Sample]) -> list[MetricResult]:
        """Every sample as :meth:`score` scores it (one call for a chunk of samples)."""
        return [
            MetricResult.ok(value, details=LazyDetails(self.column_details, sample))
            if type(value) is float
            else value  # type: ignore[misc]
            for value, sample in zip(self.score_column(samples), samples, strict=True)
        ]

    def score_column(self, samples: Sequence[Sample]) -> Sequence[Value]:
        """Per sample, the score of its ``ok`` row or its whole row, as :meth:`score`
        scores it."""
        return self.score_columns([self], samples)[0]

    def column_group(self) -> tuple[str, int]:
        """The ``search_*`` metrics of one relevance level are judged together."""
        return ("search_steps", self.relevance_level)

    def score_columns(self, metrics: Sequence[Any], samples: Sequence[Sample]) -> list[list[Value]]:
        """The columns of ``metrics`` (``search_*`` metrics of this relevance level), each
        sample's steps judged once for them all: the usual sample (a plain list of reference
        IDs, every step with IDs) read inline, the others through each metric's
        :meth:`score`."""
        columns: list[list[Value]] = [[] for _ in metrics]
        appends = [column.append for column in columns]
        measures = [metric.measure for metric in metrics]
        pairs = list(zip(measures, appends, strict=True))
        precisions = any(metric.uses_precisions for metric in metrics)
        plain = self.relevance_level <= 1
        for sample in samples:
            judged, steps = sample.reference_context_ids, sample.retrieval_steps
            if plain and steps and judged and type(judged) is tuple:
                ids = [step[1] for step in steps]  # (retrieved_context_ids)
                if None not in ids:
                    found = Found(ids, frozenset(judged), precisions=precisions)  # type: ignore[arg-type]
                    for measure, append in pairs:
                        append(measure(found, sample))
                    continue
            for metric, append in zip(metrics, appends, strict=True):
                row = metric.score(sample)
                append(row.score if row.status is Status.OK else row)
        return columns

    def column_details(self, sample: Sample) -> Mapping[str, Any]:
        """The details of ``sample``'s ``ok`` row (those :meth:`score` gives it)."""
        relevant = relevant_ids(sample, self.relevance_level)
        steps = _steps(sample)
        assert type(relevant) is frozenset  # (an ok row's sample)
        assert type(steps) is list
        return self.details(steps, relevant, sample)

    def measure(self, found: Found, sample: Sample) -> Value:
        """The score of the ``ok`` row of ``sample``, whose steps :class:`Found` ``found``,
        or its row of another status (with :meth:`_lazy` details)."""
        raise NotImplementedError

    def details(self, steps: Steps, relevant: Relevant, sample: Sample) -> Mapping[str, Any]:
        """The row's details (computed when they are read)."""
        return evidence(steps, relevant, sample.reference_context_ids or ())

    def _lazy(self, steps: Steps, relevant: Relevant, sample: Sample) -> LazyDetails:
        return LazyDetails(self.details, steps, relevant, sample)


@attrs.frozen(kw_only=True)
class SearchEvidenceRecall(_SearchMetric):
    """Share of the relevant reference IDs returned by at least one step (the union of the
    steps): BrowseComp-Plus's evidence recall over all search calls. 0.0 when no step
    returned anything."""

    registry_name = "search_evidence_recall"

    def measure(self, found: Found, sample: Sample) -> Value:
        return len(found.first) / len(found.relevant)


@attrs.frozen(kw_only=True)
class SearchFirstHitStep(_SearchMetric):
    """The first step (1-based) that returns a relevant ID, scored as its reciprocal (1.0:
    the first call found evidence; 0.5: the second...); the step is the details'
    ``first_hit_step``. ``undefined`` when no step returns a relevant ID."""

    registry_name = "search_first_hit_step"

    def measure(self, found: Found, sample: Sample) -> Value:
        if found.first:
            return 1.0 / min(found.first.values())
        return MetricResult.undefined(
            f"nothing relevant found: none of {len(found.steps)} step(s) returned a relevant ID",
            details=self._lazy(found.steps, found.relevant, sample),
        )

    def details(self, steps: Steps, relevant: Relevant, sample: Sample) -> Mapping[str, Any]:
        found = super().details(steps, relevant, sample)
        first = min(found["found_at_step"].values(), default=None)
        return {"first_hit_step": first, **found} if first is not None else found


@attrs.frozen(kw_only=True)
class SearchCallsToFullRecall(_SearchMetric):
    """The number of search calls after which every relevant reference ID has been returned,
    scored as its reciprocal (1.0: one call sufficed); the count is the details' ``calls``.
    ``undefined`` when full recall is never reached."""

    registry_name = "search_calls_to_full_recall"

    def measure(self, found: Found, sample: Sample) -> Value:
        first, relevant = found.first, found.relevant
        if len(first) == len(relevant):
            return 1.0 / max(first.values())
        return MetricResult.undefined(
            f"full recall never reached: {len(first)} of {len(relevant)} "
            f"relevant ID(s) returned in {len(found.steps)} step(s)",
            details=self._lazy(found.steps, relevant, sample),
        )

    def details(self, steps: Steps, relevant: Relevant, sample: Sample) -> Mapping[str, Any]:
        found = super().details(steps, relevant, sample)
        if found["missing"]:
            return found
        return {"calls": max(found["found_at_step"].values()), **found}


@attrs.frozen(kw_only=True)
class SearchStepPrecision(_SearchMetric):
    """Precision of each step (relevant IDs it returned / IDs it returned), averaged over the
    steps that returned something; the details' ``step_precision`` holds each step's (None for
    a step that returned nothing). ``undefined`` when no step returned anything."""

    registry_name = "search_step_precision"
    uses_precisions: ClassVar[bool] = True

    def measure(self, found: Found, sample: Sample) -> Value:
        counted = [p for p in found.precisions if p is not None]
        if not counted:
            details = self._lazy(found.steps, found.relevant, sample)
            return policy.nothing_retrieved(_RETRIEVED, details=details)
        return min(sum(counted) / len(counted), 1.0)

    def details(self, steps: Steps, relevant: Relevant, sample: Sample) -> Mapping[str, Any]:
        return {
            "step_precision": _step_precisions(steps, relevant),
            **super().details(steps, relevant, sample),
        }


def _step_precisions(steps: Steps, relevant: Relevant) -> list[float | None]:
    """Each step's relevant IDs / IDs (each ID once); None for a step that returned none."""
    return Found(steps, relevant, precisions=True).precisions


@attrs.frozen(kw_only=True)
class SearchRedundancy(BaseDeterministicMetric):
    """Share of the items the steps returned that an earlier step had already returned
    (lower is better): items returned again / items returned, each step's items counted once
    (by ID when every step has IDs, else by text). No reference needed. ``undefined`` when
    no step returned anything."""

    registry_name = "search_redundancy"
    requires: ClassVar[tuple[str, ...]] = ("retrieval_steps",)

    def score(self, sample: Sample) -> MetricResult:
        value = self._value(sample)
        if type(value) is not float:
            return value  # type: ignore[return-value]
        return MetricResult.ok(value, details=LazyDetails(self.column_details, sample))

    def score_batch(self, samples: Sequence[Sample]) -> list[MetricResult]:
        """Every sample as :meth:`score` scores it (one call for a chunk of samples)."""
        return list(map(self.score, samples))

    def score_column(self, samples: Sequence[Sample]) -> list[Value]:
        """Per sample, the score of its ``ok`` row or its whole row (as :meth:`score`)."""
        return list(map(self._value, samples))

    def column_details(self, sample: Sample) -> Mapping[str, Any]:
        """The details of ``sample``'s row: each step's items and those seen before."""
        return _redundancy_evidence(_items(sample))

    def _value(self, sample: Sample) -> Value:
        steps = _items(sample)
        # an item counts as new in the first step that returns it, as "again" in the others
        total = sum(map(len, map(set, steps)))
        if not total:
            details = LazyDetails(_redundancy_evidence, steps)
            return policy.nothing_retrieved("items returned by any step", details=details)
        distinct = len(set().union(*steps))
        return (total - distinct) / total


def _items(sample: Sample) -> list[Sequence[str]]:
    """Each step's items: its IDs when every step has IDs, else its texts."""
    steps = sample.retrieval_steps or ()
    ids = [step.retrieved_context_ids for step in steps]
    if None not in ids:
        return ids  # type: ignore[return-value]
    return [step.retrieved_contexts or () for step in steps]


def _redundancy_evidence(steps: list[Sequence[str]]) -> Mapping[str, Any]:
    seen: set[str] = set()
    returned: list[int] = []
    again: list[list[str]] = []
    for items in steps:
        unique = list(dict.fromkeys(items))
        returned.append(len(unique))
        again.append([i for i in unique if i in seen])
        seen.update(unique)
    return {"steps": len(steps), "returned_per_step": returned, "seen_before": again}
