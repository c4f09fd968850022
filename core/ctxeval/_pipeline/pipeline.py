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

from ctxeval._pipeline.batch import BatchJudgement
from ctxeval._pipeline.compose import compose
from ctxeval._pipeline.deterministic import DeterministicPipelineMetric
from ctxeval._pipeline.judgement import Judgement, judged_details
from ctxeval._pipeline.metric import PipelineMetric
from ctxeval._pipeline.parts import Pipeline
from ctxeval._pipeline.sources import Extracted, Items, SplitAndAttribute, field_text

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
    "field_text",
    "judged_details",
]
