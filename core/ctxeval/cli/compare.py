"""``ctxeval compare``: did a run get better or worse than the first one, and is it real?

The first run is the baseline; each other run is compared with it, metric by metric, over the
samples both scored (``ok`` rows in both): the mean difference with its paired bootstrap 95%
interval, and two p-values for "no difference": the paired bootstrap's and a paired
randomisation (sign-flip) test's. With more than one run against the baseline, the
randomisation p-values of each metric are corrected for the number of comparisons (Holm).
Metrics that a run lacks are named, not dropped.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ctxeval._errors import CtxevalError
from ctxeval.cli.render import EXIT_OK, UsageError, console

__all__ = ["add_parser", "cmd_compare", "compare_runs", "table_lines"]


def _read_run(folder: str) -> dict[tuple[str, str], Any]:
    from ctxeval._output.evaluation import Evaluation

    path = Path(folder)
    path = path / "results.jsonl" if path.is_dir() else path
    if not path.exists():
        raise UsageError(f"{path}: no results here (give a run folder or its results.jsonl)")
    try:
        evaluation = Evaluation.from_jsonl(path)
    except (ValueError, KeyError, CtxevalError) as exc:
        raise UsageError(f"{path}: not a ctxeval results file: {exc}") from None
    return {(r.sample_id, r.metric): r for r in evaluation.results}


def _named_as(
    baseline: dict[tuple[str, str], Any], run: dict[tuple[str, str], Any]
) -> dict[tuple[str, str], Any]:
    """``run`` with each metric the baseline has under another of its names (an alias, an IR
    name: ``context_precision`` and ``llm_context_precision_with_reference``) renamed to the
    baseline's name, so that the two are compared."""
    from ctxeval._errors import CtxevalError
    from ctxeval._plugins.metric_names import MetricNames

    names = MetricNames(list(dict.fromkeys(m for _, m in baseline)))
    own = list(dict.fromkeys(m for _, m in run))
    renamed: dict[str, str] = {}
    for metric in own:
        if metric in names:
            continue
        try:
            meant = names.resolve(metric)
        except CtxevalError:  # (no metric of the baseline, or a name unknown here)
            continue
        if meant not in own and meant not in renamed.values():
            renamed[metric] = meant
    if not renamed:
        return run
    return {(sid, renamed.get(m, m)): row for (sid, m), row in run.items()}


def compare_runs(
    folders: list[str], *, permutations: int = 10_000, runs: list[Any] | None = None
) -> dict[str, Any]:
    """The comparison of ``folders[1:]`` with ``folders[0]`` (see the module), as a dict."""
    from ctxeval._results.stats import holm, paired_bootstrap, randomization_test

    if len(folders) < 2:
        raise UsageError("compare needs two run folders or more (the first is the baseline)")
    runs = runs if runs is not None else [_read_run(folder) for folder in folders]
    runs = [runs[0], *(_named_as(runs[0], run) for run in runs[1:])]
    metrics_of = [list(dict.fromkeys(m for _, m in run)) for run in runs]
    every = list(dict.fromkeys(m for names in metrics_of for m in names))
    missing = {
        metric: [folders[i] for i, names in enumerate(metrics_of) if metric not in names]
        for metric in every
    }
    missing = {metric: lacking for metric, lacking in missing.items() if lacking}
    baseline = runs[0]
    comparisons: list[dict[str, Any]] = []
    for metric in metrics_of[0]:
        family = []
        for folder, run in zip(folders[1:], runs[1:], strict=True):
            if metric in missing and folder in missing[metric]:
                continue
            shared = [
                sid
                for (sid, m), row in baseline.items()
                if m == metric
                and row.score is not None
                and (sid, m) in run
                and run[sid, m].score is not None
            ]
            a = [baseline[s, metric].score for s in shared]
            b = [run[s, metric].score for s in shared]
            result = paired_bootstrap(a, b)
            entry: dict[str, Any] = {"metric": metric, "run": folder, **result}
            entry["p_bootstrap"] = entry.pop("p_value")
            entry["p_randomization"] = randomization_test(a, b, permutations=permutations)
            family.append(entry)
        corrected = holm([e["p_randomization"] for e in family])
        for entry, p in zip(family, corrected, strict=True):
            entry["p_holm"] = p if len(family) > 1 else entry["p_randomization"]
        comparisons += family
    if not comparisons:
        raise UsageError("the runs share no metric with the baseline")
    return {
        "baseline": folders[0],
        "runs": folders[1:],
        "comparisons": comparisons,
        "missing": missing,
        "method": (
            "paired over the samples both runs scored; 95% CI: paired bootstrap (5000 "
            f"resamples); p: paired randomisation test ({permutations} sign flips, exact up to "
            "16 pairs); Holm-corrected per metric when more than one run is compared"
        ),
    }


def _number(value: float | None, spec: str) -> str:
    return "—" if value is None else format(value, spec)


