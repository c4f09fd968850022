"""The report's "How far to trust the judge" section: per judged metric, agreement with
people's labels (for a grading judge: the weighted kappas and the confusion matrix per grade)
and the corrected mean, repeatability with the unsure items, the jury with its
disagreements and each judge's cost (:func:`trust_section`).
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

from ctxeval._output.explorer import sample_view
from ctxeval._output.fragments import fmt

__all__ = ["trust_section"]


def votes_text(votes: Mapping[str, Sequence[int]]) -> str:
    return "; ".join(
        f"{html.escape(name)}: {' '.join(str(v) for v in said)}" for name, said in votes.items()
    )


def item_table(items: Sequence[Mapping[str, Any]], total: int, what: str, metric: str) -> str:
    """A table of judged items (unsure, or judges disagreeing), each sample id a link that
    shows that sample alone in the explorer below, opened, with ``metric``'s evidence."""
    if not items:
        return ""
    body = "".join(
        f"<tr><td><a href='#{html.escape(sample_view(str(i['sample_id']), metric))}'>"
        f"<code>{html.escape(str(i['sample_id']))}</code></a></td>"
        f"<td class='num'>{i['index']}</td><td>{votes_text(i['votes'])}</td></tr>"
        for i in items
    )
    more = f"<p class='muted'>{total - len(items)} more in summary.json / results.jsonl.</p>"
    return (
        f"<details><summary>{total} {what}</summary><table class='trust-items'>"
        f"<tr><th>sample</th><th class='num'>item</th><th>votes (1 = yes)</th></tr>{body}"
        f"</table>{more if total > len(items) else ''}</details>"
    )


def _ci(ci: Sequence[float] | None) -> str:
    return f" (95% CI {ci[0]:.3f} – {ci[1]:.3f})" if ci else ""


def graded_rows(graded: Mapping[str, Any]) -> str:
    """The rows of a grading judge against people's grades: the figures, then the confusion
    matrix per grade (rows: the people's grade, columns: the judge's; the agreeing cells on
    the diagonal in bold)."""
    grades = graded["grades"]
    given = graded["mean_difference"]
    difference = "—" if given is None else f"{given:+.3f}"
    head = "".join(f"<th class='num'>{g}</th>" for g in grades)
    body = "".join(
        f"<tr><th class='num'>{g}</th>"
        + "".join(
            f"<td class='num'>{f'<b>{c}</b>' if i == j else c}</td>" for j, c in enumerate(row)
        )
        + f"<td class='num muted'>{sum(row)}</td></tr>"
        for i, (g, row) in enumerate(zip(grades, graded["confusion"], strict=True))
    )
    totals = "".join(f"<td class='num muted'>{c}</td>" for c in graded["judge_counts"])
    matrix = (
        "<table class='trust-items confusion'><tr><th>people ↓ judge →</th>"
        f"{head}<th class='num'>all</th></tr>{body}"
        f"<tr><th>all</th>{totals}<td class='num muted'>{graded['n_items']}</td></tr></table>"
    )
    return (
        f"<tr><th>judge vs people's grades</th><td>{graded['n_items']} items of "
        f"{graded['n_samples']} samples · exact agreement {fmt(graded['exact'])} · within one "
        f"grade {fmt(graded['within_one'])} · weighted kappa: quadratic "
        f"<b>{fmt(graded['kappa_quadratic'])}</b>{_ci(graded['kappa_quadratic_ci95'])}, linear "
        f"<b>{fmt(graded['kappa_linear'])}</b>{_ci(graded['kappa_linear_ci95'])} · unweighted "
        f"kappa {fmt(graded['kappa'])} · judge's mean grade − people's {difference}{matrix}"
        "</td></tr>"
    )


def trust_section(summary: Mapping[str, Any]) -> str:
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
                f"{agreement['n_samples']} samples · accuracy {fmt(agreement['accuracy'])} · "
                f"balanced accuracy {fmt(agreement['balanced_accuracy'])} · Cohen's kappa "
                f"<b>{fmt(agreement['kappa'])}</b>"
                + (f" (95% CI {ci[0]:.3f} – {ci[1]:.3f})" if ci else "")
                + f"<br><span class='muted'>judge 1 / people 1: {c['tp']} · judge 1 / people 0: "
                f"{c['fp']} · judge 0 / people 1: {c['fn']} · both 0: {c['tn']}</span></td></tr>"
            )
        graded = judge.get("graded_agreement")
        if graded:
            cells.append(graded_rows(graded))
        if corrected:
            low, high = corrected["ci95"]
            cells.append(
                f"<tr><th>mean</th><td>{fmt(corrected['judged_mean'])} as judged → "
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
                f"flip rate {fmt(repeats['flip_rate'])} · two judgements differ "
                f"{fmt(repeats['disagreement'])}"
                + item_table(
                    repeats["unsure"], repeats["n_unsure"], "items the judge is unsure about", name
                )
                + "</td></tr>"
            )
        jury = judge.get("jury")
        if jury:
            pairs = " · ".join(
                f"{html.escape(p['a'])} vs {html.escape(p['b'])}: agree {fmt(p['agreement'])} "
                f"on {p['n']}, kappa {fmt(p['kappa'])}"
                for p in jury["pairs"]
            )
            costs = " · ".join(
                f"{html.escape(n)}: {u['requests']} requests, "
                + ("cost unknown" if u.get("cost_usd") is None else f"${u['cost_usd']:.4f}")
                for n, u in jury["usage"].items()
            )
            cells.append(
                f"<tr><th>jury</th><td>{pairs}<br>{jury['n_escalated']} escalated · {costs}"
                + item_table(jury["disagreements"], jury["n_disagreements"], "disagreements", name)
                + "</td></tr>"
            )
        parts.append(
            f"<h3><code>{html.escape(name)}</code></h3><table class='trust'>{''.join(cells)}</table>"
        )
    if not parts:
        return ""
    weighted = any(
        (i.get("judge") or {}).get("graded_agreement") for i in summary["metrics"].values()
    )
    return (
        "<h2 id='judge'>How far to trust the judge</h2>"
        + "".join(parts)
        + "<p class='muted'>Kappa: agreement beyond chance (1 perfect, 0 chance). The corrected "
        "mean uses the people's labels to remove the judge's bias (prediction-powered "
        "inference); its interval is honest where the judged mean's is not."
        + (
            " Weighted kappa (a judge that grades): a disagreement by two grades counts twice "
            "(linear) or four times (quadratic) one by one grade."
            if weighted
            else ""
        )
        + "</p>"
    )
