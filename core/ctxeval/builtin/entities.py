"""Context entity recall, and the matchers that look for an entity in a text.

``context_entity_recall`` measures the share of the reference's entities that the retrieved
contexts hold: a pipeline whose reference units are the entities an extractor finds in the
reference (``llm`` from the LLM plugin, ``spacy`` from the spaCy plugin, or any registered one),
matched against the retrieved contexts, into the ``Recall`` formula. It has two modes:

* ``verify`` (default): extract the entities of the reference only, then check each one in the
  retrieved text with a matcher: ``containment`` (normalised text, whole words), ``fuzzy``
  (best partial alignment at or above a threshold) or ``llm`` (a judge that also accepts
  variants). With the LLM extractor this is one call per sample.
* ``intersection`` (ragas): extract the entities of the reference and of the retrieved contexts
  (one extractor call for both) and count the reference entities found among the context's
  (matcher ``same_entity``: equal in normalised form).

Entities and texts are compared in the normal form of :func:`ctxeval.plugin.normalize_entity`
(case, possessives, Unicode quotes and dashes, diacritics, initialisms...), the same on both
sides. The extractor and the matcher are built once, when the metric is built.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import attrs

from ctxeval.plugin import (
    BaseDeterministicMatcher,
    Extracted,
    Items,
    Judgement,
    Pipeline,
    PipelineMetric,
    Verdict,
    get_extractor,
    get_matcher,
    judge_part,
    judges_option,
    jury_option,
    membership_verdicts,
    normalize_entity,
    normalize_words,
    policy,
    repeats_option,
    temperature_option,
    validators,
)

__all__ = [
    "ContainmentMatcher",
    "ContextEntityRecall",
    "FuzzyMatcher",
    "SameEntityMatcher",
]

ENTITY_FORM_VERSION = "entity-form@2"
"""The version of :func:`~ctxeval.plugin.normalize_entity`'s rules, in the ``fingerprint_data``
of the metric and of the matchers that use them: a resumed run scores their rows again when the
rules change (2: possessives at the end of an entity, Unicode folding, initialisms, digit
groups, ``&``)."""


@attrs.frozen(kw_only=True)
class ContainmentMatcher(BaseDeterministicMatcher):
    """Matcher ``containment``: the normalised entity occurs in a candidate as whole words."""

    registry_name: ClassVar[str] = "containment"
    name: str = "containment"

    @property
    def fingerprint_data(self) -> str:
        """The version of the normal form (a resumed run matches again when it changes)."""
        return ENTITY_FORM_VERSION

    def match_now(self, items: Sequence[str], candidates: Sequence[str]) -> list[Verdict]:
        texts = [f" {normalize_words(c)} " for c in candidates]
        verdicts = []
        for item in items:
            key = normalize_entity(item)
            needle = f" {key} "
            where = next((i for i, t in enumerate(texts) if key and needle in t), None)
            verdicts.append(Verdict(where is not None, 1.0 if where is not None else 0.0, where))
        return verdicts


@attrs.frozen(kw_only=True)
class FuzzyMatcher(BaseDeterministicMatcher):
    """Matcher ``fuzzy``: the best partial alignment of the normalised entity in a candidate
    reaches ``threshold`` (default 0.9; rapidfuzz ``partial_ratio``)."""

    registry_name: ClassVar[str] = "fuzzy"
    name: str = "fuzzy"
    threshold: float = attrs.field(default=0.9, validator=validators.unit_interval)

    @property
    def fingerprint_data(self) -> str:
        return ENTITY_FORM_VERSION

    def match_now(self, items: Sequence[str], candidates: Sequence[str]) -> list[Verdict]:
        from rapidfuzz import fuzz

        texts = [normalize_words(c) for c in candidates]
        verdicts = []
        for item in items:
            key = normalize_entity(item)
            best, where = 0.0, None
            for index, text in enumerate(texts):
                score = fuzz.partial_ratio(key, text) / 100 if key else 0.0
                if score > best:
                    best, where = score, index
            matched = policy.is_match(best, self.threshold)
            verdicts.append(Verdict(matched, best, where if matched else None))
        return verdicts


@attrs.frozen(kw_only=True)
class SameEntityMatcher(BaseDeterministicMatcher):
    """Matcher ``same_entity``: an entity is matched when a candidate entity has the same
    normalised form (``"The Eiffel-Tower"`` and ``"eiffel tower"``); what
    ``context_entity_recall``'s ``intersection`` mode compares with."""

    registry_name: ClassVar[str] = "same_entity"
    name: str = "same_entity"

    @property
    def fingerprint_data(self) -> str:
        return ENTITY_FORM_VERSION

    def match_now(self, items: Sequence[str], candidates: Sequence[str]) -> list[Verdict]:
        return membership_verdicts(items, candidates, normalize_entity)


