"""The run folder: :func:`write_outputs` writes ``results.jsonl``, ``summary.json``,
``report.html`` (:data:`DEFAULT_FORMATS`) and the files of the writers a run asks for.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ctxeval._output.summary import summary_dict
from ctxeval._results.evaluation import Evaluation

__all__ = ["DEFAULT_FORMATS", "write_outputs"]


DEFAULT_FORMATS = ("jsonl", "summary", "html")
"""The writers every run folder gets: ``results.jsonl``, ``summary.json``, ``report.html``."""


def write_outputs(
    evaluation: Evaluation,
    folder: str | os.PathLike[str],
    *,
    title: str,
    summary: Mapping[str, Any] | None = None,
    formats: Sequence[str] = (),
) -> dict[str, Path]:
    """Write the run folder: ``results.jsonl``, ``summary.json``, ``report.html`` and the
    files of the writers named in ``formats`` (entry-point group ``ctxeval.writers``).

    ``summary`` is :func:`summary_dict`'s output when the caller has it already (its bootstrap
    intervals are not computed twice). Returns each file's path by writer name (the default
    three also as ``results``, ``summary`` and ``report``).
    """
    from ctxeval._plugins.registry import default_registry

    registry = default_registry()
    writers = [registry.get_writer(name) for name in dict.fromkeys((*DEFAULT_FORMATS, *formats))]
    target = Path(folder)
    if not target.exists():
        target.mkdir(parents=True, mode=0o700)  # a folder of the user's own is left as it is
    if summary is None:
        summary = summary_dict(evaluation)
    paths = {w.name: w.write(evaluation, summary, target, title=title) for w in writers}
    paths.update(results=paths["jsonl"], report=paths["html"])
    return paths
