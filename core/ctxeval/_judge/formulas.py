"""Each pipeline metric's formula by row name: :func:`formulas_of`.

People's labels of a sample are scored through the formula of its metric (see
:mod:`ctxeval._judge.corrected`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ctxeval._pipeline.parts import Pipeline
from ctxeval._plugins.hooks import HasPipeline

__all__ = ["formulas_of"]


def formulas_of(metrics: Sequence[Any]) -> dict[str, Any]:
    """Each pipeline metric's formula by row name (people's labels are scored through it)."""
    formulas = {}
    for metric in metrics:
        pipeline = metric.pipeline if isinstance(metric, HasPipeline) else None
        if isinstance(pipeline, Pipeline):
            formulas[metric.name] = pipeline.formula
    return formulas
