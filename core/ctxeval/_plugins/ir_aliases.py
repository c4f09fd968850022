"""IR measure names as metric names: ``nDCG@10``, ``P@5``, ``AP``, ``mrr`` (as ir_measures or
ranx write them) stand for the ID metric they name, with the options they imply (see
:mod:`ctxeval._data.measure_names`).
"""

from __future__ import annotations

from typing import Any

from ctxeval._data.measure_names import DOCUMENT_SUFFIX, parse_ir_name
from ctxeval._errors import ConfigError

__all__ = ["is_ir_name", "resolve_ir_name"]


def resolve_ir_name(name: str, options: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The registered metric ``name`` stands for, and its options (the implied ones
    overridden by ``options``); ``name`` and ``options`` themselves when it is no IR name.

    Raises:
        ConfigError: an IR name that is malformed (a measure missing its cut-off, say).
    """
    try:
        parsed = parse_ir_name(name)
    except ValueError as exc:
        raise ConfigError(f"metric {name!r}: {exc}") from None
    if parsed is None:
        return name, options
    metric, implied = parsed
    if options.get("unit") == "document" and "name" not in options:
        implied["name"] += DOCUMENT_SUFFIX  # its chunk-level twin keeps the plain name
    return metric, {**implied, **options}


def is_ir_name(name: str) -> bool:
    """Whether ``name`` is an IR measure name (a malformed one counts: resolving it says what
    is wrong)."""
    try:
        return parse_ir_name(name) is not None
    except ValueError:
        return True  # a measure name missing its cut-off: get_metric says so
