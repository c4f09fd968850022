"""The public plugin API: everything a plugin author needs, in one module.

A plugin package (ctxeval's own built-in ones included) imports from here and nowhere else in
ctxeval; the rest of the core is private and may change. A test in ctxeval's suite fails when a
plugin package imports anything else.

::

    from ctxeval.plugin import (
        Extracted, Items, compose, get_extractor, get_matcher, policy,
    )

What is here:

* the pipeline parts: :class:`Pipeline`, :class:`PipelineMetric`,
  :class:`DeterministicPipelineMetric`, the sources :class:`Items`, :class:`Extracted`,
  :class:`SplitAndAttribute`, the :class:`Judgement` a metric's evidence is made from, and
  :func:`compose`; the formulas are in :mod:`policy` (``policy.Recall()``,
  ``policy.NDCGAtK(k=10)``...);
* judging more than once: :class:`Panel` (repeats and juries of judges, a matcher and
  attributor itself), the :class:`JudgeContext` it hands each judgement (``repeat``,
  ``temperature``), the :class:`Votes` each of its verdicts carries, :func:`majority`, and
  for a metric's options :func:`judge_part` with the fields ``judges_option()``,
  ``repeats_option()``, ``jury_option()``, ``temperature_option()``;
* other plugins, bound when yours is built: :func:`get_extractor`, :func:`get_matcher`,
  :func:`get_embedder`;
* the protocols: :class:`Metric`, :class:`DeterministicMetric`, :class:`BatchMetric`,
  :class:`Extractor`, :class:`Matcher`, :class:`DeterministicMatcher`, :class:`Attributor`,
  :class:`LLMProvider` (and :class:`PricedLLMProvider`, one that gives a :class:`Price`),
  :class:`ChatTransport` (with its :class:`Completion`), :class:`Writer` (and
  :class:`StreamingWriter`, which writes its file as rows come, with its :class:`RowFile`;
  :class:`SummaryWriter`, whose file holds the summary only), :class:`TraceReader`,
  :class:`RunContext` (and the :class:`Limits` it reports, the :class:`PluginLookup` its
  ``registry`` is); the values :class:`Unit`,
  :class:`Verdict`, :class:`Sample`, and :class:`Evaluation` (what a writer writes);
* the optional hooks, one protocol each (a plugin has them or not; ctxeval checks with
  ``isinstance`` and calls them when there), in their own namespace: :mod:`ctxeval.plugin.hooks`
  (``from ctxeval.plugin.hooks import NeedsLLM``; the names stay importable from here too);
* base classes: :class:`BaseMetric`, :class:`BaseDeterministicMetric`,
  :class:`BaseDeterministicMatcher` (write ``match_now``, get ``match`` and ``match_batch``),
  :class:`Dependency` (an optional module and its install command), :func:`options_of`,
  :func:`membership_verdicts`;
* results: :class:`MetricResult`, :class:`Status`, :class:`Usage`, :data:`NO_USAGE`,
  :func:`ok_row` (the fast path of batch scorers), :class:`LazyDetails`;
* the score rules and formulas (:mod:`policy`) and the option validators (:mod:`validators`);
* errors and call-failure classification: every error class, :func:`classify`,
  :func:`status_of`, :func:`retry_after_of`, and :func:`error_for_status` (an HTTP status to the
  error of its kind: the one table a transport uses), :func:`request_not_sent` (a transport
  cancelled before its request left says so: the attempt is not counted in ``usage.requests``);
* helpers: :func:`cache_key` (the key of an LLM answer in the run's cache),
  :func:`current_async_library` (``"asyncio"``, ``"trio"`` or None, without sniffio),
  :func:`normalize_entity`, :func:`normalize_words`.
"""

from __future__ import annotations

from typing import Any

from ctxeval import policy
from ctxeval._calls.async_library import current_async_library
from ctxeval._calls.cache import cache_key
from ctxeval._calls.failures import Kind, classify, error_for_status, retry_after_of, status_of
from ctxeval._calls.limits import Limits
from ctxeval._calls.meter import request_not_sent
from ctxeval._data.sample import SAMPLE_FIELDS, Sample
from ctxeval._data.text import normalize_entity, normalize_words
from ctxeval._errors import (
    AuthenticationError,
    BadRequestError,
    BudgetExceededError,
    CacheError,
    CallError,
    CallTimeoutError,
    ConfigError,
    ConnectionFailedError,
    CtxevalError,
    DataError,
    EndpointUnreachableError,
    EndpointUnresponsiveError,
    FatalCallError,
    InvalidResultError,
    MalformedOutputError,
    MissingCredentialsError,
    MissingExtraError,
    ModelNotFoundError,
    PluginConflictError,
    PluginError,
    RateLimitError,
    ServiceError,
    TransientCallError,
    UnknownNameError,
    UnusableLLMError,
)
from ctxeval._output.evaluation import Evaluation
from ctxeval._pipeline.compose import compose
from ctxeval._pipeline.deterministic import DeterministicPipelineMetric
from ctxeval._pipeline.judgement import Judgement
from ctxeval._pipeline.judging import (
    DEFAULT_REPEAT_TEMPERATURE,
    JudgeContext,
    Panel,
    judge_name,
    judge_part,
    judges_option,
    jury_option,
    repeats_option,
    temperature_option,
)
from ctxeval._pipeline.metric import PipelineMetric
from ctxeval._pipeline.parts import Pipeline
from ctxeval._pipeline.sources import Extracted, Items, SplitAndAttribute
from ctxeval._pipeline.units import RetrievalUnits
from ctxeval._plugins import validators
from ctxeval._plugins.base import (
    BaseDeterministicMatcher,
    BaseDeterministicMetric,
    BaseMetric,
    Dependency,
    membership_verdicts,
    options_of,
)
from ctxeval._plugins.protocols import (
    Attributor,
    BatchMetric,
    ChatTransport,
    Completion,
    DeterministicEmbedder,
    DeterministicMatcher,
    DeterministicMetric,
    Embedder,
    Extractor,
    LLMProvider,
    Matcher,
    Metric,
    PluginLookup,
    Price,
    PricedLLMProvider,
    RowFile,
    RunContext,
    StreamingWriter,
    SummaryWriter,
    TraceReader,
    Unit,
    Verdict,
    Votes,
    Writer,
    majority,
)
from ctxeval._plugins.registry import EXTRACTORS, MATCHERS, building_registry
from ctxeval._public import rehome_all
from ctxeval._results.results import NO_USAGE, LazyDetails, MetricResult, Status, Usage, ok_row
from ctxeval._version import __version__
from ctxeval.plugin import hooks
from ctxeval.plugin.hooks import *  # noqa: F403 (the hooks importable from here, as before)

