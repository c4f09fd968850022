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

``matcher`` (default ``similarity``) swaps the matcher: ``embedding`` compares by meaning
(cosine of text vectors, plugin ``ctxeval_embed``, extra ``embed``), with ``embedder``
(default ``wordllama``, offline) and ``threshold`` defaulting to that embedder's calibrated
one; any other registered deterministic matcher is built with ``threshold`` when given.
``measure`` and ``normalize`` belong to ``similarity``. The rows' details say which matcher,
embedder and threshold judged them. The metrics run without I/O (the fast path), so an
embedder that calls a service is refused here: compose such a metric with
:func:`ctxeval.plugin.compose` and ``get_matcher("embedding", embedder=...)``.
"""

from __future__ import annotations

from typing import Any, ClassVar

import attrs

from ctxeval.builtin.similarity import SimilarityMatcher, check_measure
from ctxeval.plugin import (
    DeterministicMatcher,
    DeterministicPipelineMetric,
    Items,
    Judgement,
    Matcher,
    Pipeline,
    get_matcher,
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
    threshold: float | None = attrs.field(
        default=None, validator=validators.optional(validators.unit_interval)
    )
    """The least similarity that counts as a match (``>=``); default 0.5 for ``similarity``,
    the embedder's calibrated threshold for ``embedding``."""
    normalize: bool = attrs.field(default=False, validator=validators.boolean)
    """Compare lower-cased text with punctuation and white space folded to single spaces."""
    matcher: str = attrs.field(default="similarity", validator=validators.text)
    """The matcher: ``similarity`` (strings), ``embedding`` (meaning) or a registered one."""
    embedder: str | None = attrs.field(default=None, validator=validators.optional(validators.text))
    """The embedder of the ``embedding`` matcher (default ``wordllama``)."""

    formula_type: ClassVar[type[policy.Formula]] = policy.Formula

    def _matcher(self, reference: str) -> Matcher:
        """The matcher of the options (``reference``: which side holds the passages)."""
        if self.matcher == "similarity":
            if self.embedder is not None:
                raise ValueError("embedder goes with matcher='embedding'")
            return SimilarityMatcher(
                measure=self.measure,
                threshold=0.5 if self.threshold is None else self.threshold,
                normalize=self.normalize,
                reference=reference,  # type: ignore[arg-type]
            )
        if self.measure != "levenshtein" or self.normalize:
            raise ValueError(
                f"measure and normalize go with matcher='similarity', not {self.matcher!r}"
            )
        options: dict[str, Any] = {}
        if self.threshold is not None:
            options["threshold"] = self.threshold
        if self.matcher == "embedding":
            options["embedder"] = self.embedder or "wordllama"
            options["reference"] = reference
        elif self.embedder is not None:
            raise ValueError(f"embedder goes with matcher='embedding', not {self.matcher!r}")
        matcher = get_matcher(self.matcher, **options)
        if not isinstance(matcher, DeterministicMatcher):
            what = f" with embedder {options['embedder']!r}" if "embedder" in options else ""
            raise ValueError(
                f"matcher {self.matcher!r}{what} does I/O, and {self.registry_name} runs "
                "without (the fast path): compose a metric from it instead "
                "(ctxeval.plugin.compose with policy.Recall() or policy.AveragePrecision())"
            )
        return matcher

    def build(self) -> Pipeline:
        formula = self.formula_type()
        # the measure always compares a reference passage with a chunk, in that order
        matcher = self._matcher("items" if formula.judged == "reference" else "candidates")
        return Pipeline(
            reference=REFERENCE_CONTEXTS, retrieved=RETRIEVED_CONTEXTS, matcher=matcher,
            formula=formula,
        )  # fmt: skip

    def settings(self) -> dict[str, Any]:
        matcher: Any = self.pipeline.matcher
        if self.matcher == "similarity":
            return {
                "measure": self.measure,
                "threshold": matcher.threshold,
                "normalize": self.normalize,
            }
        settings: dict[str, Any] = {"matcher": self.matcher}
        embedder = getattr(matcher, "embedder", None)
        if embedder is not None:
            settings["embedder"] = embedder.name
        threshold = getattr(matcher, "threshold", self.threshold)
        if threshold is not None:
            settings["threshold"] = threshold
        return settings

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
