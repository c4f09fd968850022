"""Pausing Python's cycle collector while many long-lived objects are made.

Building a large run's samples or rows allocates objects that all stay alive; with the
collector on, each collection walks them again (a full collection walks every row so far), so
reading 200 000 rows cost five times what building them did. Reference counting still frees
what it can meanwhile; cycles made meanwhile are collected when the collector resumes, as
:mod:`timeit` does around what it measures.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["collector_paused"]


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cycle collector for the ``with`` block; it is left off if it was off.

    A program that turns the collector off for good from another thread *during* the block
    finds it on again afterwards.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
