"""What state each registered plugin is in: :class:`PluginInfo`, as :func:`ctxeval.plugins`
and ``ctxeval plugins`` list it.

``ok``; ``unavailable`` (an optional dependency is missing, with its install command);
``broken`` (it failed to load, with the error); ``conflict`` (another distribution claims the
name). Two names with the same target in one distribution are one plugin: the name equal to the
plugin's ``registry_name`` is canonical and the others are aliases (``context_recall`` for
``llm_context_recall``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Literal

import attrs

from ctxeval._data.optional import is_installed
from ctxeval._errors import MissingExtraError, PluginError
from ctxeval._plugins.base import Dependency
from ctxeval._plugins.conflicts import conflict_message, own_entry
from ctxeval._plugins.entries import Entry
from ctxeval._plugins.hooks import DeclaresDependencies, HasRegistryName

__all__ = ["PluginInfo", "PluginStatus", "canonical_names", "info_of", "missing_dependencies"]

PluginStatus = Literal["ok", "unavailable", "broken", "conflict"]


@attrs.frozen(slots=True)
class PluginInfo:
    """One registered plugin name and its state, as :func:`ctxeval.plugins` lists it.

    Attributes:
        group: the entry-point group (``ctxeval.metrics``, ``ctxeval.extractors`` or
            ``ctxeval.matchers``).
        name: the name it is registered under.
        target: where it comes from (``module:attribute``, or the object registered in code).
        distribution: the installed distribution that declares it (None when registered in code).
        version: that distribution's version.
        status: ``ok``; ``unavailable`` (an optional dependency is missing, see ``install``);
            ``broken`` (it failed to load, see ``error``); ``conflict`` (another distribution
            claims the same name).
        error: what went wrong, for ``broken`` and ``conflict``.
        install: the command that makes an ``unavailable`` plugin available.
        alias_of: for an alias, the canonical name.
    """

    group: str
    name: str
    target: str
    distribution: str | None
    version: str | None
    status: PluginStatus
    error: str | None = None
    install: str | None = None
    alias_of: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)


def missing_dependencies(factory: object) -> list[Dependency]:
    """The optional modules ``factory`` declares (:class:`DeclaresDependencies`) that are not
    installed."""
    dependencies: Iterable[Dependency] = (
        factory.dependencies if isinstance(factory, DeclaresDependencies) else ()
    )
    return [d for d in dependencies if not is_installed(d.module)]


def canonical_names(entries: Iterable[Sequence[Entry]]) -> dict[tuple[str, str | None], str]:
    """For targets registered under several names (among the ``entries`` of one group, by
    name): the name that is canonical, by ``(target, distribution)``."""
    by_target: dict[tuple[str, str | None], list[Entry]] = {}
    for named in entries:
        for entry in named:
            by_target.setdefault((entry.target, entry.distribution), []).append(entry)
    canonical = {}
    for key, same in by_target.items():
        if len(same) < 2:
            continue
        try:
            factory = same[0].load()
        except PluginError:
            continue
        own = factory.registry_name if isinstance(factory, HasRegistryName) else None
        if own in {e.name for e in same}:
            canonical[key] = own
    return canonical


def info_of(entry: Entry, rivals: Sequence[Entry], canonical: str | None) -> PluginInfo:
    """The state of ``entry`` (loaded to find out), among the ``rivals`` registered under its
    name (itself included); ``canonical``: the canonical name of its target, if it has
    aliases."""
    info = PluginInfo(
        group=entry.group,
        name=entry.name,
        target=entry.target,
        distribution=entry.distribution,
        version=entry.version,
        status="ok",
        alias_of=canonical if canonical is not None and canonical != entry.name else None,
    )
    if len(rivals) > 1:
        error = conflict_message(entry.group, entry.name, rivals)
        if own_entry(rivals) is not entry:
            return attrs.evolve(info, status="conflict", error=error)
        info = attrs.evolve(info, error=f"{error}; ctxeval's own is used")
    try:
        factory = entry.load()
    except PluginError as exc:
        install = exc.install if isinstance(exc, MissingExtraError) else None
        return attrs.evolve(info, status="broken", error=str(exc), install=install)
    missing = missing_dependencies(factory)
    if missing:
        return attrs.evolve(
            info,
            status="unavailable",
            error=f"needs {', '.join(d.module for d in missing)}",
            install=missing[0].install,
        )
    return info
