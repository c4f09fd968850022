"""LLM context precision against a fake OpenAI-compatible server at a fixed latency.

200 samples x 5 retrieved chunks = 1 000 usefulness verdicts, concurrency 16, 50 ms latency
(by default). The server runs in its own process, so the client's CPU time is the client's
alone. For each transport (``openai``, httpx, and ``litellm``) it reports wall time
against the physical limit ``ceil(requests / concurrency) x latency``, and the client's CPU
time per request (everything included: scheduling, prompts, JSON, HTTP, parsing, checking).

    python bench/llm_throughput.py [--samples 200] [--chunks 5] [--latency 0.05]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import ctxeval
from ctxeval_llm import LLMConfig

ROOT = Path(__file__).resolve().parents[1]
SERVER = r"""
import json, sys, time
sys.path.insert(0, sys.argv[2])
from fakes.openai_server import FakeOpenAI
answer = json.dumps({"reason": "it states the answer", "verdict": 1})
server = FakeOpenAI(lambda request: answer, latency=float(sys.argv[1]))
server.start()
print(server.url, flush=True)
sys.stdin.read()
"""


def start_server(latency: float) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(latency), str(ROOT / "tests")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    return process, process.stdout.readline().strip()


def one_run(
    url: str, transport: str, samples: list[dict[str, object]], concurrency: int
) -> tuple[float, float, int]:
    llm = LLMConfig(
        model="openai/fake-judge", api_base=url, api_key="sk-bench", transport=transport
    )
    cpu, wall = time.process_time(), time.perf_counter()
    evaluation = ctxeval.evaluate(
        samples, ["llm_context_precision_with_reference"], llm=llm, max_concurrency=concurrency
    )
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    assert evaluation.ok, [r.reason for r in evaluation.results if r.reason][:3]
    return wall, cpu, evaluation.usage.requests


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--chunks", type=int, default=5)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    samples = [
        {
            "id": str(i),
            "user_input": f"Question {i}?",
            "reference": f"The reference answer of question {i}.",
            "retrieved_contexts": [
                f"Chunk {j} retrieved for question {i}." for j in range(args.chunks)
            ],
        }
        for i in range(args.samples)
    ]
    server, url = start_server(args.latency)
    try:
        for transport in ("openai", "litellm"):  # warm up: imports, connections
            one_run(url, transport, samples[:20], args.concurrency)
        results: dict[str, list[tuple[float, float, int]]] = {"openai": [], "litellm": []}
        for _ in range(args.repeat):
            for transport in results:
                results[transport].append(one_run(url, transport, samples, args.concurrency))
    finally:
        server.stdin.close()  # type: ignore[union-attr]
        server.wait(timeout=10)
    requests = args.samples * args.chunks
    limit = math.ceil(requests / args.concurrency) * args.latency
    print(
        f"# LLM context precision: {args.samples} samples x {args.chunks} chunks = {requests} "
        f"verdicts, concurrency {args.concurrency}, latency {args.latency * 1000:.0f} ms, "
        f"median of {args.repeat}"
    )
    latency_ms = args.latency * 1000
    print(f"limit: ceil({requests}/{args.concurrency}) x {latency_ms:.0f} ms = {limit:.2f} s\n")
    print("| transport | requests | wall (s) | wall / limit | client CPU per request (ms) |")
    print("|---|---:|---:|---:|---:|")
    summary = {}
    for transport, runs in results.items():
        wall = statistics.median(r[0] for r in runs)
        cpu = statistics.median(r[1] / r[2] for r in runs) * 1000
        print(f"| {transport} | {runs[0][2]} | {wall:.2f} | {wall / limit:.2f}x | {cpu:.2f} |")
        summary[transport] = {"wall_s": wall, "limit_s": limit, "cpu_ms_per_request": cpu}
    print("\n" + json.dumps(summary))


if __name__ == "__main__":
    main()
