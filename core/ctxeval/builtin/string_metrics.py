"""The non-LLM context metrics: reference contexts matched to retrieved contexts by similarity.

Both are pipelines over the ``similarity`` matcher:

* ``non_llm_context_precision_with_reference``: a retrieved chunk is relevant when some
  reference context is similar enough to it; the score is the average precision of those
  verdicts in ranked order (formula ``AveragePrecision``).
* ``non_llm_context_recall``: a reference context is recalled when some retrieved chunk is
  similar enough to it; the score is the share of reference contexts recalled (``Recall``).

Both take ``measure`` (default ``levenshtein``), ``threshold`` (default 0.5, a match when the
similarity is ``>=`` it) and ``normalize`` (default False). See
:mod:`ctxeval.builtin.similarity` for the measures; ``containment`` is the one to use when a
retrieved chunk may hold a reference passage plus other text.
"""

from __future__ import annotations

from typing import Any, ClassVar

import attrs

from ctxeval.builtin.similarity import SimilarityMatcher, check_measure
from ctxeval.plugin import (
    DeterministicPipelineMetric,
    Items,
    Judgement,
    Pipeline,
    policy,
    validators,
)

__all__ = ["NonLLMContextPrecisionWithReference", "NonLLMContextRecall"]

REFERENCE_CONTEXTS = Items(field="reference_contexts", what="reference contexts")
RETRIEVED_CONTEXTS = Items(field="retrieved_contexts", what="retrieved contexts")


@attrs.frozen(kw_only=True)
class _StringMetric(DeterministicPipelineMetric):
    requires: ClassVar[tuple[str, ...]] = ("retrieved_contexts", "reference_contexts")

    measure: str = attrs.field(default="levenshtein", validator=check_measure)
    """The similarity measure (see :data:`ctxeval.builtin.similarity.MEASURES`)."""
    threshold: float = attrs.field(default=0.5, validator=validators.unit_interval)
    """The least similarity that counts as a match (``>=``)."""
    normalize: bool = attrs.field(default=False, validator=validators.boolean)
    """Compare lower-cased text with punctuation and white space folded to single spaces."""

    formula_type: ClassVar[type[policy.Formula]] = policy.Formula

    def build(self) -> Pipeline:
        formula = self.formula_type()
        matcher = SimilarityMatcher(
            measure=self.measure,
            threshold=self.threshold,
            normalize=self.normalize,
            # the measure always compares a reference passage with a chunk, in that order
            reference="items" if formula.judged == "reference" else "candidates",
        )
        return Pipeline(
            reference=REFERENCE_CONTEXTS, retrieved=RETRIEVED_CONTEXTS, matcher=matcher,
            formula=formula,
        )  # fmt: skip

    def settings(self) -> dict[str, Any]:
        return {"measure": self.measure, "threshold": self.threshold, "normalize": self.normalize}

    def evidence(self, judgement: Judgement) -> dict[str, Any]:
        """Per judged item (``judged``: the retrieved chunks or the reference contexts): its
        index, verdict, best similarity and the best counterpart."""
        return {
            "judged": judgement.judged,
            "verdicts": [
                {
                    "index": index,
                    "matched": v.matched,
                    "similarity": v.score,
                    "evidence": v.evidence,
                }
                for index, v in enumerate(judgement.verdicts)
            ],
        }


@attrs.frozen(kw_only=True)
class NonLLMContextPrecisionWithReference(_StringMetric):
    """Average precision of retrieved chunks judged relevant by similarity to reference contexts."""

    registry_name = "non_llm_context_precision_with_reference"

    formula_type = policy.AveragePrecision


@attrs.frozen(kw_only=True)
class NonLLMContextRecall(_StringMetric):
    """Share of reference contexts that some retrieved chunk matches by similarity."""

    registry_name = "non_llm_context_recall"

    formula_type = policy.Recall
