"""ctxeval against ragas 0.4.3 on the LLM context metrics, against the fake OpenAI-compatible
server (its own process) at a fixed latency, concurrency 16 for both.

Scenarios (200 samples x 5 retrieved chunks by default):

* precision at 50 ms and 500 ms latency, recall and entity recall at 50 ms;
* precision against a provider that admits 8 requests in flight and answers 429 with
  ``Retry-After: 1`` beyond that;
* precision with 20% 429 and 10% 500 answers.

For each: requests sent, wall time, client CPU per request, the physical limit
``ceil(requests / 16) x latency`` (of ctxeval's requests), and rows lost (ragas turns failures
into NaN; ctxeval's failures are error rows, counted as lost too). Each tool runs in its own
process; ragas through ``ragas.evaluate`` with ``RunConfig(max_workers=16)``.

    python bench/compare_llm.py [--samples 200] [--chunks 5] [--quick]
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

from peer_env import python_of

HERE = Path(__file__).resolve().parent

CTXEVAL_RUN = r"""
import json, os, sys, time
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
import ctxeval
from ctxeval_llm import LLMConfig
url, metric, data, concurrency = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
name = {"precision": "llm_context_precision_with_reference", "recall": "llm_context_recall",
        "entities": "context_entity_recall"}[metric]
rows = [json.loads(line) for line in open(data, encoding="utf-8")]
llm = LLMConfig(model="openai/fake-judge", api_base=url, api_key="sk-bench")
cpu, wall = time.process_time(), time.perf_counter()
ev = ctxeval.evaluate(rows, [name], llm=llm, max_concurrency=concurrency)
wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
print(json.dumps({"wall": wall, "cpu": cpu, "rows": len(ev.results),
                  "lost": sum(r.status.value != "ok" for r in ev.results)}))
"""


def stats(url: str) -> dict:
    with urllib.request.urlopen(url.removesuffix("/v1") + "/stats") as response:
        return json.loads(response.read())


def scenario(name, metric, latency, data, ours, ragas, concurrency, server_args=()):
    server = subprocess.Popen(
        [sys.executable, str(HERE / "fake_judge_server.py"), "--latency", str(latency), *server_args],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    url = server.stdout.readline().strip()
    results = {}
    try:
        for tool, command in (
            ("ctxeval", [ours, "-c", CTXEVAL_RUN, url, metric, str(data), str(concurrency)]),
            (
                "ragas 0.4.3",
                [
                    str(ragas),
                    str(HERE / "peers" / "ragas_llm.py"),
                    url,
                    metric,
                    str(data),
                    str(concurrency),
                ],
            ),
        ):
            before = stats(url)["requests"]
            done = subprocess.run(command, capture_output=True, text=True, timeout=1800)
            if done.returncode != 0:
                results[tool] = {"error": done.stderr[-400:]}
                continue
            result = json.loads(done.stdout.strip().splitlines()[-1])
            result["requests"] = stats(url)["requests"] - before
            results[tool] = result
    finally:
        server.stdin.close()
        server.wait(timeout=30)
    return name, latency, concurrency, results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--chunks", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="skip the 500 ms scenario")
    args = parser.parse_args()
    ragas, ours = python_of("ragas"), sys.executable
    with tempfile.TemporaryDirectory() as folder:
        data = Path(folder) / "llm.jsonl"
        with data.open("w") as handle:
            for i in range(args.samples):
                handle.write(
                    json.dumps(
                        {
                            "id": str(i),
                            "user_input": f"Where is landmark {i}?",
                            "reference": f"Landmark {i} is in Paris, France.",
                            "retrieved_contexts": [
                                f"Chunk {j} about landmark {i} in Paris."
                                for j in range(args.chunks)
                            ],
                        }
                    )
                    + "\n"
                )
        runs = [
            ("precision", "precision", 0.05, ()),
            ("recall", "recall", 0.05, ()),
            ("entity recall", "entities", 0.05, ()),
            (
                "precision, 8-in-flight provider, 429 beyond",
                "precision",
                0.05,
                ("--max-in-flight", "8"),
            ),
            ("precision, 20% 429 + 10% 500", "precision", 0.05, ("--faults", "429=0.2,500=0.1")),
        ]
        if not args.quick:
            runs.insert(1, ("precision", "precision", 0.5, ()))
        rows = [scenario(n, m, lat, data, ours, ragas, 16, extra) for n, m, lat, extra in runs]
    print(
        f"# LLM metrics: {args.samples} samples x {args.chunks} chunks, concurrency 16, one run each\n"
    )
    print(
        "| scenario | latency | tool | requests | wall (s) | limit (s) | wall / limit | CPU / request (ms) | rows lost |"
    )
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|")
    for name, latency, concurrency, results in rows:
        limit = None
        if "requests" in results.get("ctxeval", {}):
            limit = math.ceil(results["ctxeval"]["requests"] / concurrency) * latency
        for tool, r in results.items():
            if "error" in r:
                print(
                    f"| {name} | {latency * 1000:.0f} ms | {tool} | failed: {r['error'][:80]!r} | | | | | |"
                )
                continue
            per = r["cpu"] / max(1, r["requests"]) * 1000
            ratio = f"{r['wall'] / limit:.2f}x" if limit else ""
            print(
                f"| {name} | {latency * 1000:.0f} ms | {tool} | {r['requests']} | {r['wall']:.2f} | {limit or 0:.2f} | {ratio} | {per:.2f} | {r['lost']} |"
            )
    print("\n" + json.dumps(rows))


if __name__ == "__main__":
    main()
