"""One name per metric: which metric a name means, and which of a run's metrics it is.

The rule (documented in docs/concepts.md, "Metric names"): **a metric's rows carry the name
you wrote** in ``-m`` or :func:`ctxeval.get_metric`: ``context_precision`` stays
``context_precision`` (it is not renamed to the plugin's canonical
``llm_context_precision_with_reference``), ``nDCG@10`` stays ``nDCG@10``; a metric named by its
registry name with a parameter adds it (``id_ndcg_at_k`` with ``k=10`` gives ``id_ndcg_at_10``,
itself a name ``-m`` accepts); the ``name`` option overrides all of it.

A name given later (``--fail-under``, :func:`ctxeval.testing.assert_metric`, a labels file,
:func:`ctxeval.compare`) finds its metric through the run's :class:`MetricNames`, built once
with the run's plan and carried by its :class:`~ctxeval.Evaluation`: the row name itself, then
the same name in another case (the registry's rule for registered names,
:func:`~ctxeval._plugins.names.one_by_case`), then any other spelling of the same metric (an
alias, an IR name in any case: ``--fail-under ndcg@10`` finds the rows of
``-m id_ndcg_at_k:k=10``; a registered name finds the rows its metric renamed with ``name=``).
Two metrics are the same when they are built by the same class and have the same default
name (so the same parameters that name them: ``k``).
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ctxeval._data.measure_names import DOCUMENT_SUFFIX
from ctxeval._errors import ConfigError, CtxevalError
from ctxeval._plugins.hooks import NamedByDefault
from ctxeval._plugins.names import one_by_case, suggest_metric_names
from ctxeval._public import defined_name

if TYPE_CHECKING:
    from ctxeval._plugins.registry import Registry

__all__ = ["MetricNames", "identity", "resolve_metric_name"]

Identity = tuple[str, str]
"""What makes two built metrics the same metric: their class (module and name) and their
default row name."""


def identity(metric: Any) -> Identity:
    """What makes two built metrics the same metric, whatever they were called: their class
    and their default row name (which holds the parameters that name them, such as ``k``)."""
    named = metric.default_name() if isinstance(metric, NamedByDefault) else metric.name
    if getattr(metric, "unit", None) == "document":  # the two levels are two metrics
        named += DOCUMENT_SUFFIX
    return defined_name(type(metric)), str(named)


class MetricNames:
    """The row names of a run's metrics, and which of them any name of a metric means.

    Built once per run, from the built metrics (:meth:`RunPlan.build
    <ctxeval.runners.RunPlan.build>`; what they are is read from them, the registry is not
    entered) or from row names alone (a run read back from its files: each row name is then
    built once, when first needed). A name looked up is built at most once: its answer is
    kept.

    Public as :class:`ctxeval.runners.MetricNames` (a plan's :attr:`RunPlan.metric_names
    <ctxeval.runners.RunPlan.metric_names>`, an evaluation's
    :attr:`~ctxeval.Evaluation.metric_names`), and pickled by that name.
    """

    __module__ = "ctxeval.runners"
    __slots__ = ("_identities", "_meant", "_registry", "names")

    def __init__(
        self,
        names: Sequence[str],
        metrics: Sequence[Any] | None = None,
        *,
        registry: Registry | None = None,
    ) -> None:
        self.names: tuple[str, ...] = tuple(names)
        """The row names, in the run's order."""
        self._registry = registry
        self._identities: list[Identity | None] | None = (
            None if metrics is None else [identity(m) for m in metrics]
        )
        self._meant: dict[str, Identity | None] = {}  # a name built once: what it is

    @classmethod
    def of(cls, metrics: Sequence[Any], registry: Registry | None = None) -> MetricNames:
        """The names of the built ``metrics`` (each metric's ``name``, in order)."""
        return cls([m.name for m in metrics], metrics, registry=registry)

    def __repr__(self) -> str:
        return f"MetricNames({list(self.names)!r})"

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without its registry (a plan sent to other processes: each process
        builds a name, if it must, in its own default registry)."""
        return {"names": self.names, "_identities": self._identities, "_meant": self._meant}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._registry = None
        for key, value in state.items():
            setattr(self, key, value)

    def __contains__(self, name: object) -> bool:
        return name in self.names

    def resolve(self, name: str) -> str:
        """The row name, among :attr:`names`, of the metric ``name`` means (a row name, an
        alias, an IR name, in any case).

        Raises:
            ConfigError: no metric of the run is meant (with the close names), or several are.
        """
        if name in self.names:
            return name
        by_case = one_by_case(name, self.names)
        if by_case is not None:
            return by_case
        wanted = self._meaning(name)
        if wanted is not None:
            same = self._named(wanted)
            if len(same) == 1:
                return same[0]
            if len(same) > 1:
                raise ConfigError(
                    f"{name!r} is each of the run's metrics {', '.join(same)}; name one of them"
                )
        close = difflib.get_close_matches(name, self.names, n=1, cutoff=0.6)
        if not close and wanted is None:  # a misspelt name of a run's metric (ndgc@10: nDCG@10)
            for spelled in suggest_metric_names(name, self._registry_of().names()):
                meant = self._meaning(spelled)
                close = self._named(meant)[:1] if meant is not None else []
                if close:
                    break
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ConfigError(
            f"no metric of this run is named {name!r} "
            f"(the run's metrics: {', '.join(self.names)}){hint}"
        )

    def _named(self, wanted: Identity) -> list[str]:
        """The row names of the run's metrics that are ``wanted``."""
        if self._identities is None:
            self._identities = [self._meaning(n) for n in self.names]
        return [n for n, i in zip(self.names, self._identities, strict=True) if i == wanted]

    def _meaning(self, name: str) -> Identity | None:
        """What ``name`` builds (None: nothing builds it alone), built once."""
        if name not in self._meant:
            try:
                self._meant[name] = identity(self._registry_of().get_metric(name))
            except CtxevalError:
                self._meant[name] = None  # a custom ``name=``, a plugin needing options
        return self._meant[name]

    def _registry_of(self) -> Registry:
        if self._registry is None:
            from ctxeval._plugins.registry import default_registry

            return default_registry()
        return self._registry


def resolve_metric_name(
    name: str,
    run_names: Sequence[str] | MetricNames,
    *,
    registry: Registry | None = None,
    metrics: Sequence[Any] | None = None,
) -> str:
    """The row name, among ``run_names``, of the metric ``name`` means: ``run_names``'s
    :meth:`MetricNames.resolve` (a :class:`MetricNames` made of them and ``metrics``, the
    run's built metrics in the same order, when given a sequence).

    Raises:
        ConfigError: no metric of the run is meant (with the close names), or several are.
    """
    if not isinstance(run_names, MetricNames):
        run_names = MetricNames(run_names, metrics, registry=registry)
    return run_names.resolve(name)
