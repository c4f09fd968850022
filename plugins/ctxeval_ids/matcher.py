"""Matcher ``id``: an ID is matched when it is among the candidate IDs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import attrs

from ctxeval.plugin import BaseDeterministicMatcher, Verdict, membership_verdicts

__all__ = ["IDMatcher"]


@attrs.frozen(kw_only=True)
class IDMatcher(BaseDeterministicMatcher):
    """Exact matching of IDs (compared as strings); the evidence is the first candidate rank.

    A :class:`~ctxeval.plugin.DeterministicMatcher`: the ID metrics run through its batch form
    on the fast path.
    """

    registry_name: ClassVar[str] = "id"
    itemwise: ClassVar[bool] = True
    membership: ClassVar[bool] = True
    name: str = "id"

    def match_now(self, items: Sequence[str], candidates: Sequence[str]) -> list[Verdict]:
        """:meth:`match` without a run context (it needs no I/O)."""
        return membership_verdicts(items, candidates)

    def match_batch(self, pairs: Sequence[tuple[Sequence[str], Sequence[str]]]) -> list[list[bool]]:
        """For each ``(items, candidates)``: whether each item is among the candidates (a set
        lookup: faster than :meth:`match_now`, the same flags)."""
        return [list(map(frozenset(candidates).__contains__, items)) for items, candidates in pairs]
