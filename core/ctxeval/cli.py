"""The ``ctxeval`` command line.

::

    ctxeval evaluate DATA -m METRIC [-m METRIC ...] [--out DIR] [--resume] ...
    ctxeval metrics [--json]
    ctxeval plugins [--json]
    ctxeval compare RUN_A RUN_B [--json]
    ctxeval demo [--out DIR]

Exit codes: 0 when every row is ok or undefined, 1 when any row is an error (or the run stopped
at its cost limit), 2 on bad usage or unreadable input (the message names file, line and
field), 130 when interrupted.
"""

from __future__ import annotations

import argparse
import difflib
import json
import logging
import math
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from ._version import __version__
from .errors import BudgetExceededError, ConfigError, CtxevalError, DataError, MissingExtraError

__all__ = ["main"]

EXIT_OK, EXIT_ERRORS, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130

EXAMPLES = """\
examples:
  ctxeval demo
  ctxeval evaluate traces.jsonl -m id_based_context_precision -m id_ndcg_at_k:k=5 --out run1
  ctxeval evaluate traces.jsonl -m context_entity_recall:extractor=spacy --out run1
  ctxeval evaluate traces.jsonl -m context_precision -m context_recall \\
      --model openai/gpt-4o-mini --out run2 --max-cost 2.50
  ctxeval evaluate traces.jsonl -m context_recall --model openai/gpt-4o-mini --dry-run
  ctxeval evaluate --config run.toml --resume
  ctxeval compare run1 run2

metric options go after a colon, comma-separated: NAME:key=value,key=value
(values are read as JSON when they parse, e.g. k=5, batch=true, labels=["PERSON","GPE"])
"""


class UsageError(Exception):
    """Bad command-line usage: exit code 2 with the message."""


def _console(stderr: bool = False) -> Any:
    from rich.console import Console

    return Console(stderr=stderr, highlight=False)


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    from rich.markup import escape

    # escape: install commands such as pip install 'ctxeval[llm]' hold brackets
    _console(stderr=True).print(
        f"[bold red]error:[/] {escape(message)}", markup=True, soft_wrap=True
    )
    raise SystemExit(code)


# --- metric specs ----------------------------------------------------------------------------


def parse_value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def parse_metric(spec: str) -> tuple[str, dict[str, Any]]:
    """``name:key=value,key=value`` into a name and options."""
    name, _, rest = spec.partition(":")
    options: dict[str, Any] = {}
    if rest:
        depth, part, parts = 0, "", []
        for char in rest:  # split on commas outside brackets
            depth += char in "[{"
            depth -= char in "]}"
            if char == "," and depth == 0:
                parts.append(part)
                part = ""
            else:
                part += char
        parts.append(part)
        for item in parts:
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise UsageError(f"metric option {item!r} in {spec!r} is not key=value")
            options[key.strip()] = parse_value(value.strip())
    return name.strip(), options


def build_metrics(specs: Sequence[tuple[str, dict[str, Any]]], llm: Any) -> list[Any]:
    from . import default_registry

    registry = default_registry()
    metrics = []
    for name, options in specs:
        if name not in registry.names():
            close = difflib.get_close_matches(name, registry.names(), n=1, cutoff=0.5)
            hint = f"; did you mean {close[0]!r}?" if close else "; see: ctxeval metrics"
            raise UsageError(f"unknown metric {name!r}{hint}")
        metrics.append(registry.get_metric(name, **options))
    return metrics


# --- run files -------------------------------------------------------------------------------


def read_run_file(path: str) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    try:
        with open(path, "rb") as handle:
            data: dict[str, Any] = tomllib.load(handle)
    except FileNotFoundError:
        raise UsageError(f"{path}: no such run file") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: not valid TOML: {exc}") from None
    return data


# --- progress --------------------------------------------------------------------------------


