"""A :class:`ctxeval.MetricResult` translated for a host, in the terms every host shares.

* ``ok``: the score, a rationale (the row's reason, else a one-line account of its evidence),
  ``passed`` when a threshold is given (``score >= threshold``, ctxeval's one threshold rule);
* ``undefined``: **not scored**, never 0. ``score`` is None and ``not_scored`` holds the
  reason (each host spells "not scored" its own way: MLflow an assessment error with code
  ``CTXEVAL_UNDEFINED``, DeepEval the metric's ``error``);
* ``error``: ``error`` holds the reason.

The evidence goes to ``metadata``: the per-chunk verdicts (``ctxeval.verdicts``), the judge's
provenance (``ctxeval.provenance``), the usage (``ctxeval.usage``) and the whole details
(``ctxeval.details``), all plain JSON values.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from ctxeval import MetricResult, Status

__all__ = [
    "ERROR_CODE",
    "UNDEFINED_CODE",
    "HostResult",
    "as_json",
    "judge_model",
    "rationale_of",
    "translate",
]

UNDEFINED_CODE: Final = "CTXEVAL_UNDEFINED"
"""The error code of a row ctxeval could not score (``undefined``): not a failure, not 0."""
ERROR_CODE: Final = "CTXEVAL_ERROR"
"""The error code of a row whose scoring failed (``error``)."""

_EVIDENCE_KEYS: Final = ("verdicts", "chunks", "statements")
_MAX_RATIONALE_ITEMS: Final = 20


@dataclass(frozen=True)
class HostResult:
    """One metric's result for one row, host-neutral (the adapters map it onto their types)."""

    metric: str
    status: str
    """``ok``, ``undefined`` or ``error``, as ctxeval's :class:`ctxeval.Status`."""
    score: float | None
    passed: bool | None
    """``score >= threshold`` when a threshold was given and the row is ``ok``; else None
    (an undefined or error row passes nothing, fails nothing: the host says not scored)."""
    rationale: str | None
    error: str | None
    """Why the row has no score (undefined or error), else None."""
    error_code: str | None
    llm_judged: bool
    judge: str | None
    """The judge model named in the row's provenance, if any."""
    metadata: dict[str, Any] = field(default_factory=dict)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None


def as_json(value: Any) -> str:
    """``value`` as compact JSON (what a host that stores strings only gets)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def judge_model(details: Mapping[str, Any]) -> str | None:
    """The first judge model named in ``details["provenance"]``, or None."""
    provenance = details.get("provenance")
    if not isinstance(provenance, Mapping):
        return None
    for judge in provenance.get("judges") or ():
        if isinstance(judge, Mapping) and isinstance(judge.get("model"), str):
            return str(judge["model"])
    return None


def _item(entry: Mapping[str, Any]) -> str:
    index = entry.get("index", "?")
    if "verdict" in entry:
        said = f"chunk {index}: {'yes' if entry['verdict'] else 'no'}"
    elif "grade" in entry:
        said = f"chunk {index}: grade {entry['grade']}"
    elif "matched" in entry:
        said = f"item {index}: {'matched' if entry['matched'] else 'not matched'}"
        if isinstance(entry.get("similarity"), (int, float)):
            said += f" ({entry['similarity']:.2f})"
    elif "attributed" in entry:
        said = f"statement {index}: {'attributed' if entry['attributed'] else 'not attributed'}"
    else:
        return as_json(entry)
    reason = entry.get("reason")
    return f"{said} ({reason})" if isinstance(reason, str) and reason else said


def rationale_of(result: MetricResult) -> str | None:
    """The row's reason, else a one-line account of its evidence (per-item verdicts, the
    relevant and missing IDs), else None."""
    if result.reason:
        return result.reason
    details = result.details or {}
    for key in _EVIDENCE_KEYS:
        items = details.get(key)
        if isinstance(items, Sequence) and items and all(isinstance(i, Mapping) for i in items):
            shown = [_item(i) for i in items[:_MAX_RATIONALE_ITEMS]]
            more = len(items) - len(shown)
            return "; ".join(shown) + (f"; and {more} more" if more > 0 else "")
    parts = [
        f"{key}: {', '.join(map(str, details[key])) or 'none'}"
        for key in ("relevant", "missing", "relevant_ranks")
        if isinstance(details.get(key), Sequence) and not isinstance(details.get(key), str)
    ]
    if "first_relevant_rank" in details:
        parts.append(f"first relevant rank: {details['first_relevant_rank']}")
    return "; ".join(parts) or None


def translate(
    result: MetricResult, *, threshold: float | None = None, llm_judged: bool | None = None
) -> HostResult:
    """``result`` for a host. ``llm_judged`` None: decided by the row (a judge's provenance)."""
    details = result.to_dict()["details"] or {}
    judge = judge_model(details)
    judged = bool(judge) if llm_judged is None else llm_judged
    metadata: dict[str, Any] = {
        "ctxeval.metric": result.metric,
        "ctxeval.status": str(result.status),
    }
    for key in _EVIDENCE_KEYS:
        if key in details:
            metadata["ctxeval.verdicts"] = details[key]
            break
    if "provenance" in details:
        metadata["ctxeval.provenance"] = details["provenance"]
    if not result.usage.is_zero:
        metadata["ctxeval.usage"] = result.usage.to_dict()
    metadata["ctxeval.details"] = details
    usage = result.usage
    common: dict[str, Any] = {
        "metric": result.metric,
        "status": str(result.status),
        "llm_judged": judged,
        "judge": judge,
        "metadata": metadata,
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "cost_usd": usage.cost_usd,
    }
    if result.status is Status.OK:
        score = float(result.score if result.score is not None else 0.0)
        passed = None if threshold is None else score >= threshold
        if threshold is not None:
            metadata["threshold"] = threshold
            metadata["score"] = score
        return HostResult(
            score=score, passed=passed, rationale=rationale_of(result), error=None,
            error_code=None, **common,
        )  # fmt: skip
    undefined = result.status is Status.UNDEFINED
    reason = result.reason or "no reason given"
    return HostResult(
        score=None,
        passed=None,
        rationale=reason,
        error=f"not scored (undefined): {reason}" if undefined else reason,
        error_code=UNDEFINED_CODE if undefined else ERROR_CODE,
        **common,
    )
