"""A pipeline metric whose parts do no I/O: :class:`DeterministicPipelineMetric`.

Both sides are :class:`~ctxeval._pipeline.sources.Items` and the matcher is a
:class:`~ctxeval.plugin.DeterministicMatcher`: it also scores at once (``score``) and many
samples per call (``score_batch``, ``judge_batch``), through the same parts and the same formula;
a row's evidence is computed only when its details are read.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from ctxeval._data.sample import Sample
from ctxeval._pipeline.batch import (
    BatchJudgement,
    batchable,
    both_sides_key,
    graded_scores,
    judgeable,
)
from ctxeval._pipeline.metric import PipelineMetric
from ctxeval._pipeline.sources import Items
from ctxeval._plugins.hooks import is_itemwise, is_membership
from ctxeval._plugins.protocols import DeterministicMatcher, RunContext
from ctxeval._results.columns import Column
from ctxeval._results.results import LazyDetails, MetricResult, ok_row
from ctxeval.policy import Side

if TYPE_CHECKING:
    from ctxeval._data.ranked import RankedColumns

__all__ = ["DeterministicPipelineMetric"]

_NOTHING = Sample()
"""What a batch judges in the place of a sample its units cannot prepare: nothing (an edge
case, which :meth:`DeterministicPipelineMetric.score` then scores, with its error)."""


@attrs.frozen(kw_only=True)
class DeterministicPipelineMetric(PipelineMetric):
    """A :class:`PipelineMetric` whose parts do no I/O: it also scores at once
    (:meth:`score`) and many samples per call (:meth:`score_batch`), through the same parts."""

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        if not self.pipeline.deterministic:
            raise TypeError(
                f"{type(self).__name__}: a deterministic metric needs Items on both sides and "
                "a DeterministicMatcher (with match_now and match_batch)"
            )

    def score(self, sample: Sample) -> MetricResult:
        prepared = self.prepared(sample)
        if isinstance(prepared, MetricResult):
            return prepared
        return self.result_of(self.units.collapse(self.pipeline.judge_now(prepared), prepared))

    async def ascore(self, sample: Sample, ctx: RunContext) -> MetricResult:
        return self.score(sample)

    def _details_now(self, sample: Sample) -> Mapping[str, Any]:
        prepared = self.prepared(sample)
        if isinstance(prepared, MetricResult):
            return prepared.details or {}
        return self.details_of(self.units.collapse(self.pipeline.judge_now(prepared), prepared))

    def details_batch(
        self, samples: Sequence[Sample], memo: dict[Any, Any] | None = None
    ) -> list[Mapping[str, Any]]:
        """The details of each of ``samples``' rows, as a row's details read them one by one
        (``details_of(pipeline.judge_now(sample))``); a metric with a faster way to the same
        details overrides it (the ID metrics do: ``results.jsonl`` reads every row's).
        ``memo``: a dict the metrics of one run share for the same ``samples`` (what one
        metric computed that another reads too), or None."""
        return [self._details_now(sample) for sample in samples]

    def score_batch(self, samples: Sequence[Sample]) -> list[MetricResult]:
        """Every sample as :meth:`score` scores it: the matcher's batch form gives the flags,
        the formula the score, and the evidence is computed only when a row's details are
        read. With :attr:`units` active, :meth:`judge_batch` prepares the samples first (one
        step for every metric of a judging group); at document level, a text side is scored
        sample by sample (its verdicts collapse after judging)."""
        if self.units.by_document and not self._ids_only():
            return [self.score(sample) for sample in samples]  # verdicts collapse after
        judged = self.judge_batch(samples)
        if judged is None:
            return [self.score(sample) for sample in samples]
        ids = [sample.id or "" for sample in samples]
        column = Column(self.name, len(samples))
        self.fill_column(column, samples, judged, range(len(samples)), ids, label=False)
        return [column.row(i, ids[i], sample) for i, sample in enumerate(samples)]

    def takes_ranked_columns(self) -> bool:
        """Whether :meth:`score_ranked_columns` scores this metric
        (:class:`~ctxeval.plugin.hooks.ScoresRankedColumns`): the reference and retrieved
        context IDs as they are (each side deduplicated), matched by membership,
        into a ranked formula scored over columns (:data:`~ctxeval._pipeline.ranked.
        RANKED_FORMULAS`), with no retrieval units."""
        from ctxeval._pipeline.ranked import RANKED_FORMULAS

        p = self.pipeline
        reference, retrieved = p.reference, p.retrieved
        return (
            not self.units.active
            and type(p.formula) in RANKED_FORMULAS
            and is_membership(p.matcher)
            and type(reference) is Items
            and reference.field == "reference_context_ids"
            and reference.dedupe
            and type(retrieved) is Items
            and retrieved.field == "retrieved_context_ids"
            and retrieved.dedupe
            and retrieved.min_grade <= 1
        )

    def score_ranked_columns(self, columns: RankedColumns) -> Any:
        """The scores of the plain ``ok`` rows of a chunk of queries given as columns, NaN
        for the others (:class:`~ctxeval.plugin.hooks.ScoresRankedColumns`)."""
        from ctxeval._pipeline.ranked import ranked_scores

        reference = self.pipeline.reference
        assert isinstance(reference, Items)
        return ranked_scores(self.pipeline.formula, reference.min_grade, columns)

    def ranked_details(self, sample: Sample) -> Mapping[str, Any]:
        """The details of a row :meth:`score_ranked_columns` scored (as :meth:`score`'s)."""
        return self._details_now(sample)

    def ranked_details_batch(
        self, samples: Sequence[Sample], memo: dict[Any, Any] | None
    ) -> Sequence[Mapping[str, Any]]:
        """:meth:`ranked_details` of many samples (:meth:`details_batch`)."""
        return self.details_batch(samples, memo)

    def _as_judged(self, samples: Sequence[Sample]) -> Sequence[Sample]:
        """``samples`` as :meth:`judge_batch` judged them (prepared by :attr:`units`; one that
        cannot be is no judged sample, and stays as it is)."""
        if not self.units.active:
            return samples
        return [p if isinstance(p := self.prepared(s), Sample) else s for s in samples]

    def _ids_only(self) -> bool:
        """Whether both sides are ID fields (collapsed to documents before judging)."""
        return {"retrieved_context_ids", "reference_context_ids"}.issuperset(self.pipeline.requires)

    def _prepared_details(
        self, samples: Sequence[Sample], memo: dict[Any, Any] | None = None
    ) -> list[Mapping[str, Any]]:
        """:meth:`details_batch` of the samples as :attr:`units` prepare them (plain rows:
        each can be), with a memo of their own (the sides differ from the samples')."""
        fields = self.pipeline.requires
        prepared = [self.units.prepare(sample, fields) for sample in samples]
        own = None if memo is None else memo.setdefault(("units", self.units), {})
        return self.details_batch(prepared, own)

    def judging_key(self) -> tuple[Any, ...] | None:
        """Metrics with equal keys judge a batch of samples alike (the same sides, matcher,
        judged side and depth): the fast path judges a chunk once for all of them
        (:meth:`judge_batch`) and each fills its column from that (:meth:`fill_column`).
        The depth is left out for an ``itemwise`` matcher (the flags of the first k items are
        the same either way), and the judged side too for a matcher that judges both sides
        in one pass (``membership``, or ``match_both_batch`` with its ``both_sides_key()``
        in the matcher's place). None when the metric scores its batches its own way (an
        overridden :meth:`score_batch`) or sample by sample (text or graded sides)."""
        if type(self).score_batch is not DeterministicPipelineMetric.score_batch:
            return None
        if self.units.by_document and not self._ids_only():
            return None  # verdicts collapse after judging: sample by sample
        p = self.pipeline
        if not batchable(p):
            return None
        both = p.matcher if is_membership(p.matcher) else both_sides_key(p.matcher)
        key: tuple[Any, ...]
        if both is not None:
            key = (p.reference, p.retrieved, both, None, None)
        else:
            depth = None if is_itemwise(p.matcher) else p.formula.depth
            key = (p.reference, p.retrieved, p.matcher, p.formula.judged, depth)
        return (self.units, *key) if self.units.active else key  # (the depth stays last)

    def judge_batch(
        self,
        samples: Sequence[Sample],
        *,
        whole: bool = False,
        sides: Collection[Side] | None = None,
    ) -> BatchJudgement | None:
        """The matcher's flags for every sample of ``samples`` that is no edge case, in one
        :meth:`~ctxeval.plugin.DeterministicMatcher.match_batch` call (the sides are read
        here in one loop, as :meth:`Items.read` reads them: this runs for every row of a
        large run); None when the sides cannot be read so (text or graded sides).

        ``whole`` judges every retrieved item, not only those down to the formula's depth
        (for an itemwise matcher, whose flags of the first k items are the same either way:
        :meth:`fill_column` cuts them). ``sides`` are the sides to judge (default: the
        formula's). A ``membership`` matcher's flags are set lookups, made here for both
        sides in one pass (every retrieved item judged); both sides of another matcher come
        from its ``match_both_batch``, and one side from its ``match_batch``."""
        p = self.pipeline
        if not batchable(p):
            return None
        if self.units.active:  # (a sample that cannot be prepared: an edge, scored alone)
            samples = [
                prepared if isinstance(prepared, Sample) else _NOTHING
                for prepared in map(self.prepared, samples)
            ]
        matcher = p.matcher
        assert isinstance(matcher, DeterministicMatcher)
        wanted = frozenset(sides) if sides is not None else frozenset((p.formula.judged,))
        if not wanted or not wanted <= {"reference", "retrieved"}:
            raise ValueError(f"sides must be 'reference' and/or 'retrieved', not {sorted(wanted)}")
        if is_membership(matcher):
            return self._judge_members(samples, wanted)
        if len(wanted) != 1:
            if both_sides_key(matcher) is not None:
                return self._judge_both(samples)
            raise ValueError(
                f"matcher {matcher.name!r} has neither membership nor match_both_batch: "
                "it judges one side per batch"
            )
        judge_reference = "reference" in wanted
        dedupe_reference, dedupe_retrieved = p.reference.dedupe, p.retrieved.dedupe  # type: ignore[union-attr]
        depth = None if whole or judge_reference else p.formula.depth
        fromkeys = dict.fromkeys
        todo: list[tuple[Sequence[str], Sequence[str]]] = []
        sizes: list[int] = []
        where, references, retrieved_ones = judgeable(p, samples)
        for reference, retrieved in zip(references, retrieved_ones, strict=True):
            if judge_reference:
                if dedupe_reference:
                    reference = list(fromkeys(reference))
                todo.append((reference, retrieved))
                sizes.append(len(reference))
            else:
                if dedupe_retrieved:
                    retrieved = list(fromkeys(retrieved))
                todo.append((retrieved if depth is None else retrieved[:depth], reference))
                sizes.append(len(set(reference)) if dedupe_reference else len(reference))
        flags = matcher.match_batch(todo) if todo else []
        if len(flags) != len(todo):
            raise ValueError(
                f"matcher {matcher.name!r}: match_batch gave {len(flags)} results for "
                f"{len(todo)} samples"
            )
        if judge_reference:
            return BatchJudgement(where, sizes, reference=flags)
        return BatchJudgement(where, sizes, depth, retrieved=flags)

    def _judge_members(self, samples: Sequence[Sample], sides: frozenset[str]) -> BatchJudgement:
        """:meth:`judge_batch` for a ``membership`` matcher: an item is matched when it is
        among the other side's items, so both sides are judged in one pass of set lookups
        (the flags the matcher's ``match_batch`` gives)."""
        p = self.pipeline
        dedupe_reference, dedupe_retrieved = p.reference.dedupe, p.retrieved.dedupe  # type: ignore[union-attr]
        want_retrieved, want_reference = "retrieved" in sides, "reference" in sides
        fromkeys = dict.fromkeys
        retrieved_flags: list[list[bool]] = []
        reference_flags: list[list[bool]] = []
        sizes: list[int] = []
        where, references, retrieved_ones = judgeable(p, samples)
        for reference, retrieved in zip(references, retrieved_ones, strict=True):
            unique_reference = fromkeys(reference)  # a set that keeps the order
            unique_retrieved = fromkeys(retrieved)
            if want_retrieved:
                judged = unique_retrieved if dedupe_retrieved else retrieved
                retrieved_flags.append(list(map(unique_reference.__contains__, judged)))
            if want_reference:
                judged = unique_reference if dedupe_reference else reference
                reference_flags.append(list(map(unique_retrieved.__contains__, judged)))
            sizes.append(len(unique_reference) if dedupe_reference else len(reference))
        return BatchJudgement(
            where,
            sizes,
            retrieved=retrieved_flags if want_retrieved else None,
            reference=reference_flags if want_reference else None,
        )

    def _judge_both(self, samples: Sequence[Sample]) -> BatchJudgement:
        """:meth:`judge_batch` of both sides through the matcher's ``match_both_batch``
        (one call, each pair of items compared once for both sides)."""
        p = self.pipeline
        reference_side, retrieved_side = p.reference, p.retrieved
        assert isinstance(reference_side, Items)
        assert isinstance(retrieved_side, Items)
        where = judgeable(p, samples)[0]
        todo = [(reference_side.read(samples[i]), retrieved_side.read(samples[i])) for i in where]
        matcher: Any = p.matcher
        flags = matcher.match_both_batch(todo) if todo else []
        if len(flags) != len(todo):
            raise ValueError(
                f"matcher {matcher.name!r}: match_both_batch gave {len(flags)} results for "
                f"{len(todo)} samples"
            )
        reference_flags = [list(of_reference) for of_reference, _ in flags]
        retrieved_flags = [list(of_retrieved) for _, of_retrieved in flags]
        for (reference, retrieved), mine, theirs in zip(
            todo, reference_flags, retrieved_flags, strict=True
        ):
            if len(mine) != len(reference) or len(theirs) != len(retrieved):
                raise ValueError(
                    f"matcher {matcher.name!r}: match_both_batch gave {len(mine)} and "
                    f"{len(theirs)} flags for {len(reference)} reference and {len(retrieved)} "
                    "retrieved items"
                )
        sizes = [len(reference) for reference, _ in todo]
        return BatchJudgement(where, sizes, retrieved=retrieved_flags, reference=reference_flags)

    def fill_column(
        self,
        column: Column,
        samples: Sequence[Sample],
        judged: BatchJudgement,
        positions: Sequence[int],
        ids: Sequence[str],
        *,
        label: bool = True,
    ) -> None:
        """Put the rows of ``samples`` (judged by :meth:`judge_batch`) in ``column``: the
        scores of plain ``ok`` rows, the others whole (the edge cases, scored by
        :meth:`score`). Sample ``j`` goes to position ``positions[j]``, labelled
        ``ids[positions[j]]`` (edge rows only when ``label``).

        The formula's value is computed once per class of equal flags and reference count
        (:meth:`BatchJudgement.classes`): it depends on those two only."""
        column.evidence = self._details_now
        column.evidence_batch = self._prepared_details if self.units.active else self.details_batch
        scores, rows, name = column.scores, column.rows, self.name
        assert isinstance(scores, list)  # (a column being filled: a kept one is compact)
        formula = self.pipeline.formula
        value, depth, side = formula.value, formula.depth, formula.judged
        cut = depth is not None and judged.depth != depth and side == "retrieved"
        where = judged.where
        if len(where) < len(samples):
            judged_here = set(where)
            for j, sample in enumerate(samples):
                if j not in judged_here:
                    row = self.score(sample)
                    i = positions[j]
                    rows[i] = row.labelled(ids[i], name) if label else row
        classes, kinds = judged.classes(side)
        values: list[float | None]
        if cut:
            values = [value(flags[:depth], size) for flags, size in kinds]
        else:
            values = [value(flags, size) for flags, size in kinds]
        if formula.graded and side == "retrieved":
            graded = graded_scores(self.pipeline, self._as_judged(samples), where)
            if graded:  # graded reference IDs: their own values (None: scored whole)
                classes = list(classes)
                for k, score in graded.items():
                    classes[k] = len(values)
                    values.append(score)
        odd = [type(v) is not float or not 0.0 <= v <= 1.0 for v in values]  # ok_row's check
        if len(where) == len(scores) and not any(odd):  # every sample judged, in place
            column.scores = list(map(values.__getitem__, classes))
            return
        for j, kind in zip(where, classes, strict=True):
            i = positions[j]
            if not odd[kind]:
                scores[i] = values[kind]
                continue
            score = values[kind]
            if score is None:  # an edge case found by graded_scores
                row = self.score(samples[j])
                rows[i] = row.labelled(ids[i], name) if label else row
            else:  # ok_row converts or refuses it
                details = LazyDetails(self._details_now, samples[j])
                rows[i] = ok_row(score, details=details, sample_id=ids[i], metric=name)
