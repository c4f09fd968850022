"""The ``ctxeval`` command line: one module per command, and the shared parts.

::

    ctxeval evaluate DATA -m METRIC [-m METRIC ...] [--out DIR] [--resume] ...
    ctxeval metrics [--json]
    ctxeval plugins [--json]
    ctxeval compare RUN RUN [RUN ...] [--json | --markdown]
    ctxeval label-sheet RUN -m METRIC [--data DATA] [-n N] [-o FILE]
    ctxeval demo [--out DIR]
    ctxeval view RUN [RUN_B] [--host HOST] [--port N] [--data DATA] [--data-b DATA]
    ctxeval report RUN [--data DATA] [-o FILE]
    ctxeval serve-judge [--port N] [--host HOST] [--latency S]

Exit codes: 0 when every row is ok or undefined and every ``--fail-under`` gate holds, 1 when
any row is an error (or the run stopped at its cost limit), 2 on bad usage or unreadable input
(the message names file, line and field), 3 when a ``--fail-under`` gate fails, 130 when
interrupted.

Modules: :mod:`.render` (console, errors, the summary table), :mod:`.specs` (metric specs and
run files), :mod:`.progress` (a run with its live progress view), and one per command:
:mod:`.evaluate`, :mod:`.metrics`, :mod:`.plugins`, :mod:`.compare`, :mod:`.label_sheet`,
:mod:`.demo`, :mod:`.view`.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Sequence

from ctxeval._errors import ConfigError, DataError, MissingExtraError
from ctxeval._version import __version__
from ctxeval.cli.render import EXIT_OK, EXIT_USAGE, UsageError, fail

__all__ = ["build_parser", "main"]

EXAMPLES = """\
examples (`ctxeval COMMAND --help` has more):
  ctxeval demo
  ctxeval evaluate traces.jsonl -m @ids --out run1
  ctxeval evaluate traces.jsonl -m context_precision \\
      --model openai/gpt-4o-mini --out run2 --max-cost 2.50
  ctxeval compare run1 run2
  ctxeval view run1
  ctxeval report run1
  ctxeval label-sheet run2 -m context_precision --data traces.jsonl
  ctxeval serve-judge
"""

EVALUATE_EXAMPLES = """\
examples:
  ctxeval evaluate traces.jsonl -m id_based_context_precision \\
      -m id_ndcg_at_k:k=5 --out run1
  ctxeval evaluate traces.jsonl -m context_entity_recall:extractor=spacy
  ctxeval evaluate traces.jsonl -m context_precision -m context_recall \\
      --model openai/gpt-4o-mini --out run2 --max-cost 2.50
  ctxeval evaluate traces.jsonl -m context_recall \\
      --model openai/gpt-4o-mini --dry-run
  ctxeval evaluate --config run.toml --resume
  ctxeval evaluate --qrels qrels.txt --run run.txt -m nDCG@10 -m AP -m P@5
  ctxeval evaluate traces.jsonl -m id_mrr -m P@5 \\
      --fail-under id_mrr=0.6 --gate-on ci-low
  ctxeval evaluate traces.jsonl -m context_precision \\
      --model openai/gpt-4o-mini --labels run2/label-sheet.jsonl --out run3

