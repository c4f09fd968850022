"""Matcher ``id``: an ID is matched when it is among the candidate IDs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

import attrs

from ctxeval.plugin import RunContext, Verdict

__all__ = ["IDMatcher"]


@attrs.frozen(kw_only=True)
class IDMatcher:
    """Exact matching of IDs (compared as strings); the evidence is the first candidate rank.

    A :class:`~ctxeval.plugin.DeterministicMatcher`: the ID metrics run through its batch form
    on the fast path.
    """

    registry_name: ClassVar[str] = "id"
    name: str = "id"

    def match_now(self, items: Sequence[str], candidates: Sequence[str]) -> list[Verdict]:
        """:meth:`match` without a run context (it needs no I/O)."""
        first: dict[str, int] = {}
        for index, candidate in enumerate(candidates):
            first.setdefault(str(candidate), index)
        verdicts = []
        for item in items:
            rank = first.get(str(item))
            verdicts.append(Verdict(rank is not None, 1.0 if rank is not None else 0.0, rank))
        return verdicts

    def match_batch(self, pairs: Sequence[tuple[Sequence[str], Sequence[str]]]) -> list[list[bool]]:
        """For each ``(items, candidates)``: whether each item is among the candidates."""
        out = []
        for items, candidates in pairs:
            found = frozenset(candidates)
            out.append([item in found for item in items])
        return out

    async def match(
        self, items: Sequence[str], candidates: Sequence[str], ctx: RunContext
    ) -> list[Verdict]:
        return self.match_now(items, candidates)
