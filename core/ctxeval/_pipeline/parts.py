"""A metric's parts, bound once: :class:`Pipeline` (two sources, a matcher, a formula).

It checks the parts when built, reads the two sides of a sample, matches the judged side
against the other (an LLM or an extractor only when needed) and gives the sample's
:class:`~ctxeval._pipeline.judgement.Judgement`; with :class:`~ctxeval._pipeline.sources.Items`
on both sides and a deterministic matcher it also judges at once (:meth:`Pipeline.judge_now`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from ctxeval._data.sample import Sample
from ctxeval._pipeline.judgement import Judgement
from ctxeval._pipeline.sources import (
    Extracted,
    Items,
    ReferenceSource,
    RetrievedSource,
    SplitAndAttribute,
)
from ctxeval._plugins.protocols import DeterministicMatcher, Matcher, Unit, Verdict
from ctxeval.policy import Formula

__all__ = ["Pipeline"]


_NO_CANDIDATE = Verdict(False, 0.0, None)
"""The verdict of an item when the other side is empty: nothing can support it."""


@attrs.frozen(kw_only=True)
class Pipeline:
    """The parts of a metric: two sources, a matcher and a formula (see the module).

    The parts are checked when the pipeline is built: a :class:`SplitAndAttribute` reference
    takes no matcher and a recall-like formula; any other reference needs a matcher; a formula
    with a ``depth`` judges the retrieved side.
    """

    reference: ReferenceSource
    retrieved: RetrievedSource
    formula: Formula
    matcher: Matcher | None = None
    _deterministic: bool = attrs.field(init=False, default=False, eq=False, repr=False)
    """(Told once, at construction: a runtime protocol check costs tens of microseconds,
    and every row's evidence asks.)"""

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.formula, Formula):
            raise TypeError(
                f"formula must be a ctxeval.policy.Formula, got {type(self.formula).__name__}"
            )
        if isinstance(self.reference, SplitAndAttribute):
            if self.matcher is not None:
                raise ValueError("a SplitAndAttribute reference judges its own units: no matcher")
            if self.formula.judged != "reference":
                raise ValueError(
                    "a SplitAndAttribute reference gives verdicts on the reference units; "
                    f"{type(self.formula).__name__} judges the retrieved items"
                )
        elif self.matcher is None or not isinstance(self.matcher, Matcher):
            raise TypeError("a pipeline needs a matcher (an object with name and match())")
        if self.formula.depth is not None and self.formula.judged != "retrieved":
            raise ValueError("a formula with a depth must judge the retrieved items")
        deterministic = (
            isinstance(self.reference, Items)
            and isinstance(self.retrieved, Items)
            and isinstance(self.matcher, DeterministicMatcher)
        )
        object.__setattr__(self, "_deterministic", deterministic)

    @property
    def requires(self) -> tuple[str, ...]:
        """The sample fields the pipeline reads."""
        return tuple(dict.fromkeys((self.reference.field, self.retrieved.field)))

    @property
    def deterministic(self) -> bool:
        """True when no part does I/O: both sides given and the matcher deterministic."""
        return self._deterministic

    @property
    def parts(self) -> tuple[Any, ...]:
        """The plugin objects the pipeline calls (extractors, attributor, matcher)."""
        found: list[Any] = []
        for side in (self.reference, self.retrieved):
            if isinstance(side, Extracted):
                found.append(side.extractor)
            elif isinstance(side, SplitAndAttribute):
                found.append(side.attributor)
        if self.matcher is not None:
            found.append(self.matcher)
        # one entry per object (by identity: a part holding an unhashable option is a part)
        return tuple({id(part): part for part in found}.values())

    # --- the two sides ---------------------------------------------------------------------

    def pairs(
        self, reference: Sequence[str], retrieved: Sequence[str]
    ) -> tuple[Sequence[str], Sequence[str]]:
        """``(judged items, candidates)`` for the matcher: the retrieved items are cut to the
        formula's depth. (A deterministic pipeline hands the candidate side to the matcher as
        the sample gives it, repeats included: a verdict says whether an item is *among* the
        candidates, which repeats do not change.)"""
        if self.formula.judged == "reference":
            return reference, retrieved
        depth = self.formula.depth
        return (retrieved if depth is None else retrieved[:depth]), reference

    def judge_now(self, sample: Sample) -> Judgement:
        """The judgement of a deterministic pipeline (both sides :class:`Items`)."""
        assert isinstance(self.reference, Items)
        assert isinstance(self.retrieved, Items)
        reference = self.reference.read(sample)
        retrieved = self.retrieved.read(sample)
        items, candidates = self.pairs(
            reference if self.formula.judged == "reference" else self.reference.given(sample),
            retrieved if self.formula.judged == "retrieved" else self.retrieved.given(sample),
        )
        verdicts = self.decided(items, candidates)
        if verdicts is None:
            verdicts = self.matcher.match_now(items, candidates)  # type: ignore[union-attr]
        return self.judgement(sample, reference, retrieved, verdicts)

    @staticmethod
    def decided(items: Sequence[str], candidates: Sequence[str]) -> list[Verdict] | None:
        """The verdicts that need no matcher: none when nothing is judged, "not matched" for
        every item when there is nothing to match it against; None when the matcher decides."""
        if not items:
            return []
        if not candidates:
            return [_NO_CANDIDATE] * len(items)
        return None

    def judgement(
        self,
        sample: Sample,
        reference: Sequence[str],
        retrieved: Sequence[str],
        verdicts: Sequence[Verdict],
        *,
        units: Sequence[Unit] = (),
        retrieved_units: Sequence[Unit] = (),
    ) -> Judgement:
        """The judgement of ``sample``, with the grades of a graded :class:`Items` reference
        and, for a graded formula, the gains of the verdicts."""
        grades = self.reference.grades(sample) if isinstance(self.reference, Items) else None
        return Judgement(
            reference=reference,
            retrieved=retrieved,
            verdicts=verdicts,
            judged=self.formula.judged,
            units=units,
            retrieved_units=retrieved_units,
            reference_grades=grades,
            gains=self.gains(verdicts, grades),
        )

    def gains(self, verdicts: Sequence[Verdict], grades: Sequence[int] | None) -> list[int] | None:
        """For a graded formula judging the retrieved items against graded reference items:
        the grade of the reference item each verdict's evidence points at, -1 for no match
        (the item was not judged)."""
        if grades is None or not self.formula.graded or self.formula.judged != "retrieved":
            return None
        return [
            grades[v.evidence] if v.matched and v.evidence is not None else -1 for v in verdicts
        ]
