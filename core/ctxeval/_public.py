"""ctxeval's public names, and where each says it lives (#54).

:data:`PUBLIC` is the one map of the names of ``ctxeval`` and the private module each is
imported from when first used (``ctxeval/__init__.py`` makes its ``__all__`` and its lazy
lookup from it). :func:`rehome` gives a public class or function the module users import it
from as its ``__module__`` (``ctxeval.Evaluation``, ``ctxeval.plugin.Pipeline``,
``ctxeval.runners.RunPlan``), once, as it is handed out, so that reprs, pickles and tracebacks
show that, as anyio does for its names; a name of :data:`PUBLIC` lives in ``ctxeval`` wherever
else it is handed out too. What must not change with it (a journal's fingerprint of a metric,
a metric's identity in a run's name index) reads :func:`defined_name`: the module the class or
function was defined in, as before the rewrite.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

__all__ = ["PUBLIC", "defined_name", "rehome", "rehome_all"]

PUBLIC: Final[Mapping[str, str]] = {
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
"""Each public name of ``ctxeval`` and the module it is imported from when first used: the one
list (a name is added with one line here, and its import in ``ctxeval/__init__.py`` for type
checkers)."""

_DEFINED_IN: Final = "_ctxeval_defined_in"
"""The attribute that keeps the module a rewritten class or function was defined in."""


def rehome(value: Any, name: str, module: str) -> None:
    """Show ``value`` (handed out as ``module.name``) as living there: its ``__module__`` set
    to ``ctxeval`` for a name of :data:`PUBLIC`, else to ``module``. Only a class or function
    of a private module of ctxeval whose own name is ``name`` is changed (an alias, a
    submodule or a value is left as it is: a pickle finds it by its own name). The module it
    was defined in is kept on it for :func:`defined_name`, but on a protocol (whose every
    attribute an ``isinstance`` check would ask of an object; a protocol is never what is
    fingerprinted)."""
    defined = getattr(value, "__module__", None)
    if not isinstance(defined, str) or not defined.startswith("ctxeval._"):
        return
    if getattr(value, "__name__", None) != name or getattr(value, "__qualname__", name) != name:
        return
    home = "ctxeval" if PUBLIC.get(name) == defined else module
    if not getattr(value, "_is_protocol", False):  # (a protocol's attribute would be a member)
        setattr(value, _DEFINED_IN, defined)
    value.__module__ = home


def rehome_all(namespace: Mapping[str, Any], names: Iterable[str], module: str) -> None:
    """:func:`rehome` each of ``names`` of a public module's ``namespace``."""
    for name in names:
        if name in namespace:
            rehome(namespace[name], name, module)


def defined_name(kind: Any) -> str:
    """``MODULE.QUALNAME`` of a class or function as it was defined, whatever module it shows
    now (a class's own, not one it inherits)."""
    own = getattr(kind, "__dict__", {})
    module = own.get(_DEFINED_IN) if isinstance(own, Mapping) else None
    module = module or getattr(kind, "__module__", "")
    return f"{module}.{getattr(kind, '__qualname__', repr(kind))}"
