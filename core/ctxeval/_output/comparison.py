"""The comparison page: runs side by side as one self-contained HTML page
(:func:`render_comparison`), for ``ctxeval compare``.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

from ctxeval._output.asset_files import asset
from ctxeval._output.explorer import explorer_json
from ctxeval._output.fragments import fmt, signed
from ctxeval._results.results import MetricResult

__all__ = ["render_comparison"]


def render_comparison(
    comparison: Mapping[str, Any],
    runs: Sequence[Mapping[tuple[str, str], MetricResult]],
    labels: Sequence[str],
    *,
    title: str = "ctxeval comparison",
    shown: int = 20,
) -> str:
    """Runs side by side as one self-contained page: the paired comparison (``comparison``,
    from ``ctxeval compare``), per metric and run the samples that got better or worse
    (largest changes first), and every sample with a chip per metric and run to filter, sort
    and search."""
    baseline = runs[0]
    folders = [comparison["baseline"], *comparison["runs"]]
    legend = "".join(
        f"<li><b>{html.escape(label)}</b> <code>{html.escape(folder)}</code></li>"
        for label, folder in zip(labels, folders, strict=True)
    )
    table = []
    changes = []
    for c in comparison["comparisons"]:
        label = labels[folders.index(c["run"])]
        ci = "—" if c["ci95_low"] is None else f"{c['ci95_low']:+.3f} – {c['ci95_high']:+.3f}"
        table.append(
            f"<tr><td><code>{html.escape(c['metric'])}</code></td><td>{label}</td>"
            f"<td class='num'>{c['n']}</td><td class='num'>{fmt(c['mean_a'])}</td>"
            f"<td class='num'>{fmt(c['mean_b'])}</td><td class='num'>{signed(c['difference'])}</td>"
            f"<td class='num'>{ci}</td><td class='num'>{fmt(c['p_randomization'])}</td>"
            f"<td class='num'>{fmt(c['p_holm'])}</td></tr>"
        )
        run = runs[folders.index(c["run"])]
        deltas = []
        for (sample_id, metric), row in baseline.items():
            other = run.get((sample_id, metric))
            if metric != c["metric"] or row.score is None or other is None or other.score is None:
                continue
            if other.score != row.score:
                deltas.append((other.score - row.score, sample_id, row.score, other.score))
        better = sorted((d for d in deltas if d[0] > 0), key=lambda d: -d[0])
        worse = sorted((d for d in deltas if d[0] < 0), key=lambda d: d[0])

        def listing(items: list[Any], css: str, label: str = label) -> str:
            if not items:
                return "<p class='muted'>none</p>"
            body = "".join(
                f"<tr><td><code>{html.escape(sid)}</code></td><td class='num'>{a:.3f}</td>"
                f"<td class='num'>{b:.3f}</td><td class='num {css}'>{d:+.3f}</td></tr>"
                for d, sid, a, b in items[:shown]
            )
            more = (
                f"<p class='muted'>and {len(items) - shown} more</p>" if len(items) > shown else ""
            )
            return f"<table><tr><th>sample</th><th class='num'>A</th><th class='num'>{label}</th><th class='num'>change</th></tr>{body}</table>{more}"

        heading = f"<h3><code>{html.escape(c['metric'])}</code>: {label} against A</h3>"
        if not deltas:
            changes.append(f"{heading}<p class='muted'>no sample changed ({c['n']} compared)</p>")
            continue
        changes.append(
            f"{heading}"
            f"<p>{len(better)} better, {len(worse)} worse, {c['n'] - len(deltas)} unchanged</p>"
            f"<div class='cards'><div class='card'><h3>better</h3>{listing(better, 'score-high')}</div>"
            f"<div class='card'><h3>worse</h3>{listing(worse, 'score-low')}</div></div>"
        )
    names = [f"{metric} [{label}]" for metric in dict.fromkeys(m for _, m in baseline)
             for label in labels]  # fmt: skip
    named = (
        (f"{row.metric} [{label}]", row)
        for label, run in zip(labels, runs, strict=True)
        for row in run.values()
    )
    data = explorer_json(named, names, {})
    missing = "".join(
        f"<p class='muted'><code>{html.escape(m)}</code> is missing from "
        f"{html.escape(', '.join(lacking))}</p>"
        for m, lacking in comparison["missing"].items()
    )
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>{html.escape(title)}</title><style>{asset("report.css")}{asset("explorer.css")}</style></head>
<body><header><h1>{html.escape(title)}</h1><p>{len(runs)} runs, the first the baseline A</p></header>
<main><ul>{legend}</ul>
<h2>Paired comparison</h2>
<table><tr><th>metric</th><th>run</th><th class="num">n</th><th class="num">A</th><th class="num">B</th>
<th class="num">change</th><th class="num">95% CI</th><th class="num">p</th><th class="num">Holm</th></tr>{"".join(table)}</table>
<p class="muted">{html.escape(comparison["method"])}.</p>{missing}
<h2>Which samples got better or worse</h2>{"".join(changes)}
<h2>Every sample, run by run</h2>
{asset("toolbar.html")}
<script id="ctxeval-data" type="application/json">{data}</script>
<script>{asset("explorer.js")}</script>
</main></body></html>
"""
