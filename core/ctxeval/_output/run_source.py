"""A run folder as it is read back: its folder, results file, summary and data file
(:class:`RunSource`, :func:`run_source`); what the report rebuilt from a folder
(:func:`~ctxeval._output.rebuild.write_report`) and the viewer (``_view``) both read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

__all__ = ["RunSource", "data_candidates", "run_source"]


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
