"""What ``summary.json`` holds: :func:`summary_dict`, per metric the numbers of
:meth:`~ctxeval.Evaluation.summary` and what the run says of its judge, and the usage totals.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ctxeval._results.evaluation import Evaluation

__all__ = ["summary_dict"]


def summary_dict(
    evaluation: Evaluation, *, extra: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Per metric: mean, n_ok, n_undefined, n_error, the 95% CI and its method, usage, and for
    a judged metric with something to say about its judge, ``judge`` (agreement with people's
    labels, the corrected mean, repeatability, the jury: :meth:`Evaluation.trust`); usage
    totals. The numbers are :meth:`Evaluation.summary`'s."""
    metrics = {}
    trust = evaluation.trust()
    for name, summary in evaluation.summary().items():
        entry = summary.to_dict()
        del entry["metric"]
        if name in trust:
            entry["judge"] = trust[name].to_dict()
        metrics[name] = entry
    out: dict[str, Any] = {"metrics": metrics, "usage": evaluation.usage.to_dict()}
    out.update(extra or {})
    return out
