"""ctxeval's LLM plugin: extractors and judges through litellm (the ``llm`` extra).

Not built yet: the LLM metrics (``context_entity_recall`` with the LLM extractor,
``llm_context_precision_with_reference``, ``llm_context_precision_without_reference`` and
``llm_context_recall``) arrive with the LLM plugin issue. This package reserves the name and
imports nothing heavy.
"""
