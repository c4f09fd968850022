"""The run's report: one self-contained HTML page, at most a few megabytes whatever the run's
size (:func:`render_page`), from the numbers of the run and the samples chosen to show in full
(:mod:`ctxeval._output.selection`); :func:`render_report` makes it from
an :class:`~ctxeval.Evaluation`.

Its parts: the shared fragments (:mod:`ctxeval._output.fragments`), the judge's section
(:mod:`ctxeval._output.trust_section`), the explorer's data (:mod:`ctxeval._output.explorer`),
the CSS and script (asset files, :mod:`ctxeval._output.asset_files`).
"""

from __future__ import annotations

import html
import urllib.parse
from collections.abc import Callable, Collection, Mapping, Sequence
from types import SimpleNamespace
from typing import Any

from ctxeval._data.sample import Sample
from ctxeval._output.asset_files import asset

# imported here too for the importers of their old place (ctxeval.cli)
from ctxeval._output.comparison import render_comparison
from ctxeval._output.explorer import SAMPLE_TEXTS, explorer_json, sample_text
from ctxeval._output.fragments import evidence, fmt, histogram, score_class
from ctxeval._output.selection import TAGS, ReportSelection, Shown
from ctxeval._output.summary import summary_dict
from ctxeval._output.trust_section import trust_section
from ctxeval._results.columns import sample_of
from ctxeval._results.evaluation import RunResults
from ctxeval._results.results import MetricResult, Status, Usage

__all__ = [
    "SampleLookup",
    "render_comparison",
    "render_page",
    "render_report",
    "summary_dict",
]

SampleLookup = Callable[[Collection[str]], Mapping[str, Sample]]
"""Finds the samples of some ids (the data file read again): the texts of the samples a report
shows whose rows came without them."""


def render_report(evaluation: RunResults, summary: Mapping[str, Any], *, title: str) -> str:
    """The report of ``evaluation`` (see :func:`render_page`)."""
    selection = ReportSelection(evaluation.metrics)
    for part in evaluation.parts:
        selection.add(part)
    known = evaluation.samples
    return render_page(
        selection,
        summary,
        title=title,
        scores=lambda metric: [s for s in evaluation.scores(metric) if s is not None],
        lookup=lambda ids: {i: known[i] for i in ids if i in known},
    )


