"""Who judged a run: the distinct judges named in its rows' ``details["provenance"]``.

``summary.json`` lists them per metric (model, endpoint, the model that answered, prompts,
temperature, output mode), and the report's header names them, with a warning when a judge is
ctxeval's scripted one (``ctxeval serve-judge``: word overlap, NOT A REAL JUDGE).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

import orjson

from ctxeval._results.results import LazyDetails, MetricResult

__all__ = ["MAX_JUDGES", "SCRIPTED_JUDGE", "SCRIPTED_WARNING", "JudgeLog", "is_scripted"]

SCRIPTED_JUDGE: Final = "scripted-judge"
"""The model name ``ctxeval serve-judge`` answers as (its ``/v1/models`` lists only it)."""

SCRIPTED_WARNING: Final = (
    "NOT A REAL JUDGE: rows of this run were judged by ctxeval serve-judge, which answers by "
    "word overlap with no model; their scores say nothing about the retrieval"
)
"""What every view of a run judged by the scripted judge says of it: the terminal,
``summary.json``, the report, ``print(evaluation)``, a notebook's table, a failed
:func:`~ctxeval.testing.assert_metric` and ``ctxeval view`` (#57)."""

MAX_JUDGES: Final = 8
"""Judges kept per metric (a run that names more lists these and counts the rest)."""


def is_scripted(judge: Mapping[str, Any]) -> bool:
    """Whether ``judge`` (one entry of a row's ``provenance["judges"]``) is the scripted judge
    of ``ctxeval serve-judge`` (by the model asked for or the model that answered)."""
    names = (judge.get("model"), judge.get("served_model"))
    return any(isinstance(n, str) and n.rsplit("/", 1)[-1] == SCRIPTED_JUDGE for n in names)


class JudgeLog:
    """The distinct judges of each metric, as rows are added (constant memory: at most
    :data:`MAX_JUDGES` per metric kept, the rest counted)."""

    def __init__(self) -> None:
        self._judges: dict[str, dict[bytes, dict[str, Any]]] = {}
        self._more: dict[str, int] = {}
        self._last: dict[str, Any] = {}  # per metric, the last provenance seen (mostly shared)

    def add(self, row: MetricResult) -> None:
        """Note the judges of ``row`` (nothing for a row with no provenance)."""
        details = row.details
        if isinstance(details, LazyDetails) or not details:
            return  # (evidence computed when read: a deterministic row's, never a judge's)
        provenance = details.get("provenance")
        if not isinstance(provenance, Mapping):
            return
        metric = row.metric or ""
        judges = provenance.get("judges")
        if not isinstance(judges, list) or self._last.get(metric) == judges:
            return
        self._last[metric] = judges
        known = self._judges.setdefault(metric, {})
        for judge in judges:
            if not isinstance(judge, Mapping):
                continue
            key = orjson.dumps(judge, option=orjson.OPT_SORT_KEYS, default=str)
            if key in known:
                continue
            if len(known) >= MAX_JUDGES:
                self._more[metric] = self._more.get(metric, 0) + 1
                continue
            known[key] = dict(judge)

    def extend(self, rows: Iterable[MetricResult]) -> None:
        for row in rows:
            self.add(row)

    def to_dict(self) -> dict[str, list[dict[str, Any]]]:
        """Per metric that has any, its judges (as its rows name them), first seen first."""
        return {metric: list(found.values()) for metric, found in self._judges.items() if found}

    @property
    def more(self) -> dict[str, int]:
        """Per metric, the judges not kept (beyond :data:`MAX_JUDGES`)."""
        return dict(self._more)

    @property
    def scripted(self) -> bool:
        """Whether any judge is the scripted one (``ctxeval serve-judge``)."""
        return any(is_scripted(j) for found in self._judges.values() for j in found.values())
