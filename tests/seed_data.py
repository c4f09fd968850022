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

# The Taj Mahal example of the entity-recall seeds.
TAJ_REFERENCE = (
    "The Taj Mahal is an ivory-white marble mausoleum on the right bank of the river Yamuna in "
    "the Indian city of Agra. It was commissioned in 1631 by the Mughal emperor Shah Jahan to "
    "house the tomb of his favorite wife, Mumtaz Mahal."
)
TAJ_HIGH = (
    "The Taj Mahal is a symbol of love and architectural marvel located in Agra, India. It was "
    "built by the Mughal emperor Shah Jahan in memory of his beloved wife, Mumtaz Mahal. The "
    "structure is renowned for its intricate marble work and beautiful gardens surrounding it."
)
TAJ_LOW = (
    "The Taj Mahal is an iconic monument in India. It is a UNESCO World Heritage Site and "
    "attracts millions of visitors annually. The intricate carvings and stunning architecture "
    "make it a must-visit destination."
)

# The Eiffel example of the entity-recall seeds.
EIFFEL_REFERENCE = "Gustave Eiffel designed the tower in Paris in 1889."
EIFFEL_CONTEXT = "The tower in Paris was completed in 1889 and remains a popular landmark."