def _options(instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise ValueError(f"{attribute.name} must be a mapping of option names to values")


@attrs.frozen(kw_only=True)
class ContextEntityRecall(PipelineMetric):
    """Share of the reference's entities found in the retrieved contexts; the entities come
    from an LLM (the default) or, with no LLM, from spaCy (extractor=spacy).

    Options:
        extractor: the extractor plugin (default ``llm``; ``spacy`` needs no LLM).
        extractor_options: options for the extractor (e.g. ``{"labels": ["PERSON"]}``).
        mode: ``verify`` (default) or ``intersection`` (ragas).
        matcher: for ``verify``: ``containment`` (default), ``fuzzy``, ``llm`` or any registered
            matcher.
        matcher_options: options for the matcher (e.g. ``{"threshold": 0.85}`` for ``fuzzy``).
        llm: the LLM for the ``llm`` extractor or matcher (default: the run's ``llm=``).
        judges: a jury of LLMs for the ``llm`` matcher, in place of ``llm`` (the extractor
            then uses the run's ``llm=``).
        repeats: judgements per judge and entity, majority verdict used (``llm`` matcher).
        jury: ``majority`` or ``escalate`` (see :class:`ctxeval.plugin.Panel`).
        repeat_temperature: the temperature of repeated judgements.
    """

    registry_name: ClassVar[str] = "context_entity_recall"
    requires: ClassVar[tuple[str, ...]] = ("reference", "retrieved_contexts")

    extractor: str = attrs.field(default="llm", validator=validators.text)
    extractor_options: Mapping[str, Any] = attrs.field(factory=dict, validator=_options)
    mode: str = attrs.field(
        default="verify", validator=validators.one_of("verify", "intersection", what="mode")
    )
    matcher: str = attrs.field(default="containment", validator=validators.text)
    matcher_options: Mapping[str, Any] = attrs.field(factory=dict, validator=_options)
    llm: Any = attrs.field(default=None, repr=False)
    judges: tuple[Any, ...] = judges_option()
    repeats: int = repeats_option()
    jury: str = jury_option()
    repeat_temperature: float = temperature_option()

    def build(self) -> Pipeline:
        extractor = get_extractor(self.extractor, llm=self.llm, **self.extractor_options)
        reference = Extracted(
            field="reference",
            extractor=extractor,
            what="reference entities",
            distinct=normalize_entity,
        )
        if self.mode == "intersection":
            if self.judges or self.repeats > 1:
                raise ValueError(
                    "judges and repeats judge entities with a matcher: use mode='verify' "
                    "with matcher='llm'"
                )
            return Pipeline(
                reference=attrs.evolve(reference, compare_by="key"),
                retrieved=Extracted(
                    field="retrieved_contexts",
                    extractor=extractor,
                    what="entities in the retrieved contexts",
                    distinct=normalize_entity,
                    compare_by="key",
                ),
                matcher=SameEntityMatcher(),
                formula=policy.Recall(),
            )
        return Pipeline(
            reference=reference,
            retrieved=Items(field="retrieved_contexts", what="retrieved contexts"),
            matcher=judge_part(
                lambda llm: get_matcher(self.matcher, llm=llm, **self.matcher_options),
                llm=self.llm,
                judges=self.judges,
                repeats=self.repeats,
                rule=self.jury,
                temperature=self.repeat_temperature,
            ),
            formula=policy.Recall(),
        )

    @property
    def fingerprint_data(self) -> str:
        """The version of the normal form entities are counted once in (a resumed run scores
        its rows again when it changes)."""
        return ENTITY_FORM_VERSION

    def settings(self) -> dict[str, Any]:
        return {"extractor": self.extractor, "mode": self.mode}

    def evidence(self, judgement: Judgement) -> dict[str, Any]:
        details: dict[str, Any] = {"reference_entities": [u.text for u in judgement.units]}
        if self.mode == "intersection":
            details["context_entities"] = [u.text for u in judgement.retrieved_units]
        else:
            details["matcher"] = self.matcher
        pairs = list(zip(judgement.units, judgement.verdicts, strict=True))
        details["found"] = [u.text for u, v in pairs if v.matched]
        details["missing"] = [u.text for u, v in pairs if not v.matched]
        return details