def render_page(
    selection: ReportSelection,
    summary: Mapping[str, Any],
    *,
    title: str,
    scores: Callable[[str], Sequence[float] | Any],
    lookup: SampleLookup | None = None,
    folder: str | None = None,
) -> str:
    """The report as one self-contained HTML page (no outside resources): the summary, the
    score distributions (``scores``: a metric's ``ok`` scores), and the samples of
    ``selection`` with their texts and each metric's evidence beside the chunk or reference
    item it concerns, to filter, sort and search (a script renders 50 samples at a time; the
    view is kept in the address's ``#``, so a link reproduces it). When the selection leaves
    samples out, the page says how many, why the others are shown, and how to see them all
    (``ctxeval view FOLDER``).

    ``lookup`` finds the texts of shown samples whose rows came without them."""
    usage = Usage.from_dict(summary.get("usage", {}))
    metrics = selection.metrics
    shown = selection.shown
    samples = _texts(shown, lookup)
    rows = []
    cards = []
    worst = []
    for name in metrics:
        info = summary["metrics"][name]
        ci = info["ci95"]
        rows.append(
            f"<tr><td><code>{html.escape(name)}</code></td><td class='num'>{fmt(info['mean'])}</td>"
            f"<td class='num'>{'—' if ci is None else f'{ci[0]:.3f} – {ci[1]:.3f}'}</td>"
            f"<td class='num'>{info['n_ok']}</td><td class='num'>{info['n_undefined']}</td>"
            f"<td class='num'>{info['n_error']}</td></tr>"
        )
        values = scores(name)
        cards.append(
            f"<div class='card'><h3>{html.escape(name)}</h3>{histogram(values)}"
            f"<div class='muted'>{len(values)} scores · mean {fmt(info['mean'])}</div></div>"
        )
        table = _worst_table(name, shown)
        if table:
            worst.append(table)
    cost = "unknown" if usage.cost_usd is None else f"${usage.cost_usd:.4f}"
    llm = (
        f"{usage.requests} LLM requests ({usage.cache_hits} from cache) · cost {cost}"
        if usage.requests or usage.cache_hits
        else "no LLM requests"
    )
    explorer, shown, cut = _fitted(shown, list(metrics), samples)
    heading = (
        "<h2>Every sample, with its evidence</h2>"
        if selection.complete and len(shown) == selection.samples
        else _left_out(selection, shown, folder)
    )
    if cut is not None:
        heading += (
            f"<p class='muted'>Texts longer than {cut} characters are cut here (and lists of "
            f"more than {_ITEMS} items); <code>ctxeval view</code> shows them whole.</p>"
        )
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>{html.escape(title)}</title><style>{asset("report.css")}{asset("explorer.css")}</style></head>
<body><header><h1>{html.escape(title)}</h1>
<p>{selection.samples:,} samples · {len(metrics)} metrics · {selection.rows:,} rows · {llm}</p>
{_judged_by(summary)}</header>
<main>
<h2>Summary</h2>
<table><tr><th>metric</th><th class="num">mean</th><th class="num">95% CI</th><th class="num">ok</th>
<th class="num">undefined</th><th class="num">error</th></tr>
{"".join(rows)}</table>
<p class="muted">Means are over <code>ok</code> rows; <code>undefined</code> rows (nothing to recall,
nothing retrieved) are counted apart, never as zero. Confidence intervals: percentile bootstrap.</p>
{trust_section(summary)}
<h2>Score distributions</h2><div class="cards">{"".join(cards)}</div>
{heading}
{asset("toolbar.html")}
<noscript><h3>Worst samples, with their evidence</h3>{"".join(worst) or "<p>Every row scored 1.0.</p>"}</noscript>
<script id="ctxeval-data" type="application/json">{explorer}</script>
<script>{asset("explorer.js")}</script>
</main></body></html>
"""


def _judged_by(summary: Mapping[str, Any]) -> str:
    """The header's lines on who judged the run: each distinct judge of its rows (model, the
    model that answered when another, endpoint), and a warning when it was the scripted judge
    of ``ctxeval serve-judge``."""
    seen: dict[tuple[str, str, str], None] = {}
    for info in summary.get("metrics", {}).values():
        for judge in info.get("judges", ()) if isinstance(info, Mapping) else ():
            if isinstance(judge, Mapping):
                key = (
                    str(judge.get("model") or "?"),
                    str(judge.get("served_model") or ""),
                    str(judge.get("endpoint") or ""),
                )
                seen.setdefault(key)
    parts = []
    for model, served, endpoint in list(seen)[:4]:
        text = f"<code>{html.escape(model)}</code>"
        if served:
            text += f" (answered by <code>{html.escape(served)}</code>)"
        if endpoint:
            text += f" at {html.escape(endpoint)}"
        parts.append(text)
    if len(seen) > 4:
        parts.append(f"{len(seen) - 4} more (see summary.json)")
    out = f"<p>judged by {', '.join(parts)}</p>" if parts else ""
    warning = summary.get("scripted_judge")
    if warning:
        out += f"<p class='not-a-judge' role='alert'>{html.escape(str(warning))}</p>"
    return out


EXPLORER_BYTES = 12_000_000
"""At most this many bytes of samples, texts and evidence in a report (it stays under 15 MB
with its page): texts are cut shorter, then the samples drawn at random are left out, then
the others from the last, until they fit."""
_CUTS = (None, 4000, 1000, 250)
"""The characters a text keeps, tried in turn (None: whole)."""
_ITEMS = 50
"""The items a list keeps (retrieved chunks, IDs) once texts are cut."""
_DROP_FIRST = ("random", "unsure", "disputed", "worst", "failed")
"""The samples left out first when cut texts are not enough."""


def _fitted(
    shown: Sequence[Shown], metrics: list[str], samples: Mapping[str, Sample]
) -> tuple[str, list[Shown], int | None]:
    """The explorer's JSON of ``shown`` within :data:`EXPLORER_BYTES`: the samples kept, and
    the characters texts were cut to (None: whole)."""
    kept = list(shown)
    known: Mapping[str, Any] = samples
    text = ""
    for cut in _CUTS:
        known = samples if cut is None else {i: _cut(s, cut) for i, s in samples.items()}
        text = _explorer(kept, metrics, known)
        if _size(text) <= EXPLORER_BYTES:
            return text, kept, cut
    order = sorted(
        range(len(kept)),
        key=lambda i: (
            min((_DROP_FIRST.index(w.split(":")[0]) for w in kept[i].why), default=0),
            -kept[i].position,
        ),
    )
    each = _size(text) / max(1, len(kept))
    drop = set(order[: int((_size(text) - EXPLORER_BYTES) / each) + 1])
    kept = [s for i, s in enumerate(kept) if i not in drop]
    while kept:
        text = _explorer(kept, metrics, known)
        if _size(text) <= EXPLORER_BYTES:
            break
        kept = kept[: len(kept) * 9 // 10]
    return text, kept, _CUTS[-1]


def _size(text: str) -> int:
    return len(text.encode("utf-8", "backslashreplace"))


def _explorer(shown: Sequence[Shown], metrics: list[str], known: Mapping[str, Any]) -> str:
    named = [
        (metric, MetricResult.from_dict({**row, "sample_id": s.sample_id, "metric": metric}))
        for s in shown
        for metric, row in s.rows.items()
    ]
    return explorer_json(named, metrics, known)


def _cut(sample: Sample, chars: int) -> SimpleNamespace:
    """``sample``'s texts as the report shows them: each at most ``chars`` characters, each
    list at most :data:`_ITEMS` items."""

    def cut(text: str) -> str:
        return text if len(text) <= chars else text[:chars] + f" … [{len(text) - chars} more]"

    fields: dict[str, Any] = {}
    for name in SAMPLE_TEXTS:
        value = sample_text(sample, name)
        if isinstance(value, str):
            value = cut(value)
        elif name == "retrieval_steps" and value is not None:
            value = [
                {k: cut(v) if isinstance(v, str) else [cut(t) for t in v[:_ITEMS]]
                 for k, v in step.items()}
                for step in value[:_ITEMS]
            ]  # fmt: skip
        elif isinstance(value, list):
            value = [cut(v) if isinstance(v, str) else v for v in value[:_ITEMS]]
        fields[name] = value
    return SimpleNamespace(**fields)


def _texts(shown: Sequence[Shown], lookup: SampleLookup | None) -> dict[str, Sample]:
    """The samples of ``shown`` by id: from the rows' sources, the others by ``lookup``."""
    out: dict[str, Sample] = {}
    wanted: list[str] = []
    for s in shown:
        if s.source is not None:
            out[s.sample_id] = sample_of(s.source)
        else:
            wanted.append(s.sample_id)
    if wanted and lookup is not None:
        out.update(lookup(wanted))
    return out