class ProgressView:
    """A live bar on a terminal, plain lines every few seconds elsewhere; silent with --quiet."""

    def __init__(self, *, quiet: bool, total: int | None) -> None:
        self.quiet = quiet
        self.total = total
        self.console = _console(stderr=True)
        self.live = self.console.is_terminal and not quiet
        self._last_line = 0.0
        self._progress: Any = None
        self._task: Any = None

    def __enter__(self) -> ProgressView:
        if self.live:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeRemainingColumn,
            )

            self._progress = Progress(
                TextColumn("[bold]scoring"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[rate]}"),
                TimeRemainingColumn(),
                TextColumn("{task.fields[extra]}"),
                console=self.console,
                transient=False,
            )
            self._progress.start()
            self._task = self._progress.add_task("scoring", total=self.total, rate="", extra="")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()

    def __call__(self, p: Any) -> None:
        if self.quiet:
            return
        extra = f"errors {p.errors}"
        if p.usage.requests or p.usage.cache_hits:
            cost = "cost unknown" if p.usage.cost_usd is None else f"${p.usage.cost_usd:.4f}"
            tokens = p.usage.prompt_tokens + p.usage.completion_tokens
            extra += f" · {p.usage.requests} requests · {tokens} tokens · {cost}"
        if self._progress is not None:
            self._progress.update(
                self._task, completed=p.done, rate=f"{p.rate:.0f} rows/s", extra=extra
            )
            return
        now = time.monotonic()
        if p.finished or now - self._last_line >= 5:
            self._last_line = now
            known = p.total if p.total is not None else self.total
            total = f"/{known}" if known is not None else ""
            left = None if known is None or not p.rate else max(0.0, (known - p.done) / p.rate)
            eta = "" if left is None or p.finished else f", eta {left:.0f}s"
            self.console.print(
                f"scored {p.done}{total} rows ({p.rate:.0f}/s{eta}), {extra}", highlight=False
            )


def count_rows(path: Path) -> int | None:
    """Rows of a JSONL file, counted fast (blank lines aside), for the progress total."""
    if path.suffix.lower() not in (".jsonl", ".ndjson"):
        return None
    count = 0
    with path.open("rb") as handle:
        for line in handle:
            if line.strip():
                count += 1
    return count


# --- commands --------------------------------------------------------------------------------


def _llm_config(args: argparse.Namespace, run: dict[str, Any]) -> Any:
    model = args.model or run.get("model")
    if not model:
        return None
    from ctxeval_llm import LLMConfig

    api_base = args.api_base or run.get("api_base")
    settings = dict(run.get("llm", {}))
    settings.update(model=model, api_base=api_base)
    if args.timeout is not None:
        settings["timeout"] = args.timeout
    try:
        return LLMConfig(**settings)
    except TypeError as exc:
        raise UsageError(f"bad [llm] settings: {exc}") from None


def _needs_llm(metrics: Sequence[Any]) -> bool:
    return any(hasattr(m, "estimate_calls") for m in metrics)


def _dry_run(samples: Any, metrics: Sequence[Any], llm: Any, console: Any) -> int:
    from rich.table import Table

    calls: dict[str, int] = {m.name: 0 for m in metrics}
    chars: dict[str, int] = {m.name: 0 for m in metrics}
    n = 0
    for sample in samples:
        n += 1
        for metric in metrics:
            estimate = getattr(metric, "estimate_calls", None)
            if estimate is None:
                continue
            sizes = estimate(sample)
            calls[metric.name] += len(sizes)
            chars[metric.name] += sum(sizes)
    table = Table(title=f"dry run: {n} samples, nothing sent")
    table.add_column(
        "metric", no_wrap=True, min_width=max((len(m.name) for m in metrics), default=6)
    )
    for column in ("LLM calls", "prompt tokens (est.)", "cost USD (est.)"):
        table.add_column(column, justify="right")
    total_cost: float | None = 0.0
    model = getattr(llm, "model", None)
    for metric in metrics:
        prompt_tokens = math.ceil(chars[metric.name] / 4)
        completion = 60 * calls[metric.name]
        cost: float | None = 0.0
        if calls[metric.name]:
            from ctxeval_llm.pricing import cost_usd

            cost = cost_usd(model, prompt_tokens, completion) if model else None
        total_cost = None if cost is None or total_cost is None else total_cost + cost
        table.add_row(
            metric.name,
            str(calls[metric.name]),
            str(prompt_tokens),
            "unknown" if cost is None else f"{cost:.4f}",
        )
    console.print(table)
    total = sum(calls.values())
    console.print(
        f"{total} LLM calls; estimated cost: "
        + ("unknown (model not in the price table)" if total_cost is None else f"${total_cost:.4f}")
        + " (tokens estimated as characters / 4, 60 answer tokens per call)"
    )
    return EXIT_OK


