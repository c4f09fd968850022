"""``ctxeval evaluate``: score a dataset, write the run folder, print the summary."""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ctxeval._version import __version__
from ctxeval.settings import RunSettings

from .progress import run_with_progress
from .render import EXIT_ERRORS, EXIT_OK, UsageError, console, fail, print_summary
from .specs import build_metrics, count_rows, parse_metric, read_run_file

__all__ = ["DEFAULT_PROVIDER", "cmd_evaluate", "llm_provider"]

DEFAULT_PROVIDER = "auto"
"""The LLM provider (``ctxeval.llms`` group) used when neither --provider nor the run file
names one: the LLM plugin's OpenAI-compatible / litellm provider."""


def llm_provider(name: str) -> Any:
    """The LLM provider registered under ``name``."""
    from ctxeval.registry import default_registry

    return default_registry().get_llm_provider(name)


def _llm(args: argparse.Namespace, run: dict[str, Any]) -> tuple[Any, Any]:
    """The run's ``llm=`` made by the chosen provider, and the provider (both None without
    a model)."""
    model = args.model or run.get("model")
    if not model:
        return None, None
    provider = llm_provider(args.provider or run.get("provider") or DEFAULT_PROVIDER)
    settings = dict(run.get("llm", {}))
    if args.timeout is not None:
        settings["timeout"] = args.timeout
    try:
        llm = provider.configure(
            model=model, api_base=args.api_base or run.get("api_base"), **settings
        )
    except (TypeError, ValueError) as exc:
        raise UsageError(f"bad [llm] settings for provider {provider.name!r}: {exc}") from None
    return llm, provider


def _with_trec_eval_averaging(metric: Any) -> Any:
    """``metric`` with trec_eval's averaging (an option of the ID metrics)."""
    if not hasattr(metric, "trec_eval_averaging"):
        raise UsageError(
            f"--trec-eval-averaging: metric {metric.name!r} has no trec_eval averaging (only "
            "the ID metrics do)"
        )
    import attrs

    return attrs.evolve(metric, trec_eval_averaging=True)


def _needs_llm(metrics: Sequence[Any]) -> bool:
    """Whether a metric calls an LLM and has none of its own (it then uses --model)."""
    return any(getattr(m, "needs_llm", False) for m in metrics)


def _dry_run(samples: Any, metrics: Sequence[Any], llm: Any, provider: Any, out: Any) -> int:
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
            priced = provider is not None and model
            cost = provider.estimate_cost(model, prompt_tokens, completion) if priced else None
        total_cost = None if cost is None or total_cost is None else total_cost + cost
        table.add_row(
            metric.name,
            str(calls[metric.name]),
            str(prompt_tokens),
            "unknown" if cost is None else f"{cost:.4f}",
        )
    out.print(table)
    total = sum(calls.values())
    out.print(
        f"{total} LLM calls; estimated cost: "
        + ("unknown (model not in the price table)" if total_cost is None else f"${total_cost:.4f}")
        + " (tokens estimated as characters / 4, 60 answer tokens per call)"
    )
    return EXIT_OK


def cmd_evaluate(args: argparse.Namespace) -> int:
    from ctxeval.loading import load_samples

    run = read_run_file(args.config) if args.config else {}
    data = args.data or run.get("data")
    trec = bool(args.qrels or args.run)
    if trec:
        if not (args.qrels and args.run):
            raise UsageError("TREC files come in pairs: give both --qrels QRELS and --run RUN")
        if data:
            raise UsageError("give either DATA or --qrels/--run, not both")
    elif not data:
        raise UsageError(
            "give the data file: ctxeval evaluate DATA -m METRIC (or data= in the run file), "
            "or TREC files: --qrels QRELS --run RUN"
        )
    elif args.complete:
        raise UsageError("--complete goes with --qrels/--run (it adds the qrels' queries)")
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
    llm, provider = _llm(args, run)
    metrics = build_metrics(specs)
    if args.trec_eval_averaging:
        metrics = [_with_trec_eval_averaging(m) for m in metrics]
    if trec:
        from ctxeval.trec import load_trec

        path = Path(args.run)
        samples: Any = load_trec(args.qrels, args.run, complete=args.complete)
    else:
        path = Path(str(data))
        strict = not (args.lenient or run.get("lenient", False))
        samples = load_samples(path, strict=strict)
    stdout = console()
    if args.dry_run:
        return _dry_run(samples, metrics, llm, provider, stdout)
    if _needs_llm(metrics) and llm is None:
        raise UsageError("these metrics need an LLM: add --model (e.g. --model openai/gpt-4o-mini)")
    cache = None
    if _needs_llm(metrics) and not (args.no_cache or run.get("no_cache", False)):
        from ctxeval.cache import SQLiteCache

        home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        cache = SQLiteCache(home / "ctxeval" / "llm.sqlite")
    settings = RunSettings(
        max_concurrency=args.max_concurrency or run.get("max_concurrency") or 16,
        journal=Path(out) / "journal.jsonl" if out else None,
        resume=args.resume,
        cache=cache,
        max_cost_usd=args.max_cost if args.max_cost is not None else run.get("max_cost"),
    )
    total = len(samples) if trec else count_rows(path) if path.exists() else None
    evaluation, stopped = run_with_progress(
        samples,
        metrics,
        llm=llm,
        settings=settings,
        quiet=args.quiet,
        total=None if total is None else total * len(metrics),
    )
    bad_rows = list(getattr(samples, "errors", ()))
    from rich.markup import escape

    for error in bad_rows:
        console(stderr=True).print(f"[yellow]skipped:[/] {escape(str(error))}", soft_wrap=True)
    from ctxeval.report import summary_dict, write_outputs

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
        print_summary(summary, stdout)
        if out:
            for kind in ("results", "summary", "report"):
                stdout.print(f"{kind + ':':<9}{paths[kind]}")
    if stopped is not None:
        fail(f"{stopped}; continue with --resume and a higher --max-cost", EXIT_ERRORS)
    return EXIT_ERRORS if (not evaluation.ok or bad_rows) else EXIT_OK
