"""``ctxeval plugins``: every plugin with its group, distribution, version and status."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ctxeval.cli.render import EXIT_OK, console

__all__ = ["add_parser", "cmd_plugins"]


def add_parser(commands: Any) -> None:
    """Declare ``ctxeval plugins`` and its options on ``commands`` (the
    subparsers of the ``ctxeval`` parser)."""
    parser = commands.add_parser(
        "plugins", help="list every plugin with its distribution and status"
    )
    parser.add_argument("--json", action="store_true")
    parser.set_defaults(command_module="plugins")


def cmd_plugins(args: argparse.Namespace) -> int:
    from ctxeval._run.api import plugins

    infos = plugins()
    if args.json:
        print(json.dumps([i.to_dict() for i in infos], indent=2))
        return EXIT_OK
    from rich.markup import escape
    from rich.table import Table

    out = console()
    for group in dict.fromkeys(i.group for i in infos):
        table = Table(title=group, title_justify="left", expand=False)
        table.add_column("name", overflow="fold")
        table.add_column("from", overflow="fold")
        table.add_column("status", overflow="fold")
        for i in infos:
            if i.group != group:
                continue
            origin = f"{i.distribution} {i.version or ''}".strip() if i.distribution else "(code)"
            status = i.status if i.status == "ok" else f"{i.status}: {i.install or i.error}"
            name = i.name + (f" (= {i.alias_of})" if i.alias_of else "")
            table.add_row(escape(name), escape(origin), escape(status))
        out.print(table)
    return EXIT_OK
