"""What one row has spent so far: :class:`Meter`.

A :class:`~ctxeval._calls.context.RowContext` owns one; the
:class:`~ctxeval._calls.scheduler.Scheduler` counts each request and retry of the row's calls on
it, and the context adds the usage plugins report.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ctxeval._results.results import Usage

__all__ = ["ATTEMPT", "Meter", "request_not_sent"]

ATTEMPT: ContextVar[list[bool] | None] = ContextVar("ctxeval_attempt", default=None)
"""The attempt the running task makes: ``[sent]`` (set by the scheduler around each one)."""


def request_not_sent() -> None:
    """Say that the running attempt's request never left (its task was cancelled while the
    connection was being opened, before a byte was sent): a transport calls it as the
    cancellation goes through, and the scheduler then does not count the attempt in the row's
    ``usage.requests`` (the requests sent over the network). Outside an attempt: nothing."""
    attempt = ATTEMPT.get()
    if attempt is not None:
        attempt[0] = False


class Meter:
    """What one row has spent so far: requests, retries, and the usage plugins added."""

    __slots__ = ("extra", "requests", "retries")

    def __init__(self) -> None:
        self.requests = 0
        self.retries = 0
        self.extra: Usage | None = None
