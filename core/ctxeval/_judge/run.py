"""What the judge reports read of a run: the :class:`JudgedRun` protocol.

:class:`~ctxeval.Evaluation` is one; typing against this protocol keeps :mod:`ctxeval._judge`
below :mod:`ctxeval._results.evaluation`, which calls down into it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ctxeval._results.results import MetricResult

if TYPE_CHECKING:
    from ctxeval._plugins.metric_names import MetricNames

__all__ = ["IndexedRun", "JudgedRun"]


class JudgedRun(Protocol):
    """A run's rows by metric, their summaries, and the samples kept."""

    @property
    def metrics(self) -> Sequence[str]: ...

    @property
    def samples(self) -> Mapping[str, Any]: ...

    def rows(self, metric: str) -> Sequence[MetricResult]: ...

    def judged_rows(self, metric: str) -> Sequence[MetricResult]: ...

    def summary(self) -> Mapping[str, Any]: ...


@runtime_checkable
class IndexedRun(Protocol):
    """A run that carries the index of its metrics' names, built with its plan
    (:class:`~ctxeval.Evaluation`): a name is looked up there, not built again."""

    @property
    def metric_names(self) -> MetricNames: ...
