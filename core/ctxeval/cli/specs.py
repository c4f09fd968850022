"""Reading what the user asked for: metric specs (``NAME:key=value,...``) and run files."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ctxeval.cli.render import UsageError

__all__ = ["build_metrics", "count_rows", "parse_metric", "parse_value", "read_run_file"]


def parse_value(text: str) -> Any:
    """A metric option's value: JSON when it parses (``5``, ``true``, ``["PERSON"]``), else
    the text."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def parse_metric(spec: str) -> tuple[str, dict[str, Any]]:
    """``name:key=value,key=value`` into a name and options."""
    name, _, rest = spec.partition(":")
    options: dict[str, Any] = {}
    if rest:
        depth, part, parts = 0, "", []
        for char in rest:  # split on commas outside brackets
            depth += char in "[{"
            depth -= char in "]}"
            if char == "," and depth == 0:
                parts.append(part)
                part = ""
            else:
                part += char
        parts.append(part)
        for item in parts:
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise UsageError(f"metric option {item!r} in {spec!r} is not key=value")
            options[key.strip()] = parse_value(value.strip())
    return name.strip(), options


def build_metrics(specs: Sequence[tuple[str, dict[str, Any]]]) -> list[Any]:
    """The metrics of ``specs``, built in the default registry."""
    from ctxeval import UnknownNameError, default_registry
    from ctxeval._run.presets import PRESETS, expand

    registry = default_registry()
    metrics = []
    for name, options in specs:
        if name.startswith("@"):
            names = expand(name)
            if names is None:
                raise UsageError(f"unknown preset {name!r}; the presets are {', '.join(PRESETS)}")
            if options:
                raise UsageError(f"preset {name!r} takes no options; give its metrics one by one")
            metrics += [registry.get_metric(n) for n in names]
            continue
        try:
            metrics.append(registry.get_metric(name, **options))
        except UnknownNameError as exc:
            hint = (
                f"did you mean {' or '.join(repr(s) for s in exc.suggestions)}?"
                if exc.suggestions
                else "see: ctxeval metrics"
            )
            raise UsageError(f"unknown metric {name!r}; {hint}") from None
    return metrics


def read_run_file(path: str) -> dict[str, Any]:
    """A TOML run file's settings."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    try:
        with open(path, "rb") as handle:
            data: dict[str, Any] = tomllib.load(handle)
    except FileNotFoundError:
        raise UsageError(f"{path}: no such run file") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: not valid TOML: {exc}") from None
    return data


def count_rows(path: Path) -> int | None:
    """Rows of a JSONL file, counted fast (blank lines aside), for the progress total."""
    if path.suffix.lower() not in (".jsonl", ".ndjson"):
        return None
    count = 0
    with path.open("rb") as handle:
        for line in handle:
            if line.strip():
                count += 1
    return count
