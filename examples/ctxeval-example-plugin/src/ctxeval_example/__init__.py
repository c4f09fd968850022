"""An example ctxeval plugin package: an extractor, a matcher, and two metrics composed from
parts, one of them ctxeval's own ``fuzzy`` matcher.

Everything comes from :mod:`ctxeval.plugin`, the one module a plugin may import; the entry
points in this package's ``pyproject.toml`` are what make ctxeval find the plugins.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import ClassVar

import attrs

from ctxeval.plugin import (
    BaseDeterministicMatcher,
    Extracted,
    Items,
    PipelineMetric,
    RunContext,
    Unit,
    Verdict,
    compose,
    get_extractor,
    get_matcher,
    policy,
    validators,
)

__all__ = ["KeywordExtractor", "SubstringMatcher", "fuzzy_keyword_recall", "keyword_recall"]

_WORD = re.compile(r"[^\W\d_]+(?:['-][^\W\d_]+)*|\d+")
_STOP_WORDS = frozenset(
    ["a", "an", "and", "are", "as", "at", "be", "been", "but", "by", "for", "from", "had", "has",
     "have", "he", "her", "his", "in", "into", "is", "it", "its", "of", "on", "or", "she", "that",
     "the", "their", "them", "they", "this", "to", "was", "were", "which", "who", "will", "with"]
)  # fmt: skip


@attrs.frozen(kw_only=True)
class KeywordExtractor:
    """Extractor ``keywords``: the distinct content words of each text, in order (the unit's
    key is the lower-cased word)."""

    registry_name: ClassVar[str] = "keywords"
    name: str = "keywords"
    min_length: int = attrs.field(default=4, validator=validators.positive_int)

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
class SubstringMatcher(BaseDeterministicMatcher):
    """Matcher ``substring``: an item is matched when a candidate contains it (any case).

    It needs no I/O: it writes ``match_now``, and the base class gives it ``match`` and the
    batch form ``match_batch`` that ctxeval's fast path uses.
    """

    registry_name: ClassVar[str] = "substring"
    name: str = "substring"

    def match_now(self, items: Sequence[str], candidates: Sequence[str]) -> list[Verdict]:
        lowered = [c.casefold() for c in candidates]
        verdicts = []
        for item in items:
            needle = item.casefold()
            where = next((i for i, c in enumerate(lowered) if needle in c), None)
            verdicts.append(Verdict(where is not None, None, where))
        return verdicts


def keyword_recall(
    *, name: str = "keyword_recall", extractor: str = "keywords", matcher: str = "substring"
) -> PipelineMetric:
    """Metric ``keyword_recall``: reference keywords found in the retrieved contexts / keywords.

    A composition: the keywords of the reference (any registered extractor), matched against
    the retrieved contexts (any registered matcher), into the ``Recall`` formula.
    """
    return compose(
        name,
        reference=Extracted(
            field="reference",
            extractor=get_extractor(extractor),
            what="keywords in the reference",
            compare_by="key",
        ),
        retrieved=Items(field="retrieved_contexts", what="retrieved contexts"),
        matcher=get_matcher(matcher),
        formula=policy.Recall(),
    )


def fuzzy_keyword_recall(
    *, name: str = "fuzzy_keyword_recall", threshold: float = 0.85
) -> PipelineMetric:
    """Metric ``fuzzy_keyword_recall``: entity recall with this package's extractor and
    ctxeval's own ``fuzzy`` matcher (a keyword counts when a close spelling is retrieved)."""
    return compose(
        name,
        reference=Extracted(
            field="reference", extractor=KeywordExtractor(), what="keywords in the reference"
        ),
        retrieved=Items(field="retrieved_contexts", what="retrieved contexts"),
        matcher=get_matcher("fuzzy", threshold=threshold),
        formula=policy.Recall(),
    )
