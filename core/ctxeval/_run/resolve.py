"""From what a user passes as ``metrics=`` to the run's list of :class:`~ctxeval.Metric`.

Names are built with their default options in the run's registry (a preset such as ``@ids``
stands for its metrics, see :mod:`ctxeval._run.presets`); objects are checked to be
metrics; row names must be unique within a run, and every field a metric requires must be a
sample field.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import attrs

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
        raise ConfigError(_repeated_message(repeated, resolved))
    for metric in resolved:
        unknown = [f for f in metric.requires if f not in SAMPLE_FIELDS]
        if unknown:
            raise ConfigError(
                f"metric {metric.name!r} requires unknown sample field(s) {unknown}; "
                f"sample fields are {', '.join(SAMPLE_FIELDS)}"
            )
    return resolved


def _repeated_message(repeated: Sequence[str], resolved: Sequence[Metric]) -> str:
    """Why two metrics named alike are refused, and how to name them apart: the options
    they differ in (``relevance_level`` is not part of a row name, as ``k`` is: ``-m AP -m
    AP:relevance_level=2`` gives two metrics named ``AP``), with the command that does it."""
    name = repeated[0]
    same = [m for m in resolved if m.name == name]
    first, other = same[0], same[1]
    head = f"metric name(s) {', '.join(map(repr, repeated))} given more than once"
    if type(first) is not type(other) or not attrs.has(type(first)):
        return (
            f"{head}: the rows of both would be named {name!r}; give each a name of its own "
            f"with the option name=..., e.g. -m {name}:name={name}_2 on the command line "
            f"(in Python: get_metric(..., name='{name}_2'))"
        )
    kind: Any = type(first)  # (an attrs class: checked above)
    fields = [f.name for f in attrs.fields(kind) if f.init and f.name != "name"]
    differ = {
        f: getattr(other, f)
        for f in fields
        if getattr(first, f) != getattr(other, f)
        and isinstance(getattr(other, f), (int, float, str))  # (an option -m can write)
    }
    if not differ:
        return f"{head}: the same metric with the same options twice; give it once"
    shown = ", ".join(
        f"{key} ({getattr(first, key)!r} and {value!r})" for key, value in differ.items()
    )
    options = ",".join(f"{key}={value}" for key, value in differ.items())
    suffix = "_".join(f"{key}{value}" for key, value in differ.items())
    python = ", ".join(f"{key}={value!r}" for key, value in differ.items())
    return (
        f"{head}: the two differ in {shown}, which is not part of the row name, so both "
        f"would name their rows {name!r}; give the second a name of its own: "
        f"-m {name}:{options},name={name}_{suffix} on the command line (in Python: "
        f"get_metric({name!r}, {python}, name='{name}_{suffix}'))"
    )
