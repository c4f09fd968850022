"""``ctxeval compare``: is run B better than run A? (paired bootstrap over shared samples)"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ctxeval.errors import CtxevalError

from .render import EXIT_OK, UsageError, console

__all__ = ["cmd_compare"]


def _read_run(folder: str) -> dict[tuple[str, str], Any]:
    from ctxeval.evaluation import Evaluation

    path = Path(folder)
    path = path / "results.jsonl" if path.is_dir() else path
    if not path.exists():
        raise UsageError(f"{path}: no results here (give a run folder or its results.jsonl)")
    try:
        evaluation = Evaluation.from_jsonl(path)
    except (ValueError, KeyError, CtxevalError) as exc:
        raise UsageError(f"{path}: not a ctxeval results file: {exc}") from None
    return {(r.sample_id, r.metric): r for r in evaluation.results}


def cmd_compare(args: argparse.Namespace) -> int:
    from ctxeval.stats import paired_bootstrap

    a, b = _read_run(args.run_a), _read_run(args.run_b)
    metrics = sorted({m for _, m in a} & {m for _, m in b})
    if not metrics:
        raise UsageError("the two runs share no metric")
    report = {}
    for metric in metrics:
        shared = sorted(
            sid
            for (sid, m) in a
            if m == metric
            and (sid, m) in b
            and a[sid, m].score is not None
            and b[sid, m].score is not None
        )
        report[metric] = paired_bootstrap(
            [a[s, metric].score for s in shared], [b[s, metric].score for s in shared]
        )
    if args.json:
        print(json.dumps(report, indent=2))
        return EXIT_OK
    from rich.table import Table

    table = Table(title=f"{args.run_b} vs {args.run_a} (paired bootstrap over shared samples)")
    table.add_column("metric", no_wrap=True, min_width=max(map(len, report), default=6))
    for column in ("n", "A", "B", "B − A", "95% CI", "p"):
        table.add_column(column, justify="right", no_wrap=True)
    for metric, r in report.items():
        ci = "—" if r["ci95_low"] is None else f"{r['ci95_low']:+.3f} – {r['ci95_high']:+.3f}"
        diff = "—" if r["difference"] is None else f"{r['difference']:+.3f}"
        p = "—" if r["p_value"] is None else f"{r['p_value']:.3f}"
        a_mean = "—" if r["mean_a"] is None else f"{r['mean_a']:.3f}"
        b_mean = "—" if r["mean_b"] is None else f"{r['mean_b']:.3f}"
        table.add_row(metric, str(r["n"]), a_mean, b_mean, diff, ci, p)
    console().print(table)
    return EXIT_OK
