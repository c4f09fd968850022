"""A run to show: its folder, results file and data file (:class:`RunSource`,
:func:`run_source`), and where the index of one run or two lives (:func:`index_location`).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["RunSource", "data_candidates", "index_location", "run_source"]

INDEX_NAME = "view-index.sqlite"


@dataclass(frozen=True)
class RunSource:
    """One run folder to show.

    Attributes:
        folder: the run folder (absolute).
        results: its ``results.jsonl``.
        data: the data file with the samples' texts, or None when it is unknown or missing.
        data_named: the data file the run names (``summary.json``'s ``data``), found or not.
        summary: ``summary.json`` as read (empty when missing or unreadable).
    """

    folder: Path
    results: Path
    data: Path | None
    data_named: str | None
    summary: dict[str, object]


def data_candidates(folder: Path, named: str) -> list[Path]:
    """Where the data file ``named`` (as ``summary.json`` gives it) may be, in order: as given
    (relative to the current directory), relative to the run folder's parent, relative to the
    run folder."""
    given = Path(named).expanduser()
    if given.is_absolute():
        return [given]
    return [given, folder.parent / given, folder / given]


def run_source(folder: Path, data: Path | None = None) -> RunSource:
    """The run in ``folder`` (which holds ``results.jsonl``), its data file ``data`` when
    given, else the one its ``summary.json`` names when it can be found (see
    :func:`data_candidates`)."""
    folder = folder.resolve()
    summary: dict[str, object] = {}
    try:
        loaded = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
        if isinstance(loaded, dict):
            summary = loaded
    except (OSError, ValueError):
        pass
    named = summary.get("data")
    named = named if isinstance(named, str) and named else None
    inside = summary.get("samples_file")  # the texts of a run written from memory (#57)
    if data is None and isinstance(inside, str) and inside and (folder / inside).is_file():
        data = folder / inside
    if data is None and named is not None:
        data = next((p for p in data_candidates(folder, named) if p.is_file()), None)
    return RunSource(
        folder=folder,
        results=folder / "results.jsonl",
        data=data.resolve() if data is not None else None,
        data_named=named,
        summary=summary,
    )


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
