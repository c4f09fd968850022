"""``ctxeval report RUN [--data DATA] [-o FILE]``: write a run folder's ``report.html`` again
from its ``results.jsonl`` (after a ctxeval upgrade, or with the data file moved), in
constant memory whatever the run's size."""

from __future__ import annotations

import argparse
from pathlib import Path

from ctxeval.cli.render import EXIT_OK, console

__all__ = ["cmd_report"]


def cmd_report(args: argparse.Namespace) -> int:
    from ctxeval._output.rebuild import rebuild_report
    from ctxeval.cli.view import _run

    source = _run(args.run, args.data, "--data")
    if source.data is None:
        named = f" ({source.data_named} was not found)" if source.data_named else ""
        console(stderr=True).print(
            f"[yellow]no data file{named}: the report shows scores and evidence without the "
            "samples' texts; give it with --data FILE[/]",
            soft_wrap=True,
        )
    title = args.title or (
        f"ctxeval: {Path(source.data_named).name}" if source.data_named else None
    )
    path = rebuild_report(source.folder, data=source.data, output=args.output, title=title)
    console().print(f"report:   {path}", soft_wrap=True)
    return EXIT_OK
