"""What ``summary.json`` holds: :func:`summary_dict`, per metric the numbers of
:meth:`~ctxeval.Evaluation.summary` and what the run says of its judge, and the usage totals.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from ctxeval._results.judges import SCRIPTED_WARNING
from ctxeval._results.results import Usage

if TYPE_CHECKING:
    from ctxeval._judge.trust import JudgeTrust
    from ctxeval._results.evaluation import MetricSummary
    from ctxeval._results.judges import JudgeLog

__all__ = ["SCRIPTED_WARNING", "Summarized", "summary_dict"]


class Summarized(Protocol):
    """What a summary is made from: an :class:`~ctxeval.Evaluation`, or the
    :class:`~ctxeval._output.totals.RunTotals` of a streamed run."""

    def summary(self) -> dict[str, MetricSummary]: ...

    def trust(self) -> dict[str, JudgeTrust]: ...

    def judges(self) -> JudgeLog: ...

    @property
    def usage(self) -> Usage: ...


def summary_dict(
    evaluation: Summarized, *, extra: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Per metric: mean, n_ok, n_undefined, n_error, the 95% CI and its method, usage, and for
    a judged metric with something to say about its judge, ``judge`` (agreement with people's
    labels, the corrected mean, repeatability, the jury: :meth:`Evaluation.trust`) and
    ``judges`` (who judged: each distinct ``provenance`` judge of its rows); usage totals;
    ``scripted_judge`` (a warning) when ``ctxeval serve-judge`` judged any row. The numbers
    are :meth:`Evaluation.summary`'s."""
    metrics = {}
    trust = evaluation.trust()
    log = evaluation.judges()
    judges = log.to_dict()
    for name, summary in evaluation.summary().items():
        entry = summary.to_dict()
        del entry["metric"]
        if name in trust:
            entry["judge"] = trust[name].to_dict()
        if name in judges:
            entry["judges"] = judges[name]
        metrics[name] = entry
    out: dict[str, Any] = {"metrics": metrics, "usage": evaluation.usage.to_dict()}
    if log.scripted:
        out["scripted_judge"] = SCRIPTED_WARNING
    out.update(extra or {})
    return out
