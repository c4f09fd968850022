"""``ctxeval demo``: the bundled dataset scored with every metric that needs no LLM."""

from __future__ import annotations

import argparse
import json
import shlex
from pathlib import Path
from typing import Any

from ctxeval._version import __version__
from ctxeval.cli.invocation import program
from ctxeval.cli.render import EXIT_ERRORS, EXIT_OK, console, print_errors, print_summary
from ctxeval.cli.specs import build_metrics, parse_metric

__all__ = ["DEMO_METRICS", "add_parser", "cmd_demo"]


DEMO_METRICS = [
    "id_based_context_precision",
    "id_based_context_recall",
    "id_mrr",
    "id_ndcg_at_k:k=5",
    "non_llm_context_precision_with_reference",
    "non_llm_context_recall:measure=containment",
    "context_entity_recall:extractor=spacy",
]


def add_parser(commands: Any) -> None:
    """Declare ``ctxeval demo`` and its options on ``commands`` (the
    subparsers of the ``ctxeval`` parser)."""
    parser = commands.add_parser(
        "demo", help="score the bundled demo dataset (no LLM) and write a report"
    )
    parser.add_argument(
        "--out", default="ctxeval-demo", metavar="DIR", help="where to write (ctxeval-demo)"
    )
    parser.add_argument("-q", "--quiet", action="store_true")
    parser.set_defaults(command_module="demo")


def cmd_demo(args: argparse.Namespace) -> int:
    from importlib.resources import files

    from ctxeval._plugins.registry import default_registry
    from ctxeval._run.settings import RunSettings
    from ctxeval.cli.progress import run_with_progress

    data = files("ctxeval") / "data" / "demo.jsonl"
    specs = [parse_metric(m) for m in DEMO_METRICS]
    stdout = console()
    infos = {(i.group, i.name): i for i in default_registry().plugins()}
    spacy_info = infos.get(("ctxeval.extractors", "spacy"))
    if spacy_info is None or spacy_info.status != "ok":
        specs = [s for s in specs if s[0] != "context_entity_recall"]
        stdout.print(
            "[yellow]spaCy is not installed: the demo skips context_entity_recall "
            "(pip install 'ctxeval\\[spacy]' to include it)[/]",
            markup=True,
            soft_wrap=True,  # (the command stays on one line, to copy)
        )
    out = Path(args.out)
    stdout.print(
        f"ctxeval {__version__} demo: 30 questions over a 24-document corpus,\n"
        "scored with the metrics that need no LLM\n",
        soft_wrap=True,
    )
    metrics = build_metrics(specs)
    with open(str(data), encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    from ctxeval._output.folder import RunFolder
    from ctxeval._output.rebuild import file_lookup

    path = Path(str(data))  # (the report shows each sample's texts beside its evidence)
    folder = RunFolder(
        out, [m.name for m in metrics], title="ctxeval demo", lookup=file_lookup(path)
    )
    try:
        run_with_progress(
            rows,
            metrics,
            llm=None,
            settings=RunSettings(),
            quiet=args.quiet,
            total=len(rows) * len(metrics),
            consume=folder.add,
        )
        summary = folder.summary(extra={"data": str(path)})
        paths = folder.finish(summary)
    except BaseException:
        folder.abort()
        raise
    print_summary(summary, stdout)
    print_errors(folder.totals.error_groups(), stdout)
    stdout.print(
        f"\nreport: {paths['report'].resolve()}\nresults: {paths['results'].resolve()}"
        f"\nevery sample in a local viewer: {program()} view {shlex.quote(str(out))}",
        soft_wrap=True,
    )
    return EXIT_ERRORS if not folder.totals.ok else EXIT_OK
