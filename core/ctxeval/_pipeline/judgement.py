"""What the matching step found for one sample: :class:`Judgement`, and the part of a judged
row's details made from it for comparing the judge with people (:func:`judged_details`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import attrs

from ctxeval._plugins.protocols import Unit, Verdict
from ctxeval.policy import Formula

__all__ = ["Judgement", "judged_details"]


@attrs.frozen(kw_only=True)
class Judgement:
    """What the matching step found for one sample: the evidence a row's details show.

    Attributes:
        reference: the reference units as matched (texts or keys).
        retrieved: the retrieved items as matched (deduplicated where the side says so).
        verdicts: one per judged item (``judged`` side), in order.
        judged: ``reference`` or ``retrieved``.
        units: the reference :class:`~ctxeval.Unit` objects, when they were extracted.
        retrieved_units: the retrieved side's units, when they were extracted.
        reference_grades: the grades of the reference items, when they carry grades.
        gains: for a graded formula, the grade of the reference item each verdict matched
            (0 for no match), when the reference carries grades.
    """

    reference: Sequence[str]
    retrieved: Sequence[str]
    verdicts: Sequence[Verdict]
    judged: Literal["reference", "retrieved"]
    units: Sequence[Unit] = ()
    retrieved_units: Sequence[Unit] = ()
    reference_grades: Sequence[int] | None = None
    gains: Sequence[int] | None = None

    @property
    def flags(self) -> list[bool]:
        return [v.matched for v in self.verdicts]

    @property
    def judged_items(self) -> Sequence[str]:
        return self.reference if self.judged == "reference" else self.retrieved


def judged_details(judgement: Judgement, formula: Formula) -> dict[str, Any]:
    """What a judged row adds to its details, for comparing the judge with people
    (:mod:`ctxeval._judge.trust`): ``flags``, the verdict (0 or 1) of each judged item in order, as
    the formula scored them; ``n_reference`` where the formula judges the retrieved items (the
    formula's other input); ``votes`` for the items a :class:`~ctxeval.plugin.Panel` judged
    more than once (each with its ``index``)."""
    out: dict[str, Any] = {"flags": [int(v.matched) for v in judgement.verdicts]}
    if formula.judged == "retrieved":
        out["n_reference"] = len(judgement.reference)
    votes = [
        {"index": index, **v.votes.to_dict()}
        for index, v in enumerate(judgement.verdicts)
        if v.votes is not None
    ]
    if votes:
        out["votes"] = votes
    return out