def _worst_table(metric: str, shown: Sequence[Shown]) -> str:
    """The five lowest rows of ``metric`` among ``shown`` (for a page read without script)."""
    rows = []
    for s in shown:
        row = s.rows.get(metric)
        if row is not None:
            rows.append(MetricResult.from_dict({**row, "sample_id": s.sample_id, "metric": metric}))
    ranked = sorted(
        rows, key=lambda r: (r.status is Status.OK, r.status is Status.UNDEFINED, r.score or 0.0)
    )
    picked = [
        r
        for r in ranked
        if r.status is Status.ERROR or (r.status is Status.OK and (r.score or 0) < 1.0)
    ][:5]
    if not picked:
        return ""
    body = "".join(
        f"<tr><td><code>{html.escape(r.sample_id)}</code></td>"
        f"<td class='num {score_class(r)}'>{fmt(r.score) if r.score is not None else r.status.value}</td>"
        f"<td>{evidence(r)}</td></tr>"
        for r in picked
    )
    return (
        f"<h3><code>{html.escape(metric)}</code></h3><table><tr><th>sample</th>"
        f"<th class='num'>score</th><th>evidence</th></tr>{body}</table>"
    )


def _left_out(selection: ReportSelection, shown: Sequence[Shown], folder: str | None) -> str:
    """The heading of a report that shows some samples only: how many, why each group is
    shown (with links to its samples), and how to see the others."""
    groups: dict[str, list[str]] = {}
    for s in shown:
        for why in s.why:
            groups.setdefault(why, []).append(s.sample_id)
    items = []
    for why in sorted(groups, key=lambda w: (list(TAGS).index(w.split(":")[0]), w)):
        kind, _, metric = why.partition(":")
        ids = groups[why]
        links = ", ".join(
            f"<a href='#{html.escape(urllib.parse.urlencode({'id': i, 'open': i}))}'>"
            f"{html.escape(i)}</a>"
            for i in ids[:8]
        )
        more = f" and {len(ids) - 8} more" if len(ids) > 8 else ""
        label = TAGS[kind].format(metric=f"<code>{html.escape(metric)}</code>")
        items.append(f"<li>{len(ids)}: {label}: {links}{more}</li>")
    command = f"ctxeval view {folder}" if folder else "ctxeval view RUN_DIR"
    return (
        f"<h2>The samples to look at first ({len(shown):,} of {selection.samples:,})</h2>"
        f"<p class='left-out'>This report shows {len(shown):,} of {selection.samples:,} samples "
        f"in full and leaves out {selection.samples - len(shown):,}; every number above counts "
        "them all. "
        f"To see every sample, run <code>{html.escape(command)}</code> "
        "(a local viewer, paged, with sort, filter and search).</p>"
        f"<ul class='why'>{''.join(items)}</ul>"
    )
