"""Context entity recall, and the matchers that look for an entity in a text.

``context_entity_recall`` measures the share of the reference's entities that the retrieved
contexts hold. It takes its entities from an extractor plugin (``llm`` from the LLM plugin,
``spacy`` from the spaCy plugin, or any registered one) and has two modes:

* ``verify`` (default, the seeds' algorithm): extract the entities of the reference only, then
  check each one in the retrieved text with a matcher: ``containment`` (normalised text, whole
  words), ``fuzzy`` (best partial alignment at or above a threshold) or ``llm`` (a judge that
  also accepts variants). With the LLM extractor this is one call per sample.
* ``intersection`` (ragas): extract the entities of the reference and of the retrieved contexts
  and count the reference entities found among the context's (compared in normalised form).
  Two extractions per sample.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from ctxeval import policy
from ctxeval.base import BaseMetric
from ctxeval.protocols import RunContext, Unit, Verdict
from ctxeval.registry import EXTRACTORS, MATCHERS, Registry, default_registry
from ctxeval.results import MetricResult
from ctxeval.sample import Sample

from .similarity import check_threshold

__all__ = [
    "ContainmentMatcher",
    "ContextEntityRecall",
    "FuzzyMatcher",
    "normalize_entity",
]

_PUNCTUATION = re.compile(r"[^\w\s]", re.UNICODE)
_SPACES = re.compile(r"\s+")
_LEADING_THE = re.compile(r"^(the|a|an)\s+")


def normalize_entity(text: str) -> str:
    """The form entities are compared in: case folded, punctuation dropped, spacing folded,
    a leading article removed (``"The  Eiffel-Tower!"`` becomes ``"eiffel tower"``)."""
    folded = _PUNCTUATION.sub(" ", text.casefold().replace("'s ", " ").replace("\u2019s ", " "))
    folded = _SPACES.sub(" ", folded).strip()
    return _LEADING_THE.sub("", folded)


def _normalize_text(text: str) -> str:
    return _SPACES.sub(" ", _PUNCTUATION.sub(" ", text.casefold())).strip()


@attrs.frozen(kw_only=True)
class ContainmentMatcher:
    """Matcher ``containment``: the normalised entity occurs in a candidate as whole words."""

    registry_name = "containment"
    name: str = "containment"

    def match_now(self, items: Sequence[str], candidates: Sequence[str]) -> list[Verdict]:
        texts = [f" {_normalize_text(c)} " for c in candidates]
        verdicts = []
        for item in items:
            key = normalize_entity(item)
            needle = f" {key} "
            where = next((i for i, t in enumerate(texts) if key and needle in t), None)
            verdicts.append(Verdict(where is not None, 1.0 if where is not None else 0.0, where))
        return verdicts

    async def match(
        self, items: Sequence[str], candidates: Sequence[str], ctx: RunContext
    ) -> list[Verdict]:
        return self.match_now(items, candidates)


@attrs.frozen(kw_only=True)
class FuzzyMatcher:
    """Matcher ``fuzzy``: the best partial alignment of the normalised entity in a candidate
    reaches ``threshold`` (default 0.9; rapidfuzz ``partial_ratio``)."""

    registry_name = "fuzzy"
    name: str = "fuzzy"
    threshold: float = attrs.field(default=0.9, validator=check_threshold)

    def match_now(self, items: Sequence[str], candidates: Sequence[str]) -> list[Verdict]:
        from rapidfuzz import fuzz

        texts = [_normalize_text(c) for c in candidates]
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

    async def match(
        self, items: Sequence[str], candidates: Sequence[str], ctx: RunContext
    ) -> list[Verdict]:
        return self.match_now(items, candidates)


def _distinct(units: Sequence[Unit]) -> list[Unit]:
    """Units with distinct normalised keys, first occurrence kept; empty keys dropped."""
    seen: dict[str, Unit] = {}
    for unit in units:
        key = normalize_entity(unit.key or unit.text)
        if key and key not in seen:
            seen[key] = unit
    return list(seen.values())


def _mode(instance: object, attribute: attrs.Attribute[str], value: str) -> None:
    if value not in ("verify", "intersection"):
        raise ValueError(f"mode must be 'verify' or 'intersection', got {value!r}")


@attrs.frozen(kw_only=True)
class ContextEntityRecall(BaseMetric):
    """Share of the reference's entities found in the retrieved contexts.

    Options:
        extractor: the extractor plugin (default ``llm``; ``spacy`` needs no LLM).
        extractor_options: options for the extractor (e.g. ``{"labels": ["PERSON"]}``).
        mode: ``verify`` (default) or ``intersection`` (ragas).
        matcher: for ``verify``: ``containment`` (default), ``fuzzy``, ``llm`` or any registered
            matcher.
        matcher_options: options for the matcher (e.g. ``{"threshold": 0.85}`` for ``fuzzy``).
        llm: the LLM for the ``llm`` extractor or matcher (default: the run's ``llm=``).
    """

    registry_name = "context_entity_recall"
    requires = ("reference", "retrieved_contexts")

    extractor: str = attrs.field(default="llm", validator=attrs.validators.instance_of(str))
    extractor_options: Mapping[str, Any] = attrs.field(factory=dict)
    mode: str = attrs.field(default="verify", validator=_mode)
    matcher: str = attrs.field(default="containment", validator=attrs.validators.instance_of(str))
    matcher_options: Mapping[str, Any] = attrs.field(factory=dict)
    llm: Any = attrs.field(default=None, repr=False)

    def _plugin_options(self, factory: Any, options: Mapping[str, Any]) -> dict[str, Any]:
        merged = dict(options)
        if self.llm is not None and "llm" not in merged:
            from ctxeval.base import options_of

            accepted = options_of(factory)
            if accepted is None or "llm" in accepted:
                merged["llm"] = self.llm
        return merged

    def estimate_calls(self, sample: Sample, registry: Registry | None = None) -> list[int]:
        """Prompt sizes (characters) of the LLM requests scoring ``sample`` would send, as the
        extractor and matcher plugins estimate them (those without ``estimate_calls`` send
        none)."""
        reference = sample.reference or ""
        contexts = list(sample.retrieved_contexts or ())
        if not reference.strip() or not contexts:
            return []
        registry = registry or default_registry()
        extractor = registry.get_extractor(
            self.extractor,
            **self._plugin_options(
                registry.factory(EXTRACTORS, self.extractor), self.extractor_options
            ),
        )
        sizes: list[int] = []
        texts = [reference, "\n".join(contexts)] if self.mode == "intersection" else [reference]
        estimate = getattr(extractor, "estimate_calls", None)
        if estimate is not None:
            sizes += estimate(texts)
        if self.mode == "verify":
            matcher = registry.get_matcher(
                self.matcher,
                **self._plugin_options(
                    registry.factory(MATCHERS, self.matcher), self.matcher_options
                ),
            )
            estimate = getattr(matcher, "estimate_calls", None)
            if estimate is not None:
                sizes += estimate([], contexts)
        return sizes

    async def ascore(self, sample: Sample, ctx: RunContext) -> MetricResult:
        reference = sample.reference or ""
        contexts = sample.retrieved_contexts or ()
        settings = {"extractor": self.extractor, "mode": self.mode}
        if not reference.strip():
            return policy.no_reference(
                "reference entities (the reference is empty)", details=settings
            )
        if not contexts:  # decided without extracting anything (no LLM call)
            return MetricResult.ok(0.0, details={**settings, "nothing_retrieved": True})
        registry = ctx.registry
        extractor = registry.get_extractor(
            self.extractor,
            **self._plugin_options(
                registry.factory(EXTRACTORS, self.extractor), self.extractor_options
            ),
        )
        joined = "\n".join(contexts)
        if self.mode == "intersection":
            reference_units, context_units = await extractor.extract([reference, joined], ctx)
        else:
            [reference_units] = await extractor.extract([reference], ctx)
            context_units = []
        entities = _distinct(reference_units)
        details: dict[str, Any] = {
            **settings,
            "reference_entities": [u.text for u in entities],
        }
        if not entities:
            return policy.no_reference("reference entities", details=details)
        if self.mode == "intersection":
            found_keys = {normalize_entity(u.key or u.text) for u in context_units}
            details["context_entities"] = [u.text for u in _distinct(context_units)]
            verdicts = [Verdict(normalize_entity(u.key or u.text) in found_keys) for u in entities]
        else:
            details["matcher"] = self.matcher
            matcher = registry.get_matcher(
                self.matcher,
                **self._plugin_options(
                    registry.factory(MATCHERS, self.matcher), self.matcher_options
                ),
            )
            verdicts = await matcher.match([u.text for u in entities], list(contexts), ctx)
            if len(verdicts) != len(entities):
                return MetricResult.error(
                    f"matcher {self.matcher!r} gave {len(verdicts)} verdicts for "
                    f"{len(entities)} entities",
                    details=details,
                )
        details["found"] = [u.text for u, v in zip(entities, verdicts, strict=True) if v.matched]
        details["missing"] = [
            u.text for u, v in zip(entities, verdicts, strict=True) if not v.matched
        ]
        return policy.recall(
            len(details["found"]), len(entities), what="reference entities", details=details
        )
