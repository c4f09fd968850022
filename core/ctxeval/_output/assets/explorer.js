
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
