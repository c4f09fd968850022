"""``ctxeval plugins``: every plugin with its group, distribution, version and status."""

from __future__ import annotations

import argparse
import json

from .render import EXIT_OK, console

__all__ = ["cmd_plugins"]


def cmd_plugins(args: argparse.Namespace) -> int:
    from ctxeval.api import plugins

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
    console().print(table)
    return EXIT_OK
