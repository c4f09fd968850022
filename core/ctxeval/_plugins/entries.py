"""One registered name and its factory, imported on first use: :class:`Entry`.

An entry comes from an installed entry point, a ``"module:attribute"`` string or an object
registered in code. Loading imports the factory once; a plugin that fails to import (even one
calling ``sys.exit``) is remembered with its error, re-raised as a
:class:`~ctxeval.PluginError` (a :class:`~ctxeval.MissingExtraError` for a missing module) on
every later use, and never takes the other plugins down.
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING, Any

import attrs

from ctxeval._errors import MissingExtraError, PluginError, plugin_kind

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

__all__ = ["Entry", "describe"]

logger = logging.getLogger("ctxeval._plugins.registry")


@attrs.define(slots=True, eq=False)
class Entry:
    """One name in one group, and (once loaded) its factory or the error loading raised."""

    group: str
    name: str
    target: str
    distribution: str | None
    version: str | None
    entry_point: EntryPoint | None = None
    factory: Any = None
    load_error: BaseException | None = None
    loaded: bool = False

    def origin(self) -> str:
        """Where the entry comes from, in words (for messages)."""
        where = f"distribution {self.distribution!r}" if self.distribution else "code"
        return f"{where} ({self.target})"

    def load(self) -> Any:
        """Import the factory once; re-raise the import error on every later call."""
        if not self.loaded:
            try:
                if self.entry_point is not None:
                    self.factory = self.entry_point.load()
                elif isinstance(self.factory, str):
                    self.factory = _import_target(self.factory)
            except (Exception, SystemExit) as exc:  # a broken plugin (even one calling
                # sys.exit at import) must not take the others down
                self.load_error = exc
                logger.debug("plugin %s:%s failed to load", self.group, self.name, exc_info=True)
            self.loaded = True
        if self.load_error is not None:
            raise _load_failure(self, self.load_error) from self.load_error
        return self.factory


def _import_target(target: str) -> Any:
    module_name, _, attribute = target.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in filter(None, attribute.split(".")):
        obj = getattr(obj, part)
    return obj


def _load_failure(entry: Entry, exc: BaseException) -> PluginError:
    kind = plugin_kind(entry.group)
    message = (
        f"{kind} {entry.name!r} from {entry.origin()} failed to load: {type(exc).__name__}: {exc}"
    )
    if isinstance(exc, ModuleNotFoundError) and exc.name:
        top = exc.name.split(".")[0]
        return MissingExtraError(message, install=f"pip install {top}")
    return PluginError(message)


def describe(factory: object) -> str:
    """``module:qualname`` of an object registered in code (its entry's target)."""
    module = getattr(factory, "__module__", None) or "?"
    qualname = getattr(factory, "__qualname__", None) or type(factory).__qualname__
    return f"{module}:{qualname}"