def cmd_evaluate(args: argparse.Namespace) -> int:
    from . import load_samples

    run = read_run_file(args.config) if args.config else {}
    data = args.data or run.get("data")
    if not data:
        raise UsageError(
            "give the data file: ctxeval evaluate DATA -m METRIC (or data= in the run file)"
        )
    specs = [parse_metric(m) for m in (args.metric or [])]
    for entry in run.get("metrics", []):
        if not isinstance(entry, dict) or "name" not in entry:
            raise UsageError(f"{args.config}: each [[metrics]] table needs a name")
        entry = dict(entry)
        specs.append((entry.pop("name"), entry))
    if not specs:
        raise UsageError("give at least one metric: -m NAME (see: ctxeval metrics)")
    out = args.out or run.get("out")
    if args.resume and not out:
        raise UsageError("--resume needs --out DIR (the folder of the run to resume)")
    llm = _llm_config(args, run)
    metrics = build_metrics(specs, llm)
    path = Path(data)
    strict = not (args.lenient or run.get("lenient", False))
    stream = load_samples(path, strict=strict)
    console = _console()
    if args.dry_run:
        return _dry_run(stream, metrics, llm, console)
    if _needs_llm(metrics) and llm is None:
        raise UsageError("these metrics need an LLM: add --model (e.g. --model openai/gpt-4o-mini)")
    cache = None
    if _needs_llm(metrics) and not (args.no_cache or run.get("no_cache", False)):
        from .cache import SQLiteCache

        home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        cache = SQLiteCache(home / "ctxeval" / "llm.sqlite")
    concurrency = args.max_concurrency or run.get("max_concurrency") or 16
    max_cost = args.max_cost if args.max_cost is not None else run.get("max_cost")
    journal = Path(out) / "journal.jsonl" if out else None
    total = count_rows(path) if path.exists() else None
    evaluation, stopped = _run(
        stream,
        metrics,
        llm=llm,
        cache=cache,
        concurrency=concurrency,
        journal=journal,
        resume=args.resume,
        max_cost=max_cost,
        quiet=args.quiet,
        total=None if total is None else total * len(metrics),
    )
    bad_rows = list(stream.errors)
    from rich.markup import escape

    for error in bad_rows:
        _console(stderr=True).print(f"[yellow]skipped:[/] {escape(str(error))}", soft_wrap=True)
    from .report import summary_dict, write_outputs

    summary = summary_dict(
        evaluation,
        extra={
            "data": str(path),
            "skipped_rows": [str(e) for e in bad_rows],
            "ctxeval": __version__,
        },
    )
    if out:
        paths = write_outputs(evaluation, out, title=f"ctxeval: {path.name}", summary=summary)
    if not args.quiet:
        print_summary(summary, console)
        if out:
            for kind in ("results", "summary", "report"):
                console.print(f"{kind + ':':<9}{paths[kind]}")
    if stopped is not None:
        fail(f"{stopped}; continue with --resume and a higher --max-cost", EXIT_ERRORS)
    return EXIT_ERRORS if (not evaluation.ok or bad_rows) else EXIT_OK


def _run(
    samples: Any,
    metrics: list[Any],
    *,
    llm: Any,
    cache: Any,
    concurrency: int,
    journal: Path | None,
    resume: bool,
    max_cost: float | None,
    quiet: bool,
    total: int | None,
) -> tuple[Any, BudgetExceededError | None]:

    from . import stream
    from .evaluation import Evaluation
    from .runner import run_to_completion

    rows: list[Any] = []
    stopped: list[BudgetExceededError] = []
    with ProgressView(quiet=quiet, total=total) as view:

        async def main() -> None:
            async with stream(
                samples,
                metrics,
                llm=llm,
                cache=cache,
                max_concurrency=concurrency,
                journal=journal,
                resume=resume,
                on_progress=view,
                max_cost_usd=max_cost,
            ) as results:
                try:
                    async for row in results:
                        rows.append(row)
                except BudgetExceededError as exc:
                    stopped.append(exc)

        try:
            run_to_completion(main)
        except KeyboardInterrupt:
            saved = _journal_rows(journal) if journal else 0
            where = f" ({saved} rows saved in {journal})" if journal else ""
            hint = (
                " run the same command with --resume to finish it"
                if journal
                else " use --out DIR to be able to resume"
            )
            fail(f"interrupted{where};{hint}", EXIT_INTERRUPTED)
    return Evaluation(rows, [m.name for m in metrics]), (stopped[0] if stopped else None)


def _journal_rows(journal: Path) -> int:
    try:
        with journal.open(encoding="utf-8", errors="replace") as handle:
            return max(0, sum(1 for _ in handle) - 1)
    except OSError:
        return 0


