(function () {
  // The explorer: every sample with each metric's rows, to filter, sort, search and page (50 at
  // a time), the view kept in the address's "#". Its data come from a source: the report's
  // own (a JSON block in the page, filtered here) or the viewer's server (ctxeval view).
  const PAGE = 50;
  const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c]));
  const fmt = (x) => (x === null || x === undefined ? "—" : Number(x).toFixed(3));
  // An own property only: ids such as "constructor" or "__proto__" are data, never Object's.
  const own = (o, k) => (o && Object.prototype.hasOwnProperty.call(o, k) ? o[k] : undefined);
  const cls = (r) => r.status !== "ok" ? r.status : r.score < 0.5 ? "low" : r.score < 0.8 ? "mid" : "high";

  // A source of the report: every sample in the page; `query(view, offset, limit)` resolves to
  // {total, all, samples, rows} as the viewer's /api/samples answers.
  function localSource(data) {
    for (const s of data.samples) {
      s.text = [s.id, s.user_input, s.reference, s.response, ...(s.retrieved_contexts || []),
                ...(s.reference_contexts || []), ...(s.retrieved_context_ids || []),
                ...(s.reference_context_ids || []),
                ...(s.retrieval_steps || []).flatMap((st) => [st.query, ...(st.retrieved_context_ids || []), ...(st.retrieved_contexts || [])])
               ].filter(Boolean).join("\n").toLowerCase();
    }
    function rowsOf(s, v) {
      const rows = own(data.rows, s.id) || {};
      return v.metric ? (own(rows, v.metric) ? [own(rows, v.metric)] : []) : Object.values(rows);
    }
    function keep(s, v) {
      if (v.id !== null && s.id !== v.id) return false;
      const q = v.q.trim().toLowerCase();
      if (q && !s.text.includes(q)) return false;
      const rows = rowsOf(s, v);
      if (!rows.length) return false;
      const lo = v.min === "" ? null : Number(v.min), hi = v.max === "" ? null : Number(v.max);
      return rows.some((r) => (!v.status || r.status === v.status) &&
        (lo === null || (r.score !== null && r.score >= lo)) && (hi === null || (r.score !== null && r.score <= hi)));
    }
    function sortKey(s, v) {
      const rows = rowsOf(s, v).filter((r) => r.score !== null);
      return rows.length ? Math.min(...rows.map((r) => r.score)) : Infinity;
    }
    return {
      metrics: data.metrics,
      query(v, offset, limit) {
        let shown = data.samples.filter((s) => keep(s, v));
        if (v.sort !== "input") {
          const sign = v.sort === "asc" ? 1 : -1;
          shown = shown.map((s, i) => [s, i]).sort((a, b) => {
            const ka = sortKey(a[0], v), kb = sortKey(b[0], v);
            if (ka === kb) return a[1] - b[1];
            if (ka === Infinity) return 1;
            if (kb === Infinity) return -1;
            return sign * (ka - kb);
          }).map((p) => p[0]);
        }
        return Promise.resolve({total: shown.length, all: data.samples.length,
                                samples: shown.slice(offset, offset + limit), rows: data.rows});
      },
    };
  }

  function explore(source) {
    const metricSel = document.getElementById("f-metric"), statusSel = document.getElementById("f-status");
    const minIn = document.getElementById("f-min"), maxIn = document.getElementById("f-max");
    const search = document.getElementById("f-search"), sortSel = document.getElementById("f-sort");
    const list = document.getElementById("samples"), count = document.getElementById("count");
    const everyOne = document.getElementById("every-sample");
    let page = 0, opened = new Set(), onlyId = null, asked = 0, renders = 0;
    let rowsById = {};
    for (const m of source.metrics) { const o = document.createElement("option"); o.value = m; o.textContent = m; metricSel.appendChild(o); }
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
      if (onlyId !== null) opened.add(onlyId);  // a link to one sample opens it
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
    function badge(ok, label, why) {
      return `<span class="badge ${ok ? "yes" : "no"}">${esc(label)}: ${ok ? "✓" : "✗"}${why ? " " + esc(why) : ""}</span>`;
    }
    function view() {
      return {metric: metricSel.value, status: statusSel.value, min: minIn.value, max: maxIn.value,
              q: search.value, sort: sortSel.value, id: onlyId};
    }
    async function render() {
      const mine = ++asked;
      let answer;
      try {
        answer = await source.query(view(), page * PAGE, PAGE);
      } catch (err) {
        if (mine === asked) count.textContent = "could not load the samples: " + err.message;
        return;
      }
      if (mine !== asked) return;  // a newer view was asked meanwhile
      const pages = Math.max(1, Math.ceil(answer.total / PAGE));
      if (page > pages - 1) { page = pages - 1; return render(); }
      rowsById = answer.rows;
      count.textContent = `${answer.total} of ${answer.all} samples · page ${page + 1} of ${pages}` + (onlyId !== null ? ` · sample ${onlyId} only` : "");
      everyOne.hidden = onlyId === null;
      list.innerHTML = answer.samples.map(card).join("");
      document.getElementById("prev").disabled = page === 0;
      document.getElementById("next").disabled = page >= pages - 1;
      writeHash();
      document.body.dataset.rendered = String(++renders);
      if (window.performance && performance.mark) performance.mark("ctxeval-rendered");
    }
    function card(s) {
      const rows = own(rowsById, s.id) || {};
      const chips = source.metrics.filter((m) => own(rows, m)).map((m) => {
        const r = own(rows, m);
        return `<span class="chip ${cls(r)}" title="${esc(r.reason || "")}">${esc(m)} ${r.status === "ok" ? fmt(r.score) : r.status}</span>`;
      }).join("");
      const ctx = s.retrieved_contexts || [], ids = s.retrieved_context_ids || [], refs = s.reference_contexts || [];
      const onChunk = ctx.map(() => []), onRef = refs.map(() => []), onId = new Map(), lines = [];
      const atId = (i) => onId.get(i) || onId.set(i, []).get(i);
      const foundAt = new Map();  // a relevant ID -> the search step that first returned it
      for (const m of source.metrics) {
        const r = own(rows, m);
        if (!r) continue;
        if (r.status !== "ok") { lines.push(`<div class="rowline"><b>${esc(m)}</b>: ${r.status} — ${esc(r.reason || "")}</div>`); continue; }
        const d = r.details || {};
        const votesAt = new Map();
        if (Array.isArray(d.votes)) for (const v of d.votes) votesAt.set(v.index, " · votes " + Object.entries(v.judges).map(([n, said]) => `${n} ${said.join(" ")}`).join("; ") + (v.escalated ? " (escalated)" : "") + (v.unsure ? " · unsure" : "") + (v.disagree ? " · judges disagree" : ""));
        if (Array.isArray(d.verdicts)) {
          const side = d.judged === "reference" ? onRef : onChunk;
          for (const v of d.verdicts) {
            const ok = v.matched !== undefined ? v.matched : v.verdict === 1;
            let why = v.reason || (v.similarity !== undefined && v.similarity !== null ? "similarity " + fmt(v.similarity) : "");
            if (d.judged === "reference" && v.evidence !== null && v.evidence !== undefined) why += ` (best: chunk ${v.evidence + 1})`;
            why += votesAt.get(v.index) || "";
            if (side[v.index]) side[v.index].push(badge(ok, m, why));
          }
        }
        if (Array.isArray(d.relevant)) for (const i of d.relevant) atId(i).push(badge(true, m, "relevant"));
        if (Array.isArray(d.irrelevant)) for (const i of d.irrelevant) atId(i).push(badge(false, m, "not relevant"));
        if (Array.isArray(d.missing) && d.missing.length) lines.push(`<div class="rowline"><b>${esc(m)}</b> missing: ${d.missing.map((x) => `<span class="badge no">${esc(x)}</span>`).join("")}</div>`);
        if (Array.isArray(d.found) && d.found.length) lines.push(`<div class="rowline"><b>${esc(m)}</b> found: ${d.found.map((x) => `<span class="badge yes">${esc(x)}</span>`).join("")}</div>`);
        if (Array.isArray(d.statements)) d.statements.forEach((st, i) => lines.push(`<div class="rowline">${badge(st.attributed === 1, m, "")} ${esc(st.statement)} <span class="why">${esc((st.reason || "") + (votesAt.get(i) || ""))}</span></div>`));
        if (d.found_at_step && typeof d.found_at_step === "object") for (const [i, step] of Object.entries(d.found_at_step)) foundAt.set(i, step);
        if (d.relevant_ranks) lines.push(`<div class="rowline"><b>${esc(m)}</b>: relevant at ranks ${d.relevant_ranks.length ? d.relevant_ranks.join(", ") : "none"}${d.k ? " (top " + d.k + ")" : ""}</div>`);
        else if ("first_relevant_rank" in d) lines.push(`<div class="rowline"><b>${esc(m)}</b>: first relevant at rank ${d.first_relevant_rank === null ? "none" : d.first_relevant_rank}</div>`);
      }
      const field = (label, text) => text ? `<div class="field"><b>${label}</b> ${esc(text)}</div>` : "";
      const chunkList = (ctx.length || ids.length) ? `<div class="field"><b>retrieved</b><ol class="chunks">${
        Array.from({length: Math.max(ctx.length, ids.length)}, (_, i) =>
          `<li>${ids[i] !== undefined ? `<span class="cid">[${esc(ids[i])}]</span> ` : ""}${ctx[i] !== undefined ? esc(ctx[i]) : ""} ${(onChunk[i] || []).join("")}${ids[i] !== undefined ? (onId.get(ids[i]) || []).join("") : ""}</li>`
        ).join("")}</ol></div>` : "";
      const refList = refs.length ? `<div class="field"><b>reference contexts</b><ol class="chunks">${refs.map((t, i) => `<li>${esc(t)} ${onRef[i].join("")}</li>`).join("")}</ol></div>` : "";
      const stepList = (s.retrieval_steps || []).length ? `<div class="field"><b>search steps</b><ol class="chunks">${s.retrieval_steps.map((st, n) => {
          const ids = st.retrieved_context_ids || [], texts = st.retrieved_contexts || [];
          const items = Array.from({length: Math.max(ids.length, texts.length)}, (_, i) => {
            const first = ids[i] !== undefined && foundAt.get(ids[i]) === n + 1 ? ` <span class="badge yes" title="relevant, first found here">relevant</span>` : "";
            return `<li>${ids[i] !== undefined ? `<span class="cid">[${esc(ids[i])}]</span> ` : ""}${texts[i] !== undefined ? esc(texts[i]) : ""}${first}</li>`;
          }).join("");
          return `<li>${st.query ? `<span class="q">${esc(st.query)}</span>` : "<i>(no query)</i>"} · ${Math.max(ids.length, texts.length)} returned<ol class="chunks">${items}</ol></li>`;
        }).join("")}</ol></div>` : "";
      const refIds = (s.reference_context_ids || []).length ? field("reference IDs", s.reference_context_ids.join(", ")) : "";
      return `<details class="sample" data-id="${esc(s.id)}"${opened.has(s.id) ? " open" : ""}><summary><span class="sid">${esc(s.id)}</span>${chips}<span class="q">${esc(s.user_input || "")}</span></summary>
        ${field("question", s.user_input)}${field("reference", s.reference)}${field("response", s.response)}${chunkList}${stepList}${refList}${refIds}${lines.join("")}</details>`;
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
  }

  window.ctxevalExplorer = explore;
  const data = document.getElementById("ctxeval-data");
  if (data) explore(localSource(JSON.parse(data.textContent)));
})();
