"""The non-LLM context metrics: reference contexts matched to retrieved contexts by similarity.

* ``non_llm_context_precision_with_reference``: a retrieved chunk is relevant when some
  reference context is similar enough to it; the score is the average precision of those
  verdicts in ranked order.
* ``non_llm_context_recall``: a reference context is recalled when some retrieved chunk is
  similar enough to it; the score is the share of reference contexts recalled.

Both take ``measure`` (default ``levenshtein``), ``threshold`` (default 0.5, a match when the
similarity is ``>=`` it) and ``normalize`` (default False). See
:mod:`ctxeval.builtin.similarity` for the measures; ``containment`` is the one to use when a
retrieved chunk may hold a reference passage plus other text.
"""

from __future__ import annotations

from typing import Any

import attrs

from ctxeval import policy
from ctxeval.base import BaseDeterministicMetric
from ctxeval.results import MetricResult
from ctxeval.sample import Sample

from .similarity import best_matches, check_measure, check_threshold, similarity_matrix

__all__ = ["NonLLMContextPrecisionWithReference", "NonLLMContextRecall"]


@attrs.frozen(kw_only=True)
class _StringMetric(BaseDeterministicMetric):
    requires = ("retrieved_contexts", "reference_contexts")

    measure: str = attrs.field(default="levenshtein", validator=check_measure)
    """The similarity measure (see :data:`ctxeval.builtin.similarity.MEASURES`)."""
    threshold: float = attrs.field(default=0.5, validator=check_threshold)
    """The least similarity that counts as a match (``>=``)."""
    normalize: bool = attrs.field(default=False, validator=attrs.validators.instance_of(bool))
    """Compare lower-cased text with punctuation and white space folded to single spaces."""

    def _settings(self) -> dict[str, Any]:
        return {"measure": self.measure, "threshold": self.threshold, "normalize": self.normalize}

    def _verdicts(self, sample: Sample, axis: int) -> list[dict[str, Any]] | MetricResult:
        """Best matches per retrieved chunk (``axis=0``) or per reference context (``axis=1``),
        or the ``undefined`` result when there are no reference contexts."""
        references = sample.reference_contexts or ()
        if not references:
            return policy.no_reference("reference contexts", details=self._settings())
        matrix = similarity_matrix(
            references,
            sample.retrieved_contexts or (),
            measure=self.measure,
            normalize=self.normalize,
        )
        return best_matches(matrix, self.threshold, axis=axis)


@attrs.frozen(kw_only=True)
class NonLLMContextPrecisionWithReference(_StringMetric):
    """Average precision of retrieved chunks judged relevant by similarity to reference contexts."""

    registry_name = "non_llm_context_precision_with_reference"

    def score(self, sample: Sample) -> MetricResult:
        verdicts = self._verdicts(sample, axis=0)
        if isinstance(verdicts, MetricResult):
            return verdicts
        return policy.average_precision(
            [v["matched"] for v in verdicts],
            what="retrieved contexts",
            details={"verdicts": verdicts, **self._settings()},
        )


@attrs.frozen(kw_only=True)
class NonLLMContextRecall(_StringMetric):
    """Share of reference contexts that some retrieved chunk matches by similarity."""

    registry_name = "non_llm_context_recall"

    def score(self, sample: Sample) -> MetricResult:
        verdicts = self._verdicts(sample, axis=1)
        if isinstance(verdicts, MetricResult):
            return verdicts
        return policy.recall(
            sum(v["matched"] for v in verdicts),
            len(verdicts),
            what="reference contexts",
            details={"verdicts": verdicts, **self._settings()},
        )
