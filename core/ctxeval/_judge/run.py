"""What the judge reports read of a run: the :class:`JudgedRun` protocol.

:class:`~ctxeval.Evaluation` is one; typing against this protocol keeps :mod:`ctxeval._judge`
below :mod:`ctxeval._results.evaluation`, which calls down into it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from ctxeval._results.results import MetricResult

__all__ = ["JudgedRun"]


class JudgedRun(Protocol):
    """A run's rows by metric, their summaries, and the samples kept."""

    @property
    def metrics(self) -> Sequence[str]: ...

    @property
    def samples(self) -> Mapping[str, Any]: ...

    def rows(self, metric: str) -> Sequence[MetricResult]: ...

    def judged_rows(self, metric: str) -> Sequence[MetricResult]: ...

    def summary(self) -> Mapping[str, Any]: ...