def _markdown(report: dict[str, Any], labels: dict[str, str]) -> str:
    lines = [f"Baseline A: `{report['baseline']}`", ""]
    lines += [f"- {label}: `{folder}`" for folder, label in labels.items()]
    lines += [
        "",
        "| metric | run | n | A | B | B − A | 95% CI | p | p (Holm) |",
        "|---|---|---:|---:|---:|---:|---|---:|---:|",
    ]
    for c in report["comparisons"]:
        ci = "—" if c["ci95_low"] is None else f"{c['ci95_low']:+.3f} to {c['ci95_high']:+.3f}"
        lines.append(
            f"| `{c['metric']}` | {labels[c['run']]} | {c['n']} | {_number(c['mean_a'], '.3f')} "
            f"| {_number(c['mean_b'], '.3f')} | {_number(c['difference'], '+.3f')} | {ci} "
            f"| {_number(c['p_randomization'], '.3f')} | {_number(c['p_holm'], '.3f')} |"
        )
    for metric, lacking in report["missing"].items():
        lines.append(f"\n`{metric}` is missing from: {', '.join(f'`{r}`' for r in lacking)}")
    lines += ["", report["method"] + "."]
    return "\n".join(lines) + "\n"


_GAP = "  "


def table_lines(report: dict[str, Any], labels: dict[str, str], width: int) -> list[str]:
    """The comparison table as plain lines that fit ``width`` columns (a metric name longer
    than its column takes a line of its own, above its numbers, and is never cut): a header,
    a rule, a row per metric and run. The ``run`` and ``Holm`` columns appear only when more
    than one run is compared with the baseline (with one, B is that run and Holm's p is p).
    No line ends in white space."""
    several = len(report["runs"]) > 1
    headers = ["n", "A", "B", "B − A", "95% CI", "p"]
    if several:
        headers = ["run", *headers, "Holm"]
    body: list[tuple[str, list[str]]] = []
    for c in report["comparisons"]:
        ci = "—" if c["ci95_low"] is None else f"{c['ci95_low']:+.2f}…{c['ci95_high']:+.2f}"
        cells = [
            str(c["n"]),
            _number(c["mean_a"], ".3f"),
            _number(c["mean_b"], ".3f"),
            _number(c["difference"], "+.3f"),
            ci,
            _number(c["p_randomization"], ".3f"),
        ]
        if several:
            cells = [labels[c["run"]], *cells, _number(c["p_holm"], ".3f")]
        body.append((c["metric"], cells))
    widths = [max([len(h), *(len(cells[i]) for _, cells in body)]) for i, h in enumerate(headers)]

    def numbers(cells: list[str]) -> str:
        return _GAP.join(cell.rjust(w) for cell, w in zip(cells, widths, strict=True))

    tail = len(numbers(headers))
    longest = max((len(metric) for metric, _ in body), default=0)
    name_width = max(len("metric"), min(longest, width - tail - len(_GAP)))
    lines = ["metric".ljust(name_width) + _GAP + numbers(headers)]
    lines.append("─" * len(lines[0]))
    previous = None
    for metric, cells in body:
        shown, previous = ("" if metric == previous else metric), metric
        if len(shown) > name_width:
            lines.append(shown)
            shown = ""
        lines.append(shown.ljust(name_width) + _GAP + numbers(cells))
    return [line.rstrip() for line in lines]


def add_parser(commands: Any) -> None:
    """Declare ``ctxeval compare`` and its options on ``commands`` (the
    subparsers of the ``ctxeval`` parser)."""
    parser = commands.add_parser(
        "compare",
        help="did runs get better or worse than the first? (paired tests, Holm-corrected)",
    )
    parser.add_argument(
        "runs",
        nargs="+",
        metavar="RUN",
        help="run folders (or their results.jsonl); the first is the baseline",
    )
    parser.add_argument("--json", action="store_true", help="the comparison as JSON")
    parser.add_argument(
        "--markdown", action="store_true", help="the comparison as a Markdown table"
    )
    parser.add_argument(
        "--report",
        metavar="FILE",
        help="also write the runs side by side as an HTML page (which samples got better/worse)",
    )
    parser.add_argument(
        "--permutations",
        type=int,
        default=10_000,
        metavar="N",
        help="random sign flips of the randomisation test (exact up to 16 samples)",
    )
    parser.set_defaults(command_module="compare")


def cmd_compare(args: argparse.Namespace) -> int:
    runs = [_read_run(folder) for folder in args.runs]
    report = compare_runs(args.runs, permutations=args.permutations, runs=runs)
    if args.report:
        from ctxeval._output.comparison import render_comparison
        from ctxeval._output.files import write_text

        names = ["A", *(f"B{i}" for i in range(1, len(runs)))] if len(runs) > 2 else ["A", "B"]
        write_text(Path(args.report), render_comparison(report, runs, names))
    if args.json:
        print(json.dumps(report, indent=2))
        return EXIT_OK
    labels = {folder: f"B{i}" if len(report["runs"]) > 1 else "B"
              for i, folder in enumerate(report["runs"], start=1)}  # fmt: skip
    if args.markdown:
        print(_markdown(report, labels), end="")
        return EXIT_OK
    from rich.markup import escape
    from rich.text import Text

    from ctxeval.cli.metrics import wrap

    out = console()
    out.print(f"A = {escape(report['baseline'])} (baseline)", soft_wrap=True)
    for folder, label in labels.items():
        out.print(f"{label} = {escape(folder)}", soft_wrap=True)
    out.print(Text("paired comparison over the samples both runs scored", style="bold"))
    for i, line in enumerate(table_lines(report, labels, out.width)):
        out.print(Text(line, style="bold" if i == 0 else ""), soft_wrap=True)
    for metric, lacking in report["missing"].items():
        out.print(
            f"[yellow]{escape(metric)}[/] is missing from {escape(', '.join(lacking))}: "
            "not compared there",
            soft_wrap=True,
        )
    for line in wrap("", report["method"], out.width, indent=0):
        out.print(Text(line, style="dim"), soft_wrap=True)
    return EXIT_OK
