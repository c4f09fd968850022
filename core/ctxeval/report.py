"""The files of a run's output folder: ``results.jsonl``, ``summary.json`` and ``report.html``."""

from __future__ import annotations

import html
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .evaluation import Evaluation
from .results import MetricResult, Status, Usage
from .writers import write_text

__all__ = ["DEFAULT_FORMATS", "summary_dict", "write_outputs", "write_report"]


def summary_dict(
    evaluation: Evaluation, *, extra: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Per metric: mean, n_ok, n_undefined, n_error, the 95% CI and its method, usage; usage
    totals. The numbers are :meth:`Evaluation.summary`'s."""
    metrics = {}
    for name, summary in evaluation.summary().items():
        entry = summary.to_dict()
        del entry["metric"]
        metrics[name] = entry
    out: dict[str, Any] = {"metrics": metrics, "usage": evaluation.usage.to_dict()}
    out.update(extra or {})
    return out


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
    from .registry import default_registry

    registry = default_registry()
    writers = [registry.get_writer(name) for name in dict.fromkeys((*DEFAULT_FORMATS, *formats))]
    target = Path(folder)
    target.mkdir(parents=True, exist_ok=True)
    if summary is None:
        summary = summary_dict(evaluation)
    paths = {w.name: w.write(evaluation, summary, target, title=title) for w in writers}
    paths.update(results=paths["jsonl"], report=paths["html"])
    return paths


def write_report(
    evaluation: Evaluation, path: str | os.PathLike[str], *, title: str = "ctxeval report"
) -> Path:
    """Write only ``report.html``."""
    return write_text(Path(path), render_report(evaluation, summary_dict(evaluation), title=title))


# --- the HTML report -------------------------------------------------------------------------

_CSS = """
body{font:15px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1d2330;background:#f6f7fb}
header{background:#1f3a5f;color:#fff;padding:22px 36px}header h1{margin:0;font-size:24px}
header p{margin:4px 0 0;opacity:.85}main{padding:24px 36px;max-width:1200px}
h2{font-size:19px;margin:30px 0 10px}h3{font-size:16px;margin:18px 0 8px}
table{border-collapse:collapse;background:#fff;box-shadow:0 1px 3px #0002;border-radius:6px;overflow:hidden;width:100%}
th,td{padding:8px 12px;text-align:left;border-bottom:1px solid #e6e8ef;vertical-align:top}
th{background:#eef1f7;font-weight:600}th.num{text-align:right}td.num{text-align:right;font-variant-numeric:tabular-nums}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(260px,1fr));gap:14px}
.card{background:#fff;border-radius:6px;box-shadow:0 1px 3px #0002;padding:12px 14px}
.card h3{margin:0 0 6px;font-size:14px;overflow-wrap:anywhere}
.score-low{color:#b42318;font-weight:600}.score-mid{color:#b54708}.score-high{color:#067647}.muted{color:#667085;font-size:13px}
.bar{fill:#3f72af}.axis{stroke:#98a2b3}.label{font-size:10px;fill:#667085}
.status-ok{color:#067647}.status-undefined{color:#b54708}.status-error{color:#b42318;font-weight:600}
code{background:#eef1f7;padding:1px 4px;border-radius:3px;font-size:13px}
ul.evidence{margin:4px 0;padding-left:18px}.miss{color:#b42318}.hit{color:#067647}
"""


def _fmt(value: float | None, digits: int = 3) -> str:
    return (
        "—"
        if value is None or (isinstance(value, float) and math.isnan(value))
        else f"{value:.{digits}f}"
    )


def _histogram(scores: Sequence[float], bins: int = 10) -> str:
    counts = [0] * bins
    for score in scores:
        counts[min(bins - 1, int(score * bins))] += 1
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


def _evidence(row: MetricResult) -> str:
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
                f"similarity {_fmt(verdict.get('similarity'), 2)}"
                if "similarity" in verdict
                else ""
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
        items.append(html.escape(", ".join(f"{k}: {v}" for k, v in d.items())[:300]))
    return '<ul class="evidence">' + "".join(f"<li>{i}</li>" for i in items) + "</ul>"


def _score_class(row: MetricResult) -> str:
    if row.score is None:
        return f"status-{row.status.value}"
    return "score-low" if row.score < 0.5 else "score-mid" if row.score < 0.8 else "score-high"


def render_report(evaluation: Evaluation, summary: Mapping[str, Any], *, title: str) -> str:
    """The report as one self-contained HTML page (no scripts, no outside resources)."""
    usage = Usage.from_dict(summary.get("usage", {}))
    rows = []
    cards = []
    worst = []
    for name in evaluation.metrics:
        info = summary["metrics"][name]
        ci = info["ci95"]
        rows.append(
            f"<tr><td><code>{html.escape(name)}</code></td><td class='num'>{_fmt(info['mean'])}</td>"
            f"<td class='num'>{'—' if ci is None else f'{ci[0]:.3f} – {ci[1]:.3f}'}</td>"
            f"<td class='num'>{info['n_ok']}</td><td class='num'>{info['n_undefined']}</td>"
            f"<td class='num'>{info['n_error']}</td></tr>"
        )
        scores = [s for s in evaluation.scores(name) if s is not None]
        cards.append(
            f"<div class='card'><h3>{html.escape(name)}</h3>{_histogram(scores)}"
            f"<div class='muted'>{len(scores)} scores · mean {_fmt(info['mean'])}</div></div>"
        )
        ranked = sorted(
            evaluation.rows(name),
            key=lambda r: (r.status is Status.OK, r.status is Status.UNDEFINED, r.score or 0.0),
        )
        shown = [
            r
            for r in ranked
            if r.status is Status.ERROR or (r.status is Status.OK and (r.score or 0) < 1.0)
        ][:5]
        if shown:
            body = "".join(
                f"<tr><td><code>{html.escape(r.sample_id)}</code></td>"
                f"<td class='num {_score_class(r)}'>{_fmt(r.score) if r.score is not None else r.status.value}</td>"
                f"<td>{_evidence(r)}</td></tr>"
                for r in shown
            )
            worst.append(
                f"<h3><code>{html.escape(name)}</code></h3><table><tr><th>sample</th><th class='num'>score</th>"
                f"<th>evidence</th></tr>{body}</table>"
            )
    samples = len({r.sample_id for r in evaluation.results})
    cost = "unknown" if usage.cost_usd is None else f"${usage.cost_usd:.4f}"
    llm = (
        f"{usage.requests} LLM requests ({usage.cache_hits} from cache) · cost {cost}"
        if usage.requests or usage.cache_hits
        else "no LLM requests"
    )
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>{html.escape(title)}</title><style>{_CSS}</style></head>
<body><header><h1>{html.escape(title)}</h1>
<p>{samples} samples · {len(evaluation.metrics)} metrics · {len(evaluation.results)} rows · {llm}</p></header>
<main>
<h2>Summary</h2>
<table><tr><th>metric</th><th class="num">mean</th><th class="num">95% CI</th><th class="num">ok</th>
<th class="num">undefined</th><th class="num">error</th></tr>
{"".join(rows)}</table>
<p class="muted">Means are over <code>ok</code> rows; <code>undefined</code> rows (nothing to recall,
nothing retrieved) are counted apart, never as zero. Confidence intervals: percentile bootstrap.</p>
<h2>Score distributions</h2><div class="cards">{"".join(cards)}</div>
<h2>Worst samples, with their evidence</h2>
{"".join(worst) or "<p>Every row scored 1.0.</p>"}
</main></body></html>
"""
