"""One name per metric: which metric a name means, and which of a run's metrics it is.

The rule (documented in docs/concepts.md, "Metric names"): **a metric's rows carry the name
you wrote** in ``-m`` or :func:`ctxeval.get_metric`: ``context_precision`` stays
``context_precision`` (it is not renamed to the plugin's canonical
``llm_context_precision_with_reference``), ``nDCG@10`` stays ``nDCG@10``; a metric named by its
registry name with a parameter adds it (``id_ndcg_at_k`` with ``k=10`` gives ``id_ndcg_at_10``,
itself a name ``-m`` accepts); the ``name`` option overrides all of it.

A name given later (``--fail-under``, :func:`ctxeval.testing.assert_metric`, a labels file)
finds its metric by :func:`resolve_metric_name`: the row name itself, then the same name in
another case, then any other spelling of the same metric (an alias, an IR name in any case:
``--fail-under ndcg@10`` finds the rows of ``-m id_ndcg_at_k:k=10``). Two metrics are the same
when they are built by the same class and have the same default name (so the same parameters
that name them: ``k``).
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import Any

from ctxeval._data.measure_names import DOCUMENT_SUFFIX
from ctxeval._errors import ConfigError, CtxevalError
from ctxeval._plugins.names import suggest_metric_names
from ctxeval._plugins.registry import Registry, default_registry

__all__ = ["identity", "resolve_metric_name"]


def identity(metric: Any) -> tuple[str, str]:
    """What makes two built metrics the same metric, whatever they were called: their class
    and their default row name (which holds the parameters that name them, such as ``k``)."""
    default = getattr(metric, "default_name", None)
    named = default() if callable(default) else metric.name
    if getattr(metric, "unit", None) == "document":  # the two levels are two metrics
        named += DOCUMENT_SUFFIX
    cls = type(metric)
    return f"{cls.__module__}.{cls.__qualname__}", str(named)


def _identity_of_name(registry: Registry, name: str) -> tuple[str, str] | None:
    try:
        return identity(registry.get_metric(name))
    except CtxevalError:
        return None  # a name nothing builds alone (a custom ``name=``, a plugin needing options)


def resolve_metric_name(
    name: str,
    run_names: Sequence[str],
    *,
    registry: Registry | None = None,
    metrics: Sequence[Any] | None = None,
) -> str:
    """The row name, among ``run_names``, of the metric ``name`` means.

    Args:
        name: a name as a user writes it (row name, alias, IR name, any case).
        run_names: the run's metric row names.
        registry: where names are built (default: :func:`ctxeval.default_registry`).
        metrics: the run's built metrics, in the order of ``run_names``, when at hand (else
            each row name is built to find what it is).

    Raises:
        ConfigError: no metric of the run is meant (with the close names), or several are.
    """
    if name in run_names:
        return name
    folded = [n for n in run_names if n.casefold() == name.casefold()]
    if len(folded) == 1:
        return folded[0]
    registry = registry or default_registry()
    wanted = _identity_of_name(registry, name)
    if wanted is not None:
        identities: list[tuple[str, str] | None]
        if metrics is not None:
            identities = [identity(m) for m in metrics]
        else:
            identities = [_identity_of_name(registry, n) for n in run_names]
        same = [n for n, i in zip(run_names, identities, strict=True) if i == wanted]
        if len(same) == 1:
            return same[0]
        if len(same) > 1:
            raise ConfigError(
                f"{name!r} is each of the run's metrics {', '.join(same)}; name one of them"
            )
    close = difflib.get_close_matches(name, run_names, n=1, cutoff=0.6)
    if not close and wanted is None:  # a misspelt name of a run's metric (ndgc@10: nDCG@10)
        for spelled in suggest_metric_names(name, registry.names()):
            meant = _identity_of_name(registry, spelled)
            if meant is None:
                continue
            known: list[tuple[str, str] | None]
            if metrics is not None:
                known = [identity(m) for m in metrics]
            else:
                known = [_identity_of_name(registry, n) for n in run_names]
            close = [n for n, i in zip(run_names, known, strict=True) if i == meant][:1]
            if close:
                break
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise ConfigError(
        f"no metric of this run is named {name!r} (the run's metrics: {', '.join(run_names)}){hint}"
    )
