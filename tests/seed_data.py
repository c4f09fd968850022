"""The inputs of the seeds' worked examples (../shared/seeds/)."""

from __future__ import annotations

SEED_ID_PRECISION = {
    "retrieved_context_ids": ["doc_1", "doc_2", "doc_3", "doc_4"],
    "reference_context_ids": ["doc_1", "doc_4", "doc_5", "doc_6"],
}
SEED_ID_RECALL = {
    "retrieved_context_ids": ["doc_1", "doc_2", "doc_3"],
    "reference_context_ids": ["doc_1", "doc_4", "doc_5", "doc_6"],
}
SEED_NONLLM_PRECISION = {
    "retrieved_contexts": ["The Eiffel Tower is located in Paris."],
    "reference_contexts": [
        "Paris is the capital of France.",
        "The Eiffel Tower is one of the most famous landmarks in Paris.",
    ],
}
SEED_NONLLM_RECALL = {
    "retrieved_contexts": ["Paris is the capital of France."],
    "reference_contexts": [
        "Paris is the capital of France.",
        "The Eiffel Tower is one of the most famous landmarks in Paris.",
    ],
}