metric options go after a colon, comma-separated: NAME:key=value,key=value
(values are read as JSON when they parse: k=5, batch=true, labels=["PERSON"])
"""


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
        epilog=EVALUATE_EXAMPLES,
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
        "--map",
        action="append",
        default=[],
        metavar="FIELD=COLUMN",
        help="read sample field FIELD from column COLUMN of DATA (repeat for more), e.g. "
        "--map user_input=query --map retrieved_contexts=chunks; with --from, where the "
        "trace reader finds FIELD (question=root, retrieval=last, id_key=metadata.doc_id)",
    )
    ev.add_argument("--qrels", metavar="QRELS", help="TREC qrels (instead of DATA; with --run)")
    ev.add_argument("--run", metavar="RUN", help="a TREC run, ranked by score as trec_eval does")
    ev.add_argument(
        "--complete",
        action="store_true",
        help="with --qrels: also the qrels' queries the run misses (trec_eval -c)",
    )
    ev.add_argument(
        "--per-query",
        nargs="?",
        const="",
        metavar="FILE",
        help="every query's value of every metric, as trec_eval -q: a table, and the file FILE "
        "(default: OUT/per-query.tsv with --out)",
    )
    ev.add_argument(
        "--unit",
        choices=("chunk", "document", "both"),
        help="what the context metrics count: each retrieved chunk (the default), each "
        "document once (at its best chunk), or both side by side (NAME and NAME@document)",
    )
    ev.add_argument(
        "--doc-id-separator",
        metavar="SEP",
        help="chunk IDs name their document before SEP (TREC RAG's doc#segment: --doc-id-"
        "separator '#'); without it, --unit document reads retrieved_context_sources",
    )
    ev.add_argument(
        "--duplicates",
        type=float,
        metavar="SIM",
        help="drop retrieved chunks that repeat an earlier one before judging: 1 identical "
        "texts, below 1 near-duplicates at least SIM alike (Levenshtein similarity)",
    )
    ev.add_argument(
        "--trec-eval-averaging",
        action="store_true",
        help="score a query with nothing retrieved or nothing relevant 0, as trec_eval does",
    )
    ev.add_argument(
        "--model", help="LLM for the LLM metrics, a litellm model string (openai/gpt-4o-mini)"
    )
    ev.add_argument("--api-base", help="the LLM endpoint, for OpenAI-compatible servers")
    ev.add_argument(
        "--provider",
        metavar="NAME",
        help="the LLM provider plugin that reaches --model (default: auto; see ctxeval plugins)",
    )
    ev.add_argument(
        "--out",
        metavar="DIR",
        help="write results.jsonl, summary.json, report.html and a journal here",
    )
    ev.add_argument("--resume", action="store_true", help="finish an interrupted run in --out")
    ev.add_argument("--overwrite", action="store_true", help="replace the run already in --out")
    ev.add_argument(
        "--shared",
        action="store_true",
        help="let others read the run folder's results and report (0755/0644, not 0700/0600): "
        "to publish them as a CI artifact or from a web server",
    )
    ev.add_argument(
        "--max-concurrency", type=int, metavar="N", help="LLM calls in flight at once (16)"
    )
    ev.add_argument("--timeout", type=float, metavar="S", help="seconds one LLM request may take")
    ev.add_argument(
        "--deadline",
        type=float,
        metavar="S",
        help="seconds one LLM call may take, its retries included (150)",
    )
    ev.add_argument(
        "--metric-timeout",
        type=float,
        metavar="S",
        help="seconds one metric may take on one sample, retries included (default 3600)",
    )
    ev.add_argument(
        "--batch",
        action="store_true",
        help="send the LLM requests through the Batch API (OpenAI-compatible; half the price, "
        "answers within 24 h); resumable with --out",
    )
    ev.add_argument(
        "--no-cache", action="store_true", help="do not read or write the LLM answer cache"
    )
    ev.add_argument(
        "--runner",
        metavar="NAME",
        help="where the run executes: local (this process, the default), processes (every "
        "core of this machine), ray (a Ray cluster, pip install 'ctxeval[ray]'), spark "
        "(Spark tasks, pip install 'ctxeval[spark]'), or a runner plugin's name (see: "
        "ctxeval plugins)",
    )
    ev.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="worker processes or actors of --runner (default: processes, the CPU count; ray, 2)",
    )
    ev.add_argument(
        "--ray",
        nargs="?",
        const="local",
        metavar="ADDRESS",
        help="--runner ray on the Ray cluster at ADDRESS (auto: the one this machine is "
        "in), or a local one when no ADDRESS is given",
    )
    ev.add_argument("--ray-workers", type=int, metavar="N", help=argparse.SUPPRESS)
    ev.add_argument(
        "--master",
        metavar="URL",
        help="--runner spark on the Spark master at URL (spark://HOST:7077, yarn, local[8]); "
        "default: local mode with --workers tasks",
    )
    ev.add_argument(
        "--max-cost",
        type=float,
        metavar="USD",
        help="stop cleanly once the run has spent this much",
    )
    ev.add_argument(
        "--price",
        metavar="IN,OUT",
        help="the price of --model in USD per million prompt (IN) and completion (OUT) tokens, "
        "e.g. 0.15,0.60: for a model the provider has no price for (needed with --max-cost); "
        "overrides the provider's price",
    )
    ev.add_argument(
        "--context-window",
        type=int,
        metavar="N",
        help="the context window of --model in tokens: a prompt that would not fit (estimated, "
        "with max_tokens for the answer) is an error row, not sent (default: the provider's "
        "known window, or a local llama.cpp server's n_ctx)",
    )
    ev.add_argument(
        "--format",
        action="append",
        metavar="FMT",
        help="also write this format in --out: csv, parquet, markdown, or a writer plugin's",
    )
    ev.add_argument(
        "--write-qrels",
        metavar="FILE",
        help="write the run's graded judgements (details.qrels of a metric that grades "
        "documents, such as context_relevance) to FILE as TREC qrels, to read with --qrels",
    )
    ev.add_argument(
        "--fail-under",
        action="append",
        metavar="METRIC=VALUE",
        help="exit 3 when METRIC scores below VALUE (repeat for more): a gate for CI",
    )
    ev.add_argument(
        "--gate-on",
        choices=("mean", "ci-low"),
        default="mean",
        help="what --fail-under compares: the mean, or the lower bound of its 95%% CI",
    )
    ev.add_argument(
        "--labels",
        metavar="FILE",
        help="people's labels of judged items (JSONL/CSV): the judge's agreement with them "
        "and the mean corrected by them (PPI) are reported",
    )
    ev.add_argument(
        "--dry-run",
        action="store_true",
        help="count the LLM calls and estimate the cost; send nothing",
    )
    ev.add_argument(
        "--lenient",
        action="store_true",
        help="make each bad input row error rows (exit 1) and score the others, not stop",
    )
    ev.add_argument(
        "--from",
        dest="from_format",
        metavar="FORMAT",
        help="DATA holds traces, not samples: openinference (OTLP JSON), mlflow, langsmith, "
        "phoenix, or a trace reader plugin's name; one trace is one sample (docs/traces.md)",
    )
    ev.add_argument(
        "--references",
        metavar="FILE",
        help="with --from: reference data (qrels, or samples with an id and reference fields) "
        "joined to the traces on --join-on",
    )
    ev.add_argument(
        "--join-on",
        metavar="ATTRIBUTE",
        help="the trace attribute whose value is a reference's id (default trace_id)",
    )
    ev.add_argument("-q", "--quiet", action="store_true", help="no progress and no summary")
    ev.set_defaults(command_module="evaluate")

    me = commands.add_parser("metrics", help="list the metrics, what they need and their options")
    me.add_argument("--json", action="store_true")
    me.set_defaults(command_module="metrics")

    pl = commands.add_parser("plugins", help="list every plugin with its distribution and status")
    pl.add_argument("--json", action="store_true")
    pl.set_defaults(command_module="plugins")

    co = commands.add_parser(
        "compare",
        help="did runs get better or worse than the first? (paired tests, Holm-corrected)",
    )
    co.add_argument(
        "runs",
        nargs="+",
        metavar="RUN",
        help="run folders (or their results.jsonl); the first is the baseline",
    )
    co.add_argument("--json", action="store_true", help="the comparison as JSON")
    co.add_argument("--markdown", action="store_true", help="the comparison as a Markdown table")
    co.add_argument(
        "--report",
        metavar="FILE",
        help="also write the runs side by side as an HTML page (which samples got better/worse)",
    )
    co.add_argument(
        "--permutations",
        type=int,
        default=10_000,
        metavar="N",
        help="random sign flips of the randomisation test (exact up to 16 samples)",
    )
    co.set_defaults(command_module="compare")

    ls = commands.add_parser(
        "label-sheet",
        help="draw samples of a run for people to label (the judge's items, label null)",
    )
    ls.add_argument("run", metavar="RUN", help="a run folder (or its results.jsonl)")
    ls.add_argument("-m", "--metric", required=True, help="the LLM-judged metric to label")
    ls.add_argument(
        "--data", metavar="DATA", help="the samples file: shows each question and chunk text"
    )
    ls.add_argument("-n", type=int, default=150, metavar="N", help="samples to draw (default 150)")
    ls.add_argument("--seed", type=int, default=0, help="the draw's seed (default 0)")
    ls.add_argument("-o", "--output", metavar="FILE", help="where to write (RUN/label-sheet.jsonl)")
    ls.set_defaults(command_module="label_sheet")

    de = commands.add_parser(
        "demo", help="score the bundled demo dataset (no LLM) and write a report"
    )
    de.add_argument(
        "--out", default="ctxeval-demo", metavar="DIR", help="where to write (ctxeval-demo)"
    )
    de.add_argument("-q", "--quiet", action="store_true")
    de.set_defaults(command_module="demo")

    vi = commands.add_parser(
        "view",
        help="every sample of a run in a local, read-only web viewer (any size)",
        description="Serve every sample of a run folder (or two, side by side) on this machine: "
        "the report's explorer with filters, sort, search and paging done by the server.",
    )
    vi.add_argument("run", metavar="RUN", help="a run folder (written with --out DIR)")
    vi.add_argument(
        "run_b", nargs="?", metavar="RUN_B", help="a second run folder, shown side by side"
    )
    vi.add_argument("--host", default="127.0.0.1", help="the address to listen on (127.0.0.1)")
    vi.add_argument(
        "--port", type=int, default=0, metavar="N", help="the port (default 0: a free one)"
    )
    vi.add_argument("--data", metavar="DATA", help="the samples file of RUN (default: the run's)")
    vi.add_argument("--data-b", metavar="DATA", help="the samples file of RUN_B")
    vi.set_defaults(command_module="view")

    rp = commands.add_parser(
        "report",
        help="write a run folder's report.html again from its results.jsonl",
        description="Write RUN/report.html again from RUN/results.jsonl (any size, in constant "
        "memory): the summary, the distributions, and in full the samples to look at first.",
    )
    rp.add_argument("run", metavar="RUN", help="a run folder (written with --out DIR)")
    rp.add_argument("--data", metavar="DATA", help="the samples file (default: the run's)")
    rp.add_argument("-o", "--output", metavar="FILE", help="where to write (RUN/report.html)")
    rp.add_argument("--title", help="the page's title")
    rp.set_defaults(command_module="report")

    sj = commands.add_parser(
        "serve-judge",
        help="a scripted local judge to try the LLM metrics without a key (NOT a real judge)",
        description="Serve an OpenAI-compatible endpoint on this machine that answers ctxeval's "
        "LLM-metric prompts with well-formed, deterministic answers made by word overlap: NOT A "
        "REAL JUDGE, for trying the plumbing. Use it with --model openai/scripted-judge "
        "--api-base http://127.0.0.1:PORT/v1; no API key is needed. Ctrl-C stops it.",
    )
    sj.add_argument("--host", default="127.0.0.1", help="the address to listen on (127.0.0.1)")
    sj.add_argument(
        "--port", type=int, default=8799, metavar="N", help="the port (8799; 0: a free one)"
    )
    sj.add_argument(
        "--latency", type=float, default=0.0, metavar="S", help="seconds before each answer (0)"
    )
    sj.set_defaults(command_module="serve_judge")
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
    module = importlib.import_module(f"{__name__}.{args.command_module}")
    command = getattr(module, f"cmd_{args.command_module}")
    try:
        code: int = command(args)
        return code
    except UsageError as exc:
        fail(str(exc))
    except DataError as exc:
        hint = ""
        if exc.line is not None and getattr(args, "lenient", None) is False:
            hint = (
                "\n(to score the other rows and record each bad one as error rows, pass --lenient)"
            )
        fail(str(exc) + hint)
    except (ConfigError, MissingExtraError) as exc:
        fail(str(exc))
    except BrokenPipeError:  # e.g. piped into head
        return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
