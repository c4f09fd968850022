"""``ctxeval metrics``: every metric, what it measures, what it needs, its options."""

from __future__ import annotations

import argparse
import inspect
import json
from typing import Any

from ctxeval._plugins.hooks import needs_llm as calls_llm
from ctxeval.cli.render import EXIT_OK, console

__all__ = ["cmd_metrics", "metric_entries"]


def _description(factory: Any) -> str:
    """The first sentence of the factory's docstring."""
    doc = inspect.getdoc(factory) or ""
    first = " ".join(doc.split("\n\n", 1)[0].split())
    return first.replace("``", "").removeprefix("Metric ").strip()


def metric_entries() -> list[dict[str, Any]]:
    """One entry per metric name: status, description, needs, options, aliases, IR names."""
    from ctxeval._data.measure_names import ir_names_of
    from ctxeval._plugins.base import options_of
    from ctxeval._plugins.registry import default_registry

    registry = default_registry()
    entries: list[dict[str, Any]] = []
    for info in registry.plugins():
        if info.group != "ctxeval.metrics":
            continue
        usable = info.status in ("ok", "unavailable")
        factory = registry.factory(info.group, info.name) if usable else None
        needs_llm: bool | None = None
        if info.status == "ok":
            try:
                needs_llm = calls_llm(registry.get_metric(info.name))
            except Exception:
                needs_llm = None  # its default options need something not here
        entries.append(
            {
                "name": info.name,
                "alias_of": info.alias_of,
                "status": info.status,
                "description": _description(factory) if factory is not None else "",
                "requires": list(getattr(factory, "requires", ()) or ()),
                "needs_llm": needs_llm,
                "ir_names": ir_names_of(info.name),
                "options": [o for o in (options_of(factory) or []) if o != "name"]
                if factory
                else [],
                "install": info.install,
                "error": info.error,
                "distribution": info.distribution,
            }
        )
    return entries


def cmd_metrics(args: argparse.Namespace) -> int:
    entries = metric_entries()
    if args.json:
        print(json.dumps(entries, indent=2))
        return EXIT_OK
    from rich.markup import escape
    from rich.padding import Padding

    out = console()

    def line(text: str) -> None:  # indented, wrapped lines keep their indent
        out.print(Padding(text, (0, 0, 0, 2), expand=False))

    aliases: dict[str, list[str]] = {}
    for e in entries:
        if e["alias_of"]:
            aliases.setdefault(e["alias_of"], []).append(e["name"])
    for e in entries:
        if e["alias_of"]:
            continue
        also = aliases.get(e["name"], []) + e["ir_names"]
        status = "" if e["status"] == "ok" else f"  [yellow]{e['status']}[/]"
        name = f"[bold]{escape(e['name'])}[/]" + (f" ({escape(', '.join(also))})" if also else "")
        out.print(name + status)
        if e["description"]:
            line(escape(e["description"]))
        needs = ", ".join(e["requires"]) or "nothing"
        if e["needs_llm"]:
            needs += "; an LLM (--model)"
        line(f"[dim]needs:[/] {escape(needs)}")
        if e["options"]:
            line(f"[dim]options:[/] {escape(', '.join(e['options']))}")
        if e["install"]:
            line(f"[dim]install:[/] {escape(e['install'])}")
        elif e["error"] and e["status"] != "ok":
            line(f"[dim]error:[/] {escape(e['error'])}")
    from ctxeval._run.presets import PRESETS

    out.print("\n[bold]presets[/] (use as a metric name: -m @ids)")
    for preset, names in PRESETS.items():
        line(f"{preset}: {escape(', '.join(names))}")
    return EXIT_OK