__all__ = [
    "DEFAULT_REPEAT_TEMPERATURE",
    "NO_USAGE",
    "SAMPLE_FIELDS",
    "Attributor",
    "AuthenticationError",
    "BadRequestError",
    "BaseDeterministicMatcher",
    "BaseDeterministicMetric",
    "BaseMetric",
    "BatchMetric",
    "BudgetExceededError",
    "CacheError",
    "CallError",
    "CallTimeoutError",
    "ChatTransport",
    "Completion",
    "ConfigError",
    "ConnectionFailedError",
    "CtxevalError",
    "DataError",
    "Dependency",
    "DeterministicEmbedder",
    "DeterministicMatcher",
    "DeterministicMetric",
    "DeterministicPipelineMetric",
    "Embedder",
    "EndpointUnreachableError",
    "EndpointUnresponsiveError",
    "Evaluation",
    "Extracted",
    "Extractor",
    "FatalCallError",
    "InvalidResultError",
    "Items",
    "JudgeContext",
    "Judgement",
    "Kind",
    "LLMProvider",
    "LazyDetails",
    "Limits",
    "MalformedOutputError",
    "Matcher",
    "Metric",
    "MetricResult",
    "MissingCredentialsError",
    "MissingExtraError",
    "ModelNotFoundError",
    "Panel",
    "Pipeline",
    "PipelineMetric",
    "PluginConflictError",
    "PluginError",
    "PluginLookup",
    "Price",
    "PricedLLMProvider",
    "RateLimitError",
    "RetrievalUnits",
    "RowFile",
    "RunContext",
    "Sample",
    "ServiceError",
    "SplitAndAttribute",
    "Status",
    "StreamingWriter",
    "SummaryWriter",
    "TraceReader",
    "TransientCallError",
    "Unit",
    "UnknownNameError",
    "UnusableLLMError",
    "Usage",
    "Verdict",
    "Votes",
    "Writer",
    "__version__",
    "cache_key",
    "classify",
    "compose",
    "current_async_library",
    "error_for_status",
    "get_embedder",
    "get_extractor",
    "get_matcher",
    "hooks",
    "judge_name",
    "judge_part",
    "judges_option",
    "jury_option",
    "majority",
    "membership_verdicts",
    "normalize_entity",
    "normalize_words",
    "ok_row",
    "options_of",
    "policy",
    "repeats_option",
    "request_not_sent",
    "retry_after_of",
    "status_of",
    "temperature_option",
    "validators",
]


def _with_llm(group: str, name: str, options: dict[str, Any], llm: Any) -> dict[str, Any]:
    if llm is None or "llm" in options:
        return options
    accepted = options_of(building_registry().factory(group, name))
    return {**options, "llm": llm} if accepted is None or "llm" in accepted else options


def get_extractor(name: str, /, *, llm: Any = None, **options: Any) -> Extractor:
    """The extractor registered under ``name``, built with ``options``, from the registry that
    is building the calling plugin (else the default one): call it in a factory or a
    metric's ``build()`` to bind a part once.

    Args:
        llm: handed on as the extractor's ``llm`` option when it takes one (LLM-backed
            extractors do), left out otherwise.

    Raises:
        UnknownNameError, ConfigError, MissingExtraError, PluginError: as
        :meth:`ctxeval.Registry.get_extractor` does.
    """
    return building_registry().get_extractor(name, **_with_llm(EXTRACTORS, name, options, llm))


def get_matcher(name: str, /, *, llm: Any = None, **options: Any) -> Matcher:
    """The matcher registered under ``name``, built with ``options`` (see
    :func:`get_extractor`)."""
    return building_registry().get_matcher(name, **_with_llm(MATCHERS, name, options, llm))


def get_embedder(name: str, /, **options: Any) -> Embedder:
    """The embedder registered under ``name`` (entry-point group ``ctxeval.embedders``),
    built with ``options`` (see :func:`get_extractor`)."""
    return building_registry().get_embedder(name, **options)


rehome_all(globals(), __all__, __name__)  # each name shows its public module (ctxeval._public)
