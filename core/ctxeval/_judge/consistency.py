"""A judge against itself and against other judges: :class:`Repeatability` (repeated
judgements of one item, flip rates, the unsure items) and :class:`Jury` (two or more judges on
the same items: pairwise agreement and kappa, disagreements, escalations, what each spent).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from itertools import combinations
from typing import Any

import attrs

from ctxeval._judge.agreement import ratio
from ctxeval._judge.evidence import LISTED, details_of, votes_of
from ctxeval._plugins.protocols import majority
from ctxeval._results.results import MetricResult, Usage
from ctxeval._results.stats import cohen_kappa

__all__ = ["Jury", "Repeatability", "jury_of", "repeatability_of"]


@attrs.frozen
class Repeatability:
    """How stable the judge is over repeated judgements of the same item.

    Attributes:
        n_items: items judged more than once by one judge.
        flip_rate: share of them whose judgements did not all agree (the unsure items).
        disagreement: the chance that two judgements of one item differ (pairs of judgements
            that differ / pairs, averaged over items and judges); with independent
            judgements wrong with probability p, it is 2p(1 - p).
        unsure: the unsure items: ``sample_id``, ``index``, each judge's ``votes``.
    """

    n_items: int
    flip_rate: float | None
    disagreement: float | None
    unsure: tuple[Mapping[str, Any], ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "n_items": self.n_items,
            "flip_rate": self.flip_rate,
            "disagreement": self.disagreement,
            "n_unsure": len(self.unsure),
            "unsure": [dict(u) for u in self.unsure[:LISTED]],
        }


@attrs.frozen
class Jury:
    """Two or more judges on the same items.

    Attributes:
        judges: their names, in the panel's order.
        pairs: per pair of judges: ``a``, ``b``, ``n`` (items both judged), ``agreement``
            (share of them with the same verdict), ``kappa``.
        n_items: items judged by two judges or more.
        n_escalated: items sent to the last judge (the ``escalate`` rule).
        disagreements: items where the judges' verdicts differ: ``sample_id``, ``index``,
            each judge's ``votes``.
        usage: what each judge spent, by name.
    """

    judges: tuple[str, ...]
    pairs: tuple[Mapping[str, Any], ...]
    n_items: int
    n_escalated: int
    disagreements: tuple[Mapping[str, Any], ...]
    usage: Mapping[str, Usage]

    def to_dict(self) -> dict[str, Any]:
        return {
            "judges": list(self.judges),
            "pairs": [dict(p) for p in self.pairs],
            "n_items": self.n_items,
            "n_escalated": self.n_escalated,
            "n_disagreements": len(self.disagreements),
            "disagreements": [dict(d) for d in self.disagreements[:LISTED]],
            "usage": {name: u.to_dict() for name, u in self.usage.items()},
        }


def repeatability_of(rows: Sequence[MetricResult]) -> Repeatability | None:
    """The repeatability of the judge over ``rows``; None when no item was judged twice."""
    items = 0
    flipped: list[Mapping[str, Any]] = []
    shares: list[float] = []
    for row in rows:
        for entry in details_of(row).get("votes") or ():
            votes = votes_of(entry)
            repeated = {name: v for name, v in votes.items() if len(v) > 1}
            if not repeated:
                continue
            items += 1
            for v in repeated.values():
                ones = sum(v)
                pairs = len(v) * (len(v) - 1) / 2
                shares.append(ones * (len(v) - ones) / pairs)
            if any(len(set(v)) > 1 for v in repeated.values()):
                flipped.append(
                    {"sample_id": row.sample_id, "index": entry["index"], "votes": votes}
                )
    if not items:
        return None
    return Repeatability(
        n_items=items,
        flip_rate=len(flipped) / items,
        disagreement=math.fsum(shares) / len(shares),
        unsure=tuple(flipped),
    )


def jury_of(rows: Sequence[MetricResult]) -> Jury | None:
    """The jury over ``rows``; None when no item was judged by two judges."""
    names: dict[str, None] = {}
    pair_counts: dict[tuple[str, str], list[int]] = {}  # (a, b) -> tp, fp, fn, tn
    n_items = escalated = 0
    disagreements: list[Mapping[str, Any]] = []
    usage: dict[str, Usage] = {}
    for row in rows:
        details = details_of(row)
        for judge in (details.get("provenance") or {}).get("judges") or ():
            if isinstance(judge, Mapping) and "judge" in judge and judge.get("usage"):
                spent = Usage.from_dict(judge["usage"])
                name = str(judge["judge"])
                usage[name] = usage[name] + spent if name in usage else spent
        for entry in details.get("votes") or ():
            votes = votes_of(entry)
            for name in votes:
                names.setdefault(name)
            if len(votes) < 2:
                continue
            n_items += 1
            escalated += bool(entry.get("escalated"))
            verdicts = {name: majority(v) for name, v in votes.items()}
            if len(set(verdicts.values())) > 1:
                disagreements.append(
                    {"sample_id": row.sample_id, "index": entry["index"], "votes": votes}
                )
            for a, b in combinations(votes, 2):
                counts = pair_counts.setdefault((a, b), [0, 0, 0, 0])
                va, vb = verdicts[a], verdicts[b]
                counts[0 if va and vb else 1 if va else 2 if vb else 3] += 1
    if not n_items:
        return None
    pairs = []
    for (a, b), (tp, fp, fn, tn) in pair_counts.items():
        n = tp + fp + fn + tn
        pairs.append(
            {
                "a": a,
                "b": b,
                "n": n,
                "agreement": ratio(tp + tn, n),
                "kappa": cohen_kappa(tp, fp, fn, tn),
            }
        )
    return Jury(
        judges=tuple(names),
        pairs=tuple(pairs),
        n_items=n_items,
        n_escalated=escalated,
        disagreements=tuple(disagreements),
        usage=usage,
    )
