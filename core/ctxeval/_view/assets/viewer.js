(function () {
  // ctxeval view: the report's explorer (explorer.js, window.ctxevalExplorer) with its data
  // asked of the viewer's server, a page at a time. Every text of the run is set with
  // textContent here (and escaped by the explorer's rendering).
  "use strict";
  const el = (tag, text, cls) => {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  };
  const fmt = (x) => (x === null || x === undefined ? "—" : Number(x).toFixed(3));

  function remoteSource(info) {
    return {
      metrics: info.metrics,
      async query(v, offset, limit) {
        const p = new URLSearchParams({offset: String(offset), limit: String(limit), sort: v.sort});
        for (const k of ["metric", "status", "min", "max", "q"]) if (v[k]) p.set(k, v[k]);
        if (v.id !== null) p.set("id", v.id);
        const answer = await fetch("api/samples?" + p.toString());
        const body = await answer.json();
        if (!answer.ok) throw new Error(body.error || answer.statusText);
        body.samples = body.samples.map((s) => Object.assign({}, s.texts || {}, {id: s.id}));
        return body;
      },
    };
  }

  function header(info) {
    document.title = info.title;
    document.getElementById("title").textContent = info.title;
    const runs = info.runs.map((r) => (r.label ? r.label + ": " : "") + r.folder).join(" · ");
    document.getElementById("subtitle").textContent =
      `${info.samples} samples · ${info.metrics.length} columns · ${info.rows} rows · ${runs}`;
    const notice = document.getElementById("notice");
    for (const r of info.runs) {
      const who = r.label ? `run ${r.label}: ` : "";
      if (r.scripted_judge) {
        const warning = el("div", who + r.scripted_judge);
        warning.className = "scripted-judge";
        notice.appendChild(warning);
      }
      if (!r.data) {
        const why = r.data_named ? `the data file (${r.data_named}) was not found` : "the run names no data file";
        notice.appendChild(el("div", `${who}no texts: ${why}, so only scores and evidence are shown; give it with --data` + (r.label === "B" ? "-b" : "")));
      }
    }
    if (info.texts_missing && info.runs.some((r) => r.data)) {
      notice.appendChild(el("div", `${info.texts_missing} samples have no texts in the data file`));
    }
  }

  function summary(info) {
    const table = document.getElementById("summary-table");
    const head = el("tr");
    for (const h of ["metric", "mean", "95% CI", "ok", "undefined", "error"]) head.appendChild(el("th", h, h === "metric" ? "" : "num"));
    table.appendChild(head);
    for (const r of info.runs) {
      for (const [name, m] of Object.entries(r.metrics || {})) {
        const tr = el("tr");
        const td = el("td");
        td.appendChild(el("code", r.label ? `${name} [${r.label}]` : name));
        tr.appendChild(td);
        const ci = Array.isArray(m.ci95) ? `${fmt(m.ci95[0])} – ${fmt(m.ci95[1])}` : "—";
        for (const v of [fmt(m.mean), ci, m.n_ok, m.n_undefined, m.n_error]) tr.appendChild(el("td", v, "num"));
        table.appendChild(tr);
      }
    }
  }

  async function start() {
    const answer = await fetch("api/summary");
    const info = await answer.json();
    if (!answer.ok) throw new Error(info.error || answer.statusText);
    header(info);
    summary(info);
    if (info.pair) {
      const sort = document.getElementById("f-sort");
      for (const [value, label] of [["diff-asc", "B − A, biggest drop first"], ["diff-desc", "B − A, biggest gain first"]]) {
        const o = el("option", label);
        o.value = value;
        sort.appendChild(o);
      }
    }
    window.ctxevalExplorer(remoteSource(info));
  }
  start().catch((err) => { document.getElementById("count").textContent = "could not reach the viewer: " + err.message; });
})();
