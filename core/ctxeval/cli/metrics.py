"""``ctxeval metrics``: every metric, what it needs, its options and its status."""

from __future__ import annotations

import argparse
import json
from typing import Any

from .render import EXIT_OK, console

__all__ = ["cmd_metrics"]


def cmd_metrics(args: argparse.Namespace) -> int:
    from ctxeval.base import options_of
    from ctxeval.measure_names import ir_names_of
    from ctxeval.registry import default_registry

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
                "ir_names": ir_names_of(info.name),
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
        if e["ir_names"]:
            name += f" ({', '.join(e['ir_names'])})"
        status = e["status"] + (f": {e['install']}" if e["install"] else "")
        table.add_row(name, ", ".join(e["requires"]), ", ".join(e["options"]), status)
    console().print(table)
    return EXIT_OK
