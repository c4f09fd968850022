"""``ctxeval metrics``: every metric, what it measures, what it needs, its options."""

from __future__ import annotations

import argparse
import inspect
import json
import textwrap
from collections.abc import Sequence
from typing import Any

from ctxeval._plugins.hooks import needs_llm as calls_llm
from ctxeval.cli.render import EXIT_OK, console

__all__ = ["add_parser", "cmd_metrics", "metric_entries", "wrap"]


def _description(factory: Any) -> str:
    """The first sentence of the factory's docstring."""
    doc = inspect.getdoc(factory) or ""
    first = " ".join(doc.split("\n\n", 1)[0].split())
    return first.replace("``", "").removeprefix("Metric ").strip()


def _fields(value: Any) -> list[str] | None:
    """``value`` as a list of field names, or None when it is not one (a class's
    ``requires`` property, read on the class, is a property object)."""
    if isinstance(value, (tuple, list)) and all(isinstance(v, str) for v in value):
        return list(value)
    return None


def metric_entries() -> list[dict[str, Any]]:
    """One entry per metric name: status, description, needs, options, aliases, IR names.

    What a metric needs is read from the metric built with its default options: a metric
    :func:`~ctxeval.plugin.compose` made (or a factory function) tells its fields only once
    built, from its parts. ``requires`` is None when it cannot be built here (its default
    options need something missing) and its factory does not say.
    """
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
        requires = _fields(getattr(factory, "requires", None)) if factory is not None else None
        if info.status == "ok":
            try:
                metric = registry.get_metric(info.name)
            except Exception:
                pass  # its default options need something not here
            else:
                needs_llm = calls_llm(metric)
                requires = _fields(getattr(metric, "requires", None)) or requires
        entries.append(
            {
                "name": info.name,
                "alias_of": info.alias_of,
                "status": info.status,
                "description": _description(factory) if factory is not None else "",
                "requires": requires,
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


def _needs(entry: dict[str, Any]) -> str:
    """The ``needs:`` line's text: the sample fields, and an LLM when a part calls one."""
    requires: list[str] | None = entry["requires"]
    if requires is None:
        needs = "unknown (it cannot be built with its default options here)"
    else:
        needs = ", ".join(requires) or "no sample field"
    if entry["needs_llm"]:
        needs += "; an LLM (--model)"
    return needs


def wrap(label: str, text: str, width: int, *, indent: int = 2) -> list[str]:
    """``label`` and ``text`` wrapped at ``width`` columns and indented by ``indent``, the
    lines after the first aligned under the text (after the label). No line ends in white
    space; a word longer than a line (a long metric name) is not cut."""
    head = " " * indent + (f"{label} " if label else "")
    return textwrap.wrap(
        text,
        width=max(width, len(head) + 20),
        initial_indent=head,
        subsequent_indent=" " * len(head),
        break_long_words=False,
        break_on_hyphens=False,
    ) or [head.rstrip()]


def _print(out: Any, label: str, text: str, *, indent: int = 2, style: str = "dim") -> None:
    """``label`` (in ``style``) and ``text``, wrapped by :func:`wrap` at the console's width."""
    from rich.text import Text

    for i, line in enumerate(wrap(label, text, out.width, indent=indent)):
        styled = Text(line)
        if i == 0 and label and style:
            styled.stylize(style, indent, indent + len(label))
        out.print(styled, soft_wrap=True)


def add_parser(commands: Any) -> None:
    """Declare ``ctxeval metrics`` and its options on ``commands`` (the
    subparsers of the ``ctxeval`` parser)."""
    parser = commands.add_parser(
        "metrics", help="list the metrics, what they need and their options"
    )
    parser.add_argument("--json", action="store_true")
    parser.set_defaults(command_module="metrics")


def cmd_metrics(args: argparse.Namespace) -> int:
    entries = metric_entries()
    if args.json:
        print(json.dumps(entries, indent=2))
        return EXIT_OK
    from rich.text import Text

    out = console()
    aliases: dict[str, list[str]] = {}
    for e in entries:
        if e["alias_of"]:
            aliases.setdefault(e["alias_of"], []).append(e["name"])
    for e in entries:
        if e["alias_of"]:
            continue
        also: Sequence[str] = aliases.get(e["name"], []) + e["ir_names"]
        heading = f"{e['name']} ({', '.join(also)})" if also else e["name"]
        status = "" if e["status"] == "ok" else e["status"]
        lines = wrap("", f"{heading}  {status}" if status else heading, out.width, indent=0)
        for i, line in enumerate(lines):
            styled = Text(line)
            if i == 0:
                styled.stylize("bold", 0, len(e["name"]))
            if status and i == len(lines) - 1:
                styled.stylize("yellow", len(line) - len(status))
            out.print(styled, soft_wrap=True)
        if e["description"]:
            _print(out, "", e["description"])
        _print(out, "needs:", _needs(e))
        if e["options"]:
            _print(out, "options:", ", ".join(e["options"]))
        if e["install"]:
            _print(out, "install:", e["install"])
        elif e["error"] and e["status"] != "ok":
            _print(out, "error:", e["error"])
    from ctxeval._run.presets import PRESETS

    out.print(Text("\npresets", style="bold") + Text(" (use as a metric name: -m @ids)"))
    for preset, names in PRESETS.items():
        _print(out, f"{preset}:", ", ".join(names), style="")
    return EXIT_OK
