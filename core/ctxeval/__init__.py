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

from ctxeval._public import PUBLIC as _PUBLIC
from ctxeval._public import rehome as _rehome
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
        _rehome(value, name, __name__)
        here[name] = value


def __dir__() -> list[str]:
    return sorted(__all__)
