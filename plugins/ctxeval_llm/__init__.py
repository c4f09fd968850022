"""ctxeval's LLM plugin: judges and extractors over an OpenAI-compatible endpoint (httpx),
litellm (every other provider) or your own transport.

Registered through the ``ctxeval`` distribution's entry points, like any plugin:

* metrics ``llm_context_precision_with_reference`` (alias ``context_precision``),
  ``llm_context_precision_without_reference`` (alias ``context_utilization``) and
  ``llm_context_recall`` (alias ``context_recall``);
* extractor ``llm`` (named entities) and matcher ``llm`` (entity presence), used by
  ``context_entity_recall``;
* ``context_relevance``, ``context_sufficiency``, and the fact-level metrics
  ``context_nugget_recall`` (TREC RAG's nuggets), ``claim_recall`` and
  ``claim_context_precision`` (RAGChecker), with their parts (extractors ``llm_nuggets``,
  ``llm_claims``; matcher ``llm_nugget_support``).

Give the run an LLM with ``llm=``: a litellm model string (``"openai/gpt-4o-mini"``), a dict or
:class:`LLMConfig`, or your own async callable. Nothing heavy is imported until a request is
made; litellm only when a non-OpenAI-compatible provider is used. The providers
(``ctxeval.llms`` group) are in :mod:`ctxeval_llm.provider`.
"""

from __future__ import annotations

from types import ModuleType

from ctxeval.plugin import ChatTransport, Completion

from .config import LLMConfig

__all__ = ["ChatTransport", "Completion", "LLMConfig"]


def __getattr__(name: str) -> ModuleType:
    """``ctxeval_llm.prompts``: the prompt texts, now :mod:`ctxeval_llm.judges.prompts`."""
    if name == "prompts":
        from .judges import prompts

        return prompts
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
