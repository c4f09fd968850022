"""Which async library runs the calling code: :func:`current_async_library`.

anyio no longer depends on ``sniffio`` (4.x dropped it), so ctxeval cannot count on it being
installed. This module asks the two libraries ctxeval runs on directly: asyncio for a running
loop in this thread, and trio (only when trio is already imported: a program that runs trio has
imported it) for a run in progress.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Literal

__all__ = ["AsyncLibrary", "current_async_library"]

AsyncLibrary = Literal["asyncio", "trio"]


def current_async_library() -> AsyncLibrary | None:
    """``"asyncio"`` or ``"trio"``: the async library running in this thread, or None when
    none is (plain synchronous code, or a worker thread without a loop of its own).

    Needs neither sniffio nor trio: trio is asked only when a program has imported it."""
    if asyncio._get_running_loop() is not None:
        return "asyncio"
    trio = sys.modules.get("trio")
    if trio is None:
        return None
    try:  # (in every trio release; in_trio_run() only since 0.23)
        trio.lowlevel.current_trio_token()
    except RuntimeError:
        return None
    return "trio"
