"""How ctxeval grows with the input: wall time and peak memory at 1x, 4x and 16x the samples.

Workloads (base sizes; ``--scale`` multiplies them):

* ID metrics (precision, recall, nDCG@10): 25 000 samples;
* string metrics (precision, recall): 2 500 samples (the rows of compare_deterministic.py);
* LLM ``context_precision``, 3 chunks per sample: 250 samples against the fake
  OpenAI-compatible server (its own process, no latency, concurrency 16).

Each runs in a fresh process, twice: ``evaluate`` (every row kept in memory, as the API
returns them) and ``stream`` (rows written to a JSONL file as they come, as the CLI does),
so the table shows what grows with the input and what stays flat. Peak memory is the
process's ``ru_maxrss``.

    python bench/scaling.py [--scale 1] [--steps 1,4,16]
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path

from compare_deterministic import id_row, string_row, write_rows

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

WORKLOADS = {
    "ID metrics (3)": ("ids", 25_000),
    "string metrics (2)": ("strings", 2_500),
    "LLM context_precision (3 chunks)": ("llm", 250),
}

METRICS = {
    "ids": ["id_based_context_precision", "id_based_context_recall", "id_ndcg_at_k"],
    "strings": ["non_llm_context_precision_with_reference", "non_llm_context_recall"],
    "llm": ["context_precision"],
}

RUN = r"""
import json, os, resource, sys, time
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
import anyio
import ctxeval

data, kind, mode, url, out = sys.argv[1:6]
metrics = json.loads(sys.argv[6])
options = {}
if kind == "llm":
    from ctxeval_llm import LLMConfig
    options = {"llm": LLMConfig(model="openai/judge", api_base=url, api_key="sk-bench"),
               "max_concurrency": 16}
start = time.perf_counter()
if mode == "evaluate":
    ev = ctxeval.evaluate(ctxeval.load_samples(data), metrics, **options)
    rows = len(ev.results)
    ok = sum(r.status is ctxeval.Status.OK for r in ev.results)
else:
    async def main():
        rows = ok = 0
        with open(out, "w", encoding="utf-8") as handle:
            async with ctxeval.stream(ctxeval.load_samples(data), metrics, **options) as stream:
                async for batch in stream.batches():
                    handle.write("".join(r.to_json() + "\n" for r in batch))
                    rows += len(batch)
                    ok += sum(r.status is ctxeval.Status.OK for r in batch)
        return rows, ok
    rows, ok = anyio.run(main)
seconds = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"seconds": seconds, "rows": rows, "ok": ok, "peak_mb": peak}))
"""


def llm_row(i: int, rng: random.Random) -> dict:
    return {
        "id": str(i),
        "user_input": f"Where is landmark {i}?",
        "reference": f"Landmark {i} is in Paris.",
        "retrieved_contexts": [f"Chunk {j} about landmark {i}." for j in range(3)],
    }


ROWS = {"ids": id_row, "strings": string_row, "llm": llm_row}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="multiply the base sizes")
    parser.add_argument("--steps", default="1,4,16")
    args = parser.parse_args()
    steps = [int(s) for s in args.steps.split(",")]
    server = subprocess.Popen(
        [sys.executable, str(HERE / "fake_judge_server.py"), "--latency", "0"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    url = server.stdout.readline().strip()  # type: ignore[union-attr]
    results = []
    try:
        with tempfile.TemporaryDirectory() as folder:
            for name, (kind, base) in WORKLOADS.items():
                for step in steps:
                    n = int(base * args.scale * step)
                    data = Path(folder) / f"{kind}-{n}.jsonl"
                    write_rows(data, ROWS[kind], n, random.Random(5))
                    for mode in ("evaluate", "stream"):
                        done = subprocess.run(
                            [sys.executable, "-c", RUN, str(data), kind, mode, url,
                             str(Path(folder) / "out.jsonl"), json.dumps(METRICS[kind])],
                            capture_output=True, text=True, check=True,
                        )  # fmt: skip
                        result = json.loads(done.stdout.strip().splitlines()[-1])
                        results.append((name, step, n, mode, result))
                        print(f"  {name} x{step} {mode}: {result}", file=sys.stderr)
    finally:
        server.stdin.close()  # type: ignore[union-attr]
        server.wait(timeout=30)
    print(
        "| workload | x | samples | mode | wall (s) | µs per row | rows ok / all | peak RSS (MB) |"
    )
    print("|---|---:|---:|---|---:|---:|---|---:|")
    for name, step, n, mode, r in results:
        per_row = r["seconds"] / max(1, r["rows"]) * 1e6
        print(
            f"| {name} | {step} | {n} | {mode} | {r['seconds']:.2f} | {per_row:.1f} | "
            f"{r['ok']} / {r['rows']} | {r['peak_mb']:.0f} |"
        )
    print("\n" + json.dumps(results))


if __name__ == "__main__":
    main()
