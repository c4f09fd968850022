"""ctxeval: measure the quality of the context a RAG system retrieves.

The public surface, all importable from ``ctxeval``:

* data: :class:`Sample`, :func:`load_samples`, :func:`load_trec` (qrels and runs),
  :func:`load_traces` (an application's traces: OpenTelemetry spans, MLflow, LangSmith...);
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
import sys
from typing import TYPE_CHECKING, Any

from ctxeval._version import __version__

if TYPE_CHECKING:  # what type checkers and editors read; the same names as _PUBLIC (a test)
    from ctxeval import policy as policy
    from ctxeval._calls.cache import SQLiteCache as SQLiteCache
    from ctxeval._calls.limits import Limits as Limits
    from ctxeval._data.loading import SampleStream as SampleStream
    from ctxeval._data.loading import load_samples as load_samples
    from ctxeval._data.sample import RetrievalStep as RetrievalStep
    from ctxeval._data.sample import Sample as Sample
    from ctxeval._data.trec import load_trec as load_trec
    from ctxeval._errors import AuthenticationError as AuthenticationError
    from ctxeval._errors import BadRequestError as BadRequestError
    from ctxeval._errors import BudgetExceededError as BudgetExceededError
    from ctxeval._errors import CacheError as CacheError
    from ctxeval._errors import CallError as CallError
    from ctxeval._errors import CallTimeoutError as CallTimeoutError
    from ctxeval._errors import ConfigError as ConfigError
    from ctxeval._errors import ConnectionFailedError as ConnectionFailedError
    from ctxeval._errors import CtxevalError as CtxevalError
    from ctxeval._errors import DataError as DataError
    from ctxeval._errors import EndpointUnreachableError as EndpointUnreachableError
    from ctxeval._errors import EndpointUnresponsiveError as EndpointUnresponsiveError
    from ctxeval._errors import FatalCallError as FatalCallError
    from ctxeval._errors import InvalidResultError as InvalidResultError
    from ctxeval._errors import MalformedOutputError as MalformedOutputError
    from ctxeval._errors import MissingCredentialsError as MissingCredentialsError
    from ctxeval._errors import MissingExtraError as MissingExtraError
    from ctxeval._errors import ModelNotFoundError as ModelNotFoundError
    from ctxeval._errors import PluginConflictError as PluginConflictError
    from ctxeval._errors import PluginError as PluginError
    from ctxeval._errors import RateLimitError as RateLimitError
    from ctxeval._errors import RunnerError as RunnerError
    from ctxeval._errors import ServiceError as ServiceError
    from ctxeval._errors import SessionClosedError as SessionClosedError
    from ctxeval._errors import TransientCallError as TransientCallError
    from ctxeval._errors import UnknownNameError as UnknownNameError
    from ctxeval._errors import UnusableLLMError as UnusableLLMError
    from ctxeval._judge.labels import Labels as Labels
    from ctxeval._judge.trust import JudgeTrust as JudgeTrust
    from ctxeval._output.evaluation import Evaluation as Evaluation
    from ctxeval._output.folder import RunFolder as RunFolder
    from ctxeval._output.rebuild import write_report as write_report
    from ctxeval._plugins.protocols import BatchMetric as BatchMetric
    from ctxeval._plugins.protocols import DeterministicMetric as DeterministicMetric
    from ctxeval._plugins.protocols import Extractor as Extractor
    from ctxeval._plugins.protocols import Matcher as Matcher
    from ctxeval._plugins.protocols import Metric as Metric
    from ctxeval._plugins.protocols import RunContext as RunContext
    from ctxeval._plugins.protocols import Unit as Unit
    from ctxeval._plugins.protocols import Verdict as Verdict
    from ctxeval._plugins.registry import PluginInfo as PluginInfo
    from ctxeval._plugins.registry import Registry as Registry
    from ctxeval._plugins.registry import default_registry as default_registry
    from ctxeval._results.evaluation import MetricSummary as MetricSummary
    from ctxeval._results.evaluation import Summary as Summary
    from ctxeval._results.results import MetricResult as MetricResult
    from ctxeval._results.results import Status as Status
    from ctxeval._results.results import Usage as Usage
    from ctxeval._run.api import aevaluate as aevaluate
    from ctxeval._run.api import evaluate as evaluate
    from ctxeval._run.api import get_metric as get_metric
    from ctxeval._run.api import load_traces as load_traces
    from ctxeval._run.api import plugins as plugins
    from ctxeval._run.api import stream as stream
    from ctxeval._run.progress import Progress as Progress
    from ctxeval._run.rowstream import RowStream as RowStream
    from ctxeval._run.settings import RetryPolicy as RetryPolicy
    from ctxeval._run.settings import RunSettings as RunSettings
    from ctxeval._session.session import Session as Session

_PUBLIC: dict[str, str] = {
    "AuthenticationError": "ctxeval._errors",
    "BadRequestError": "ctxeval._errors",
    "BatchMetric": "ctxeval._plugins.protocols",
    "BudgetExceededError": "ctxeval._errors",
    "CacheError": "ctxeval._errors",
    "CallError": "ctxeval._errors",
    "CallTimeoutError": "ctxeval._errors",
    "ConfigError": "ctxeval._errors",
    "ConnectionFailedError": "ctxeval._errors",
    "CtxevalError": "ctxeval._errors",
    "DataError": "ctxeval._errors",
    "DeterministicMetric": "ctxeval._plugins.protocols",
    "EndpointUnreachableError": "ctxeval._errors",
    "EndpointUnresponsiveError": "ctxeval._errors",
    "Evaluation": "ctxeval._output.evaluation",
    "Extractor": "ctxeval._plugins.protocols",
    "FatalCallError": "ctxeval._errors",
    "InvalidResultError": "ctxeval._errors",
    "JudgeTrust": "ctxeval._judge.trust",
    "Labels": "ctxeval._judge.labels",
    "Limits": "ctxeval._calls.limits",
    "MalformedOutputError": "ctxeval._errors",
    "Matcher": "ctxeval._plugins.protocols",
    "Metric": "ctxeval._plugins.protocols",
    "MetricResult": "ctxeval._results.results",
    "MetricSummary": "ctxeval._results.evaluation",
    "MissingCredentialsError": "ctxeval._errors",
    "MissingExtraError": "ctxeval._errors",
    "ModelNotFoundError": "ctxeval._errors",
    "PluginConflictError": "ctxeval._errors",
    "PluginError": "ctxeval._errors",
    "PluginInfo": "ctxeval._plugins.registry",
    "Progress": "ctxeval._run.progress",
    "RateLimitError": "ctxeval._errors",
    "RunnerError": "ctxeval._errors",
    "Registry": "ctxeval._plugins.registry",
    "RetrievalStep": "ctxeval._data.sample",
    "RetryPolicy": "ctxeval._run.settings",
    "RowStream": "ctxeval._run.rowstream",
    "RunContext": "ctxeval._plugins.protocols",
    "RunFolder": "ctxeval._output.folder",
    "RunSettings": "ctxeval._run.settings",
    "SQLiteCache": "ctxeval._calls.cache",
    "Sample": "ctxeval._data.sample",
    "SampleStream": "ctxeval._data.loading",
    "ServiceError": "ctxeval._errors",
    "Session": "ctxeval._session.session",
    "SessionClosedError": "ctxeval._errors",
    "Status": "ctxeval._results.results",
    "Summary": "ctxeval._results.evaluation",
    "TransientCallError": "ctxeval._errors",
    "Unit": "ctxeval._plugins.protocols",
    "UnknownNameError": "ctxeval._errors",
    "UnusableLLMError": "ctxeval._errors",
    "Usage": "ctxeval._results.results",
    "Verdict": "ctxeval._plugins.protocols",
    "aevaluate": "ctxeval._run.api",
    "default_registry": "ctxeval._plugins.registry",
    "evaluate": "ctxeval._run.api",
    "get_metric": "ctxeval._run.api",
    "load_samples": "ctxeval._data.loading",
    "load_trec": "ctxeval._data.trec",
    "load_traces": "ctxeval._run.api",
    "plugins": "ctxeval._run.api",
    "policy": "ctxeval.policy",
    "stream": "ctxeval._run.api",
    "write_report": "ctxeval._output.rebuild",
}
"""Each public name and the module it is imported from when first used: the one list (a name
is added with one line here, and its import above for type checkers). ``__all__`` is made
from it."""

__all__ = ["__version__", *_PUBLIC]


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'ctxeval' has no attribute {name!r}")
    if module == f"ctxeval.{name}":  # a submodule (ctxeval.policy): set on import
        return importlib.import_module(module)
    value = getattr(importlib.import_module(module), name)
    _publish()
    return value


def _publish() -> None:
    """Each public name whose module is imported by now: found at once the next time (set in
    this module), and shown as ``ctxeval.NAME`` (``__module__``), as it is imported, in
    reprs, pickles and tracebacks. (A module's values are constant: nothing is changed but
    where they say they live.)"""
    here = globals()
    for name, module_name in _PUBLIC.items():
        if name in here:
            continue
        module = sys.modules.get(module_name)
        if module is None or module_name == f"ctxeval.{name}":
            continue
        value = getattr(module, name)
        if str(getattr(value, "__module__", "")).startswith("ctxeval._"):
            value.__module__ = __name__
        here[name] = value


def __dir__() -> list[str]:
    return sorted(__all__)
