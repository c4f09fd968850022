"""The LLM judges: the parts (an entity extractor, an entity matcher, a relevance judge, a
statement attributor) and the metrics built from them, registered through entry points
(``ctxeval_llm.judges:ContextRelevance``...); their prompt texts, versioned, are
:mod:`ctxeval_llm.judges.prompts`.

The top floor of the plugin: it asks through :mod:`ctxeval_llm._ask`, which sends through
:mod:`ctxeval_llm._transports`; nothing below imports it (docs/decisions/0008).
"""

from ._metrics import (
    ContextRelevance,
    ContextSufficiency,
    LLMContextPrecisionWithoutReference,
    LLMContextPrecisionWithReference,
    LLMContextRecall,
    LLMEntityExtractor,
    LLMEntityMatcher,
    LLMRelevanceJudge,
    SharedJudgements,
    StatementAttributor,
    SufficiencyJudge,
    doc_id_of,
    relevance_score,
)

__all__ = [
    "ContextRelevance",
    "ContextSufficiency",
    "LLMContextPrecisionWithReference",
    "LLMContextPrecisionWithoutReference",
    "LLMContextRecall",
    "LLMEntityExtractor",
    "LLMEntityMatcher",
    "LLMRelevanceJudge",
    "SharedJudgements",
    "StatementAttributor",
    "SufficiencyJudge",
    "doc_id_of",
    "relevance_score",
]
