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

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from ctxeval import policy
from ctxeval.base import BaseDeterministicMetric
from ctxeval.results import NO_USAGE, LazyDetails, MetricResult, Status, _make
from ctxeval.sample import Sample

from .similarity import (
    best_matches,
    check_measure,
    check_threshold,
    normalize_text,
    pair_similarity,
    similarity_matrix,
)

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

    def score_batch(self, samples: Sequence[Sample]) -> list[MetricResult]:
        """Every sample as :meth:`score` scores it, faster: a verdict stops at the first match
        (no numpy), and the evidence is computed only when read."""
        similarity = pair_similarity(self.measure)
        threshold, name = self.threshold, self.name
        fold = normalize_text if self.normalize else None
        out: list[MetricResult] = []
        for sample in samples:
            references: Sequence[str] | None = sample.reference_contexts
            retrieved: Sequence[str] | None = sample.retrieved_contexts
            if not references or not retrieved:
                out.append(self.score(sample))  # the edge cases, with their reasons
                continue
            if fold is not None:
                references = [fold(text) for text in references]
                retrieved = [fold(text) for text in retrieved]
            score = self._batch_score(similarity, threshold, references, retrieved)
            details = LazyDetails(self._details_of, sample)
            out.append(_make(Status.OK, score, None, details, NO_USAGE, sample.id or "", name))
        return out

    def _batch_score(
        self,
        similarity: Callable[[str, str], float],
        threshold: float,
        references: Sequence[str],
        retrieved: Sequence[str],
    ) -> float:
        raise NotImplementedError

    def _details_of(self, sample: Sample) -> Mapping[str, Any]:
        return self.score(sample).details


@attrs.frozen(kw_only=True)
class NonLLMContextPrecisionWithReference(_StringMetric):
    """Average precision of retrieved chunks judged relevant by similarity to reference contexts."""

    registry_name = "non_llm_context_precision_with_reference"

    def _batch_score(
        self,
        similarity: Callable[[str, str], float],
        threshold: float,
        references: Sequence[str],
        retrieved: Sequence[str],
    ) -> float:
        verdicts = [
            any(similarity(reference, chunk) >= threshold for reference in references)
            for chunk in retrieved
        ]
        return float(policy.average_precision_value(verdicts))

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

    def _batch_score(
        self,
        similarity: Callable[[str, str], float],
        threshold: float,
        references: Sequence[str],
        retrieved: Sequence[str],
    ) -> float:
        found = sum(
            any(similarity(reference, chunk) >= threshold for chunk in retrieved)
            for reference in references
        )
        return found / len(references)

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
