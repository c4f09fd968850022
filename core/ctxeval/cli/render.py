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
    warning = summary.get("scripted_judge")
    if warning:
        from rich.markup import escape

        out.print(f"[bold yellow]{escape(str(warning))}[/]")


def print_errors(groups: Any, out: Any, *, limit: int = 10) -> None:
    """The error rows grouped by metric and reason, most frequent first, each with its count
    and an example sample id (under the summary, so that ``error 13`` never looks like a
    score). ``groups``: :meth:`RunTotals.error_groups
    <ctxeval._output.totals.RunTotals.error_groups>`."""
    from rich.markup import escape

    groups = [g for g in groups if g.count]
    if not groups:
        return
    total = sum(g.count for g in groups)
    # one line for the metrics that failed alike on the same samples (an unreadable row, an
    # unreachable judge): "2 metrics" rather than the same reason once per metric
    alike: dict[tuple[str, int, str], list[str]] = {}
    for group in groups:
        alike.setdefault((group.reason, group.count, group.example), []).append(group.metric)
    out.print(f"[bold red]{total} error row(s)[/], by reason:")
    lines = list(alike.items())
    for (reason, count, example), metrics in lines[:limit]:
        who = metrics[0] if len(metrics) == 1 else f"{len(metrics)} metrics ({', '.join(metrics)})"
        out.print(
            f"  {count * len(metrics):>5}  {escape(who)}: {escape(reason)} "
            f"[dim](e.g. sample {escape(example)})[/]",
            soft_wrap=False,
        )
    if len(lines) > limit:
        out.print(f"  … and {len(lines) - limit} more reason(s); see results.jsonl")


def _num(value: float | None, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _cost(usage: dict[str, Any]) -> str:
    cost = usage.get("cost_usd")
    price = "cost unknown" if cost is None else f"${cost:.4f}"
    return f"{usage.get('requests', 0)} requests, {price}"


def _interval(ci: list[float] | None) -> str:
    return f" (95% CI {ci[0]:.3f}–{ci[1]:.3f})" if ci else ""


def _print_graded(graded: dict[str, Any], say: Any) -> None:
    """A grading judge against people's grades: the kappas, then the confusion matrix (rows:
    the people's grade, columns: the judge's)."""
    difference = graded["mean_difference"]
    say(
        f"    vs people's grades: {graded['n_items']} items of {graded['n_samples']} samples, "
        f"exact {_num(graded['exact'])}, within one {_num(graded['within_one'])}",
        soft_wrap=True,
    )
    say(
        f"      weighted kappa: quadratic {_num(graded['kappa_quadratic'])}"
        f"{_interval(graded['kappa_quadratic_ci95'])}"
    )
    say(
        f"        linear {_num(graded['kappa_linear'])}{_interval(graded['kappa_linear_ci95'])}"
        f" · unweighted kappa {_num(graded['kappa'])}"
    )
    shown = "—" if difference is None else f"{difference:+.2f}"
    say(f"      judge's mean grade − people's: {shown}")
    grades = graded["grades"]
    say("      people ↓ judge → " + " ".join(f"{g:>3}" for g in grades))
    for grade, row in zip(grades, graded["confusion"], strict=True):
        say(f"      {grade:>16} " + " ".join(f"{c:>3}" for c in row))


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
        graded = judge.get("graded_agreement")
        if graded:
            _print_graded(graded, say)
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
