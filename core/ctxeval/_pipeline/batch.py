"""Judging a batch of samples on the deterministic fast path: :class:`BatchJudgement` (the
flags found for a chunk of samples, sorted into classes of equal flags) and the helpers that
decide which samples and sides a batch can judge.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import attrs

from ctxeval._data.sample import TEXT_FIELDS, GradedIDs, Sample
from ctxeval._pipeline.parts import Pipeline
from ctxeval._pipeline.sources import Items
from ctxeval._plugins.hooks import MatchesBothSides, is_membership
from ctxeval.policy import Side

__all__ = ["BatchJudgement", "batchable", "both_sides_key", "graded_scores", "judgeable"]


@attrs.frozen(slots=True)
class BatchJudgement:
    """What :meth:`DeterministicPipelineMetric.judge_batch` found for a batch of samples.

    Attributes:
        where: the positions (in the batch) of the samples the matcher judged; the others
            are edge cases (a side empty, graded reference IDs) that the metric's ``score``
            decides.
        sizes: per judged sample, the number of reference items (the formula's
            ``n_reference``).
        depth: the retrieved items judged were cut at this rank (None: all of them).
        retrieved: per judged sample, one flag per retrieved item judged (None: that side
            was not judged).
        reference: per judged sample, one flag per reference item (None: not judged).
    """

    where: list[int]
    sizes: list[int]
    depth: int | None = None
    retrieved: list[list[bool]] | None = None
    reference: list[list[bool]] | None = None
    _classes: dict[str, tuple[list[int], list[tuple[list[bool], int]]]] = attrs.field(
        factory=dict, init=False, eq=False, repr=False
    )

    def flags(self, side: Side) -> list[list[bool]]:
        """The flags of ``side`` (``"retrieved"`` or ``"reference"``) per judged sample."""
        flags = self.retrieved if side == "retrieved" else self.reference
        if flags is None:
            raise ValueError(f"the {side} side of this batch was not judged")
        return flags

    def classes(self, side: Side) -> tuple[list[int], list[tuple[list[bool], int]]]:
        """The judged samples sorted into classes of equal flags (of ``side``) and reference
        count: per judged sample the number of its class, and per class its ``(flags,
        n_reference)``. Runs repeat them (ten IDs judged against a few give a few dozen
        patterns), so a formula computes one value per class. Computed once per side."""
        found = self._classes.get(side)
        if found is None:
            number: dict[tuple[object, ...], int] = {}
            give = number.setdefault
            classes = [
                give((size, *flags), len(number))
                for flags, size in zip(self.flags(side), self.sizes, strict=True)
            ]
            kinds: list[tuple[list[bool], int]] = [
                (list(key[1:]), key[0])  # type: ignore[arg-type,misc]
                for key in number
            ]
            found = self._classes[side] = (classes, kinds)
        return found


def judgeable(
    p: Pipeline, samples: Sequence[Sample]
) -> tuple[list[int], list[Sequence[str]], list[Sequence[str]]]:
    """The positions, reference sides and retrieved sides of the samples of ``samples``
    (both sides :class:`Items`) that are no edge case (a side empty, or no reference item of
    the side's least grade: ``score`` gives its reason), the sides as the samples give them
    (:meth:`Items.given`: graded reference IDs give their items of the least grade; a graded
    formula's value of them comes from :func:`graded_scores`)."""
    reference_side = p.reference
    assert isinstance(reference_side, Items)
    assert isinstance(p.retrieved, Items)
    references = list(map(operator.attrgetter(reference_side.field), samples))
    retrieved_ones = list(map(operator.attrgetter(p.retrieved.field), samples))
    if all(references) and all(retrieved_ones) and GradedIDs not in set(map(type, references)):
        return list(range(len(samples))), references, retrieved_ones  # the usual case
    given = reference_side.given
    where, judged_references = [], []
    for index, (reference, retrieved) in enumerate(zip(references, retrieved_ones, strict=True)):
        if not reference or not retrieved:
            continue
        if type(reference) is GradedIDs:
            reference = given(samples[index])
            if not reference:
                continue
        where.append(index)
        judged_references.append(reference)
    return where, judged_references, [retrieved_ones[i] for i in where]


def graded_scores(
    p: Pipeline, samples: Sequence[Sample], where: Sequence[int]
) -> dict[int, float | None]:
    """For a graded formula (:attr:`~ctxeval.policy.Formula.graded`) judging the retrieved
    side: by index ``k`` in ``where``, the value the formula gives judged sample ``where[k]``
    when its reference IDs carry grades, as ``judge_now`` and the formula's ``result`` give it,
    or None when its row is ``score``'s: an edge case (nothing relevant), or any graded sample
    when the matcher is no ``membership`` one (the gains then follow its verdicts' evidence).
    Through a ``membership`` matcher, a retrieved item's gain is the grade of its first
    occurrence among the reference items of the least grade. Samples with a plain list of
    reference IDs, whose flags count as grade 1, are left out. Equal gains and grades share
    one computation."""
    formula, reference_side, retrieved_side = p.formula, p.reference, p.retrieved
    assert isinstance(reference_side, Items)
    assert isinstance(retrieved_side, Items)
    field, level, depth = reference_side.field, reference_side.min_grade, formula.depth
    out: dict[int, float | None] = {}
    exact = is_membership(p.matcher)
    memo: dict[tuple[tuple[int, ...], tuple[int, ...]], float | None] = {}
    for k, j in enumerate(where):
        sample = samples[j]
        reference = getattr(sample, field)
        if type(reference) is not GradedIDs:
            continue
        if not exact:
            out[k] = None
            continue
        pairs = [(i, g) for i, g in zip(reference, reference.grades, strict=True) if g >= level]
        first = dict(reversed(pairs))  # the grade of each ID's first occurrence
        retrieved = retrieved_side.read(sample)
        if depth is not None:
            retrieved = retrieved[:depth]
        key = (tuple([first.get(i, -1) for i in retrieved]), tuple([g for _, g in pairs]))
        if key not in memo:
            grades = key[1]
            memo[key] = formula.graded_value(*key) if formula.relevant_in(grades) else None
        out[k] = memo[key]
    return out


def both_sides_key(matcher: object) -> Any:
    """The matcher's ``both_sides_key()`` when it judges both sides in one call
    (``match_both_batch``), else None."""
    return matcher.both_sides_key() if isinstance(matcher, MatchesBothSides) else None


def batchable(p: Pipeline) -> bool:
    """Whether a batch can read both sides of ``p`` as plain lists of items."""
    reference, retrieved = p.reference, p.retrieved
    assert isinstance(reference, Items)
    assert isinstance(retrieved, Items)
    if reference.min_grade > 1 or retrieved.min_grade > 1:
        return False  # only graded items can count
    return {reference.field, retrieved.field}.isdisjoint(TEXT_FIELDS)  # a text side: one item
