"""What people should label: :func:`label_sheet`, every judged item of a random draw of
samples, one record per item, the label left empty (a filled sheet is a labels file): ``label``
(0/1) for a judge that says yes or no, ``grade`` (0-3) for one that grades
(``context_relevance``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ctxeval._errors import ConfigError
from ctxeval._judge.evidence import details_of
from ctxeval._judge.graded import judge_grades
from ctxeval._judge.run import JudgedRun
from ctxeval._results.results import MetricResult, Status

__all__ = ["label_sheet"]


def _item_texts(row: MetricResult, sample: Any) -> list[str | None]:
    """The text of each item the row's judge judged, in ``flags`` order, where it is known:
    the statements or entities the details list, else (for a formula over the retrieved
    items) the sample's retrieved contexts."""
    details = details_of(row)
    grades = judge_grades(details)
    if "flags" not in details and grades is not None:  # a grading judge: the chunks
        return _retrieved(sample, len(grades))
    flags = details.get("flags") or []
    statements = details.get("statements")
    if isinstance(statements, list) and len(statements) == len(flags):
        return [_text(s.get("statement") if isinstance(s, Mapping) else s) for s in statements]
    entities = details.get("reference_entities")
    if isinstance(entities, list) and len(entities) == len(flags):
        return [_text(e) for e in entities]
    if "n_reference" in details:
        return _retrieved(sample, len(flags))
    return [None] * len(flags)


def _retrieved(sample: Any, count: int) -> list[str | None]:
    """The first ``count`` retrieved contexts of ``sample``, None where not known."""
    contexts = getattr(sample, "retrieved_contexts", None) if sample is not None else None
    contexts = contexts or []
    return [_text(contexts[i]) if i < len(contexts) else None for i in range(count)]


def _graded(row: MetricResult) -> bool:
    """Whether the row's judge graded its items (0-3) rather than saying yes or no."""
    details = details_of(row)
    return "flags" not in details and judge_grades(details) is not None


def _text(value: Any) -> str | None:
    """An item's text as the sheet shows it (None, not ``"None"``, where there is none)."""
    return None if value is None else str(value)


def label_sheet(
    evaluation: JudgedRun,
    metric: str,
    *,
    samples: Mapping[str, Any] | None = None,
    n: int = 150,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """A sheet for people to fill in: every judged item of ``n`` samples drawn at random
    (seeded) among the metric's judged ``ok`` rows, one record per item, ``label`` null.

    Each record has ``sample_id``, ``metric``, ``index``, ``label`` (None, to fill with 0 or
    1; ``grade`` instead, to fill with 0 to 3, for a judge that grades), and to help the
    person: ``item`` (the chunk, statement or entity judged; None where the text is not
    known), ``question``, ``reference`` and, for precision without reference, ``response``.
    The judge's own verdict is left out, so as not to sway the person. A filled sheet is a
    labels file (:meth:`ctxeval.Labels.load`).

    Args:
        samples: the samples by id (for the chunks' texts and the questions); by default those
            the evaluation kept.

    Raises:
        ConfigError: the run has no such metric, or no judged row for it.
    """
    import random

    rows = [
        r
        for r in evaluation.rows(metric)
        if r.status is Status.OK and (isinstance(details_of(r).get("flags"), list) or _graded(r))
    ]
    if not rows:
        raise ConfigError(f"{metric}: no judged ok row to label (are its rows LLM-judged?)")
    known = samples if samples is not None else evaluation.samples
    drawn = random.Random(seed).sample(rows, min(n, len(rows)))
    sheet: list[dict[str, Any]] = []
    for row in drawn:
        sample = known.get(row.sample_id)
        context = {
            key: getattr(sample, key, None)
            for key in ("user_input", "reference", "response")
            if sample is not None and getattr(sample, key, None)
        }
        for index, text in enumerate(_item_texts(row, sample)):
            sheet.append(
                {
                    "sample_id": row.sample_id,
                    "metric": metric,
                    "index": index,
                    "item": text,
                    **{("question" if k == "user_input" else k): v for k, v in context.items()},
                    ("grade" if _graded(row) else "label"): None,
                }
            )
    return sheet
