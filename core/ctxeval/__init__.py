"""ctxeval: measure the quality of the context a RAG system retrieves.

The public surface, all importable from ``ctxeval``:

* data: :class:`Sample`, :func:`load_samples`, :func:`load_trec` (qrels and runs);
* where a run executes: ``runner=`` (see :mod:`ctxeval.runners`); the LLM answer cache
  :class:`SQLiteCache` (``evaluate(..., cache=SQLiteCache(path))``);
* running: :func:`evaluate`, :func:`aevaluate`, :func:`stream`, :func:`get_metric`,
  :class:`Session` (one row at a time, from any thread or event loop, for host harnesses),
  :class:`Evaluation`, and the run's settings :class:`RunSettings` (with :class:`Limits`,
  :class:`RetryPolicy`) and its :class:`Progress` events;
* results: :class:`MetricResult`, :class:`Status`, :class:`Usage`, :class:`MetricSummary`
  (a run's :class:`Summary` of them prints as a table); a run folder written as the rows come,
  in constant memory: :class:`RunFolder` (``Evaluation.write(folder)`` writes one), and the
  report written again from a run folder or its ``results.jsonl``: :func:`write_report`;
* the judge: people's :class:`Labels` (``evaluate(..., labels=)``) and what
  ``Evaluation.trust()`` says of each judge, a :class:`JudgeTrust` (:mod:`ctxeval._judge.trust`);
* plugins: the protocols :class:`Metric`, :class:`Extractor`, :class:`Matcher`,
  :class:`RunContext`, the values :class:`Unit` and :class:`Verdict`, the :class:`Registry`,
  :func:`plugins`, :func:`default_registry`, and the score rules in :mod:`ctxeval.policy`.
  Plugin authors import everything they need from :mod:`ctxeval.plugin`;
* errors: :class:`CtxevalError` and its subclasses.

Importing ctxeval is quick: it loads neither litellm nor spaCy (plugins that need them import
them when they first run), and each public name's module is imported when the name is first
used (``ctxeval.evaluate``, ``from ctxeval import Sample``...).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

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
    SessionClosedError,
    TransientCallError,
    UnknownNameError,
    UnusableLLMError,
)
from ctxeval._version import __version__

if TYPE_CHECKING:
    from ctxeval import policy
    from ctxeval._calls.cache import SQLiteCache
    from ctxeval._calls.limits import Limits
    from ctxeval._data.loading import SampleStream, load_samples
    from ctxeval._data.sample import Sample
    from ctxeval._data.trec import load_trec
    from ctxeval._judge.labels import Labels
    from ctxeval._judge.trust import JudgeTrust
    from ctxeval._output.folder import RunFolder
    from ctxeval._output.rebuild import write_report
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
    from ctxeval._results.evaluation import Evaluation, MetricSummary, Summary
    from ctxeval._results.results import MetricResult, Status, Usage
    from ctxeval._run.api import aevaluate, evaluate, get_metric, plugins, stream
    from ctxeval._run.progress import Progress
    from ctxeval._run.rowstream import RowStream
    from ctxeval._run.settings import RetryPolicy, RunSettings
    from ctxeval._session.session import Session

_LAZY: dict[str, str] = {
    "BatchMetric": "ctxeval._plugins.protocols",
    "DeterministicMetric": "ctxeval._plugins.protocols",
    "Evaluation": "ctxeval._results.evaluation",
    "Extractor": "ctxeval._plugins.protocols",
    "JudgeTrust": "ctxeval._judge.trust",
    "Labels": "ctxeval._judge.labels",
    "Limits": "ctxeval._calls.limits",
    "Matcher": "ctxeval._plugins.protocols",
    "Metric": "ctxeval._plugins.protocols",
    "MetricResult": "ctxeval._results.results",
    "MetricSummary": "ctxeval._results.evaluation",
    "PluginInfo": "ctxeval._plugins.registry",
    "Progress": "ctxeval._run.progress",
    "Registry": "ctxeval._plugins.registry",
    "RetryPolicy": "ctxeval._run.settings",
    "RowStream": "ctxeval._run.rowstream",
    "RunFolder": "ctxeval._output.folder",
    "RunContext": "ctxeval._plugins.protocols",
    "RunSettings": "ctxeval._run.settings",
    "SQLiteCache": "ctxeval._calls.cache",
    "Sample": "ctxeval._data.sample",
    "Session": "ctxeval._session.session",
    "SampleStream": "ctxeval._data.loading",
    "Status": "ctxeval._results.results",
    "Summary": "ctxeval._results.evaluation",
    "Unit": "ctxeval._plugins.protocols",
    "Usage": "ctxeval._results.results",
    "Verdict": "ctxeval._plugins.protocols",
    "aevaluate": "ctxeval._run.api",
    "default_registry": "ctxeval._plugins.registry",
    "evaluate": "ctxeval._run.api",
    "get_metric": "ctxeval._run.api",
    "load_samples": "ctxeval._data.loading",
    "load_trec": "ctxeval._data.trec",
    "plugins": "ctxeval._run.api",
    "policy": "ctxeval.policy",
    "stream": "ctxeval._run.api",
    "write_report": "ctxeval._output.rebuild",
}
"""Each public name (not an error class) and the module it is imported from when first used."""


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'ctxeval' has no attribute {name!r}")
    if module == f"ctxeval.{name}":  # a submodule (ctxeval.policy): set on import
        return importlib.import_module(module)
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # found at once the next time (a cache of constant values)
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


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
    "RunFolder",
    "RunSettings",
    "SQLiteCache",
    "Sample",
    "SampleStream",
    "ServiceError",
    "Session",
    "SessionClosedError",
    "Status",
    "Summary",
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
    "write_report",
]
