"""The LLM judges: the parts (an entity extractor, an entity matcher, a relevance judge, a
statement attributor, a nugget extractor and support judge, a claim extractor and
checker) and the metrics built from them, registered through entry points
(``ctxeval_llm.judges:ContextRelevance``...); their prompt texts, versioned, are
:mod:`ctxeval_llm.judges.prompts`.

The top floor of the plugin: it asks through :mod:`ctxeval_llm._ask`, which sends through
:mod:`ctxeval_llm._transports`; nothing below imports it (docs/decisions/0008).
"""

from ._claims import ClaimChecker, ClaimContextPrecision, ClaimExtractor, ClaimRecall
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
from ._nuggets import ContextNuggetRecall, NuggetExtractor, NuggetSupportJudge
from .nugget_files import (
    NUGGET_VARIANTS,
    Nugget,
    nugget_scores,
    read_nuggets,
    records_of,
    write_nuggets,
)

__all__ = [
    "NUGGET_VARIANTS",
    "ClaimChecker",
    "ClaimContextPrecision",
    "ClaimExtractor",
    "ClaimRecall",
    "ContextNuggetRecall",
    "ContextRelevance",
    "ContextSufficiency",
    "LLMContextPrecisionWithReference",
    "LLMContextPrecisionWithoutReference",
    "LLMContextRecall",
    "LLMEntityExtractor",
    "LLMEntityMatcher",
    "LLMRelevanceJudge",
    "Nugget",
    "NuggetExtractor",
    "NuggetSupportJudge",
    "SharedJudgements",
    "StatementAttributor",
    "SufficiencyJudge",
    "doc_id_of",
    "nugget_scores",
    "read_nuggets",
    "records_of",
    "relevance_score",
    "write_nuggets",
]
