"""Load: many samples through the ID, string and LLM metrics, with peak memory.

* 100 000 samples read from a JSONL file (streamed) through the ID and string metrics;
* 10 000 samples through ``context_precision`` (one chunk each) against the fake
  OpenAI-compatible server in its own process (no latency, concurrency 16).

For each: wall time, rows ok / error / lost, and the peak resident memory of the process after
it (``ru_maxrss``: it only grows, so each figure bounds the runs before it too).

    python bench/load.py [--samples 100000] [--llm-samples 10000]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import ctxeval
from ctxeval_llm import LLMConfig

ROOT = Path(__file__).resolve().parents[1]


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def rows(n: int) -> Iterator[dict[str, object]]:
    """``n`` samples with ID lists and texts (the same for every run: seeded)."""
    rng = random.Random(3)
    words = [
        "paris",
        "france",
        "tower",
        "river",
        "museum",
        "capital",
        "city",
        "art",
        "history",
        "science",
    ]
    for i in range(n):
        ref = [f"d{rng.randint(0, 200)}" for _ in range(3)]
        ret = [f"d{rng.randint(0, 200)}" for _ in range(8)]
        passage = " ".join(rng.choice(words) for _ in range(25))
        yield {
            "id": str(i),
            "retrieved_context_ids": ret,
            "reference_context_ids": ref,
            "retrieved_contexts": [passage, " ".join(rng.choice(words) for _ in range(25))],
            "reference_contexts": [passage[: len(passage) // 2]],
        }


def write_data(path: Path, n: int) -> None:
    with path.open("w") as handle:
        for row in rows(n):
            handle.write(json.dumps(row) + "\n")


def report(name: str, n: int, metrics: int, evaluation: ctxeval.Evaluation, seconds: float) -> None:
    rows = evaluation.results
    ok = sum(r.status.value == "ok" for r in rows)
    undefined = sum(r.status.value == "undefined" for r in rows)
    errors = sum(r.status.value == "error" for r in rows)
    lost = n * metrics - len(rows)
    print(
        f"| {name} | {n} | {seconds:.1f} | {ok} / {undefined} / {errors} | {lost} | {peak_mb():.0f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=100_000)
    parser.add_argument("--llm-samples", type=int, default=10_000)
    args = parser.parse_args()
    print("| run | samples | wall (s) | rows ok / undefined / error | rows lost | peak RSS (MB) |")
    print("|---|---:|---:|---|---:|---:|")
    with tempfile.TemporaryDirectory() as folder:
        data = Path(folder) / "load.jsonl"
        write_data(data, args.samples)
        ids = ["id_based_context_precision", "id_based_context_recall", "id_ndcg_at_k"]
        start = time.perf_counter()
        evaluation = ctxeval.evaluate(ctxeval.load_samples(data), ids)
        report(
            "ID metrics (3), streamed from JSONL",
            args.samples,
            3,
            evaluation,
            time.perf_counter() - start,
        )
        del evaluation
        strings = ["non_llm_context_precision_with_reference", "non_llm_context_recall"]
        start = time.perf_counter()
        evaluation = ctxeval.evaluate(ctxeval.load_samples(data), strings)
        report(
            "string metrics (2), streamed from JSONL",
            args.samples,
            2,
            evaluation,
            time.perf_counter() - start,
        )
        del evaluation

    code = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); from fakes.openai_server import FakeOpenAI; "
        "s = FakeOpenAI(lambda r: json.dumps({'reason': 'ok', 'verdict': 1})); s.start(); "
        "print(s.url, flush=True); sys.stdin.read()"
    )
    server = subprocess.Popen(
        [sys.executable, "-c", code, str(ROOT / "tests")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        url = server.stdout.readline().strip()  # type: ignore[union-attr]
        samples = (
            {"id": str(i), "user_input": "q", "reference": f"r{i}", "retrieved_contexts": [f"c{i}"]}
            for i in range(args.llm_samples)
        )
        llm = LLMConfig(model="openai/judge", api_base=url, api_key="sk-load")
        start = time.perf_counter()
        evaluation = ctxeval.evaluate(samples, ["context_precision"], llm=llm, max_concurrency=16)
        report(
            "context_precision (LLM, fake server)",
            args.llm_samples,
            1,
            evaluation,
            time.perf_counter() - start,
        )
    finally:
        server.stdin.close()  # type: ignore[union-attr]
        server.wait(timeout=10)


if __name__ == "__main__":
    main()
