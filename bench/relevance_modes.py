"""``context_relevance`` per chunk against ``batch=true`` on one real judge: requests, time, the
rows each mode scored, and how the two modes' grades agree chunk by chunk (exact agreement,
linear and quadratic weighted kappa, the confusion matrix: rows per chunk, columns batch).

    python bench/relevance_modes.py DATA.jsonl --model openai/NAME --api-base URL [--limit N]

Point it at the judge you use: the figures in docs/metrics/relevance.md come from the tiny
model the test suite runs (SmolLM2-135M), which says more about that model than the modes.
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from typing import Any

import ctxeval
from ctxeval._judge.graded import weighted_kappa
from ctxeval_llm import LLMConfig


def grades_of(evaluation: ctxeval.Evaluation) -> dict[tuple[str, int], int]:
    found: dict[tuple[str, int], int] = {}
    for row in evaluation.results:
        if row.status is ctxeval.Status.OK:
            for chunk in row.details["chunks"]:
                if chunk.get("grade") is not None:
                    found[(str(row.sample_id), int(chunk["index"]))] = int(chunk["grade"])
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data")
    parser.add_argument("--model", required=True)
    parser.add_argument("--api-base", default=None)
    parser.add_argument("--limit", type=int, default=None, help="the first N samples")
    args = parser.parse_args()
    with open(args.data, encoding="utf-8") as handle:
        samples: list[dict[str, Any]] = [
            json.loads(line) for line in itertools.islice(handle, args.limit) if line.strip()
        ]
    llm = LLMConfig(model=args.model, api_base=args.api_base)
    grades = {}
    for mode, options in (("per chunk", {}), ("batch", {"batch": True})):
        metric = ctxeval.get_metric("context_relevance", **options)
        started = time.perf_counter()
        evaluation = ctxeval.evaluate(samples, [metric], llm=llm, cache=None)
        statuses = [r.status.value for r in evaluation.results]
        grades[mode] = grades_of(evaluation)
        print(
            f"{mode}: {time.perf_counter() - started:.0f} s, {evaluation.usage.requests} requests, "
            f"rows {dict(sorted((s, statuses.count(s)) for s in set(statuses)))}, "
            f"{len(grades[mode])} chunks graded"
        )
    both = sorted(set(grades["per chunk"]) & set(grades["batch"]))
    if not both:
        print("no chunk graded by both modes")
        return
    matrix = [[0] * 4 for _ in range(4)]
    for key in both:
        matrix[grades["per chunk"][key]][grades["batch"][key]] += 1
    exact = sum(matrix[i][i] for i in range(4)) / len(both)
    print(
        f"{len(both)} chunks graded by both: exact agreement {exact:.3f}, "
        f"linear kappa {weighted_kappa(matrix, 'linear')}, "
        f"quadratic kappa {weighted_kappa(matrix, 'quadratic')}"
    )
    print(f"confusion (rows: per chunk grade 0-3, columns: batch grade 0-3): {matrix}")


if __name__ == "__main__":
    main()
