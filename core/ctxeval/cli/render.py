"""What the command line shows: the console, errors, and the summary table."""

from __future__ import annotations

from typing import Any, NoReturn

__all__ = [
    "EXIT_ERRORS",
    "EXIT_GATES",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "UsageError",
    "console",
    "fail",
    "print_errors",
    "print_summary",
    "print_trust",
]

EXIT_OK, EXIT_ERRORS, EXIT_USAGE, EXIT_GATES, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


class UsageError(Exception):
    """Bad command-line usage: exit code 2 with the message."""


def console(stderr: bool = False) -> Any:
    """A rich console on standard output (or error)."""
    from rich.console import Console

    return Console(stderr=stderr, highlight=False)


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    """Print ``error: message`` on standard error and exit with ``code``."""
    from rich.markup import escape

    # escape: install commands such as pip install 'ctxeval[llm]' hold brackets
    console(stderr=True).print(
        f"[bold red]error:[/] {escape(message)}", markup=True, soft_wrap=True
    )
    raise SystemExit(code)


def print_summary(summary: dict[str, Any], out: Any) -> None:
    """The summary table of :func:`ctxeval._output.report.summary_dict`'s output, and the LLM
    usage."""
    from ctxeval._results.display import summary_table, usage_line

    out.print(summary_table(summary["metrics"]))
    line = usage_line(summary["usage"])
    if line:
        out.print(line)


def print_errors(groups: Any, out: Any, *, limit: int = 10) -> None:
    """The error rows grouped by metric and reason, most frequent first, each with its count
    and an example sample id (under the summary, so that ``error 13`` never looks like a
    score). ``groups``: :meth:`RunTotals.error_groups
    <ctxeval._results.totals.RunTotals.error_groups>`."""
    from rich.markup import escape

    groups = [g for g in groups if g.count]
    if not groups:
        return
    total = sum(g.count for g in groups)
    out.print(f"[bold red]{total} error row(s)[/], by reason:")
    for group in groups[:limit]:
        out.print(
            f"  {group.count:>5}  {escape(group.metric)}: {escape(group.reason)} "
            f"[dim](e.g. sample {escape(group.example)})[/]",
            soft_wrap=False,
        )
    if len(groups) > limit:
        out.print(f"  … and {len(groups) - limit} more reason(s); see results.jsonl")


def _num(value: float | None, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _cost(usage: dict[str, Any]) -> str:
    cost = usage.get("cost_usd")
    price = "cost unknown" if cost is None else f"${cost:.4f}"
    return f"{usage.get('requests', 0)} requests, {price}"


def print_trust(summary: dict[str, Any], out: Any) -> None:
    """What the run says of each judge (``summary.json``'s ``judge`` entries): agreement with
    people's labels and the corrected mean, flip rates over repeats, the jury. Short plain
    lines under each metric's name, readable at 80 columns and in CI logs."""
    from rich.markup import escape

    judged = {m: s["judge"] for m, s in summary["metrics"].items() if s.get("judge")}
    if not judged:
        return
    say = out.print
    say("[bold]how far to trust the judge[/]")
    for metric, judge in judged.items():
        say(f"  {escape(metric)}", soft_wrap=True)
        agreement, corrected = judge.get("agreement"), judge.get("corrected")
        if agreement:
            ci = agreement["kappa_ci95"]
            interval = f" (95% CI {ci[0]:.3f}–{ci[1]:.3f})" if ci else ""
            say(
                f"    vs people: {agreement['n_items']} items of {agreement['n_samples']} "
                f"samples, accuracy {_num(agreement['accuracy'])}"
            )
            say(
                f"      balanced accuracy {_num(agreement['balanced_accuracy'])} · kappa "
                f"{_num(agreement['kappa'])}{interval}"
            )
        if corrected:
            low, high = corrected["ci95"]
            say(
                f"    mean {_num(corrected['judged_mean'])} as judged → "
                f"[bold]{corrected['mean']:.3f}[/] corrected (95% CI {low:.3f}–{high:.3f})"
            )
            say(
                f"      PPI++ from {corrected['n_labelled']} labelled and "
                f"{corrected['n_unlabelled']} unlabelled samples"
            )
        elif agreement:
            say("    no corrected mean: it needs 2+ samples with all judged items labelled")
        for reason, count in (judge.get("skipped_labels") or {}).items():
            say(f"    [yellow]{count} label(s) not used[/]: {escape(reason)}", soft_wrap=True)
        repeats = judge.get("repeatability")
        if repeats:
            say(
                f"    repeats: {repeats['n_items']} items · flip rate "
                f"{_num(repeats['flip_rate'])} · {repeats['n_unsure']} unsure"
            )
            say(f"      two judgements of an item differ: {_num(repeats['disagreement'])}")
        jury = judge.get("jury")
        if jury:
            say(
                f"    jury: {jury['n_disagreements']} disagreement(s) · "
                f"{jury['n_escalated']} escalated"
            )
            for pair in jury["pairs"]:
                say(
                    f"      {escape(pair['a'])} vs {escape(pair['b'])}: agree "
                    f"{_num(pair['agreement'])} on {pair['n']} items, kappa "
                    f"{_num(pair['kappa'])}",
                    soft_wrap=True,
                )
            for name, usage in jury["usage"].items():
                say(f"      {escape(name)}: {_cost(usage)}", soft_wrap=True)
