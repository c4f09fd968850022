"""Run files readable by their owner only: :func:`private_open`, :func:`write_text`.

Every file of a run folder holds the data and the judge's reasons, so the writers and the report
open them 0600 through here. A file is never written through a symbolic link ctxeval did not
make (one planted at a file's name is replaced, its target untouched), and a text file is
written whole or not at all: under a temporary name in the same folder, then renamed.
"""

from __future__ import annotations

import os
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["NOFOLLOW", "private_open", "write_text"]

NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
"""``open`` refuses a symbolic link at the name (where the system has the flag)."""


def private_open(path: Path, *, newline: str | None = None) -> IO[str]:
    """``path`` opened for writing text, readable by its owner only (0600): run files hold the
    data and the judge's reasons. A symbolic link at ``path`` is refused (OSError), never
    followed."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | NOFOLLOW, 0o600)
    os.fchmod(descriptor, 0o600)  # also when the file was there already
    # a lone surrogate a plugin let through is written as \ud800 text, never a crash
    return os.fdopen(descriptor, "w", encoding="utf-8", errors="backslashreplace", newline=newline)


def write_text(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` (UTF-8, 0600) whole or not at all: under a temporary name
    beside it, flushed to disk, renamed over ``path`` once written (a link at ``path`` is
    replaced, its target left as it was). On failure the temporary file is removed and
    ``path`` is as it was."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with private_open(temporary) as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())  # on disk before it takes the name
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return path
