"""The pipeline: reference units, matched against retrieved items, through a formula.

Every metric of the seeds, and every ranked IR measure, is the same three steps::

    sample ──► reference units ──┐
                                 ├─► matcher ──► verdicts ──► formula ──► row
    sample ──► retrieved items ──┘

A :class:`Pipeline` is those parts, bound once when a metric is built:

* each side is a *source*: :class:`Items` (a sample field as it is: IDs, contexts, or one
  text), :class:`Extracted` (units an :class:`~ctxeval.Extractor` finds in a text field) or,
  for the reference, :class:`SplitAndAttribute` (an :class:`~ctxeval.plugin.Attributor` that
  splits a text into units and judges each in one call, so it needs no matcher);
* a :class:`~ctxeval.Matcher` gives one :class:`~ctxeval.Verdict` per item of the side the
  formula judges (the reference units for recall, the retrieved items in rank order for the
  precision-like formulas), against the items of the other side;
* a :class:`~ctxeval.policy.Formula` turns the verdicts into the score, under the score policy.

:class:`PipelineMetric` is a metric made of a pipeline; :func:`compose` builds one from parts.
When both sides are :class:`Items` and the matcher is a
:class:`~ctxeval.plugin.DeterministicMatcher`, the metric is deterministic: it also scores
synchronously and in bulk (:meth:`DeterministicPipelineMetric.score_batch`), through the same
parts and the same formula.

Degenerate inputs are decided without calling a matcher, an extractor or an LLM: an empty
reference is ``undefined`` (nothing to recall); nothing retrieved is ``undefined`` for a
precision-like formula and 0 otherwise.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, Literal

import attrs

from ctxeval._data.sample import TEXT_FIELDS, GradedIDs, Sample, grades_of
from ctxeval._pipeline.judging import judge_name
from ctxeval._plugins.base import BaseMetric
from ctxeval._plugins.protocols import (
    Attributor,
    DeterministicMatcher,
    Extractor,
    Matcher,
    RunContext,
    Unit,
    Verdict,
)
from ctxeval._plugins.validators import boolean, non_negative_int, text
from ctxeval._results.columns import Column
from ctxeval._results.results import LazyDetails, MetricResult, ok_row
from ctxeval._version import __version__
from ctxeval.policy import Formula, Side

__all__ = [
    "BatchJudgement",
    "DeterministicPipelineMetric",
    "Extracted",
    "Items",
    "Judgement",
    "Pipeline",
    "PipelineMetric",
    "SplitAndAttribute",
    "compose",
]

_NO_CANDIDATE = Verdict(False, 0.0, None)
"""The verdict of an item when the other side is empty: nothing can support it."""


def _dedupe(values: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(values))


def field_text(sample: Sample, field: str) -> str:
    """The text of ``field`` in ``sample``: a text field as it is, a list field joined with
    newlines, "" when missing."""
    value = getattr(sample, field)
    if not value:
        return ""
    return value if isinstance(value, str) else "\n".join(value)


@attrs.frozen(kw_only=True)
class Items:
    """A side given by the sample as it is.

    Attributes:
        field: a list field (``retrieved_context_ids``, ``reference_contexts``...) or a text
            field (``reference``, ``response``), which gives one item when it is not blank.
        what: what the items are, plural, for the reasons of degenerate rows (``"reference
            context IDs"``).
        dedupe: keep the first occurrence of a repeated item only (IDs: the best rank).
        min_grade: for graded IDs (:class:`~ctxeval._data.sample.GradedIDs`), the least grade that
            counts (trec_eval's relevance level; 0 keeps every judged item, those judged not
            relevant too); a plain list is grade 1 throughout.
    """

    field: str = attrs.field(validator=text)
    what: str = attrs.field(validator=text)
    dedupe: bool = attrs.field(default=False, validator=boolean)
    min_grade: int = attrs.field(default=1, validator=non_negative_int)

    def read(self, sample: Sample) -> list[str]:
        """The items of ``sample`` (empty when the field is missing or blank), below-grade ones
        left out and repeats removed when the side says so."""
        items = self.given(sample)
        return _dedupe(items) if self.dedupe else list(items)

    def given(self, sample: Sample) -> Sequence[str]:
        """The items of ``sample`` as it gives them (repeats kept, below-grade ones left out)."""
        value = getattr(sample, self.field)
        if not value:
            return ()
        if isinstance(value, str):
            return (value,) if value.strip() else ()
        grades = grades_of(value)
        if grades is None:
            return value if self.min_grade <= 1 else ()
        return tuple(i for i, g in zip(value, grades, strict=True) if g >= self.min_grade)

    def grades(self, sample: Sample) -> list[int] | None:
        """The grades of :meth:`given`'s items, or None when the field carries none."""
        value = getattr(sample, self.field)
        grades = grades_of(value) if value and not isinstance(value, str) else None
        return None if grades is None else [g for g in grades if g >= self.min_grade]


@attrs.frozen(kw_only=True)
class Extracted:
    """A side made of the units an extractor finds in a text field (a list field is joined
    with newlines into one text).

    Attributes:
        field: the sample field the text comes from.
        extractor: the bound extractor.
        what: what the units are, plural (``"reference entities"``).
        blank: the reason's words when the field's text is blank (nothing is extracted then).
        distinct: a key function: units with the same key count once (the first is kept;
            empty keys are dropped). None keeps every unit.
        compare_by: hand the matcher each unit's ``text`` or its ``key``.
    """

    field: str = attrs.field(validator=text)
    extractor: Extractor = attrs.field()
    what: str = attrs.field(validator=text)
    blank: str | None = None
    distinct: Callable[[str], str] | None = None
    compare_by: Literal["text", "key"] = "text"

    def source_text(self, sample: Sample) -> str:
        return field_text(sample, self.field)

    def keep(self, units: Sequence[Unit]) -> list[Unit]:
        """``units`` with the repeats (by :attr:`distinct`) removed."""
        if self.distinct is None:
            return list(units)
        seen: dict[str, Unit] = {}
        for unit in units:
            key = self.distinct(unit.key or unit.text)
            if key and key not in seen:
                seen[key] = unit
        return list(seen.values())

    def compared(self, units: Sequence[Unit]) -> list[str]:
        if self.compare_by == "key":
            return [u.key or u.text for u in units]
        return [u.text for u in units]


@attrs.frozen(kw_only=True)
class SplitAndAttribute:
    """A reference side whose units are found and judged in one step by an
    :class:`~ctxeval.plugin.Attributor` (no matcher): the LLM context recall's
    split-and-attribute request.

    Attributes:
        field: the text field to split (``reference``).
        attributor: the bound attributor.
        what: what the units are, plural (``"reference statements"``).
        blank: the reason's words when the field's text is blank.
    """

    field: str = attrs.field(validator=text)
    attributor: Attributor = attrs.field()
    what: str = attrs.field(validator=text)
    blank: str | None = None


ReferenceSource = Items | Extracted | SplitAndAttribute
RetrievedSource = Items | Extracted


@attrs.frozen(kw_only=True)
class Judgement:
    """What the matching step found for one sample: the evidence a row's details show.

    Attributes:
        reference: the reference units as matched (texts or keys).
        retrieved: the retrieved items as matched (deduplicated where the side says so).
        verdicts: one per judged item (``judged`` side), in order.
        judged: ``reference`` or ``retrieved``.
        units: the reference :class:`~ctxeval.Unit` objects, when they were extracted.
        retrieved_units: the retrieved side's units, when they were extracted.
        reference_grades: the grades of the reference items, when they carry grades.
        gains: for a graded formula, the grade of the reference item each verdict matched
            (0 for no match), when the reference carries grades.
    """

    reference: Sequence[str]
    retrieved: Sequence[str]
    verdicts: Sequence[Verdict]
    judged: Literal["reference", "retrieved"]
    units: Sequence[Unit] = ()
    retrieved_units: Sequence[Unit] = ()
    reference_grades: Sequence[int] | None = None
    gains: Sequence[int] | None = None

    @property
    def flags(self) -> list[bool]:
        return [v.matched for v in self.verdicts]

    @property
    def judged_items(self) -> Sequence[str]:
        return self.reference if self.judged == "reference" else self.retrieved


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


def judged_details(judgement: Judgement, formula: Formula) -> dict[str, Any]:
    """What a judged row adds to its details, for comparing the judge with people
    (:mod:`ctxeval._judge.trust`): ``flags``, the verdict (0 or 1) of each judged item in order, as
    the formula scored them; ``n_reference`` where the formula judges the retrieved items (the
    formula's other input); ``votes`` for the items a :class:`~ctxeval.plugin.Panel` judged
    more than once (each with its ``index``)."""
    out: dict[str, Any] = {"flags": [int(v.matched) for v in judgement.verdicts]}
    if formula.judged == "retrieved":
        out["n_reference"] = len(judgement.reference)
    votes = [
        {"index": index, **v.votes.to_dict()}
        for index, v in enumerate(judgement.verdicts)
        if v.votes is not None
    ]
    if votes:
        out["votes"] = votes
    return out


def _blank_reason(side: Extracted | SplitAndAttribute) -> str:
    return side.blank or f"{side.what} (the {side.field} is empty)"


@attrs.frozen(kw_only=True)
class PipelineMetric(BaseMetric):
    """A metric made of a :class:`Pipeline`.

    Subclasses build their pipeline from their options in :meth:`build` (called once, when the
    metric is built) and may shape their rows' details with :meth:`settings` (shown on every
    row) and :meth:`evidence` (what the matching found). :func:`compose` makes one from parts
    without a subclass.
    """

    pipeline: Pipeline = attrs.field(init=False, repr=False, eq=False)
    """The parts, bound once (from :meth:`build`)."""

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        object.__setattr__(self, "pipeline", self.build())

    def build(self) -> Pipeline:
        """The pipeline of this metric's options."""
        raise NotImplementedError(f"{type(self).__name__} does not implement build()")

    def settings(self) -> dict[str, Any]:
        """Details every row of the metric carries (its options that change the score)."""
        return {}

    def evidence(self, judgement: Judgement) -> dict[str, Any]:
        """Details of a judged sample: by default, for a recall ``found`` and ``missing``
        (unit texts), for a precision the verdict of each retrieved item."""
        if judgement.judged == "reference":
            texts = [u.text for u in judgement.units] or list(judgement.reference)
            pairs = list(zip(texts, judgement.verdicts, strict=True))
            return {
                "found": [t for t, v in pairs if v.matched],
                "missing": [t for t, v in pairs if not v.matched],
            }
        return {
            "verdicts": [
                {
                    "index": index,
                    "matched": v.matched,
                    "score": v.score,
                    "evidence": v.evidence,
                    "reason": v.reason,
                }
                for index, v in enumerate(judgement.verdicts)
            ]
        }

    @property
    def zero_when_empty(self) -> bool:
        """Score an empty reference or nothing retrieved 0 instead of ``undefined``
        (trec_eval's averaging; a metric with such an option overrides this)."""
        return False

    @property
    def needs_llm(self) -> bool:
        """True when a part calls an LLM and has none of its own (it uses the run's)."""
        return any(
            getattr(part, "needs_llm", False) and getattr(part, "llm", None) is None
            for part in self.pipeline.parts
        )

    # --- scoring -----------------------------------------------------------------------------

    def details_of(self, judgement: Judgement) -> dict[str, Any]:
        """The row's details: :meth:`settings`, the formula's evidence, :meth:`evidence`."""
        flags = judgement.flags
        details = {
            **self.settings(),
            **self.pipeline.formula.evidence(flags),
            **self.evidence(judgement),
        }
        if not self.pipeline.deterministic:
            details.update(judged_details(judgement, self.pipeline.formula))
        return details

    def result_of(self, judgement: Judgement) -> MetricResult:
        """The row for ``judgement``, through the formula (with an empty reference, the
        details are the :meth:`settings` only: there is no evidence to show)."""
        p = self.pipeline
        if judgement.reference:
            details: Mapping[str, Any] | None = self.details_of(judgement)
        else:
            details = self.settings() or None
        return p.formula.result(
            judgement.flags,
            len(judgement.reference),
            len(judgement.retrieved),
            reference=p.reference.what,
            retrieved=p.retrieved.what,
            details=details,
            gains=judgement.gains,
            reference_grades=judgement.reference_grades,
            zero_when_empty=self.zero_when_empty,
        )

    async def ascore(self, sample: Sample, ctx: RunContext) -> MetricResult:
        early = self._decided_early(sample)
        if early is not None:
            return early
        judgement = await self._judge(sample, ctx)
        if isinstance(judgement, MetricResult):
            return judgement
        row = self.result_of(judgement)
        if getattr(ctx, "usage", None) is None:  # no part asked anyone: nobody judged it
            return row
        provenance = self.provenance(ctx)
        return row if provenance is None else row.with_details(provenance=provenance)

    def provenance(self, ctx: RunContext) -> dict[str, Any] | None:
        """Who judged a row: what each part that judges reports from an optional
        ``provenance(ctx)`` method (an LLM judge: its model, endpoint and prompt version),
        with ctxeval's version; None when no part reports one (deterministic parts)."""
        judges: list[Any] = []
        for part in self.pipeline.parts:
            report = getattr(part, "provenance", None)
            if report is not None:
                said = report(ctx)
                for one in said if isinstance(said, list) else [said]:
                    if one is not None and one not in judges:
                        judges.append(one)
        return {"ctxeval": __version__, "judges": judges} if judges else None

    def _decided_early(self, sample: Sample) -> MetricResult | None:
        """The row of a sample that needs no extraction or LLM call to decide (a blank text
        reference, or nothing retrieved where the reference still needs work), else None."""
        p = self.pipeline
        reference = p.reference
        if isinstance(reference, Items):
            return None  # decided with the (cheap) items in hand, in _judge
        if not field_text(sample, reference.field).strip():
            settings = self.settings()
            return MetricResult.undefined(
                f"nothing to recall: there are no {_blank_reason(reference)}",
                details=settings or None,
            )
        retrieved = getattr(sample, p.retrieved.field)
        if not retrieved:
            if p.formula.undefined_when_nothing_retrieved:
                return MetricResult.undefined(
                    f"nothing retrieved: there are no {p.retrieved.what}",
                    details=self.settings() or None,
                )
            return MetricResult.ok(0.0, details={**self.settings(), "nothing_retrieved": True})
        return None

    async def _judge(self, sample: Sample, ctx: RunContext) -> Judgement | MetricResult:
        p = self.pipeline
        units: list[Unit] = []
        retrieved_units: list[Unit] = []
        reference_side, retrieved_side = p.reference, p.retrieved
        if isinstance(reference_side, SplitAndAttribute):
            contexts = retrieved_side.read(sample) if isinstance(retrieved_side, Items) else []
            attributed = await reference_side.attributor.attribute(
                field_text(sample, reference_side.field), contexts, ctx
            )
            units = [unit for unit, _ in attributed]
            return Judgement(
                reference=[u.text for u in units],
                retrieved=contexts,
                verdicts=[verdict for _, verdict in attributed],
                judged="reference",
                units=units,
            )
        extracted = await self._extract(sample, ctx)
        reference: Sequence[str]
        retrieved: Sequence[str]
        if isinstance(reference_side, Extracted):
            units = reference_side.keep(extracted[0])
            reference = reference_side.compared(units)
        else:
            reference = reference_side.read(sample)
        if isinstance(retrieved_side, Extracted):
            retrieved_units = retrieved_side.keep(extracted[1])
            retrieved = retrieved_side.compared(retrieved_units)
        else:
            retrieved = retrieved_side.read(sample)
        items, candidates = p.pairs(reference, retrieved)
        verdicts = p.decided(items, candidates)
        if verdicts is None:
            assert p.matcher is not None
            verdicts = list(await p.matcher.match(items, candidates, ctx))
            if len(verdicts) != len(items):
                return MetricResult.error(
                    f"matcher {p.matcher.name!r} gave {len(verdicts)} verdicts for "
                    f"{len(items)} items",
                    details=self.settings() or None,
                )
        return p.judgement(
            sample, reference, retrieved, verdicts, units=units, retrieved_units=retrieved_units
        )

    async def _extract(self, sample: Sample, ctx: RunContext) -> list[list[Unit]]:
        """The units of each :class:`Extracted` side (``[reference, retrieved]``); sides that
        share an extractor share one call (batch-first)."""
        sides = [self.pipeline.reference, self.pipeline.retrieved]
        out: list[list[Unit]] = [[], []]
        by_extractor: dict[int, list[int]] = {}
        extractors: dict[int, Extractor] = {}
        for position, side in enumerate(sides):
            if isinstance(side, Extracted):
                by_extractor.setdefault(id(side.extractor), []).append(position)
                extractors[id(side.extractor)] = side.extractor
        for key, positions in by_extractor.items():
            texts = [sides[i].source_text(sample) for i in positions]  # type: ignore[union-attr]
            found = await extractors[key].extract(texts, ctx)
            if len(found) != len(texts):
                raise ValueError(
                    f"extractor {extractors[key].name!r} gave {len(found)} results for "
                    f"{len(texts)} texts"
                )
            for position, units in zip(positions, found, strict=True):
                out[position] = list(units)
        return out

    def estimate_calls(self, sample: Sample) -> list[int]:
        """The prompt sizes (characters) of the LLM requests scoring ``sample`` would send, as
        the parts estimate them (parts without ``estimate_calls`` send none): an extractor's
        ``estimate_calls(texts)``, a matcher's ``estimate_calls(items, candidates, sample)``,
        an attributor's ``estimate_calls(text, candidates, sample)``."""
        return [
            size for part, args in self._estimated(sample) for size in part.estimate_calls(*args)
        ]

    def estimate_calls_by_model(self, sample: Sample) -> dict[str | None, list[int]]:
        """:meth:`estimate_calls` by the model that would answer (None: the run's ``llm=``),
        so that a dry run prices each judge of a jury at its own price. A part that knows its
        judges apart says so with ``estimate_calls_by_judge`` (a :class:`~ctxeval.plugin.Panel`
        does); another part's model is its own ``llm``, else the run's."""
        out: dict[str | None, list[int]] = {}
        for part, args in self._estimated(sample):
            by_judge = getattr(part, "estimate_calls_by_judge", None)
            if by_judge is not None:
                for model, sizes in by_judge(*args):
                    out.setdefault(model, []).extend(sizes)
                continue
            own = getattr(part, "llm", None)
            model = judge_name(own) if own is not None else None
            out.setdefault(model, []).extend(part.estimate_calls(*args))
        return out

    def _estimated(self, sample: Sample) -> list[tuple[Any, tuple[Any, ...]]]:
        """Each part that estimates its calls, with the arguments its ``estimate_calls``
        takes for ``sample``; none when ``sample`` is decided without calls."""
        p = self.pipeline
        if self._decided_early(sample) is not None:
            return []
        reference_side, retrieved_side = p.reference, p.retrieved
        if isinstance(reference_side, Items) and not reference_side.read(sample):
            return []
        if isinstance(retrieved_side, Items) and not retrieved_side.read(sample):
            return []
        out: list[tuple[Any, tuple[Any, ...]]] = []
        if isinstance(reference_side, SplitAndAttribute):
            attributor = reference_side.attributor
            candidates = retrieved_side.read(sample) if isinstance(retrieved_side, Items) else []
            if hasattr(attributor, "estimate_calls"):
                text = field_text(sample, reference_side.field)
                out.append((attributor, (text, candidates, sample)))
            return out
        texts: dict[int, tuple[Extractor, list[str]]] = {}
        for side in (reference_side, retrieved_side):
            if isinstance(side, Extracted):
                entry = texts.setdefault(id(side.extractor), (side.extractor, []))
                entry[1].append(side.source_text(sample))
        for extractor, side_texts in texts.values():
            if hasattr(extractor, "estimate_calls"):
                out.append((extractor, (side_texts,)))
        if hasattr(p.matcher, "estimate_calls"):
            # the judged items of an extracted side are not known before extracting
            reference = reference_side.read(sample) if isinstance(reference_side, Items) else []
            retrieved = retrieved_side.read(sample) if isinstance(retrieved_side, Items) else []
            out.append((p.matcher, (*p.pairs(reference, retrieved), sample)))
        return out


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
        return self.result_of(self.pipeline.judge_now(sample))

    async def ascore(self, sample: Sample, ctx: RunContext) -> MetricResult:
        return self.score(sample)

    def _details_now(self, sample: Sample) -> Mapping[str, Any]:
        return self.details_of(self.pipeline.judge_now(sample))

    def score_batch(self, samples: Sequence[Sample]) -> list[MetricResult]:
        """Every sample as :meth:`score` scores it: the matcher's batch form gives the flags,
        the formula the score, and the evidence is computed only when a row's details are
        read."""
        judged = self.judge_batch(samples)
        if judged is None:
            return [self.score(sample) for sample in samples]
        ids = [sample.id or "" for sample in samples]
        column = Column(self.name, len(samples))
        self.fill_column(column, samples, judged, range(len(samples)), ids, label=False)
        return [column.row(i, ids[i], sample) for i, sample in enumerate(samples)]

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
        p = self.pipeline
        if not _batchable(p):
            return None
        both = p.matcher if _membership(p.matcher) else _both_sides_key(p.matcher)
        if both is not None:
            return (p.reference, p.retrieved, both, None, None)
        depth = None if _itemwise(p.matcher) else p.formula.depth
        return (p.reference, p.retrieved, p.matcher, p.formula.judged, depth)

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
        if not _batchable(p):
            return None
        matcher = p.matcher
        assert isinstance(matcher, DeterministicMatcher)
        wanted = frozenset(sides) if sides is not None else frozenset((p.formula.judged,))
        if not wanted or not wanted <= {"reference", "retrieved"}:
            raise ValueError(f"sides must be 'reference' and/or 'retrieved', not {sorted(wanted)}")
        if _membership(matcher):
            return self._judge_members(samples, wanted)
        if len(wanted) != 1:
            if _both_sides_key(matcher) is not None:
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
        where, references, retrieved_ones = _judgeable(p, samples)
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
        where, references, retrieved_ones = _judgeable(p, samples)
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
        where = _judgeable(p, samples)[0]
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
        scores, rows, name = column.scores, column.rows, self.name
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
        if cut:
            values = [value(flags[:depth], size) for flags, size in kinds]
        else:
            values = [value(flags, size) for flags, size in kinds]
        odd = [type(v) is not float or not 0.0 <= v <= 1.0 for v in values]  # ok_row's check
        if len(where) == len(scores) and not any(odd):  # every sample judged, in place
            column.scores = list(map(values.__getitem__, classes))
            return
        for j, kind in zip(where, classes, strict=True):
            i = positions[j]
            if not odd[kind]:
                scores[i] = values[kind]
            else:  # ok_row converts or refuses it
                details = LazyDetails(self._details_now, samples[j])
                rows[i] = ok_row(values[kind], details=details, sample_id=ids[i], metric=name)


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


def _judgeable(
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


def _both_sides_key(matcher: object) -> Any:
    """The matcher's ``both_sides_key()`` when it judges both sides in one call
    (``match_both_batch``), else None."""
    key = getattr(matcher, "both_sides_key", None)
    if key is None or not callable(getattr(matcher, "match_both_batch", None)):
        return None
    return key()


def _membership(matcher: object) -> bool:
    """Whether ``matcher`` says an item is matched exactly when it is among the candidates
    (``membership = True``)."""
    return getattr(matcher, "membership", False) is True


def _itemwise(matcher: object) -> bool:
    """Whether ``matcher`` says an item's verdict depends on that item and the candidates
    only (``itemwise = True``)."""
    return getattr(matcher, "itemwise", False) is True


def _batchable(p: Pipeline) -> bool:
    """Whether a batch can read both sides of ``p`` as plain lists of items."""
    reference, retrieved = p.reference, p.retrieved
    assert isinstance(reference, Items)
    assert isinstance(retrieved, Items)
    if reference.min_grade > 1 or retrieved.min_grade > 1:
        return False  # only graded items can count
    return {reference.field, retrieved.field}.isdisjoint(TEXT_FIELDS)  # a text side: one item


@attrs.frozen(kw_only=True)
class _Composed(PipelineMetric):
    """What :func:`compose` builds: a metric whose pipeline is given."""

    parts_: Pipeline = attrs.field(alias="parts", repr=False)

    @property
    def requires(self) -> tuple[str, ...]:  # type: ignore[override]
        return self.parts_.requires

    def build(self) -> Pipeline:
        return self.parts_


@attrs.frozen(kw_only=True)
class _ComposedDeterministic(_Composed, DeterministicPipelineMetric):
    """What :func:`compose` builds when every part is deterministic."""


def compose(
    name: str,
    *,
    reference: ReferenceSource,
    retrieved: RetrievedSource,
    formula: Formula,
    matcher: Matcher | None = None,
) -> PipelineMetric:
    """A metric made of parts, with no class of its own.

    Example: entity recall with your extractor and ctxeval's fuzzy matcher::

        from ctxeval.plugin import Extracted, Items, compose, get_extractor, get_matcher, policy

        metric = compose(
            "fuzzy_keyword_recall",
            reference=Extracted(field="reference", extractor=get_extractor("keywords"),
                                what="reference keywords"),
            retrieved=Items(field="retrieved_contexts", what="retrieved contexts"),
            matcher=get_matcher("fuzzy", threshold=0.85),
            formula=policy.Recall(),
        )

    It is deterministic (with ``score`` and ``score_batch``) when its parts allow.
    """
    parts = Pipeline(reference=reference, retrieved=retrieved, matcher=matcher, formula=formula)
    cls = _ComposedDeterministic if parts.deterministic else _Composed
    return cls(name=name, parts=parts)
