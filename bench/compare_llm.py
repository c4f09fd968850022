"""ctxeval against ragas 0.4.3 on the LLM context metrics, against the fake OpenAI-compatible
server (its own process) at a fixed latency, concurrency 16 for both.

Scenarios (200 samples x 5 retrieved chunks by default):

* precision at 50 ms and 500 ms latency, recall and entity recall at 50 ms;
* precision against a provider that admits 8 requests in flight and answers 429 with
  ``Retry-After: 1`` beyond that;
* precision with 20% 429 and 10% 500 answers.

The precision scenarios at a plain server also time a third client, the floor: a bare aiohttp
session sending as many requests at the same concurrency, its imports and request bodies made
before its clock starts; *wall / floor* is each tool's time over it, in the same run.

For each: requests sent, wall time, client CPU per request, the physical limit
``ceil(requests / 16) x latency`` (of ctxeval's requests; for the capped provider
``ceil(verdicts / 8) x latency``, its refusals being instant), and rows lost (ragas turns failures
into NaN; ctxeval's failures are error rows, counted as lost too). Each tool runs in its own
process; ragas through ``ragas.evaluate`` with ``RunConfig(max_workers=16)``. Both are timed
around their ``evaluate`` call, with bytecode for both (pip compiled ragas's at install; ctxeval's
sources are compiled first, see ``peer_env.compile_ours``).

    python bench/compare_llm.py [--samples 200] [--chunks 5] [--repeat 3] [--quick]
                                [--scenarios precision,recall,...]

Each scenario runs ``--repeat`` times, the two tools alternating (ctxeval, ragas, ctxeval,
...); the table gives medians (rows lost: the median too, with the range).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

from peer_env import compile_ours, landmark_samples, python_of

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


FLOOR_RUN = r"""
import json, sys
sys.path.insert(0, sys.argv[4])
from llm_throughput import bare_run
url, data, concurrency = sys.argv[1], sys.argv[2], int(sys.argv[3])
samples = [json.loads(line) for line in open(data, encoding="utf-8")]
wall, cpu, sent = bare_run(url, "bare/aiohttp", samples, concurrency)
print(json.dumps({"wall": wall, "cpu": cpu, "rows": len(samples), "lost": 0}))
"""
FLOOR = "bare aiohttp (floor)"
"""The precision scenarios' third row: the same number of requests (ctxeval's bodies) from a
bare aiohttp session at the same concurrency, imports and bodies made before its clock starts
(``llm_throughput.bare_run``): what this server and machine allow a client, in the same run."""


def stats(url: str) -> dict:
    with urllib.request.urlopen(url.removesuffix("/v1") + "/stats") as response:
        return json.loads(response.read())


def once(command: list[str], url: str) -> dict:
    before = stats(url)["requests"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        return {"error": done.stderr[-400:]}
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["requests"] = stats(url)["requests"] - before
    return result


def scenario(name, metric, latency, data, ours, ragas, concurrency, repeat, server_args=()):
    server = subprocess.Popen(
        [sys.executable, str(HERE / "fake_judge_server.py"), "--latency", str(latency), *server_args],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    url = server.stdout.readline().strip()
    commands = {
        "ctxeval": [ours, "-c", CTXEVAL_RUN, url, metric, str(data), str(concurrency)],
        "ragas 0.4.3": [
            str(ragas), str(HERE / "peers" / "ragas_llm.py"), url, metric, str(data), str(concurrency)
        ],
    }  # fmt: skip
    if metric == "precision" and not server_args:  # (a faulty server fails a bare client)
        commands[FLOOR] = [ours, "-c", FLOOR_RUN, url, str(data), str(concurrency), str(HERE)]
    runs: dict[str, list[dict]] = {tool: [] for tool in commands}
    try:
        for _ in range(repeat):
            for tool, command in commands.items():
                runs[tool].append(once(command, url))
                print(f"  {name} {latency}s {tool}: {runs[tool][-1]}", file=sys.stderr)
    finally:
        server.stdin.close()
        server.wait(timeout=30)
    results = {}
    for tool, attempts in runs.items():
        good = [r for r in attempts if "error" not in r]
        if not good:
            results[tool] = attempts[0]
            continue
        results[tool] = {
            key: statistics.median(r[key] for r in good)
            for key in ("wall", "cpu", "requests", "lost")
        }
        results[tool]["lost_range"] = [min(r["lost"] for r in good), max(r["lost"] for r in good)]
        results[tool]["runs"] = len(good)
    return name, latency, concurrency, results


SCENARIOS = {
    "precision": ("precision", "precision", 0.05, ()),
    "precision-500ms": ("precision", "precision", 0.5, ()),
    "recall": ("recall", "recall", 0.05, ()),
    "entities": ("entity recall", "entities", 0.05, ()),
    "in-flight-8": (
        "precision, 8-in-flight provider, 429 beyond", "precision", 0.05, ("--max-in-flight", "8")
    ),
    "faults": ("precision, 20% 429 + 10% 500", "precision", 0.05, ("--faults", "429=0.2,500=0.1")),
}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--chunks", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="skip the 500 ms scenario")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--scenarios", help="comma-separated keys: " + ", ".join(SCENARIOS))
    args = parser.parse_args()
    ragas, ours = python_of("ragas"), sys.executable
    compile_ours()
    keys = args.scenarios.split(",") if args.scenarios else list(SCENARIOS)
    if args.quick and not args.scenarios:
        keys.remove("precision-500ms")
    with tempfile.TemporaryDirectory() as folder:
        data = Path(folder) / "llm.jsonl"
        with data.open("w") as handle:
            for sample in landmark_samples(args.samples, args.chunks):
                handle.write(json.dumps(sample) + "\n")
        rows = [
            scenario(*SCENARIOS[key][:2], SCENARIOS[key][2], data, ours, ragas, 16, args.repeat,
                     SCENARIOS[key][3])
            for key in keys
        ]  # fmt: skip
    print(
        f"# LLM metrics: {args.samples} samples x {args.chunks} chunks, concurrency 16, "
        f"median of {args.repeat}\n"
    )
    print(
        "| scenario | latency | tool | requests | wall (s) | limit (s) | wall / limit | wall / floor | CPU / request (ms) | rows lost |"
    )
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for (name, latency, concurrency, results), key in zip(rows, keys, strict=True):
        limit = None
        server_args = list(SCENARIOS[key][3])
        if "--max-in-flight" in server_args:  # refusals are instant: the answered calls count
            cap = int(server_args[server_args.index("--max-in-flight") + 1])
            limit = math.ceil(args.samples * args.chunks / min(cap, concurrency)) * latency
        elif "requests" in results.get("ctxeval", {}):
            limit = math.ceil(results["ctxeval"]["requests"] / concurrency) * latency
        floor = results.get(FLOOR, {}).get("wall")
        for tool, r in results.items():
            if "error" in r:
                print(
                    f"| {name} | {latency * 1000:.0f} ms | {tool} | failed: {r['error'][:80]!r} | | | | | | |"
                )
                continue
            per = r["cpu"] / max(1, r["requests"]) * 1000
            ratio = f"{r['wall'] / limit:.2f}x" if limit else ""
            to_floor = f"{r['wall'] / floor:.2f}x" if floor else ""
            lost = f"{r['lost']:g}"
            if r["lost_range"][0] != r["lost_range"][1]:
                lost += f" ({r['lost_range'][0]}-{r['lost_range'][1]})"
            print(
                f"| {name} | {latency * 1000:.0f} ms | {tool} | {r['requests']:g} | {r['wall']:.2f} | {limit or 0:.2f} | {ratio} | {to_floor} | {per:.2f} | {lost} |"
            )
    print("\n" + json.dumps(rows))


if __name__ == "__main__":
    main()
