"""The run's report: :func:`render_report`, one self-contained HTML page, and
:func:`write_report`, which writes it alone.

Its parts: the shared fragments (:mod:`ctxeval._output.fragments`), the judge's section
(:mod:`ctxeval._output.trust_section`), the explorer's data (:mod:`ctxeval._output.explorer`),
the CSS and script (asset files, :mod:`ctxeval._output.asset_files`).
"""

from __future__ import annotations

import html
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ctxeval._output.asset_files import asset

# imported here too for the importers of their old place (ctxeval.cli)
from ctxeval._output.comparison import render_comparison
from ctxeval._output.explorer import explorer_data
from ctxeval._output.files import write_text
from ctxeval._output.folder import DEFAULT_FORMATS, write_outputs
from ctxeval._output.fragments import evidence, fmt, histogram, score_class
from ctxeval._output.summary import summary_dict
from ctxeval._output.trust_section import trust_section
from ctxeval._results.evaluation import Evaluation
from ctxeval._results.results import Status, Usage

__all__ = [
    "DEFAULT_FORMATS",
    "render_comparison",
    "render_report",
    "summary_dict",
    "write_outputs",
    "write_report",
]


def write_report(
    evaluation: Evaluation, path: str | os.PathLike[str], *, title: str = "ctxeval report"
) -> Path:
    """Write only ``report.html``."""
    return write_text(Path(path), render_report(evaluation, summary_dict(evaluation), title=title))


def render_report(evaluation: Evaluation, summary: Mapping[str, Any], *, title: str) -> str:
    """The report as one self-contained HTML page (no outside resources): the summary, the
    score distributions, and every sample with its texts and each metric's evidence beside
    the chunk or reference item it concerns, to filter, sort and search (a script renders 50
    samples at a time; the view is kept in the address's ``#``, so a link reproduces it)."""
    usage = Usage.from_dict(summary.get("usage", {}))
    rows = []
    cards = []
    worst = []
    for name in evaluation.metrics:
        info = summary["metrics"][name]
        ci = info["ci95"]
        rows.append(
            f"<tr><td><code>{html.escape(name)}</code></td><td class='num'>{fmt(info['mean'])}</td>"
            f"<td class='num'>{'—' if ci is None else f'{ci[0]:.3f} – {ci[1]:.3f}'}</td>"
            f"<td class='num'>{info['n_ok']}</td><td class='num'>{info['n_undefined']}</td>"
            f"<td class='num'>{info['n_error']}</td></tr>"
        )
        scores = [s for s in evaluation.scores(name) if s is not None]
        cards.append(
            f"<div class='card'><h3>{html.escape(name)}</h3>{histogram(scores)}"
            f"<div class='muted'>{len(scores)} scores · mean {fmt(info['mean'])}</div></div>"
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
                f"<td class='num {score_class(r)}'>{fmt(r.score) if r.score is not None else r.status.value}</td>"
                f"<td>{evidence(r)}</td></tr>"
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
    explorer = explorer_data(evaluation)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>{html.escape(title)}</title><style>{asset("report.css")}{asset("explorer.css")}</style></head>
<body><header><h1>{html.escape(title)}</h1>
<p>{samples} samples · {len(evaluation.metrics)} metrics · {len(evaluation.results)} rows · {llm}</p></header>
<main>
<h2>Summary</h2>
<table><tr><th>metric</th><th class="num">mean</th><th class="num">95% CI</th><th class="num">ok</th>
<th class="num">undefined</th><th class="num">error</th></tr>
{"".join(rows)}</table>
<p class="muted">Means are over <code>ok</code> rows; <code>undefined</code> rows (nothing to recall,
nothing retrieved) are counted apart, never as zero. Confidence intervals: percentile bootstrap.</p>
{trust_section(summary)}
<h2>Score distributions</h2><div class="cards">{"".join(cards)}</div>
<h2>Every sample, with its evidence</h2>
{asset("toolbar.html")}
<noscript><h3>Worst samples, with their evidence</h3>{"".join(worst) or "<p>Every row scored 1.0.</p>"}</noscript>
<script id="ctxeval-data" type="application/json">{explorer}</script>
<script>{asset("explorer.js")}</script>
</main></body></html>
"""
