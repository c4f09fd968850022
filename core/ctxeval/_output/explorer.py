"""The explorer of a page (every sample with each metric's rows, to filter, sort and search):
its data as JSON safe inside a ``<script>`` element (:func:`explorer_data`,
:func:`explorer_json`) and the address of one sample's view (:func:`sample_view`).
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Iterable, Mapping
from typing import Any

from ctxeval._results.evaluation import RunResults
from ctxeval._results.results import MetricResult

__all__ = ["SAMPLE_TEXTS", "explorer_data", "explorer_json", "sample_text", "sample_view"]


SAMPLE_TEXTS = (
    "user_input", "response", "reference", "retrieved_contexts", "reference_contexts",
    "retrieved_context_ids", "reference_context_ids", "retrieval_steps",
)  # fmt: skip
"""The fields of a sample the explorer shows (:func:`sample_text` gives each as JSON)."""


def sample_text(sample: Any, name: str) -> Any:
    """The field ``name`` of ``sample`` as the explorer's JSON holds it: a text, a list (of
    texts or IDs), the steps of a search as a list of objects (their ``query``,
    ``retrieved_context_ids``, ``retrieved_contexts``), or None."""
    value = getattr(sample, name)
    if name == "retrieval_steps" and value is not None:
        return [step if isinstance(step, dict) else step.to_dict() for step in value]
    return list(value) if isinstance(value, tuple) else value


def step_words(steps: Iterable[Mapping[str, Any]]) -> list[str]:
    """The texts of ``steps`` (as :func:`sample_text` gives them) that a search finds."""
    words: list[str] = []
    for step in steps:
        if step.get("query"):
            words.append(step["query"])
        words.extend(step.get("retrieved_context_ids") or ())
        words.extend(step.get("retrieved_contexts") or ())
    return words


def explorer_data(evaluation: RunResults) -> str:
    """The samples and rows the explorer shows, as JSON safe inside a ``<script>`` element
    (every ``<`` escaped, so no text can close it)."""
    named = ((row.metric, row) for row in evaluation.results)
    return explorer_json(named, list(evaluation.metrics), evaluation.samples)


def explorer_json(
    named: Iterable[tuple[str, MetricResult]], metrics: list[str], known: Mapping[str, Any]
) -> str:
    """The explorer's JSON of ``(column name, row)`` pairs (the name a chip shows), with the
    texts of the ``known`` samples."""
    rows: dict[str, dict[str, Any]] = {}
    for name, row in named:
        rows.setdefault(row.sample_id, {})[name] = {
            "status": row.status.value,
            "score": row.score,
            "reason": row.reason,
            "details": row.to_dict()["details"],  # (safe on what JSON cannot hold)
        }
    samples = []
    for sample_id in rows:
        entry: dict[str, Any] = {"id": sample_id}
        sample = known.get(sample_id)
        if sample is not None:
            for name in SAMPLE_TEXTS:
                value = sample_text(sample, name)
                if value is not None:
                    entry[name] = value
        samples.append(entry)
    data = {"metrics": metrics, "samples": samples, "rows": rows}
    text = json.dumps(data, ensure_ascii=False, default=repr)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a plugin's lone surrogate: escape everything instead
        text = json.dumps(data, ensure_ascii=True, default=repr)
    return text.replace("<", "\\u003c")


def sample_view(sample_id: str, metric: str) -> str:
    """The explorer's view (the address's ``#``) of one sample alone, opened, with
    ``metric``'s rows."""
    return urllib.parse.urlencode({"metric": metric, "id": sample_id, "open": sample_id})
