"""The registry building a plugin now: :func:`building` sets it while a factory runs, and
:func:`current` reads it.

A plugin built from options may need other plugins (``context_entity_recall`` binds an
extractor and a matcher): it takes them from the registry that is building it, so that its
parts come from the same registry (``ctxeval.plugin.get_extractor``), bound once.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from ctxeval._plugins.protocols import PluginLookup

__all__ = ["building", "current"]

_BUILDING: ContextVar[PluginLookup | None] = ContextVar("ctxeval_building_registry", default=None)


@contextmanager
def building(registry: PluginLookup) -> Iterator[None]:
    """Within the block, ``registry`` is the one building a plugin."""
    token = _BUILDING.set(registry)
    try:
        yield
    finally:
        _BUILDING.reset(token)


def current() -> PluginLookup | None:
    """The registry whose factory is running now, or None."""
    return _BUILDING.get()
