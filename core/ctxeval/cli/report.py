"""``ctxeval report RUN [--data DATA] [-o FILE]``: write a run folder's ``report.html`` again
from its ``results.jsonl`` (after a ctxeval upgrade, or with the data file moved), in
constant memory whatever the run's size."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ctxeval.cli.render import EXIT_OK, console

__all__ = ["add_parser", "cmd_report"]


def add_parser(commands: Any) -> None:
    """Declare ``ctxeval report`` and its options on ``commands`` (the
    subparsers of the ``ctxeval`` parser)."""
    parser = commands.add_parser(
        "report",
        help="write a run folder's report.html again from its results.jsonl",
        description="Write RUN/report.html again from RUN/results.jsonl (any size, in constant "
        "memory): the summary, the distributions, and in full the samples to look at first.",
    )
    parser.add_argument("run", metavar="RUN", help="a run folder (written with --out DIR)")
    parser.add_argument("--data", metavar="DATA", help="the samples file (default: the run's)")
    parser.add_argument("-o", "--output", metavar="FILE", help="where to write (RUN/report.html)")
    parser.add_argument("--title", help="the page's title")
    parser.set_defaults(command_module="report")


def cmd_report(args: argparse.Namespace) -> int:
    from ctxeval._output.rebuild import rebuild_report, texts_of_report
    from ctxeval.cli.view import _run

    source = _run(args.run, args.data, "--data")
    data: Any = source.data
    if data is None:
        named = f" ({source.data_named} was not found)" if source.data_named else ""
        target = Path(args.output) if args.output else source.folder / "report.html"
        data = texts_of_report(target)
        if data is not None:
            said = "the texts are those the report being replaced showed"
        else:
            said = "the report shows scores and evidence without the samples' texts"
        console(stderr=True).print(
            f"[yellow]no data file{named}: {said}; give it with --data FILE[/]", soft_wrap=True
        )
    title = args.title or (
        f"ctxeval: {Path(source.data_named).name}" if source.data_named else None
    )
    path = rebuild_report(source.folder, data=data, output=args.output, title=title)
    console().print(f"report:   {path}", soft_wrap=True)
    return EXIT_OK