def print_summary(summary: dict[str, Any], console: Any) -> None:
    """The summary table of :func:`ctxeval.report.summary_dict`'s output, and the LLM usage."""
    from rich.table import Table

    from .results import Usage

    metrics = summary["metrics"]
    table = Table(title="summary")
    table.add_column("metric", no_wrap=True, min_width=max(map(len, metrics), default=6))
    for column in ("mean", "95% CI", "ok", "undefined", "error"):
        table.add_column(column, justify="right", no_wrap=True)
    for name, s in metrics.items():
        ci = s["ci95"]
        table.add_row(
            name,
            "—" if s["mean"] is None else f"{s['mean']:.3f}",
            "—" if ci is None else f"{ci[0]:.3f}–{ci[1]:.3f}",
            str(s["n_ok"]),
            str(s["n_undefined"]),
            f"[red]{s['n_error']}[/]" if s["n_error"] else "0",
        )
    console.print(table)
    usage = Usage.from_dict(summary["usage"])
    if usage.requests or usage.cache_hits:
        cost = "unknown" if usage.cost_usd is None else f"${usage.cost_usd:.4f}"
        console.print(
            f"LLM: {usage.requests} requests ({usage.retries} retries), "
            f"{usage.cache_hits} cache hits, "
            f"{usage.prompt_tokens + usage.completion_tokens} tokens, cost {cost}"
        )


def cmd_metrics(args: argparse.Namespace) -> int:
    from . import default_registry
    from .base import options_of

    registry = default_registry()
    entries: list[dict[str, Any]] = []
    for info in registry.plugins():
        if info.group != "ctxeval.metrics":
            continue
        factory = (
            registry.factory(info.group, info.name)
            if info.status in ("ok", "unavailable")
            else None
        )
        entries.append(
            {
                "name": info.name,
                "alias_of": info.alias_of,
                "status": info.status,
                "requires": list(getattr(factory, "requires", ()) or ()),
                "options": [o for o in (options_of(factory) or []) if o != "name"]
                if factory
                else [],
                "install": info.install,
                "error": info.error,
                "distribution": info.distribution,
            }
        )
    if args.json:
        print(json.dumps(entries, indent=2))
        return EXIT_OK
    from rich.table import Table

    table = Table(title="metrics")
    width = max(len(e["name"]) for e in entries) if entries else 10
    table.add_column("name", no_wrap=True, min_width=width)
    for column in ("needs", "options", "status"):
        table.add_column(column)
    for e in entries:
        name = e["name"] + (f" (= {e['alias_of']})" if e["alias_of"] else "")
        status = e["status"] + (f": {e['install']}" if e["install"] else "")
        table.add_row(name, ", ".join(e["requires"]), ", ".join(e["options"]), status)
    _console().print(table)
    return EXIT_OK


def cmd_plugins(args: argparse.Namespace) -> int:
    from . import plugins

    infos = plugins()
    if args.json:
        print(json.dumps([i.to_dict() for i in infos], indent=2))
        return EXIT_OK
    from rich.table import Table

    table = Table(title="plugins")
    table.add_column("group", no_wrap=True)
    table.add_column("name", no_wrap=True, min_width=max((len(i.name) for i in infos), default=4))
    for column in ("distribution", "version", "status"):
        table.add_column(column)
    for i in infos:
        status = i.status if i.status == "ok" else f"{i.status}: {i.install or i.error}"
        table.add_row(i.group, i.name, i.distribution or "(code)", i.version or "", status)
    _console().print(table)
    return EXIT_OK


def _read_run(folder: str) -> dict[tuple[str, str], Any]:
    from .evaluation import Evaluation

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
    from .stats import paired_bootstrap

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
    _console().print(table)
    return EXIT_OK


DEMO_METRICS = [
    "id_based_context_precision",
    "id_based_context_recall",
    "id_mrr",
    "id_ndcg_at_k:k=5",
    "non_llm_context_precision_with_reference",
    "non_llm_context_recall:measure=containment",
    "context_entity_recall:extractor=spacy",
]


