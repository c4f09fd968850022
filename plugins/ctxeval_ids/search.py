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

from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import attrs

from ctxeval.plugin import (
    BaseDeterministicMetric,
    LazyDetails,
    MetricResult,
    Sample,
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


def _steps(sample: Sample) -> Steps | MetricResult:
    """The IDs of each step of ``sample``, or the error row of a step without IDs."""
    steps = sample.retrieval_steps or ()
    out: Steps = []
    for index, step in enumerate(steps):
        ids = step.retrieved_context_ids
        if ids is None:
            return MetricResult.error(
                f"retrieval_steps[{index}] has no retrieved_context_ids: the search_* metrics "
                "compare IDs (give each step its IDs)"
            )
        out.append(ids)
    return out


def relevant_ids(sample: Sample, relevance_level: int) -> dict[str, None] | MetricResult:
    """The relevant reference IDs of ``sample`` (grade ``>= relevance_level``; a plain list is
    grade 1), each once in the order given; the ``undefined`` row when there are none."""
    judged = sample.reference_context_ids
    if not judged:
        return policy.no_reference(_REFERENCE)
    grades = getattr(judged, "grades", None)  # GradedIDs; a plain list is grade 1
    if grades is None:
        if relevance_level <= 1:
            return dict.fromkeys(judged)
        return MetricResult.undefined(
            "nothing to recall: the reference IDs carry no grades, so each counts as grade 1, "
            f"below relevance_level {relevance_level}"
        )
    relevant = {i: None for i, g in zip(judged, grades, strict=True) if g >= relevance_level}
    if relevant:
        return relevant
    return MetricResult.undefined(
        "nothing to recall: the reference judges every document not relevant "
        f"(grade below relevance_level {relevance_level})"
    )


@attrs.frozen(kw_only=True)
class _SearchMetric(BaseDeterministicMetric):
    """A metric of the steps against the relevant reference IDs: a subclass writes
    :meth:`value` (the row of a sample with steps and relevant IDs) and :meth:`evidence`."""

    requires: ClassVar[tuple[str, ...]] = ("retrieval_steps", "reference_context_ids")

    relevance_level: int = attrs.field(default=1, validator=validators.positive_int)
    """For graded reference IDs: the least grade that counts as relevant (trec_eval's
    ``-l``)."""

    def score(self, sample: Sample) -> MetricResult:
        relevant = relevant_ids(sample, self.relevance_level)
        if isinstance(relevant, MetricResult):
            return relevant
        steps = _steps(sample)
        if isinstance(steps, MetricResult):
            return steps
        return self.value(steps, relevant)

    def score_batch(self, samples: Sequence[Sample]) -> list[MetricResult]:
        """Every sample as :meth:`score` scores it (one call for a chunk of samples)."""
        return list(map(self.score, samples))

    def value(self, steps: Steps, relevant: dict[str, None]) -> MetricResult:
        raise NotImplementedError

    def evidence(self, steps: Steps, relevant: dict[str, None]) -> Mapping[str, Any]:
        """The row's details (computed when they are read)."""
        found_at: dict[str, int] = {}
        for number, ids in enumerate(steps, 1):
            for i in ids:
                if i in relevant and i not in found_at:
                    found_at[i] = number
        return {
            "steps": len(steps),
            "found_at_step": found_at,
            "missing": [i for i in relevant if i not in found_at],
        }

    def _details(self, steps: Steps, relevant: dict[str, None]) -> LazyDetails:
        return LazyDetails(self.evidence, steps, relevant)


def _ok(score: float, details: Mapping[str, Any]) -> MetricResult:
    return MetricResult.ok(score, details=details)


@attrs.frozen(kw_only=True)
class SearchEvidenceRecall(_SearchMetric):
    """Share of the relevant reference IDs returned by at least one step (the union of the
    steps): BrowseComp-Plus's evidence recall over all search calls. 0.0 when no step
    returned anything."""

    registry_name = "search_evidence_recall"

    def value(self, steps: Steps, relevant: dict[str, None]) -> MetricResult:
        found: set[str] = set()
        for ids in steps:
            found.update(ids)
        hits = len(found.intersection(relevant))
        return policy.recall(
            hits, len(relevant), what=_REFERENCE, details=self._details(steps, relevant)
        )


@attrs.frozen(kw_only=True)
class SearchFirstHitStep(_SearchMetric):
    """The first step (1-based) that returns a relevant ID, scored as its reciprocal (1.0:
    the first call found evidence; 0.5: the second...); the step is the details'
    ``first_hit_step``. ``undefined`` when no step returns a relevant ID."""

    registry_name = "search_first_hit_step"

    def value(self, steps: Steps, relevant: dict[str, None]) -> MetricResult:
        among = relevant.__contains__
        for number, ids in enumerate(steps, 1):
            if any(map(among, ids)):
                details = LazyDetails(self._with, steps, relevant, "first_hit_step", number)
                return _ok(1.0 / number, details)
        return MetricResult.undefined(
            f"nothing relevant found: none of {len(steps)} step(s) returned a relevant ID",
            details=self._details(steps, relevant),
        )

    def _with(
        self, steps: Steps, relevant: dict[str, None], key: str, number: int
    ) -> Mapping[str, Any]:
        return {key: number, **self.evidence(steps, relevant)}


@attrs.frozen(kw_only=True)
class SearchCallsToFullRecall(SearchFirstHitStep):
    """The number of search calls after which every relevant reference ID has been returned,
    scored as its reciprocal (1.0: one call sufficed); the count is the details' ``calls``.
    ``undefined`` when full recall is never reached."""

    registry_name = "search_calls_to_full_recall"

    def value(self, steps: Steps, relevant: dict[str, None]) -> MetricResult:
        left = set(relevant)
        for number, ids in enumerate(steps, 1):
            left.difference_update(ids)
            if not left:
                return _ok(1.0 / number, LazyDetails(self._with, steps, relevant, "calls", number))
        found = len(relevant) - len(left)
        return MetricResult.undefined(
            f"full recall never reached: {found} of {len(relevant)} relevant ID(s) returned in "
            f"{len(steps)} step(s)",
            details=self._details(steps, relevant),
        )


@attrs.frozen(kw_only=True)
class SearchStepPrecision(_SearchMetric):
    """Precision of each step (relevant IDs it returned / IDs it returned), averaged over the
    steps that returned something; the details' ``step_precision`` holds each step's (None for
    a step that returned nothing). ``undefined`` when no step returned anything."""

    registry_name = "search_step_precision"

    def value(self, steps: Steps, relevant: dict[str, None]) -> MetricResult:
        among = relevant.__contains__
        total = 0.0
        counted = 0
        for ids in steps:
            if ids:
                unique = dict.fromkeys(ids) if len(ids) > 1 else ids
                total += sum(map(among, unique)) / len(unique)
                counted += 1
        if not counted:
            return policy.nothing_retrieved(_RETRIEVED, details=self._details(steps, relevant))
        return _ok(min(total / counted, 1.0), self._details(steps, relevant))

    def evidence(self, steps: Steps, relevant: dict[str, None]) -> Mapping[str, Any]:
        among = relevant.__contains__
        per_step: list[float | None] = []
        for ids in steps:
            unique = list(dict.fromkeys(ids))
            per_step.append(sum(map(among, unique)) / len(unique) if unique else None)
        return {"step_precision": per_step, **super().evidence(steps, relevant)}


@attrs.frozen(kw_only=True)
class SearchRedundancy(BaseDeterministicMetric):
    """Share of the items the steps returned that an earlier step had already returned
    (lower is better): items returned again / items returned, each step's items counted once
    (by ID when every step has IDs, else by text). No reference needed. ``undefined`` when
    no step returned anything."""

    registry_name = "search_redundancy"
    requires: ClassVar[tuple[str, ...]] = ("retrieval_steps",)

    def score(self, sample: Sample) -> MetricResult:
        steps = _items(sample)
        seen: set[str] = set()
        total = repeated = 0
        for items in steps:
            unique = dict.fromkeys(items) if len(items) > 1 else items
            total += len(unique)
            before = len(seen)
            seen.update(unique)
            repeated += len(unique) - (len(seen) - before)
        details = LazyDetails(_redundancy_evidence, steps)
        if not total:
            return policy.nothing_retrieved("items returned by any step", details=details)
        return _ok(repeated / total, details)

    def score_batch(self, samples: Sequence[Sample]) -> list[MetricResult]:
        """Every sample as :meth:`score` scores it (one call for a chunk of samples)."""
        return list(map(self.score, samples))


def _items(sample: Sample) -> list[Sequence[str]]:
    """Each step's items: its IDs when every step has IDs, else its texts."""
    steps = sample.retrieval_steps or ()
    key: Callable[[Any], Sequence[str] | None] = _ids_of
    if any(step.retrieved_context_ids is None for step in steps):
        key = _texts_of
    return [key(step) or () for step in steps]


def _ids_of(step: Any) -> Sequence[str] | None:
    return step.retrieved_context_ids  # type: ignore[no-any-return]


def _texts_of(step: Any) -> Sequence[str] | None:
    return step.retrieved_contexts  # type: ignore[no-any-return]


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
