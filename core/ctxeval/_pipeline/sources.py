"""The two sides of a pipeline, as *sources* that read a sample.

* :class:`Items`: a sample field as it is (IDs, contexts, or one text);
* :class:`Extracted`: the units an :class:`~ctxeval.Extractor` finds in a text field;
* :class:`SplitAndAttribute` (reference side only): an :class:`~ctxeval.plugin.Attributor` that
  splits a text into units and judges each in one call, so the pipeline needs no matcher.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

import attrs

from ctxeval._data.sample import Sample, grades_of
from ctxeval._plugins.protocols import Attributor, Extractor, Unit
from ctxeval._plugins.validators import boolean, non_negative_int, text

__all__ = [
    "Extracted",
    "Items",
    "ReferenceSource",
    "RetrievedSource",
    "SplitAndAttribute",
    "dedupe",
    "field_text",
]


def dedupe(values: Sequence[str]) -> list[str]:
    """``values`` without repeats, in their first order."""
    return list(dict.fromkeys(values))


def field_text(sample: Sample, field: str) -> str:
    """The text of ``field`` in ``sample``: a text field as it is, a list field joined with
    newlines, "" when missing."""
    value = getattr(sample, field)
    if not value:
        return ""
    return value if isinstance(value, str) else "\n".join(value)


@attrs.frozen(kw_only=True)
class Items:
    """A side given by the sample as it is.

    Attributes:
        field: a list field (``retrieved_context_ids``, ``reference_contexts``...) or a text
            field (``reference``, ``response``), which gives one item when it is not blank.
        what: what the items are, plural, for the reasons of degenerate rows (``"reference
            context IDs"``).
        dedupe: keep the first occurrence of a repeated item only (IDs: the best rank).
        min_grade: for graded IDs (:class:`~ctxeval._data.sample.GradedIDs`), the least grade that
            counts (trec_eval's relevance level; 0 keeps every judged item, those judged not
            relevant too); a plain list is grade 1 throughout.
    """

    field: str = attrs.field(validator=text)
    what: str = attrs.field(validator=text)
    dedupe: bool = attrs.field(default=False, validator=boolean)
    min_grade: int = attrs.field(default=1, validator=non_negative_int)

    def read(self, sample: Sample) -> list[str]:
        """The items of ``sample`` (empty when the field is missing or blank), below-grade ones
        left out and repeats removed when the side says so."""
        items = self.given(sample)
        return dedupe(items) if self.dedupe else list(items)

    def given(self, sample: Sample) -> Sequence[str]:
        """The items of ``sample`` as it gives them (repeats kept, below-grade ones left out)."""
        value = getattr(sample, self.field)
        if not value:
            return ()
        if isinstance(value, str):
            return (value,) if value.strip() else ()
        grades = grades_of(value)
        if grades is None:
            return value if self.min_grade <= 1 else ()
        return tuple(i for i, g in zip(value, grades, strict=True) if g >= self.min_grade)

    def grades(self, sample: Sample) -> list[int] | None:
        """The grades of :meth:`given`'s items, or None when the field carries none."""
        value = getattr(sample, self.field)
        grades = grades_of(value) if value and not isinstance(value, str) else None
        return None if grades is None else [g for g in grades if g >= self.min_grade]


@attrs.frozen(kw_only=True)
class Extracted:
    """A side made of the units an extractor finds in a text field (a list field is joined
    with newlines into one text).

    Attributes:
        field: the sample field the text comes from.
        extractor: the bound extractor.
        what: what the units are, plural (``"reference entities"``).
        blank: the reason's words when the field's text is blank (nothing is extracted then).
        distinct: a key function: units with the same key count once (the first is kept;
            empty keys are dropped). None keeps every unit.
        compare_by: hand the matcher each unit's ``text`` or its ``key``.
    """

    field: str = attrs.field(validator=text)
    extractor: Extractor = attrs.field()
    what: str = attrs.field(validator=text)
    blank: str | None = None
    distinct: Callable[[str], str] | None = None
    compare_by: Literal["text", "key"] = "text"

    def source_text(self, sample: Sample) -> str:
        return field_text(sample, self.field)

    def keep(self, units: Sequence[Unit]) -> list[Unit]:
        """``units`` with the repeats (by :attr:`distinct`) removed."""
        if self.distinct is None:
            return list(units)
        seen: dict[str, Unit] = {}
        for unit in units:
            key = self.distinct(unit.key or unit.text)
            if key and key not in seen:
                seen[key] = unit
        return list(seen.values())

    def compared(self, units: Sequence[Unit]) -> list[str]:
        if self.compare_by == "key":
            return [u.key or u.text for u in units]
        return [u.text for u in units]


@attrs.frozen(kw_only=True)
class SplitAndAttribute:
    """A reference side whose units are found and judged in one step by an
    :class:`~ctxeval.plugin.Attributor` (no matcher): the LLM context recall's
    split-and-attribute request.

    Attributes:
        field: the text field to split (``reference``).
        attributor: the bound attributor.
        what: what the units are, plural (``"reference statements"``).
        blank: the reason's words when the field's text is blank.
    """

    field: str = attrs.field(validator=text)
    attributor: Attributor = attrs.field()
    what: str = attrs.field(validator=text)
    blank: str | None = None


ReferenceSource = Items | Extracted | SplitAndAttribute
RetrievedSource = Items | Extracted
