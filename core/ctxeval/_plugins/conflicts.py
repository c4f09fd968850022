"""Two distributions claiming one name: :func:`choose` and :func:`conflict_message`.

A conflict is an error that names both claimants, except that ctxeval's own built-in plugin
keeps its name when a third-party package claims it too (with a warning).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Final

from ctxeval._errors import PluginConflictError
from ctxeval._plugins.entries import Entry

__all__ = ["OWN_DISTRIBUTION", "choose", "conflict_message", "own_entry"]

logger = logging.getLogger("ctxeval._plugins.registry")

OWN_DISTRIBUTION: Final = "ctxeval"
"""Built-in plugins win a name conflict (the other claimant is reported)."""


def conflict_message(group: str, name: str, entries: Sequence[Entry]) -> str:
    """What is wrong when ``entries`` (two or more) claim ``name``, and what to do."""
    claimants = " and ".join(e.origin() for e in entries)
    return (
        f"{group}: the name {name!r} is claimed by {claimants}; uninstall one of them, "
        "or register the one you want on a registry copy"
    )


def own_entry(entries: Sequence[Entry]) -> Entry | None:
    """ctxeval's own entry among rival ``entries``, when exactly one is."""
    own = [e for e in entries if e.distribution == OWN_DISTRIBUTION]
    return own[0] if len(own) == 1 else None


def choose(group: str, name: str, entries: Sequence[Entry]) -> Entry:
    """The entry that ``name`` stands for among ``entries`` (one or more).

    Raises:
        PluginConflictError: two distributions claim the name, neither of them ctxeval.
    """
    if len(entries) > 1:
        own = own_entry(entries)
        if own is not None:
            # a package claiming a built-in name does not take the built-in away
            logger.warning("%s; using ctxeval's own", conflict_message(group, name, entries))
            return own
        raise PluginConflictError(conflict_message(group, name, entries))
    return entries[0]
