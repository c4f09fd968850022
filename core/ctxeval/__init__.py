"""ctxeval: measure the quality of the context a RAG system retrieves.

The public surface, all importable from ``ctxeval``:

* data: :class:`Sample`, :func:`load_samples`, :func:`load_trec` (qrels and runs);
* running: :func:`evaluate`, :func:`aevaluate`, :func:`stream`, :func:`get_metric`,
  :class:`Evaluation`, and the run's settings :class:`RunSettings` (with :class:`Limits`,
  :class:`RetryPolicy`) and its :class:`Progress` events;
* results: :class:`MetricResult`, :class:`Status`, :class:`Usage`, :class:`MetricSummary`;
* the judge: people's :class:`Labels` (``evaluate(..., labels=)``) and what
  ``Evaluation.trust()`` says of each judge, a :class:`JudgeTrust` (:mod:`ctxeval._judge.trust`);
* plugins: the protocols :class:`Metric`, :class:`Extractor`, :class:`Matcher`,
  :class:`RunContext`, the values :class:`Unit` and :class:`Verdict`, the :class:`Registry`,
  :func:`plugins`, :func:`default_registry`, and the score rules in :mod:`ctxeval.policy`.
  Plugin authors import everything they need from :mod:`ctxeval.plugin`;
* errors: :class:`CtxevalError` and its subclasses.

Importing ctxeval loads neither litellm nor spaCy: plugins that need them import them when
they first run.
"""

from __future__ import annotations

from ctxeval import policy
from ctxeval._calls.limits import Limits
from ctxeval._data.loading import SampleStream, load_samples
from ctxeval._data.sample import Sample
from ctxeval._data.trec import load_trec
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
from ctxeval._judge.labels import Labels
from ctxeval._judge.trust import JudgeTrust
from ctxeval._plugins.protocols import (
    BatchMetric,
    DeterministicMetric,
    Extractor,
    Matcher,
    Metric,
    RunContext,
    Unit,
    Verdict,
)
from ctxeval._plugins.registry import PluginInfo, Registry, default_registry
from ctxeval._results.evaluation import Evaluation, MetricSummary
from ctxeval._results.results import MetricResult, Status, Usage
from ctxeval._run.api import aevaluate, evaluate, get_metric, plugins, stream
from ctxeval._run.progress import Progress
from ctxeval._run.rowstream import RowStream
from ctxeval._run.settings import RetryPolicy, RunSettings
from ctxeval._version import __version__

__all__ = [
    "AuthenticationError",
    "BadRequestError",
    "BatchMetric",
    "BudgetExceededError",
    "CacheError",
    "CallError",
    "CallTimeoutError",
    "ConfigError",
    "ConnectionFailedError",
    "CtxevalError",
    "DataError",
    "DeterministicMetric",
    "EndpointUnreachableError",
    "Evaluation",
    "Extractor",
    "FatalCallError",
    "InvalidResultError",
    "JudgeTrust",
    "Labels",
    "Limits",
    "MalformedOutputError",
    "Matcher",
    "Metric",
    "MetricResult",
    "MetricSummary",
    "MissingCredentialsError",
    "MissingExtraError",
    "ModelNotFoundError",
    "PluginConflictError",
    "PluginError",
    "PluginInfo",
    "Progress",
    "RateLimitError",
    "Registry",
    "RetryPolicy",
    "RowStream",
    "RunContext",
    "RunSettings",
    "Sample",
    "SampleStream",
    "ServiceError",
    "Status",
    "TransientCallError",
    "Unit",
    "UnknownNameError",
    "UnusableLLMError",
    "Usage",
    "Verdict",
    "__version__",
    "aevaluate",
    "default_registry",
    "evaluate",
    "get_metric",
    "load_samples",
    "load_trec",
    "plugins",
    "policy",
    "stream",
]
