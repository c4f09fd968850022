"""From what a user passes as ``metrics=`` to the run's list of :class:`~ctxeval.Metric`.

Names are built with their default options in the run's registry (a preset such as ``@ids``
stands for its metrics, see :mod:`ctxeval._run.presets`); objects are checked to be
metrics; row names must be unique within a run, and every field a metric requires must be a
sample field.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ctxeval._data.sample import SAMPLE_FIELDS
from ctxeval._errors import ConfigError
from ctxeval._plugins.protocols import Metric
from ctxeval._plugins.registry import Registry
from ctxeval._run.presets import PRESETS, expand

__all__ = ["resolve_metrics"]


def resolve_metrics(metrics: Sequence[str | Metric], registry: Registry) -> list[Metric]:
    """The metrics of a run, checked.

    Raises:
        ConfigError: no metric, a value that is not a name or a metric, a row name given twice,
            or a required field that no sample has.
        and what :meth:`Registry.get_metric` raises for a name.
    """
    if isinstance(metrics, (str, bytes)) or not isinstance(metrics, Iterable):
        raise ConfigError("metrics must be a list of metric names or Metric objects")
    resolved: list[Metric] = []
    for spec in metrics:
        if isinstance(spec, str) and spec.startswith("@"):
            preset = expand(spec)
            if preset is None:
                raise ConfigError(f"unknown preset {spec!r}; the presets are {', '.join(PRESETS)}")
            resolved += [registry.get_metric(name) for name in preset]
        elif isinstance(spec, str):
            resolved.append(registry.get_metric(spec))
        elif isinstance(spec, Metric):
            resolved.append(spec)
        else:
            raise ConfigError(
                f"{spec!r} is neither a metric name nor a Metric "
                "(an object with name, requires and ascore)"
            )
    if not resolved:
        raise ConfigError("no metric given; pass metrics=[...] (see ctxeval.plugins())")
    names = [m.name for m in resolved]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ConfigError(
            f"metric name(s) {', '.join(map(repr, repeated))} given more than once; give each "
            "a distinct name, e.g. get_metric('non_llm_context_recall', name='recall_partial', "
            "measure='partial')"
        )
    for metric in resolved:
        unknown = [f for f in metric.requires if f not in SAMPLE_FIELDS]
        if unknown:
            raise ConfigError(
                f"metric {metric.name!r} requires unknown sample field(s) {unknown}; "
                f"sample fields are {', '.join(SAMPLE_FIELDS)}"
            )
    return resolved
