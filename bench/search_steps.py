"""Multi-step search metrics against the single-step ID metrics on the same IDs (#55).

Two files of the same samples: one with ``retrieval_steps`` (``--steps`` steps of ``--ids``
IDs each), one with those IDs one after the other as ``retrieved_context_ids``; the same
reference IDs (1-4 out of 301). The five ``search_*`` metrics score the first, five
single-step ID metrics (recall, precision, MRR, AP, hit rate at the whole depth) the second,
each run a fresh process under ``/usr/bin/time -v`` (wall time, peak RSS), reading the file
and streaming the rows (counted, not written: a row's evidence is computed only when read,
alike for both), the two alternating, best and median of ``--repeat``.

    python bench/search_steps.py [--samples 1000000] [--repeat 5] [--steps 5] [--ids 10]
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import orjson

SEARCH = [
    "search_evidence_recall",
    "search_first_hit_step",
    "search_calls_to_full_recall",
    "search_step_precision",
    "search_redundancy",
]
SINGLE = [
    "id_based_context_recall",
    "id_based_context_precision",
    "id_mrr",
    "id_average_precision",
    "id_hit_rate_at_k:k=50",
]

RUN = r"""
import json, os, sys, time
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
import anyio
import ctxeval

data = sys.argv[1]
metrics = []
for spec in json.loads(sys.argv[2]):
    name, _, option = spec.partition(":")
    options = {}
    if option:
        key, _, value = option.partition("=")
        options[key] = int(value)
    metrics.append(ctxeval.get_metric(name, **options))


async def main():
    rows = ok = 0
    async with ctxeval.stream(ctxeval.load_samples(data), metrics) as stream:
        async for batch in stream.batches():
            rows += len(batch)
            ok += sum(r.status is ctxeval.Status.OK for r in batch)
    return rows, ok


start = time.perf_counter()
rows, ok = anyio.run(main)
print(json.dumps({"seconds": time.perf_counter() - start, "rows": rows, "ok": ok}))
"""


def write_data(folder: Path, samples: int, steps: int, ids: int) -> tuple[Path, Path]:
    rng = random.Random(55)
    pool = [f"d{n}" for n in range(301)]
    stepped, flat = folder / "steps.jsonl", folder / "flat.jsonl"
    with stepped.open("wb") as s, flat.open("wb") as f:
        for i in range(samples):
            reference = rng.choices(pool, k=rng.randint(1, 4))
            every = rng.choices(pool, k=steps * ids)
            calls = [every[n * ids : (n + 1) * ids] for n in range(steps)]
            s.write(orjson.dumps({
                "id": str(i),
                "reference_context_ids": reference,
                "retrieval_steps": [
                    {"query": f"query {i}.{n}", "retrieved_context_ids": c}
                    for n, c in enumerate(calls)
                ],
            }) + b"\n")  # fmt: skip
            f.write(orjson.dumps({
                "id": str(i), "reference_context_ids": reference, "retrieved_context_ids": every,
            }) + b"\n")  # fmt: skip
    return stepped, flat


def measure(data: Path, metrics: list[str]) -> dict[str, float]:
    done = subprocess.run(
        ["/usr/bin/time", "-v", sys.executable, "-c", RUN, str(data), json.dumps(metrics)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    result = json.loads(done.stdout.strip().splitlines()[-1])
    wall = re.search(r"Elapsed \(wall clock\) time.*: (?:(\d+):)?(\d+):([\d.]+)", done.stderr)
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)
    if wall is None or rss is None:
        raise RuntimeError(f"no figures from /usr/bin/time: {done.stderr[-500:]}")
    hours, minutes, seconds = wall.groups()
    result["wall"] = int(hours or 0) * 3600 + int(minutes) * 60 + float(seconds)
    result["peak_mb"] = int(rss.group(1)) / 1024
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--ids", type=int, default=10)
    parser.add_argument("--data", help="a folder to keep the generated files in (reused)")
    args = parser.parse_args()
    runs: dict[str, list[dict[str, float]]] = {"single": [], "steps": []}
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(args.data or scratch)
        folder.mkdir(parents=True, exist_ok=True)
        stepped, flat = folder / "steps.jsonl", folder / "flat.jsonl"
        if not (args.data and stepped.exists() and flat.exists()):
            stepped, flat = write_data(folder, args.samples, args.steps, args.ids)
        for number in range(args.repeat):
            for kind, data, metrics in (("single", flat, SINGLE), ("steps", stepped, SEARCH)):
                result = measure(data, metrics)
                runs[kind].append(result)
                print(f"  {number} {kind}: {result}", file=sys.stderr)
    print(f"{args.samples} samples, {args.steps} steps x {args.ids} IDs (5 metrics each)\n")
    print("| metrics | wall best (s) | wall median (s) | in-process median (s) | peak RSS (MB) |")
    print("|---|---:|---:|---:|---:|")
    for kind, label in (("single", "5 single-step ID metrics, 50 IDs"),
                        ("steps", "5 search_* metrics, 5 x 10 IDs")):  # fmt: skip
        walls = [r["wall"] for r in runs[kind]]
        inner = [r["seconds"] for r in runs[kind]]
        peak = max(r["peak_mb"] for r in runs[kind])
        print(f"| {label} | {min(walls):.1f} | {statistics.median(walls):.1f} | "
              f"{statistics.median(inner):.1f} | {peak:.0f} |")  # fmt: skip
    ratios = [s["wall"] / f["wall"] for s, f in zip(runs["steps"], runs["single"], strict=True)]
    print(f"\nsteps / single, wall, pairwise: best {min(ratios):.2f}, "
          f"median {statistics.median(ratios):.2f}")  # fmt: skip
    print("\n" + json.dumps(runs))


if __name__ == "__main__":
    main()
