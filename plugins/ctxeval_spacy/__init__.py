"""ctxeval's spaCy plugin: named entities and sentences, offline and free (extra ``spacy``).

Registered through the ``ctxeval`` distribution's entry points:

* extractor ``spacy``: named entities (``context_entity_recall`` with ``extractor="spacy"``
  needs no LLM at all);
* extractor ``spacy_sentences``: sentences.

spaCy and the pipeline are imported when the plugin first runs, never at ``import ctxeval``.
"""

from .extractors import DEFAULT_LABELS, SpacyEntityExtractor, SpacySentenceExtractor

__all__ = ["DEFAULT_LABELS", "SpacyEntityExtractor", "SpacySentenceExtractor"]