def cmd_demo(args: argparse.Namespace) -> int:
    from importlib.resources import files

    from . import default_registry

    data = files("ctxeval") / "data" / "demo.jsonl"
    specs = [parse_metric(m) for m in DEMO_METRICS]
    console = _console()
    infos = {(i.group, i.name): i for i in default_registry().plugins()}
    spacy_info = infos.get(("ctxeval.extractors", "spacy"))
    if spacy_info is None or spacy_info.status != "ok":
        specs = [s for s in specs if s[0] != "context_entity_recall"]
        console.print(
            "[yellow]spaCy is not installed: the demo skips context_entity_recall "
            "(pip install 'ctxeval[spacy]' to include it)[/]",
            markup=True,
        )
    out = Path(args.out)
    console.print(
        f"ctxeval {__version__} demo: 30 questions over a 24-document corpus, "
        "metrics that need no LLM\n"
    )
    metrics = build_metrics(specs, None)
    with open(str(data), encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    evaluation, _ = _run(
        rows,
        metrics,
        llm=None,
        cache=None,
        concurrency=16,
        journal=None,
        resume=False,
        max_cost=None,
        quiet=args.quiet,
        total=len(rows) * len(metrics),
    )
    from .report import summary_dict, write_outputs

    summary = summary_dict(evaluation, extra={"data": "ctxeval demo dataset"})
    paths = write_outputs(evaluation, out, title="ctxeval demo", summary=summary)
    print_summary(summary, console)
    console.print(f"\nreport: {paths['report'].resolve()}\nresults: {paths['results'].resolve()}")
    return EXIT_ERRORS if not evaluation.ok else EXIT_OK


# --- entry point -----------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ctxeval",
        description="Measure the quality of the context a RAG system retrieves.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"ctxeval {__version__}")
    parser.add_argument(
        "-v", "--verbose", action="count", default=0, help="log more (-vv for debug)"
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    ev = commands.add_parser(
        "evaluate",
        help="score a dataset",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Score every sample of DATA (JSONL, JSON, CSV or Parquet) with every metric.",
    )
    ev.add_argument("data", nargs="?", help="the samples: .jsonl, .json, .csv or .parquet")
    ev.add_argument(
        "-m",
        "--metric",
        action="append",
        metavar="METRIC",
        help="a metric, NAME or NAME:key=value,...; repeat for more",
    )
    ev.add_argument(
        "--config", metavar="RUN.toml", help="a run file with data, out, model, [[metrics]] ..."
    )
    ev.add_argument(
        "--model", help="LLM for the LLM metrics, a litellm model string (openai/gpt-4o-mini)"
    )
    ev.add_argument("--api-base", help="the LLM endpoint, for OpenAI-compatible servers")
    ev.add_argument(
        "--out",
        metavar="DIR",
        help="write results.jsonl, summary.json, report.html and a journal here",
    )
    ev.add_argument("--resume", action="store_true", help="finish an interrupted run in --out")
    ev.add_argument(
        "--max-concurrency", type=int, metavar="N", help="LLM calls in flight at once (16)"
    )
    ev.add_argument("--timeout", type=float, metavar="S", help="seconds one LLM request may take")
    ev.add_argument(
        "--no-cache", action="store_true", help="do not read or write the LLM answer cache"
    )
    ev.add_argument(
        "--max-cost",
        type=float,
        metavar="USD",
        help="stop cleanly once the run has spent this much",
    )
    ev.add_argument(
        "--dry-run",
        action="store_true",
        help="count the LLM calls and estimate the cost; send nothing",
    )
    ev.add_argument(
        "--lenient", action="store_true", help="skip bad input rows (reported) instead of stopping"
    )
    ev.add_argument("-q", "--quiet", action="store_true", help="no progress and no summary")
    ev.set_defaults(func=cmd_evaluate)

    me = commands.add_parser("metrics", help="list the metrics, what they need and their options")
    me.add_argument("--json", action="store_true")
    me.set_defaults(func=cmd_metrics)

    pl = commands.add_parser("plugins", help="list every plugin with its distribution and status")
    pl.add_argument("--json", action="store_true")
    pl.set_defaults(func=cmd_plugins)

    co = commands.add_parser("compare", help="is run B better than run A? (paired bootstrap)")
    co.add_argument("run_a", metavar="RUN_A", help="a run folder (or its results.jsonl)")
    co.add_argument("run_b", metavar="RUN_B")
    co.add_argument("--json", action="store_true")
    co.set_defaults(func=cmd_compare)

    de = commands.add_parser(
        "demo", help="score the bundled demo dataset (no LLM) and write a report"
    )
    de.add_argument(
        "--out", default="ctxeval-demo", metavar="DIR", help="where to write (ctxeval-demo)"
    )
    de.add_argument("-q", "--quiet", action="store_true")
    de.set_defaults(func=cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=[logging.WARNING, logging.INFO, logging.DEBUG][min(args.verbose, 2)],
        format="%(levelname)s %(name)s: %(message)s",
    )
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    try:
        code: int = args.func(args)
        return code
    except UsageError as exc:
        fail(str(exc))
    except (DataError, ConfigError, MissingExtraError) as exc:
        fail(str(exc))
    except BrokenPipeError:  # e.g. piped into head
        return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
