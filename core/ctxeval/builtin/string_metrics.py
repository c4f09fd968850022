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
``embedder_options`` go to the embedder (``{"dim": 128}`` for ``wordllama``; ``{"model": ...,
"api_base": ...}`` for ``openai``). ``measure`` and ``normalize`` belong to ``similarity``.
The rows' details say which matcher, embedder and threshold judged them.

With a matcher that needs no I/O (the default, ``embedding`` over ``wordllama``) the metrics
are deterministic: they run on the fast path, many samples per call. With one that calls a
service (``embedding`` over the ``openai`` embedder, any OpenAI-compatible ``/v1/embeddings``)
the class builds its twin without the fast path instead (:class:`EndpointNonLLMContextRecall`,
:class:`EndpointNonLLMContextPrecisionWithReference`: same options, rows and details): each
row is scored through the run (the scheduler's limits, retries, cache and usage; the
embedder gathers the texts of the rows in flight into full batches) and journaled as an LLM
metric's rows are.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import attrs

from ctxeval.builtin.similarity import SimilarityMatcher, check_measure
from ctxeval.plugin import (
    ConfigError,
    DeterministicPipelineMetric,
    Items,
    Judgement,
    Matcher,
    Pipeline,
    PipelineMetric,
    get_matcher,
    policy,
    validators,
)
from ctxeval.plugin.hooks import HasEmbedder

__all__ = [
    "EndpointNonLLMContextPrecisionWithReference",
    "EndpointNonLLMContextRecall",
    "NonLLMContextPrecisionWithReference",
    "NonLLMContextRecall",
]

REFERENCE_CONTEXTS = Items(field="reference_contexts", what="reference contexts")
RETRIEVED_CONTEXTS = Items(field="retrieved_contexts", what="retrieved contexts")


_SECRET_OPTIONS = frozenset({"api_key", "extra_headers"})


def _options_repr(value: Mapping[str, Any] | None) -> str:
    """``embedder_options`` as shown (in reprs, hence logs): a key or headers as ``***``."""
    if value is None:
        return "None"
    return repr({k: "***" if k in _SECRET_OPTIONS else v for k, v in value.items()})


def _to_options(value: Any) -> Any:
    return dict(value) if isinstance(value, Mapping) else value


def _check_options(instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and not (
        isinstance(value, dict) and all(isinstance(k, str) for k in value)
    ):
        raise ValueError(
            f"embedder_options must be a mapping of option names to values, got {value!r} "
            """(on the command line: embedder_options={"model":"...","api_base":"..."})"""
        )


@attrs.frozen(kw_only=True)
class _StringOptions(PipelineMetric):
    """The options, pipeline and details of the non-LLM context metrics, with or without the
    fast path."""

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
    embedder_options: dict[str, Any] | None = attrs.field(
        default=None, converter=_to_options, validator=_check_options, repr=_options_repr
    )
    """Options of the embedder (``{"model": ..., "api_base": ...}`` for ``openai``)."""

    formula_type: ClassVar[type[policy.Formula]] = policy.Formula

    def _matcher(self, reference: str) -> Matcher:
        """The matcher of the options (``reference``: which side holds the passages)."""
        if self.matcher == "similarity":
            if self.embedder is not None or self.embedder_options is not None:
                raise ValueError("embedder and embedder_options go with matcher='embedding'")
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
            if self.embedder_options is not None:
                options["embedder_options"] = self.embedder_options
            if options["embedder"] == "openai":
                _check_endpoint(self.registry_name, self.embedder_options)
        elif self.embedder is not None or self.embedder_options is not None:
            raise ValueError(
                f"embedder and embedder_options go with matcher='embedding', not {self.matcher!r}"
            )
        return get_matcher(self.matcher, **options)

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
        embedder = matcher.embedder if isinstance(matcher, HasEmbedder) else None
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


def _check_endpoint(metric: str, options: Mapping[str, Any] | None) -> None:
    """The ``openai`` embedder needs the model the endpoint serves."""
    if options and options.get("model"):
        return
    raise ConfigError(
        f"{metric} with embedder='openai' needs the embedding model of the endpoint: pass "
        """embedder_options={"model": "text-embedding-3-small", "api_base": "http://host/v1"} """
        "(on the command line: -m '"
        f"""{metric}:matcher=embedding,embedder=openai,embedder_options={{"model":"...","api_base":"..."}}'"""
        "); without api_base the endpoint is OPENAI_BASE_URL, else OpenAI's (with "
        "OPENAI_API_KEY); api_key, batch_size, dimensions and timeout may be given too"
    )


@attrs.frozen(kw_only=True)
class _EndpointMetric(_StringOptions):
    """A non-LLM context metric whose matcher does I/O: scored row by row through the run."""


@attrs.frozen(kw_only=True)
class _StringMetric(_StringOptions, DeterministicPipelineMetric):
    """A non-LLM context metric on the fast path; built with a matcher that does I/O, the
    class gives its :attr:`endpoint_twin` instead (see the module)."""

    endpoint_twin: ClassVar[type[_EndpointMetric]]

    def __new__(cls, **options: Any) -> Any:
        matcher, embedder = options.get("matcher", "similarity"), options.get("embedder")
        offline = matcher == "embedding" and embedder in (None, "wordllama")
        if matcher != "similarity" and not offline:  # may do I/O: built to be told
            twin = cls.endpoint_twin(**options)
            if not twin.pipeline.deterministic:
                return twin
        return super().__new__(cls)


@attrs.frozen(kw_only=True)
class EndpointNonLLMContextPrecisionWithReference(_EndpointMetric):
    """:class:`NonLLMContextPrecisionWithReference` over a matcher that does I/O (an endpoint
    embedder): the same options and rows, without the fast path."""

    registry_name = "non_llm_context_precision_with_reference"

    formula_type = policy.AveragePrecision


@attrs.frozen(kw_only=True)
class EndpointNonLLMContextRecall(_EndpointMetric):
    """:class:`NonLLMContextRecall` over a matcher that does I/O (an endpoint embedder): the
    same options and rows, without the fast path."""

    registry_name = "non_llm_context_recall"

    formula_type = policy.Recall


@attrs.frozen(kw_only=True)
class NonLLMContextPrecisionWithReference(_StringMetric):
    """Average precision of retrieved chunks judged relevant by similarity to reference contexts."""

    registry_name = "non_llm_context_precision_with_reference"

    formula_type = policy.AveragePrecision
    endpoint_twin = EndpointNonLLMContextPrecisionWithReference


@attrs.frozen(kw_only=True)
class NonLLMContextRecall(_StringMetric):
    """Share of reference contexts that some retrieved chunk matches by similarity."""

    registry_name = "non_llm_context_recall"

    formula_type = policy.Recall
    endpoint_twin = EndpointNonLLMContextRecall
