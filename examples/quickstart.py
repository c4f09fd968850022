"""Score the seeds' worked examples with the metrics that need no LLM, and print the results.

Run it from the repository root after `pip install -e .`:

    python examples/quickstart.py
"""

from __future__ import annotations

from pathlib import Path

import ctxeval

DATA = Path(__file__).parent / "data" / "seed_examples.jsonl"

ID_METRICS = [
    "id_based_context_precision",
    "id_based_context_recall",
    ctxeval.get_metric("id_precision_at_k", k=3),
    "id_mrr",
    "id_average_precision",
    ctxeval.get_metric("id_ndcg_at_k", k=5),
]
TEXT_METRICS = [
    "non_llm_context_precision_with_reference",
    "non_llm_context_recall",
    # A chunk that holds the reference passage plus other text: `containment` sees it.
    ctxeval.get_metric("non_llm_context_recall", name="recall_containment", measure="containment"),
]


def show(title: str, evaluation: ctxeval.Evaluation) -> None:
    print(f"== {title}")
    print(f"{'sample':<24} {'metric':<42} {'status':<10} score")
    for row in evaluation.results:
        score = "" if row.score is None else f"{row.score:.4f}"
        print(f"{row.sample_id:<24} {row.metric:<42} {row.status.value:<10} {score}")
    print(f"\n{'metric':<42} {'mean':>7} {'ok':>4} {'undef':>6} {'error':>6}")
    for name, s in evaluation.summary().items():
        mean = "" if s.mean is None else f"{s.mean:.4f}"
        print(f"{name:<42} {mean:>7} {s.n_ok:>4} {s.n_undefined:>6} {s.n_error:>6}")
    print()


def main() -> None:
    samples = list(ctxeval.load_samples(DATA))
    with_ids = [s for s in samples if s.retrieved_context_ids is not None]
    with_texts = [s for s in samples if s.retrieved_contexts is not None]
    show("context IDs", ctxeval.evaluate(with_ids, metrics=ID_METRICS))
    show("context texts", ctxeval.evaluate(with_texts, metrics=TEXT_METRICS))


if __name__ == "__main__":
    main()
