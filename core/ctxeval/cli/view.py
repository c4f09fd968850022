"""``ctxeval view RUN [RUN_B]``: every sample of a run folder in a local, read-only web viewer.

It indexes the run once (a SQLite file beside ``results.jsonl``, or in the cache when the
folder is read-only; rebuilt when the run changed), then serves the report's explorer with
filters, sort, search and paging done by the server, so a run of any size opens at once. The
first line printed is the address to open; Ctrl-C stops it. With ``RUN_B`` the two runs are
side by side: each sample shows both runs' rows, and it sorts by the difference.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ctxeval.cli.render import EXIT_OK, UsageError, console
from ctxeval.cli.serving import listening, serve_until_stopped

__all__ = ["add_parser", "cmd_view"]


def _run(folder: str, data: str | None, option: str) -> Any:
    from ctxeval._output.run_source import run_source

    path = Path(folder)
    if not path.exists():
        raise UsageError(
            f"{folder}: no such folder (give a run folder: ctxeval evaluate ... --out DIR)"
        )
    if path.is_file() and path.name == "results.jsonl":
        path = path.parent
    if not path.is_dir():
        raise UsageError(f"{folder}: not a folder (give a run folder, written with --out DIR)")
    if not (path / "results.jsonl").is_file():
        raise UsageError(
            f"{folder}: no results.jsonl here (give the folder a run wrote with --out)"
        )
    given = None
    if data is not None:
        given = Path(data)
        if not given.is_file():
            raise UsageError(f"{option} {data}: no such file (give the samples file of the run)")
    return run_source(path, given)


class _Bar:
    """The index build's progress on standard error: a bar on a terminal, else nothing
    (the log says when it starts and ends)."""

    def __init__(self) -> None:
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        self.progress = Progress(
            TextColumn("indexing"),
            BarColumn(),
            TextColumn("{task.percentage:>3.0f}%  {task.fields[rows]:,} rows  {task.fields[rate]}"),
            TimeElapsedColumn(),
            console=console(stderr=True),
            transient=True,
            disable=not sys.stderr.isatty(),
        )
        self.task = self.progress.add_task("index", total=None, rows=0, rate="")

    def __call__(self, done: int, total: int, rows: int) -> None:
        elapsed = self.progress.tasks[0].elapsed or 0.0
        rate = f"{rows / elapsed:,.0f} rows/s" if elapsed > 0 else ""
        self.progress.update(self.task, completed=done, total=total, rows=rows, rate=rate)


def add_parser(commands: Any) -> None:
    """Declare ``ctxeval view`` and its options on ``commands`` (the
    subparsers of the ``ctxeval`` parser)."""
    parser = commands.add_parser(
        "view",
        help="every sample of a run in a local, read-only web viewer (any size)",
        description="Serve every sample of a run folder (or two, side by side) on this machine: "
        "the report's explorer with filters, sort, search and paging done by the server.",
    )
    parser.add_argument("run", metavar="RUN", help="a run folder (written with --out DIR)")
    parser.add_argument(
        "run_b", nargs="?", metavar="RUN_B", help="a second run folder, shown side by side"
    )
    parser.add_argument("--host", default="127.0.0.1", help="the address to listen on (127.0.0.1)")
    parser.add_argument(
        "--port", type=int, default=0, metavar="N", help="the port (default 0: a free one)"
    )
    parser.add_argument(
        "--data", metavar="DATA", help="the samples file of RUN (default: the run's)"
    )
    parser.add_argument("--data-b", metavar="DATA", help="the samples file of RUN_B")
    parser.set_defaults(command_module="view")


def cmd_view(args: argparse.Namespace) -> int:
    from rich.markup import escape

    from ctxeval._view.index import ensure_index
    from ctxeval._view.server import make_server, server_url

    runs = [_run(args.run, args.data, "--data")]
    if args.run_b is not None:
        runs.append(_run(args.run_b, args.data_b, "--data-b"))
    elif args.data_b is not None:
        raise UsageError("--data-b goes with a second run: ctxeval view RUN_A RUN_B --data-b FILE")
    say = console(stderr=True)
    for label, run in zip(("", "B") if len(runs) > 1 else ("",), runs, strict=False):
        warning = run.summary.get("scripted_judge")
        if warning:
            say.print(
                f"[bold yellow]{run.folder}: {escape(str(warning))}[/]",
                soft_wrap=True,
                markup=True,
                highlight=False,
            )
        if run.data is None:
            option = f"--data{'-b' if label else ''}"
            why = (
                f"the data file ({escape(run.data_named)}) was not found"
                if run.data_named
                else "the run names no data file (ev.write(folder, data=samples) keeps the "
                "texts in the folder)"
            )
            say.print(
                f"[yellow]warning:[/] {run.folder}: {why}: the viewer shows scores and "
                f"evidence without texts; give the data file with {option}",
                soft_wrap=True,
                markup=True,
                highlight=False,
            )
    bar = _Bar()
    with bar.progress:
        index = ensure_index(runs, progress=bar)
    server = listening(
        lambda: make_server(runs, index, host=args.host, port=args.port), args.host, args.port
    )
    print(server_url(server), flush=True)
    print(f"index: {index}\nCtrl-C to stop", flush=True)

    serve_until_stopped(server)
    return EXIT_OK
