"""Run files readable by their owner only: :func:`private_open`, :func:`write_text`.

Every file of a run folder holds the data and the judge's reasons, so the writers and the report
open them 0600 through here.
"""

from __future__ import annotations

import os
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["private_open", "write_text"]


def private_open(path: Path, *, newline: str | None = None) -> IO[str]:
    """``path`` opened for writing text, readable by its owner only (0600): run files hold the
    data and the judge's reasons."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(descriptor, 0o600)  # also when the file was there already
    # a lone surrogate a plugin let through is written as \ud800 text, never a crash
    return os.fdopen(descriptor, "w", encoding="utf-8", errors="backslashreplace", newline=newline)


def write_text(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` (UTF-8, 0600)."""
    with private_open(path) as handle:
        handle.write(text)
    return path
