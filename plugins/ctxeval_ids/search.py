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


@attrs.frozen(kw_only=True)
class _SearchMetric(BaseDeterministicMetric):
    """A metric of the steps against the relevant reference IDs: a subclass writes
    :meth:`value` (the score, or the row, of a sample with steps and relevant IDs) and may
    add to :meth:`details`. Scored one sample at a time (:meth:`score`), a chunk at a time
    (:meth:`score_batch`) or, on the fast path, as a column of numbers (:meth:`score_column`,
    the rows built only when read): the same rows each way."""

    requires: ClassVar[tuple[str, ...]] = ("retrieval_steps", "reference_context_ids")

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
        value = self.value(steps, relevant, sample)
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

    def score_column(self, samples: Sequence[Sample]) -> list[Value]:
        """Per sample, the score of its ``ok`` row or its whole row, as :meth:`score`
        scores it: the usual sample (a plain list of reference IDs, every step with IDs)
        read inline."""
        out: list[Value] = []
        append, value, score = out.append, self.value, self.score
        plain = self.relevance_level <= 1
        for sample in samples:
            judged, steps = sample.reference_context_ids, sample.retrieval_steps
            if plain and steps and judged and type(judged) is tuple:
                ids = [step[1] for step in steps]  # (retrieved_context_ids)
                if None not in ids:
                    append(value(ids, frozenset(judged), sample))  # type: ignore[arg-type]
                    continue
            row = score(sample)
            append(row.score if row.status is Status.OK else row)  # type: ignore[arg-type]
        return out

    def column_details(self, sample: Sample) -> Mapping[str, Any]:
        """The details of ``sample``'s ``ok`` row (those :meth:`score` gives it)."""
        relevant = relevant_ids(sample, self.relevance_level)
        steps = _steps(sample)
        assert type(relevant) is frozenset  # (an ok row's sample)
        assert type(steps) is list
        return self.details(steps, relevant, sample)

    def value(self, steps: Steps, relevant: Relevant, sample: Sample) -> Value:
        """The score of the ``ok`` row of a sample with ``steps`` and ``relevant`` IDs, or
        its row of another status (with :meth:`_lazy` details)."""
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

    def value(self, steps: Steps, relevant: Relevant, sample: Sample) -> Value:
        left = set(relevant)
        left.difference_update(*steps)
        found = len(relevant) - len(left)
        return found / len(relevant)


@attrs.frozen(kw_only=True)
class SearchFirstHitStep(_SearchMetric):
    """The first step (1-based) that returns a relevant ID, scored as its reciprocal (1.0:
    the first call found evidence; 0.5: the second...); the step is the details'
    ``first_hit_step``. ``undefined`` when no step returns a relevant ID."""

    registry_name = "search_first_hit_step"

    def value(self, steps: Steps, relevant: Relevant, sample: Sample) -> Value:
        disjoint = relevant.isdisjoint
        for number, ids in enumerate(steps, 1):
            if not disjoint(ids):
                return 1.0 / number
        return MetricResult.undefined(
            f"nothing relevant found: none of {len(steps)} step(s) returned a relevant ID",
            details=self._lazy(steps, relevant, sample),
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

    def value(self, steps: Steps, relevant: Relevant, sample: Sample) -> Value:
        left = set(relevant)
        for number, ids in enumerate(steps, 1):
            left.difference_update(ids)
            if not left:
                return 1.0 / number
        return MetricResult.undefined(
            f"full recall never reached: {len(relevant) - len(left)} of {len(relevant)} "
            f"relevant ID(s) returned in {len(steps)} step(s)",
            details=self._lazy(steps, relevant, sample),
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

    def value(self, steps: Steps, relevant: Relevant, sample: Sample) -> Value:
        precisions = _step_precisions(steps, relevant)
        counted = [p for p in precisions if p is not None]
        if not counted:
            details = self._lazy(steps, relevant, sample)
            return policy.nothing_retrieved(_RETRIEVED, details=details)
        return min(sum(counted) / len(counted), 1.0)

    def details(self, steps: Steps, relevant: Relevant, sample: Sample) -> Mapping[str, Any]:
        return {
            "step_precision": _step_precisions(steps, relevant),
            **super().details(steps, relevant, sample),
        }


def _step_precisions(steps: Steps, relevant: Relevant) -> list[float | None]:
    """Each step's relevant IDs / IDs (each ID once); None for a step that returned none."""
    out: list[float | None] = []
    for ids in steps:
        unique = set(ids)
        out.append(len(unique.intersection(relevant)) / len(unique) if unique else None)
    return out


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
