"""People's labels with each metric named as the run's rows name it:
:func:`resolve_label_metrics` (an alias becomes the metric's canonical name).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ctxeval._errors import ConfigError
from ctxeval._judge.labels import Labels

if TYPE_CHECKING:
    from ctxeval._plugins.registry import Registry

__all__ = ["resolve_label_metrics"]


def resolve_label_metrics(
    labels: Labels | str | os.PathLike[str],
    metrics: Sequence[str],
    registry: Registry | None = None,
) -> Labels:
    """``labels`` (read first when a file) with each metric name as the run's rows name it
    (an alias such as ``context_precision`` becomes ``llm_context_precision_with_reference``).

    Raises:
        DataError: the labels file is malformed (file, line and field named).
        ConfigError: labels for a metric the run does not score.
    """
    from ctxeval._plugins.registry import default_registry

    if not isinstance(labels, Labels):
        labels = Labels.load(labels)
    registry = registry or default_registry()
    names: dict[str, str] = {}
    for name in labels.metrics:
        if name in metrics:
            continue
        try:
            canonical = registry.get_metric(name).name
        except Exception:  # an unknown name: said below
            canonical = name
        if canonical not in metrics:
            raise ConfigError(
                f"{labels.source}: labels for metric {name!r}, which this run does not score; "
                f"it scores: {', '.join(metrics)}"
            )
        names[name] = canonical
    return labels.renamed(names) if names else labels
