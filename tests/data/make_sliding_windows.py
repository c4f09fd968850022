"""Write tests/data/sliding_windows.jsonl: a chunker's sliding windows over 50 documents (#55).

Each document is 24 words; the chunker cuts windows of 8 words at 0, 25 and 50% overlap
(strides 8, 6 and 4; the last window ends at the document's end). For query ``i`` the answer
is the first 4 words of document ``i`` (so only its first window holds it), and the retriever
returns every window of document ``i``, best first, then the first window of two other
documents: the reranker that returns several chunks of one document. The reference names the
answer chunk (``doc_i#0``, a chunk ID whose document is before the ``#``).

Deterministic: ``python tests/data/make_sliding_windows.py`` writes the same bytes every time
(tests/test_units.py checks the file against it).
"""

from __future__ import annotations

import json
from pathlib import Path

DOCUMENTS = 50
WORDS = 24
WINDOW = 8
OVERLAPS = (0, 25, 50)
PATH = Path(__file__).with_name("sliding_windows.jsonl")


def words(document: int) -> list[str]:
    return [f"w{(document * 31 + n * 17) % 997}" for n in range(WORDS)]


def windows(document: int, overlap: int) -> list[tuple[str, str]]:
    """``(chunk id, text)`` of each window of ``document``."""
    stride = WINDOW - WINDOW * overlap // 100
    text = words(document)
    starts = list(range(0, WORDS - WINDOW + 1, stride))
    if starts[-1] + WINDOW < WORDS:
        starts.append(WORDS - WINDOW)
    return [(f"doc_{document}#{n}", " ".join(text[s : s + WINDOW])) for n, s in enumerate(starts)]


def lines() -> list[str]:
    out = []
    for overlap in OVERLAPS:
        for query in range(DOCUMENTS):
            chunks = windows(query, overlap)
            for other in ((query + 1) % DOCUMENTS, (query + 7) % DOCUMENTS):
                chunks.append(windows(other, overlap)[0])
            sample = {
                "id": f"o{overlap}-q{query}",
                "user_input": " ".join(words(query)[:4]),
                "retrieved_context_ids": [chunk_id for chunk_id, _ in chunks],
                "retrieved_contexts": [text for _, text in chunks],
                "retrieved_context_sources": [chunk_id.split("#")[0] for chunk_id, _ in chunks],
                "reference_context_ids": [f"doc_{query}#0"],
                "reference_contexts": [windows(query, overlap)[0][1]],
                "reference_context_sources": [f"doc_{query}"],
                "overlap": overlap,
            }
            out.append(json.dumps(sample))
    return out


if __name__ == "__main__":
    PATH.write_text("\n".join(lines()) + "\n", encoding="utf-8")
