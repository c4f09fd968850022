"""Where the index of one run or two lives (:func:`index_location`); the runs themselves are
read by :func:`ctxeval._output.run_source.run_source`.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path

from ctxeval._output.run_source import RunSource

__all__ = ["index_location"]

INDEX_NAME = "view-index.sqlite"


def _digest(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:20]


def _cache_folder() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ctxeval" / "view"


def index_location(runs: Sequence[RunSource]) -> Path:
    """Where the index of ``runs`` (one run, or two side by side) lives: in the first run's
    folder when it is writable (``view-index.sqlite``; ``view-index-vs-HASH.sqlite`` for a
    pair), else in ``$XDG_CACHE_HOME/ctxeval/view/`` (default ``~/.cache``), named by a hash of
    the folders' absolute paths."""
    first = runs[0].folder
    others = [str(r.folder) for r in runs[1:]]
    if os.access(first, os.W_OK):
        name = INDEX_NAME if not others else f"view-index-vs-{_digest(*others)[:12]}.sqlite"
        return first / name
    return _cache_folder() / f"{_digest(str(first), *others)}.sqlite"
