"""What one row has spent so far: :class:`Meter`.

A :class:`~ctxeval._calls.context.RowContext` owns one; the
:class:`~ctxeval._calls.scheduler.Scheduler` counts each request and retry of the row's calls on
it, and the context adds the usage plugins report.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ctxeval._results.results import Usage

__all__ = ["Meter"]


class Meter:
    """What one row has spent so far: requests, retries, and the usage plugins added."""

    __slots__ = ("extra", "requests", "retries")

    def __init__(self) -> None:
        self.requests = 0
        self.retries = 0
        self.extra: Usage | None = None
