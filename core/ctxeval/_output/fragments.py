"""HTML fragments the report and the comparison share: numbers as shown (:func:`fmt`,
:func:`signed`), a score's colour class, a histogram of scores as SVG, and a row's evidence
as a list.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from typing import Any

from ctxeval._data.text import brief as brief_text
from ctxeval._results.results import MetricResult, Status

__all__ = ["brief", "evidence", "fmt", "histogram", "score_class", "signed"]


def fmt(value: float | None, digits: int = 3) -> str:
    return (
        "—"
        if value is None or (isinstance(value, float) and math.isnan(value))
        else f"{value:.{digits}f}"
    )


def signed(value: float | None) -> str:
    return "—" if value is None else f"{value:+.3f}"


def histogram(scores: Sequence[float] | Any, bins: int = 10) -> str:
    """An SVG histogram of ``scores`` (floats in [0, 1]: a list or a numpy array) in ``bins``
    bins, 1.0 in the last."""
    import numpy as np

    values = np.asarray(scores, dtype=np.float64)
    index = np.minimum((values * bins).astype(np.int64), bins - 1)
    counts = np.bincount(index, minlength=bins).tolist() if len(values) else [0] * bins
    width, height, pad = 240, 110, 18
    top = max(counts) or 1
    bar = (width - 2 * pad) / bins
    parts = [
        f'<svg width="{width}" height="{height + 16}" role="img" aria-label="score histogram">'
    ]
    for i, count in enumerate(counts):
        h = (height - pad) * count / top
        x = pad + i * bar
        parts.append(
            f'<rect class="bar" x="{x + 1:.1f}" y="{height - h:.1f}" width="{bar - 2:.1f}" height="{h:.1f}">'
            f"<title>{i / bins:.1f}–{(i + 1) / bins:.1f}: {count}</title></rect>"
        )
    parts.append(f'<line class="axis" x1="{pad}" y1="{height}" x2="{width - pad}" y2="{height}"/>')
    for tick in (0, 0.5, 1):
        x = pad + tick * (width - 2 * pad)
        parts.append(
            f'<text class="label" x="{x:.1f}" y="{height + 13}" text-anchor="middle">{tick:g}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def evidence(row: MetricResult) -> str:
    d = row.details
    items: list[str] = []
    if row.status is not Status.OK:
        return f'<span class="status-{row.status.value}">{html.escape(row.reason or "")}</span>'
    if "missing" in d and isinstance(d["missing"], list):
        if d["missing"]:
            items.append(
                "missing: "
                + ", ".join(
                    f'<span class="miss">{html.escape(str(m))}</span>' for m in d["missing"][:12]
                )
            )
        if d.get("found"):
            items.append(
                "found: "
                + ", ".join(
                    f'<span class="hit">{html.escape(str(m))}</span>' for m in d["found"][:12]
                )
            )
    if d.get("irrelevant"):
        items.append(
            "irrelevant IDs: " + ", ".join(html.escape(str(i)) for i in d["irrelevant"][:12])
        )
    for verdict in d.get("verdicts", [])[:8]:
        if isinstance(verdict, Mapping):
            good = verdict.get("matched", verdict.get("verdict")) in (True, 1)
            cls = "hit" if good else "miss"
            note = verdict.get("reason") or (
                f"similarity {fmt(verdict.get('similarity'), 2)}" if "similarity" in verdict else ""
            )
            items.append(
                f'chunk {verdict.get("index")}: <span class="{cls}">{"relevant" if good else "not relevant"}</span> {html.escape(str(note))}'
            )
    for statement in d.get("statements", [])[:8]:
        if isinstance(statement, Mapping) and not statement.get("attributed"):
            items.append(
                f'unattributed: <span class="miss">{html.escape(str(statement.get("statement")))}</span>'
            )
    if "first_relevant_rank" in d:
        rank = d["first_relevant_rank"]
        items.append("first relevant ID: " + ("not retrieved" if rank is None else f"rank {rank}"))
    if "top_k" in d:
        ranks = d.get("relevant_ranks") or []
        top = ", ".join(html.escape(str(i)) for i in d["top_k"]) or "nothing"
        items.append(f"top {d.get('k')}: {top}")
        items.append(
            "relevant at ranks: "
            + (", ".join(map(str, ranks)) if ranks else '<span class="miss">none</span>')
        )
    if not items:
        items.append(html.escape(", ".join(f"{k}: {brief(v)}" for k, v in d.items())[:300]))
    return '<ul class="evidence">' + "".join(f"<li>{i}</li>" for i in items) + "</ul>"


def brief(value: Any) -> str:
    """``value`` shortened for a page (safe on deep nesting): strings as they are."""
    return value if isinstance(value, str) else brief_text(value, 120)


def score_class(row: MetricResult) -> str:
    if row.score is None:
        return f"status-{row.status.value}"
    return "score-low" if row.score < 0.5 else "score-mid" if row.score < 0.8 else "score-high"
