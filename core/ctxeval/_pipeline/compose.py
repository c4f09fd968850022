"""A metric made of parts with no class of its own: :func:`compose`.

It gives a :class:`~ctxeval._pipeline.deterministic.DeterministicPipelineMetric` when every part is
deterministic, else a :class:`~ctxeval._pipeline.metric.PipelineMetric`.
"""

from __future__ import annotations

import attrs

from ctxeval._pipeline.deterministic import DeterministicPipelineMetric
from ctxeval._pipeline.metric import PipelineMetric
from ctxeval._pipeline.parts import Pipeline
from ctxeval._pipeline.sources import ReferenceSource, RetrievedSource
from ctxeval._plugins.protocols import Matcher
from ctxeval.policy import Formula

__all__ = ["compose"]


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
