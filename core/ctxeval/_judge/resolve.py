"""People's labels with each metric named as the run's rows name it:
:func:`resolve_label_metrics` (any name of a metric becomes its row name).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ctxeval._errors import ConfigError
from ctxeval._judge.labels import Labels

if TYPE_CHECKING:
    from ctxeval._plugins.metric_names import MetricNames
    from ctxeval._plugins.registry import Registry

__all__ = ["resolve_label_metrics"]


def resolve_label_metrics(
    labels: Labels | str | os.PathLike[str],
    metrics: Sequence[str] | MetricNames,
    registry: Registry | None = None,
) -> Labels:
    """``labels`` (read first when a file) with each metric name as the run's rows name it
    (any name of a metric, an alias or an IR name, becomes the run's row name), looked up in
    the run's :class:`~ctxeval._plugins.metric_names.MetricNames` (``metrics``, or one made
    of these row names).

    Raises:
        DataError: the labels file is malformed (file, line and field named).
        ConfigError: labels for a metric the run does not score.
    """
    from ctxeval._plugins.metric_names import MetricNames

    if not isinstance(labels, Labels):
        labels = Labels.load(labels)
    if not isinstance(metrics, MetricNames):
        metrics = MetricNames(metrics, registry=registry)
    names: dict[str, str] = {}
    for name in labels.metrics:
        if name in metrics:
            continue
        try:
            names[name] = metrics.resolve(name)
        except ConfigError:
            raise ConfigError(
                f"{labels.source}: labels for metric {name!r}, which this run does not score; "
                f"it scores: {', '.join(metrics.names)}"
            ) from None
    return labels.renamed(names) if names else labels
