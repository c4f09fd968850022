"""ctxeval's embedding plugin: texts compared by meaning, offline by default (extra ``embed``).

Registered through the ``ctxeval`` distribution's entry points:

* matcher ``embedding`` (:mod:`ctxeval_embed.matcher`): cosine similarity of text vectors
  ``>=`` a threshold; deterministic (the fast path) over a local embedder;
* embedder ``wordllama`` (:mod:`ctxeval_embed.offline`): WordLlama's static embeddings, whose
  weights and tokenizer ship in the ``wordllama`` wheel; loaded from there, never downloaded.

``non_llm_context_recall`` and ``non_llm_context_precision_with_reference`` use it with
``matcher="embedding"``. wordllama is imported when the embedder first runs, never at
``import ctxeval``.
"""

from .matcher import (
    DEFAULT_THRESHOLDS,
    DeterministicEmbeddingMatcher,
    EmbeddingMatcher,
    embedding_matcher,
)
from .offline import WordLlamaEmbedder

__all__ = [
    "DEFAULT_THRESHOLDS",
    "DeterministicEmbeddingMatcher",
    "EmbeddingMatcher",
    "WordLlamaEmbedder",
    "embedding_matcher",
]
