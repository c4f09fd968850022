"""The entry-point groups plugins register in, and the protocol each group's plugins meet.

``ctxeval.metrics``, ``ctxeval.extractors``, ``ctxeval.matchers``, ``ctxeval.llms``,
``ctxeval.writers``, ``ctxeval.runners``, ``ctxeval.embedders`` and ``ctxeval.traces``; a
plugin built from a group's factory must be an instance of the group's protocol
(:data:`PROTOCOLS`).
"""

from __future__ import annotations

from typing import Final

from ctxeval._plugins.protocols import (
    Embedder,
    Extractor,
    LLMProvider,
    Matcher,
    Metric,
    RunnerPlugin,
    TraceReader,
    Writer,
)

__all__ = [
    "EMBEDDERS",
    "EXTRACTORS",
    "GROUPS",
    "LLMS",
    "MATCHERS",
    "METRICS",
    "PROTOCOLS",
    "RUNNERS",
    "TRACES",
    "WRITERS",
]

METRICS: Final = "ctxeval.metrics"
EXTRACTORS: Final = "ctxeval.extractors"
MATCHERS: Final = "ctxeval.matchers"
LLMS: Final = "ctxeval.llms"
WRITERS: Final = "ctxeval.writers"
RUNNERS: Final = "ctxeval.runners"
EMBEDDERS: Final = "ctxeval.embedders"
TRACES: Final = "ctxeval.traces"
GROUPS: Final = (METRICS, EXTRACTORS, MATCHERS, LLMS, WRITERS, RUNNERS, EMBEDDERS, TRACES)

PROTOCOLS: Final[dict[str, type]] = {
    METRICS: Metric,
    EXTRACTORS: Extractor,
    MATCHERS: Matcher,
    LLMS: LLMProvider,
    WRITERS: Writer,
    RUNNERS: RunnerPlugin,
    EMBEDDERS: Embedder,
    TRACES: TraceReader,
}
