"""A metric made of a pipeline: :class:`PipelineMetric`.

It builds its :class:`~ctxeval._pipeline.parts.Pipeline` once (:meth:`PipelineMetric.build`),
decides degenerate inputs without calling anyone (an empty reference is ``undefined``; nothing
retrieved is ``undefined`` for a precision-like formula and 0 otherwise), scores a sample through
the parts and the formula, reports who judged a row (``provenance``) and estimates the requests
scoring a sample would send (for ``--dry-run``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from ctxeval._data.sample import Sample
from ctxeval._errors import DataError
from ctxeval._pipeline.judgement import Judgement, judged_details
from ctxeval._pipeline.judging import judge_name
from ctxeval._pipeline.parts import Pipeline
from ctxeval._pipeline.sources import Extracted, Items, SplitAndAttribute, field_text
from ctxeval._pipeline.units import RetrievalUnits
from ctxeval._plugins.base import BaseMetric
from ctxeval._plugins.hooks import (
    EstimatesAttributorCalls,
    EstimatesCallsByJudge,
    EstimatesExtractorCalls,
    EstimatesMatcherCalls,
    needs_run_llm,
    own_llm,
    reports_provenance,
    usage_of,
)
from ctxeval._plugins.protocols import Extractor, RunContext, Unit
from ctxeval._results.results import MetricResult
from ctxeval._version import __version__

__all__ = ["PipelineMetric"]


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

    unit: str = attrs.field(default="chunk")
    """What the metric counts: ``"chunk"`` (each retrieved chunk, the default and ragas's
    numbers) or ``"document"`` (each document once, at its best chunk's rank and verdict; the
    documents come from ``retrieved_context_sources`` / ``reference_context_sources`` or
    :attr:`doc_id_separator`). See :mod:`ctxeval._pipeline.units`."""
    doc_id_separator: str | None = attrs.field(default=None)
    """For chunk IDs that name their document (TREC RAG's ``doc#segment``): the separator;
    a chunk's document is the part before the last one."""
    duplicates: float | None = attrs.field(default=None)
    """Drop retrieved chunks that repeat an earlier one before judging (each counted once,
    at its first rank): ``1.0`` identical texts, below 1 near-duplicates at least that
    similar (Levenshtein similarity); None (default) keeps them."""
    pipeline: Pipeline = attrs.field(init=False, repr=False, eq=False)
    """The parts, bound once (from :meth:`build`)."""
    units: RetrievalUnits = attrs.field(init=False, repr=False, eq=False)
    """:attr:`unit`, :attr:`doc_id_separator` and :attr:`duplicates`, applied around the
    judging (one place for every pipeline metric)."""

    def __attrs_post_init__(self) -> None:
        RetrievalUnits.bind(self, super().__attrs_post_init__)
        object.__setattr__(self, "pipeline", self.build())

    def prepared(self, sample: Sample) -> Sample | MetricResult:
        """``sample`` as the metric judges it (:meth:`RetrievalUnits.prepare`), or the error
        row saying why it cannot be."""
        if not self.units.active:
            return sample
        try:
            return self.units.prepare(sample, self.pipeline.requires)
        except DataError as exc:
            return MetricResult.error(str(exc), details=self.units.settings())

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
        return any(needs_run_llm(part) for part in self.pipeline.parts)

    # --- scoring -----------------------------------------------------------------------------

    def details_of(self, judgement: Judgement) -> dict[str, Any]:
        """The row's details: :meth:`settings`, the formula's evidence, :meth:`evidence`."""
        flags = judgement.flags
        details = {
            **self.settings(),
            **self.units.settings(),
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
        prepared = self.prepared(sample)
        if isinstance(prepared, MetricResult):
            return prepared
        sample = prepared
        early = self._decided_early(sample)
        if early is not None:
            return early
        judgement = await self._judge(sample, ctx)
        if isinstance(judgement, MetricResult):
            return judgement
        row = self.result_of(judgement)
        if usage_of(ctx) is None:  # nobody judged it
            return row
        provenance = self.provenance(ctx)
        return row if provenance is None else row.with_details(provenance=provenance)

    def provenance(self, ctx: RunContext) -> dict[str, Any] | None:
        """Who judged a row: what each part that judges reports from an optional
        ``provenance(ctx)`` method (an LLM judge: its model, endpoint and prompt version),
        with ctxeval's version; None when no part reports one (deterministic parts)."""
        judges: list[Any] = []
        for part in self.pipeline.parts:
            if reports_provenance(part):  # (the check made once per class of part)
                said = part.provenance(ctx)
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
        judgement = p.judgement(
            sample, reference, retrieved, verdicts, units=units, retrieved_units=retrieved_units
        )
        return self.units.collapse(judgement, sample)

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
            if isinstance(part, EstimatesCallsByJudge):
                for model, sizes in part.estimate_calls_by_judge(*args):
                    out.setdefault(model, []).extend(sizes)
                continue
            own = own_llm(part)
            model = judge_name(own) if own is not None else None
            out.setdefault(model, []).extend(part.estimate_calls(*args))
        return out

    def _estimated(self, sample: Sample) -> list[tuple[Any, tuple[Any, ...]]]:
        """Each part that estimates its calls, with the arguments its ``estimate_calls``
        takes for ``sample``; none when ``sample`` is decided without calls."""
        p = self.pipeline
        prepared = self.prepared(sample)
        if isinstance(prepared, MetricResult):
            return []
        sample = prepared  # (duplicates dropped: the dry run counts what is sent)
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
            if isinstance(attributor, EstimatesAttributorCalls):
                text = field_text(sample, reference_side.field)
                out.append((attributor, (text, candidates, sample)))
            return out
        texts: dict[int, tuple[Extractor, list[str]]] = {}
        for side in (reference_side, retrieved_side):
            if isinstance(side, Extracted):
                entry = texts.setdefault(id(side.extractor), (side.extractor, []))
                entry[1].append(side.source_text(sample))
        for extractor, side_texts in texts.values():
            if isinstance(extractor, EstimatesExtractorCalls):
                out.append((extractor, (side_texts,)))
        if isinstance(p.matcher, EstimatesMatcherCalls):
            # the judged items of an extracted side are not known before extracting
            reference = reference_side.read(sample) if isinstance(reference_side, Items) else []
            retrieved = retrieved_side.read(sample) if isinstance(retrieved_side, Items) else []
            out.append((p.matcher, (*p.pairs(reference, retrieved), sample)))
        return out
