"""Presets: names for common sets of metrics, usable wherever a metric name is.

``-m @ids`` on the command line, or ``evaluate(samples, ["@deterministic"])``, stands for the
metrics below, each with its default options.
"""

from __future__ import annotations

from typing import Final

__all__ = ["PRESETS", "expand"]

_IDS = ("id_based_context_precision", "id_based_context_recall")
_RANKED = ("P@10", "R@10", "nDCG@10", "RR", "AP", "Rprec")
_STRINGS = ("non_llm_context_precision_with_reference", "non_llm_context_recall")
_LLM = ("llm_context_precision_with_reference", "llm_context_recall", "context_entity_recall")

PRESETS: Final[dict[str, tuple[str, ...]]] = {
    "@ids": _IDS + _RANKED,
    "@ranked": _RANKED,
    "@strings": _STRINGS,
    "@deterministic": _IDS + _RANKED + _STRINGS,
    "@llm": _LLM,
}
"""Each preset and the metric names it stands for."""


def expand(name: str) -> tuple[str, ...] | None:
    """The metric names of preset ``name``, or None when it is not a preset."""
    return PRESETS.get(name)
