"""The files of a run's output folder: ``results.jsonl``, ``summary.json`` and ``report.html``."""

from __future__ import annotations

import html
import json
import math
import os
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ctxeval._data.text import brief
from ctxeval._output.writers import write_text
from ctxeval._results.evaluation import Evaluation
from ctxeval._results.results import MetricResult, Status, Usage

__all__ = [
    "DEFAULT_FORMATS",
    "render_comparison",
    "render_report",
    "summary_dict",
    "write_outputs",
    "write_report",
]


def summary_dict(
    evaluation: Evaluation, *, extra: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Per metric: mean, n_ok, n_undefined, n_error, the 95% CI and its method, usage, and for
    a judged metric with something to say about its judge, ``judge`` (agreement with people's
    labels, the corrected mean, repeatability, the jury: :meth:`Evaluation.trust`); usage
    totals. The numbers are :meth:`Evaluation.summary`'s."""
    metrics = {}
    trust = evaluation.trust()
    for name, summary in evaluation.summary().items():
        entry = summary.to_dict()
        del entry["metric"]
        if name in trust:
            entry["judge"] = trust[name].to_dict()
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


def write_report(
    evaluation: Evaluation, path: str | os.PathLike[str], *, title: str = "ctxeval report"
) -> Path:
    """Write only ``report.html``."""
    return write_text(Path(path), render_report(evaluation, summary_dict(evaluation), title=title))


# --- the HTML report -------------------------------------------------------------------------

_EXPLORER_CSS = """
.toolbar{display:flex;flex-wrap:wrap;gap:8px;align-items:center;margin:8px 0 12px}
.toolbar label{font-size:13px;color:#475467}.toolbar select,.toolbar input{font:inherit;padding:4px 6px;border:1px solid #d0d5dd;border-radius:4px;background:#fff}
.toolbar input[type=search]{min-width:220px}.toolbar input[type=number]{width:70px}
.pager{display:flex;gap:8px;align-items:center;margin:10px 0}.pager button{font:inherit;padding:3px 10px}
.sample{background:#fff;border-radius:6px;box-shadow:0 1px 3px #0002;margin:0 0 10px;padding:10px 14px}
.sample>summary{cursor:pointer;display:flex;flex-wrap:wrap;gap:6px;align-items:center}
.sid{font-weight:600;margin-right:6px}.q{color:#344054}
.chip{font-size:12px;border-radius:10px;padding:1px 8px;background:#eef1f7;white-space:nowrap}
.chip.low{background:#fee4e2;color:#912018}.chip.mid{background:#fef0c7;color:#93370d}.chip.high{background:#d1fadf;color:#05603a}
.chip.undefined{background:#f2f4f7;color:#475467}.chip.error{background:#b42318;color:#fff}
.field{margin:6px 0}.field b{display:inline-block;min-width:86px;color:#475467;font-weight:600}
ol.chunks{margin:4px 0;padding-left:26px}ol.chunks li{margin:4px 0}.cid{color:#667085;font-size:12px}
.badge{display:inline-block;font-size:12px;border-radius:4px;padding:0 6px;margin:2px 4px 0 0}
.badge.yes{background:#d1fadf;color:#05603a}.badge.no{background:#fee4e2;color:#912018}
.why{color:#667085;font-size:12px}.rowline{font-size:13px;margin:3px 0}
mark{background:#fff3a3}
.card table{box-shadow:none;font-size:13px}.card th,.card td{padding:4px 6px}
"""

_EXPLORER_JS = r"""
(function () {
  const data = JSON.parse(document.getElementById("ctxeval-data").textContent);
  const PAGE = 50;
  const metricSel = document.getElementById("f-metric"), statusSel = document.getElementById("f-status");
  const minIn = document.getElementById("f-min"), maxIn = document.getElementById("f-max");
  const search = document.getElementById("f-search"), sortSel = document.getElementById("f-sort");
  const list = document.getElementById("samples"), count = document.getElementById("count");
  const everyOne = document.getElementById("every-sample");
  let page = 0, opened = new Set(), onlyId = null;
  for (const m of data.metrics) { const o = document.createElement("option"); o.value = m; o.textContent = m; metricSel.appendChild(o); }
  const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c]));
  const fmt = (x) => (x === null || x === undefined ? "—" : Number(x).toFixed(3));
  const cls = (r) => r.status !== "ok" ? r.status : r.score < 0.5 ? "low" : r.score < 0.8 ? "mid" : "high";
  for (const s of data.samples) {
    s.text = [s.id, s.user_input, s.reference, s.response, ...(s.retrieved_contexts || []),
              ...(s.reference_contexts || []), ...(s.retrieved_context_ids || []),
              ...(s.reference_context_ids || [])].filter(Boolean).join("\n").toLowerCase();
  }
  function readHash() {
    const h = new URLSearchParams(location.hash.slice(1));
    if (h.has("metric")) metricSel.value = h.get("metric");
    if (h.has("status")) statusSel.value = h.get("status");
    if (h.has("min")) minIn.value = h.get("min");
    if (h.has("max")) maxIn.value = h.get("max");
    if (h.has("q")) search.value = h.get("q");
    if (h.has("sort")) sortSel.value = h.get("sort");
    page = Math.max(0, parseInt(h.get("page") || "1", 10) - 1) || 0;
    opened = new Set((h.get("open") || "").split(",").filter(Boolean));
    onlyId = h.has("id") ? h.get("id") : null;
  }
  function writeHash() {
    const h = new URLSearchParams();
    if (metricSel.value) h.set("metric", metricSel.value);
    if (statusSel.value) h.set("status", statusSel.value);
    if (minIn.value !== "") h.set("min", minIn.value);
    if (maxIn.value !== "") h.set("max", maxIn.value);
    if (search.value) h.set("q", search.value);
    if (sortSel.value !== "input") h.set("sort", sortSel.value);
    if (page) h.set("page", page + 1);
    if (opened.size) h.set("open", [...opened].join(","));
    if (onlyId !== null) h.set("id", onlyId);
    history.replaceState(null, "", "#" + h.toString());
  }
  function rowsOf(s) {
    const rows = data.rows[s.id] || {};
    return metricSel.value ? (rows[metricSel.value] ? [rows[metricSel.value]] : []) : Object.values(rows);
  }
  function keep(s) {
    if (onlyId !== null && s.id !== onlyId) return false;
    const q = search.value.trim().toLowerCase();
    if (q && !s.text.includes(q)) return false;
    const rows = rowsOf(s);
    if (!rows.length) return false;
    const lo = minIn.value === "" ? null : Number(minIn.value), hi = maxIn.value === "" ? null : Number(maxIn.value);
    return rows.some((r) => (!statusSel.value || r.status === statusSel.value) &&
      (lo === null || (r.score !== null && r.score >= lo)) && (hi === null || (r.score !== null && r.score <= hi)));
  }
  function sortKey(s) {
    const rows = rowsOf(s).filter((r) => r.score !== null);
    return rows.length ? Math.min(...rows.map((r) => r.score)) : Infinity;
  }
  function badge(ok, label, why) {
    return `<span class="badge ${ok ? "yes" : "no"}">${esc(label)}: ${ok ? "✓" : "✗"}${why ? " " + esc(why) : ""}</span>`;
  }
  function render() {
    let shown = data.samples.filter(keep);
    if (sortSel.value !== "input") {
      const sign = sortSel.value === "asc" ? 1 : -1;
      shown = shown.map((s, i) => [s, i]).sort((a, b) => {
        const ka = sortKey(a[0]), kb = sortKey(b[0]);
        if (ka === kb) return a[1] - b[1];
        if (ka === Infinity) return 1;
        if (kb === Infinity) return -1;
        return sign * (ka - kb);
      }).map((p) => p[0]);
    }
    const pages = Math.max(1, Math.ceil(shown.length / PAGE));
    page = Math.min(page, pages - 1);
    count.textContent = `${shown.length} of ${data.samples.length} samples · page ${page + 1} of ${pages}` + (onlyId !== null ? ` · sample ${onlyId} only` : "");
    everyOne.hidden = onlyId === null;
    list.innerHTML = shown.slice(page * PAGE, (page + 1) * PAGE).map(card).join("");
    document.getElementById("prev").disabled = page === 0;
    document.getElementById("next").disabled = page >= pages - 1;
    writeHash();
  }
  function card(s) {
    const rows = data.rows[s.id] || {};
    const chips = data.metrics.filter((m) => rows[m]).map((m) => {
      const r = rows[m];
      return `<span class="chip ${cls(r)}" title="${esc(r.reason || "")}">${esc(m)} ${r.status === "ok" ? fmt(r.score) : r.status}</span>`;
    }).join("");
    const ctx = s.retrieved_contexts || [], ids = s.retrieved_context_ids || [], refs = s.reference_contexts || [];
    const onChunk = ctx.map(() => []), onRef = refs.map(() => []), onId = {}, lines = [];
    for (const m of data.metrics) {
      const r = rows[m];
      if (!r) continue;
      if (r.status !== "ok") { lines.push(`<div class="rowline"><b>${esc(m)}</b>: ${r.status} — ${esc(r.reason || "")}</div>`); continue; }
      const d = r.details || {};
      const votesAt = {};
      if (Array.isArray(d.votes)) for (const v of d.votes) votesAt[v.index] = " · votes " + Object.entries(v.judges).map(([n, said]) => `${n} ${said.join(" ")}`).join("; ") + (v.escalated ? " (escalated)" : "") + (v.unsure ? " · unsure" : "") + (v.disagree ? " · judges disagree" : "");
      if (Array.isArray(d.verdicts)) {
        const side = d.judged === "reference" ? onRef : onChunk;
        for (const v of d.verdicts) {
          const ok = v.matched !== undefined ? v.matched : v.verdict === 1;
          let why = v.reason || (v.similarity !== undefined && v.similarity !== null ? "similarity " + fmt(v.similarity) : "");
          if (d.judged === "reference" && v.evidence !== null && v.evidence !== undefined) why += ` (best: chunk ${v.evidence + 1})`;
          why += votesAt[v.index] || "";
          if (side[v.index]) side[v.index].push(badge(ok, m, why));
        }
      }
      if (Array.isArray(d.relevant)) for (const i of d.relevant) (onId[i] = onId[i] || []).push(badge(true, m, "relevant"));
      if (Array.isArray(d.irrelevant)) for (const i of d.irrelevant) (onId[i] = onId[i] || []).push(badge(false, m, "not relevant"));
      if (Array.isArray(d.missing) && d.missing.length) lines.push(`<div class="rowline"><b>${esc(m)}</b> missing: ${d.missing.map((x) => `<span class="badge no">${esc(x)}</span>`).join("")}</div>`);
      if (Array.isArray(d.found) && d.found.length) lines.push(`<div class="rowline"><b>${esc(m)}</b> found: ${d.found.map((x) => `<span class="badge yes">${esc(x)}</span>`).join("")}</div>`);
      if (Array.isArray(d.statements)) d.statements.forEach((st, i) => lines.push(`<div class="rowline">${badge(st.attributed === 1, m, "")} ${esc(st.statement)} <span class="why">${esc((st.reason || "") + (votesAt[i] || ""))}</span></div>`));
      if (d.relevant_ranks) lines.push(`<div class="rowline"><b>${esc(m)}</b>: relevant at ranks ${d.relevant_ranks.length ? d.relevant_ranks.join(", ") : "none"}${d.k ? " (top " + d.k + ")" : ""}</div>`);
      else if ("first_relevant_rank" in d) lines.push(`<div class="rowline"><b>${esc(m)}</b>: first relevant at rank ${d.first_relevant_rank === null ? "none" : d.first_relevant_rank}</div>`);
    }
    const field = (label, text) => text ? `<div class="field"><b>${label}</b> ${esc(text)}</div>` : "";
    const chunkList = (ctx.length || ids.length) ? `<div class="field"><b>retrieved</b><ol class="chunks">${
      Array.from({length: Math.max(ctx.length, ids.length)}, (_, i) =>
        `<li>${ids[i] !== undefined ? `<span class="cid">[${esc(ids[i])}]</span> ` : ""}${ctx[i] !== undefined ? esc(ctx[i]) : ""} ${(onChunk[i] || []).join("")}${ids[i] !== undefined ? (onId[ids[i]] || []).join("") : ""}</li>`
      ).join("")}</ol></div>` : "";
    const refList = refs.length ? `<div class="field"><b>reference contexts</b><ol class="chunks">${refs.map((t, i) => `<li>${esc(t)} ${onRef[i].join("")}</li>`).join("")}</ol></div>` : "";
    const refIds = (s.reference_context_ids || []).length ? field("reference IDs", s.reference_context_ids.join(", ")) : "";
    return `<details class="sample" data-id="${esc(s.id)}"${opened.has(s.id) ? " open" : ""}><summary><span class="sid">${esc(s.id)}</span>${chips}<span class="q">${esc(s.user_input || "")}</span></summary>
      ${field("question", s.user_input)}${field("reference", s.reference)}${field("response", s.response)}${chunkList}${refList}${refIds}${lines.join("")}</details>`;
  }
  for (const el of [metricSel, statusSel, minIn, maxIn, search, sortSel]) el.addEventListener("input", () => { page = 0; render(); });
  list.addEventListener("toggle", (event) => {
    const id = event.target.dataset && event.target.dataset.id;
    if (id === undefined) return;
    if (event.target.open) opened.add(id); else opened.delete(id);
    writeHash();
  }, true);
  document.getElementById("prev").addEventListener("click", () => { page -= 1; render(); });
  everyOne.addEventListener("click", () => { onlyId = null; page = 0; render(); });
  document.getElementById("next").addEventListener("click", () => { page += 1; render(); });
  window.addEventListener("hashchange", () => { readHash(); render(); });
  readHash();
  render();
})();
"""


_BASE_CSS = """
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
        items.append(html.escape(", ".join(f"{k}: {_brief(v)}" for k, v in d.items())[:300]))
    return '<ul class="evidence">' + "".join(f"<li>{i}</li>" for i in items) + "</ul>"


def _brief(value: Any) -> str:
    """``value`` shortened for a page (safe on deep nesting): strings as they are."""
    return value if isinstance(value, str) else brief(value, 120)


def _score_class(row: MetricResult) -> str:
    if row.score is None:
        return f"status-{row.status.value}"
    return "score-low" if row.score < 0.5 else "score-mid" if row.score < 0.8 else "score-high"


def _explorer_data(evaluation: Evaluation) -> str:
    """The samples and rows the explorer shows, as JSON safe inside a ``<script>`` element
    (every ``<`` escaped, so no text can close it)."""
    named = ((row.metric, row) for row in evaluation.results)
    return _explorer_json(named, list(evaluation.metrics), evaluation.samples)


def _explorer_json(
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
            for name in _SAMPLE_TEXTS:
                value = getattr(sample, name)
                if value is not None:
                    entry[name] = list(value) if isinstance(value, tuple) else value
        samples.append(entry)
    data = {"metrics": metrics, "samples": samples, "rows": rows}
    text = json.dumps(data, ensure_ascii=False, default=repr)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a plugin's lone surrogate: escape everything instead
        text = json.dumps(data, ensure_ascii=True, default=repr)
    return text.replace("<", "\\u003c")


_TOOLBAR = """<div class="toolbar">
<label>metric <select id="f-metric"><option value="">all</option></select></label>
<label>status <select id="f-status"><option value="">any</option><option>ok</option><option>undefined</option><option>error</option></select></label>
<label>score from <input id="f-min" type="number" min="0" max="1" step="0.05"></label>
<label>to <input id="f-max" type="number" min="0" max="1" step="0.05"></label>
<label>sort <select id="f-sort"><option value="input">input order</option><option value="asc">lowest score first</option><option value="desc">highest score first</option></select></label>
<input id="f-search" type="search" placeholder="search ids, questions, texts">
</div>
<div class="pager"><button id="prev">‹ previous</button><span id="count" class="muted"></span><button id="next">next ›</button><button id="every-sample" hidden>show every sample</button></div>
<div id="samples"></div>"""


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
            f"<td class='num'>{c['n']}</td><td class='num'>{_fmt(c['mean_a'])}</td>"
            f"<td class='num'>{_fmt(c['mean_b'])}</td><td class='num'>{_signed(c['difference'])}</td>"
            f"<td class='num'>{ci}</td><td class='num'>{_fmt(c['p_randomization'])}</td>"
            f"<td class='num'>{_fmt(c['p_holm'])}</td></tr>"
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
    data = _explorer_json(named, names, {})
    missing = "".join(
        f"<p class='muted'><code>{html.escape(m)}</code> is missing from "
        f"{html.escape(', '.join(lacking))}</p>"
        for m, lacking in comparison["missing"].items()
    )
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>{html.escape(title)}</title><style>{_BASE_CSS}{_EXPLORER_CSS}</style></head>
<body><header><h1>{html.escape(title)}</h1><p>{len(runs)} runs, the first the baseline A</p></header>
<main><ul>{legend}</ul>
<h2>Paired comparison</h2>
<table><tr><th>metric</th><th>run</th><th class="num">n</th><th class="num">A</th><th class="num">B</th>
<th class="num">change</th><th class="num">95% CI</th><th class="num">p</th><th class="num">Holm</th></tr>{"".join(table)}</table>
<p class="muted">{html.escape(comparison["method"])}.</p>{missing}
<h2>Which samples got better or worse</h2>{"".join(changes)}
<h2>Every sample, run by run</h2>
{_TOOLBAR}
<script id="ctxeval-data" type="application/json">{data}</script>
<script>{_EXPLORER_JS}</script>
</main></body></html>
"""


def _signed(value: float | None) -> str:
    return "—" if value is None else f"{value:+.3f}"


_SAMPLE_TEXTS = (
    "user_input", "response", "reference", "retrieved_contexts", "reference_contexts",
    "retrieved_context_ids", "reference_context_ids",
)  # fmt: skip


def _votes_text(votes: Mapping[str, Sequence[int]]) -> str:
    return "; ".join(
        f"{html.escape(name)}: {' '.join(str(v) for v in said)}" for name, said in votes.items()
    )


def _item_table(items: Sequence[Mapping[str, Any]], total: int, what: str, metric: str) -> str:
    """A table of judged items (unsure, or judges disagreeing), each sample id a link that
    shows that sample alone in the explorer below, opened, with ``metric``'s evidence."""
    if not items:
        return ""
    body = "".join(
        f"<tr><td><a href='#{html.escape(_sample_view(str(i['sample_id']), metric))}'>"
        f"<code>{html.escape(str(i['sample_id']))}</code></a></td>"
        f"<td class='num'>{i['index']}</td><td>{_votes_text(i['votes'])}</td></tr>"
        for i in items
    )
    more = f"<p class='muted'>{total - len(items)} more in summary.json / results.jsonl.</p>"
    return (
        f"<details><summary>{total} {what}</summary><table class='trust-items'>"
        f"<tr><th>sample</th><th class='num'>item</th><th>votes (1 = yes)</th></tr>{body}"
        f"</table>{more if total > len(items) else ''}</details>"
    )


def _sample_view(sample_id: str, metric: str) -> str:
    """The explorer's view (the address's ``#``) of one sample alone, opened, with
    ``metric``'s rows."""
    return urllib.parse.urlencode({"metric": metric, "id": sample_id, "open": sample_id})


def _trust_section(summary: Mapping[str, Any]) -> str:
    """The "How far to trust the judge" section: per judged metric, agreement with people's
    labels and the corrected mean, repeatability with the unsure items, the jury with its
    disagreements and each judge's cost ("" when no metric has any)."""
    parts = []
    for name, info in summary["metrics"].items():
        judge = info.get("judge")
        if not judge:
            continue
        cells = []
        agreement, corrected = judge.get("agreement"), judge.get("corrected")
        if agreement:
            ci = agreement["kappa_ci95"]
            c = agreement["confusion"]
            cells.append(
                f"<tr><th>judge vs people</th><td>{agreement['n_items']} items of "
                f"{agreement['n_samples']} samples · accuracy {_fmt(agreement['accuracy'])} · "
                f"balanced accuracy {_fmt(agreement['balanced_accuracy'])} · Cohen's kappa "
                f"<b>{_fmt(agreement['kappa'])}</b>"
                + (f" (95% CI {ci[0]:.3f} – {ci[1]:.3f})" if ci else "")
                + f"<br><span class='muted'>judge 1 / people 1: {c['tp']} · judge 1 / people 0: "
                f"{c['fp']} · judge 0 / people 1: {c['fn']} · both 0: {c['tn']}</span></td></tr>"
            )
        if corrected:
            low, high = corrected["ci95"]
            cells.append(
                f"<tr><th>mean</th><td>{_fmt(corrected['judged_mean'])} as judged → "
                f"<b>{corrected['mean']:.3f}</b> corrected (95% CI {low:.3f} – {high:.3f}); "
                f"<span class='muted'>{corrected['n_labelled']} labelled samples (their mean by "
                f"the people: {corrected['human_mean']:.3f}), {corrected['n_unlabelled']} "
                f"unlabelled; PPI++ weight {corrected['weight']:.2f}</span></td></tr>"
            )
        for reason, count in (judge.get("skipped_labels") or {}).items():
            cells.append(
                f"<tr><th>labels not used</th><td>{count}: {html.escape(reason)}</td></tr>"
            )
        repeats = judge.get("repeatability")
        if repeats:
            cells.append(
                f"<tr><th>repeats</th><td>{repeats['n_items']} items judged more than once · "
                f"flip rate {_fmt(repeats['flip_rate'])} · two judgements differ "
                f"{_fmt(repeats['disagreement'])}"
                + _item_table(
                    repeats["unsure"], repeats["n_unsure"], "items the judge is unsure about", name
                )
                + "</td></tr>"
            )
        jury = judge.get("jury")
        if jury:
            pairs = " · ".join(
                f"{html.escape(p['a'])} vs {html.escape(p['b'])}: agree {_fmt(p['agreement'])} "
                f"on {p['n']}, kappa {_fmt(p['kappa'])}"
                for p in jury["pairs"]
            )
            costs = " · ".join(
                f"{html.escape(n)}: {u['requests']} requests, "
                + ("cost unknown" if u.get("cost_usd") is None else f"${u['cost_usd']:.4f}")
                for n, u in jury["usage"].items()
            )
            cells.append(
                f"<tr><th>jury</th><td>{pairs}<br>{jury['n_escalated']} escalated · {costs}"
                + _item_table(jury["disagreements"], jury["n_disagreements"], "disagreements", name)
                + "</td></tr>"
            )
        parts.append(
            f"<h3><code>{html.escape(name)}</code></h3><table class='trust'>{''.join(cells)}</table>"
        )
    if not parts:
        return ""
    return (
        "<h2 id='judge'>How far to trust the judge</h2>"
        + "".join(parts)
        + "<p class='muted'>Kappa: agreement beyond chance (1 perfect, 0 chance). The corrected "
        "mean uses the people's labels to remove the judge's bias (prediction-powered "
        "inference); its interval is honest where the judged mean's is not.</p>"
    )


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
    explorer_data = _explorer_data(evaluation)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>{html.escape(title)}</title><style>{_BASE_CSS}{_EXPLORER_CSS}</style></head>
<body><header><h1>{html.escape(title)}</h1>
<p>{samples} samples · {len(evaluation.metrics)} metrics · {len(evaluation.results)} rows · {llm}</p></header>
<main>
<h2>Summary</h2>
<table><tr><th>metric</th><th class="num">mean</th><th class="num">95% CI</th><th class="num">ok</th>
<th class="num">undefined</th><th class="num">error</th></tr>
{"".join(rows)}</table>
<p class="muted">Means are over <code>ok</code> rows; <code>undefined</code> rows (nothing to recall,
nothing retrieved) are counted apart, never as zero. Confidence intervals: percentile bootstrap.</p>
{_trust_section(summary)}
<h2>Score distributions</h2><div class="cards">{"".join(cards)}</div>
<h2>Every sample, with its evidence</h2>
{_TOOLBAR}
<noscript><h3>Worst samples, with their evidence</h3>{"".join(worst) or "<p>Every row scored 1.0.</p>"}</noscript>
<script id="ctxeval-data" type="application/json">{explorer_data}</script>
<script>{_EXPLORER_JS}</script>
</main></body></html>
"""
