"""An example ctxeval plugin package: one extractor, one matcher and one metric.

Each class is an ordinary attrs class that satisfies a ctxeval protocol; the entry points in
this package's ``pyproject.toml`` are what make ctxeval find them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import attrs

from ctxeval import MetricResult, RunContext, Sample, Unit, Verdict, policy
from ctxeval.base import BaseMetric

__all__ = ["KeywordExtractor", "KeywordRecall", "SubstringMatcher"]

_WORD = re.compile(r"[^\W\d_]+(?:['-][^\W\d_]+)*|\d+")
_STOP_WORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "been",
        "but",
        "by",
        "for",
        "from",
        "had",
        "has",
        "have",
        "he",
        "her",
        "his",
        "in",
        "into",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "she",
        "that",
        "the",
        "their",
        "them",
        "they",
        "this",
        "to",
        "was",
        "were",
        "which",
        "who",
        "will",
        "with",
    ]
)


@attrs.frozen(kw_only=True)
class KeywordExtractor:
    """Extractor ``keywords``: the distinct content words of each text, in order."""

    registry_name = "keywords"
    name: str = "keywords"
    min_length: int = 4

    async def extract(self, texts: Sequence[str], ctx: RunContext) -> list[list[Unit]]:
        out = []
        for text in texts:
            seen: dict[str, Unit] = {}
            for word in _WORD.findall(text):
                key = word.lower()
                if (len(key) >= self.min_length or key.isdigit()) and key not in _STOP_WORDS:
                    seen.setdefault(key, Unit(word, "KEYWORD", key))
            out.append(list(seen.values()))
        return out


@attrs.frozen(kw_only=True)
class SubstringMatcher:
    """Matcher ``substring``: an item is matched when a candidate contains it (any case)."""

    registry_name = "substring"
    name: str = "substring"

    async def match(
        self, items: Sequence[str], candidates: Sequence[str], ctx: RunContext
    ) -> list[Verdict]:
        lowered = [c.casefold() for c in candidates]
        verdicts = []
        for item in items:
            needle = item.casefold()
            where = next((i for i, c in enumerate(lowered) if needle in c), None)
            verdicts.append(Verdict(where is not None, None, where))
        return verdicts


@attrs.frozen(kw_only=True)
class KeywordRecall(BaseMetric):
    """Metric ``keyword_recall``: reference keywords found in the retrieved contexts / keywords."""

    registry_name = "keyword_recall"
    requires = ("reference", "retrieved_contexts")
    extractor: str = "keywords"
    matcher: str = "substring"

    async def ascore(self, sample: Sample, ctx: RunContext) -> MetricResult:
        assert sample.reference is not None
        assert sample.retrieved_contexts is not None
        extractor = ctx.registry.get_extractor(self.extractor)
        matcher = ctx.registry.get_matcher(self.matcher)
        [keywords] = await extractor.extract([sample.reference], ctx)
        verdicts = await matcher.match([k.key for k in keywords], sample.retrieved_contexts, ctx)
        found = [k.text for k, v in zip(keywords, verdicts, strict=False) if v.matched]
        missing = [k.text for k, v in zip(keywords, verdicts, strict=False) if not v.matched]
        return policy.recall(
            len(found),
            len(keywords),
            what="keywords in the reference",
            details={"found": found, "missing": missing},
        )
