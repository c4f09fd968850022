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
from ctxeval._plugins.hooks import MatchesBothSides
from ctxeval.policy import Side

__all__ = ["BatchJudgement", "batchable", "both_sides_key", "judgeable"]


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
    (both sides :class:`Items`) that are no edge case (a side empty: ``score`` gives its
    reason) and have no graded reference IDs (scored one by one), the sides as the samples
    give them."""
    assert isinstance(p.reference, Items)
    assert isinstance(p.retrieved, Items)
    references = list(map(operator.attrgetter(p.reference.field), samples))
    retrieved_ones = list(map(operator.attrgetter(p.retrieved.field), samples))
    if all(references) and all(retrieved_ones) and GradedIDs not in set(map(type, references)):
        return list(range(len(samples))), references, retrieved_ones  # the usual case
    where = [
        index
        for index, (reference, retrieved) in enumerate(zip(references, retrieved_ones, strict=True))
        if reference and retrieved and type(reference) is not GradedIDs
    ]
    return where, [references[i] for i in where], [retrieved_ones[i] for i in where]


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
