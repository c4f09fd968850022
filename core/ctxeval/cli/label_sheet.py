"""``ctxeval label-sheet``: the items people should label, drawn from a finished run.

It draws ``-n`` samples at random (seeded) among a judged metric's ``ok`` rows and writes one
JSONL line per judged item with ``label`` null: fill in 0 or 1 (``grade`` null for a judge
that grades, ``context_relevance``: fill in 0 to 3) and give the file back to
``ctxeval evaluate --labels`` (or ``Evaluation.with_labels``). With ``--data``, each line also
shows the question and the chunk's text.
"""

from __future__ import annotations

import argparse
import contextlib
import json
from pathlib import Path
from typing import Any

from ctxeval._errors import CtxevalError
from ctxeval.cli.render import EXIT_OK, UsageError, console

__all__ = ["add_parser", "cmd_label_sheet", "write_new"]


def write_new(path: Path, text: str) -> Path:
    """Write ``text`` to the new file ``path`` (UTF-8, 0600: a sheet quotes the data) whole or
    not at all: under a temporary name beside it, then linked to ``path``, which is never
    overwritten (:class:`FileExistsError` when it exists, even when it appeared meanwhile).
    A symbolic link at ``path`` counts as a file there; it is never followed."""
    from ctxeval._output.files import write_whole

    return write_whole(path, lambda handle: handle.write(text), replace=False)


def add_parser(commands: Any) -> None:
    """Declare ``ctxeval label-sheet`` and its options on ``commands`` (the
    subparsers of the ``ctxeval`` parser)."""
    parser = commands.add_parser(
        "label-sheet",
        help="draw samples of a run for people to label (the judge's items, label null)",
    )
    parser.add_argument("run", metavar="RUN", help="a run folder (or its results.jsonl)")
    parser.add_argument("-m", "--metric", required=True, help="the LLM-judged metric to label")
    parser.add_argument(
        "--data", metavar="DATA", help="the samples file: shows each question and chunk text"
    )
    parser.add_argument(
        "-n", type=int, default=150, metavar="N", help="samples to draw (default 150)"
    )
    parser.add_argument("--seed", type=int, default=0, help="the draw's seed (default 0)")
    parser.add_argument(
        "-o", "--output", metavar="FILE", help="where to write (RUN/label-sheet.jsonl)"
    )
    parser.set_defaults(command_module="label_sheet")


def cmd_label_sheet(args: argparse.Namespace) -> int:
    from ctxeval._judge.sheet import label_sheet
    from ctxeval._output.evaluation import Evaluation
    from ctxeval._plugins.registry import default_registry

    folder = Path(args.run)
    results = folder / "results.jsonl" if folder.is_dir() else folder
    if not results.exists():
        raise UsageError(f"{results}: no results here (give a run folder or its results.jsonl)")
    evaluation = Evaluation.from_jsonl(results)
    metric = args.metric
    if metric not in evaluation.metrics:
        with contextlib.suppress(CtxevalError):
            metric = default_registry().get_metric(metric).name
    if metric not in evaluation.metrics:
        raise UsageError(
            f"{results}: no metric {args.metric!r}; the run has: {', '.join(evaluation.metrics)}"
        )
    samples = {}
    if args.data:
        from ctxeval._data.loading import load_samples

        samples = {s.id: s for s in load_samples(args.data) if s.id is not None}
    out = Path(args.output) if args.output else results.parent / "label-sheet.jsonl"
    if out.exists():
        raise UsageError(f"{out} exists: fill that one in, or give another file with -o")
    if args.n < 1:
        raise UsageError(f"-n: the number of samples to label is at least 1, got {args.n}")
    sheet = label_sheet(evaluation, metric, samples=samples, n=args.n, seed=args.seed)
    text = "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in sheet)
    try:
        write_new(out, text)
    except FileExistsError:
        raise UsageError(f"{out} exists: fill that one in, or give another file with -o") from None
    except OSError as exc:
        raise UsageError(f"cannot write the label sheet {out}: {exc.strerror or exc}") from None
    drawn = len({r["sample_id"] for r in sheet})
    unknown = sum(r["item"] is None for r in sheet)
    say = console()
    say.print(f"{len(sheet)} items of {drawn} samples to label: {out}", soft_wrap=True)
    if unknown:
        say.print(
            f"[yellow]{unknown} item texts unknown[/]: give the data file with --data",
            soft_wrap=True,
        )
    if any("grade" in r for r in sheet):
        say.print("fill in each grade with 0 to 3, then: ctxeval evaluate ... --labels FILE")
    else:
        say.print("fill in each label with 1 or 0, then: ctxeval evaluate ... --labels FILE")
    return EXIT_OK
