"""ctxeval against ragas 0.4.3 and pytrec_eval on the deterministic metrics, side by side.

* string metrics (``non_llm_context_precision_with_reference`` + ``non_llm_context_recall``)
  over 5 000 samples: ctxeval vs ragas;
* ID metrics (``id_based_context_precision`` + ``id_based_context_recall``) over 100 000
  samples: ctxeval vs ragas;
* ranked ID metrics (P@5, recall@5, nDCG@5, MRR, MAP) over 100 000 queries: ctxeval vs
  pytrec_eval (trec_eval's C code) and ranx 0.3.21 (numba; its own environment, JIT-compiled
  functions cached on disk after the first run);
* start-up: ``import ctxeval`` and ``ctxeval --help`` vs ``import ragas``, and ctxeval's first
  ``evaluate`` in a process (finding the plugins, importing the metric modules and asyncio).

The clocks start after the imports on both sides: the ragas peer imports asyncio and its metric
classes before its clock, the ctxeval runs import asyncio and resolve their metrics (which
imports their modules) before theirs; the first-call row shows what that leaves out.

Each tool runs in its own process (ragas in its own virtual environment, see peer_env.py),
alternating, ``--repeat`` times. The table gives each tool's best time and the ratio of the best
times (timeit's convention: another process's interference only adds time, and on a shared VM it
adds most to the shortest runs, ctxeval's), then the medians and their ratio.

    python bench/compare_deterministic.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from peer_env import compile_ours, python_of

HERE = Path(__file__).resolve().parent

CTXEVAL_RUN = r"""
import asyncio, json, sys, time  # (asyncio before the clock, as the ragas peer imports it)
import ctxeval
path, part = sys.argv[1], sys.argv[2]
metrics = {
    "string": ["non_llm_context_precision_with_reference", "non_llm_context_recall"],
    "id": ["id_based_context_precision", "id_based_context_recall"],
    "ranked": [ctxeval.get_metric("id_precision_at_k", k=5), ctxeval.get_metric("id_recall_at_k", k=5),
               ctxeval.get_metric("id_ndcg_at_k", k=5), "id_mrr", "id_average_precision"],
}[part]
# The metrics resolved (their plugins found, their modules imported) before the clock, as the
# ragas peer imports its metric classes before its clock; FIRST_CALL times what this leaves out.
metrics = [m if not isinstance(m, str) else ctxeval.get_metric(m) for m in metrics]
start, cpu = time.perf_counter(), time.process_time()
ev = ctxeval.evaluate(ctxeval.load_samples(path), metrics)
seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
print(json.dumps({"seconds": seconds, "cpu": cpu, "samples": len(ev.results) // len(metrics), "errors": sum(r.status.value == "error" for r in ev.results)}))
"""

FIRST_CALL = r"""
import json, sys, time
import ctxeval
start = time.perf_counter()
ctxeval.evaluate([{"retrieved_context_ids": ["a"], "reference_context_ids": ["a"]}],
                 ["id_based_context_precision", "id_based_context_recall"])
print(json.dumps({"seconds": time.perf_counter() - start}))
"""
"""A process's first ``evaluate`` of one sample by metric names: finding the plugins, importing
the metric modules and asyncio, starting the loop and the worker thread. The timed runs resolve
their metrics before the clock (as the ragas peer imports its classes before its clock)."""

LOAD_DICTS = r"""
qrels, runs = {}, {}
with open(path, encoding="utf-8") as handle:
    for line in handle:
        row = json.loads(line)
        qrels[row["id"]] = {d: 1 for d in row["reference_context_ids"]}
        ranked = list(dict.fromkeys(row["retrieved_context_ids"]))
        runs[row["id"]] = {d: float(len(ranked) - i) for i, d in enumerate(ranked)}
"""
"""The ID file as {query: {doc: 1}} qrels and {query: {doc: score}} runs (for both peers)."""

PYTREC_RUN = r"""
import json, sys, time
import pytrec_eval
path = sys.argv[1]
start, cpu = time.perf_counter(), time.process_time()
__LOAD_DICTS__evaluator = pytrec_eval.RelevanceEvaluator(qrels, {"P_5", "recall_5", "ndcg_cut_5", "recip_rank", "map"})
result = evaluator.evaluate(runs)
seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
print(json.dumps({"seconds": seconds, "cpu": cpu, "samples": len(result)}))
""".replace("__LOAD_DICTS__", LOAD_DICTS)


RANX_RUN = r"""
import json, sys, time
from ranx import Qrels, Run, evaluate
path = sys.argv[1]
start = time.perf_counter()
__LOAD_DICTS__scores = evaluate(Qrels(qrels), Run(runs), ["precision@5", "recall@5", "ndcg@5", "mrr", "map"], make_comparable=True)
seconds = time.perf_counter() - start
print(json.dumps({"seconds": seconds, "samples": len(qrels)}))
""".replace("__LOAD_DICTS__", LOAD_DICTS)


WORDS = [
    "the",
    "eiffel",
    "tower",
    "paris",
    "france",
    "museum",
    "river",
    "capital",
    "city",
    "art",
    "history",
    "landmark",
    "built",
]


def string_row(i: int, rng: random.Random) -> dict:
    """A sample for the string metrics: 3 retrieved passages of 8-40 words, 2 references."""
    passages = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 40))) for _ in range(4)]
    return {
        "id": str(i),
        "retrieved_contexts": passages[:3],
        "reference_contexts": [passages[rng.randint(0, 3)], passages[3][:60]],
    }


def id_row(i: int, rng: random.Random) -> dict:
    """A sample for the ID metrics: 10 retrieved IDs, 1-4 reference IDs, out of 301."""
    return {
        "id": str(i),
        "retrieved_context_ids": [f"d{rng.randint(0, 300)}" for _ in range(10)],
        "reference_context_ids": [f"d{rng.randint(0, 300)}" for _ in range(rng.randint(1, 4))],
    }


def write_rows(path: Path, make_row, n: int, rng: random.Random) -> Path:
    with path.open("w") as handle:
        for i in range(n):
            handle.write(json.dumps(make_row(i, rng)) + "\n")
    return path


def make_data(folder: Path, string_samples: int, id_samples: int) -> tuple[Path, Path]:
    rng = random.Random(11)
    strings = write_rows(folder / "strings.jsonl", string_row, string_samples, rng)
    ids = write_rows(folder / "ids.jsonl", id_row, id_samples, rng)
    return strings, ids


def make_data_small() -> Path:
    folder = Path(tempfile.mkdtemp())
    return write_rows(folder / "warm.jsonl", id_row, 100, random.Random(1))


def run(python: Path | str, code_or_script: str, *args: str) -> dict[str, float]:
    command = (
        [str(python), code_or_script, *args]
        if code_or_script.endswith(".py")
        else [str(python), "-c", code_or_script, *args]
    )
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def startup(command: list[str], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(command, capture_output=True, check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--string-samples", type=int, default=5000)
    parser.add_argument("--id-samples", type=int, default=100_000)
    parser.add_argument(
        "--only",
        default="string,id,ranked,ranx",
        help="the rows to run, of string, id, ranked (vs pytrec_eval), ranx (default: all)",
    )
    args = parser.parse_args()
    only = set(args.only.split(","))
    ragas = python_of("ragas")
    compile_ours()
    ranx = python_of("ranx") if "ranx" in only else ragas
    if "ranx" in only:
        run(ranx, RANX_RUN, str(make_data_small()))  # numba compiles and caches, once
    ours = sys.executable
    peer = str(HERE / "peers" / "ragas_deterministic.py")
    rows = []
    cpu_rows = []
    with tempfile.TemporaryDirectory() as folder:
        strings, ids = make_data(Path(folder), args.string_samples, args.id_samples)
        cases = [
            (
                "string",
                "string metrics (2)",
                args.string_samples,
                lambda: run(ours, CTXEVAL_RUN, str(strings), "string"),
                lambda: run(ragas, peer, str(strings), "string"),
                "ragas 0.4.3",
            ),
            (
                "id",
                "ID metrics (2)",
                args.id_samples,
                lambda: run(ours, CTXEVAL_RUN, str(ids), "id"),
                lambda: run(ragas, peer, str(ids), "id"),
                "ragas 0.4.3",
            ),
            (
                "ranked",
                "ranked ID metrics (5)",
                args.id_samples,
                lambda: run(ours, CTXEVAL_RUN, str(ids), "ranked"),
                lambda: run(ours, PYTREC_RUN, str(ids)),
                "pytrec_eval",
            ),
            (
                "ranx",
                "ranked ID metrics (5)",
                args.id_samples,
                lambda: run(ours, CTXEVAL_RUN, str(ids), "ranked"),
                lambda: run(ranx, RANX_RUN, str(ids)),
                "ranx 0.3.21",
            ),
        ]
        for case, name, n, mine, theirs, peer_name in cases:
            if case not in only:
                continue
            a, b, cpu_a, cpu_b = [], [], [], []
            for _ in range(args.repeat):
                for times, cpus, tool in ((a, cpu_a, mine), (b, cpu_b, theirs)):
                    done = tool()
                    times.append(done["seconds"])
                    cpus.append(done.get("cpu", float("nan")))
            rows.append(
                (name, n, min(a), min(b), statistics.median(a), statistics.median(b), peer_name)
            )
            cpu_rows.append((name, min(cpu_a), min(cpu_b), statistics.median(cpu_a),
                             statistics.median(cpu_b), peer_name))  # fmt: skip
    first_call = statistics.median(run(ours, FIRST_CALL)["seconds"] for _ in range(5))
    import_ours = startup([ours, "-c", "import ctxeval"], 5)
    help_ours = startup([ours, "-m", "ctxeval", "--help"], 5)
    import_ragas = startup([str(ragas), "-W", "ignore", "-c", "import ragas"], 5)
    report(args.repeat, rows, cpu_rows, (import_ours, import_ragas, help_ours, first_call))


def report(
    repeat: int, rows: list[tuple], cpu_rows: list[tuple], startups: tuple[float, ...]
) -> None:
    """The tables: wall times, start-up, CPU times; then the figures as JSON."""
    import_ours, import_ragas, help_ours, first_call = startups
    args = argparse.Namespace(repeat=repeat)
    print(
        f"# deterministic metrics, best and median of {args.repeat}, each tool in its own "
        "process (load + score)\n"
    )
    print(
        "| measure | samples | ctxeval best (s) | peer | peer best (s) | speed-up (best) "
        "| ctxeval median (s) | peer median (s) | speed-up (median) |"
    )
    print("|---|---:|---:|---|---:|---:|---:|---:|---:|")
    for name, n, a, b, median_a, median_b, peer_name in rows:
        print(
            f"| {name} | {n} | {a:.2f} | {peer_name} | {b:.2f} | {b / a:.1f}x "
            f"| {median_a:.2f} | {median_b:.2f} | {median_b / median_a:.1f}x |"
        )
    print(
        f"| start-up: import | | {import_ours:.2f} | ragas 0.4.3 | {import_ragas:.2f} | {import_ragas / import_ours:.1f}x | | | |"
    )
    print(f"| start-up: `ctxeval --help` | | {help_ours:.2f} | | | | | | |")
    print(
        f"| start-up: first `evaluate` (plugins, modules, loop) | | {first_call:.3f} | | | | | | |"
    )
    print(
        "\nCPU time of the same runs (user + system of each process, its threads included; "
        "fairer than wall time on a loaded machine):\n"
    )
    print("| measure | ctxeval best | peer | peer best | speed-up | ctxeval median "
          "| peer median | speed-up (median) |")  # fmt: skip
    print("|---|---:|---|---:|---:|---:|---:|---:|")
    for name, a, b, median_a, median_b, peer_name in cpu_rows:
        print(
            f"| {name} | {a:.2f} | {peer_name} | {b:.2f} | {b / a:.1f}x "
            f"| {median_a:.2f} | {median_b:.2f} | {median_b / median_a:.1f}x |"
        )
    print(
        "\n"
        + json.dumps(
            {
                "rows": rows,
                "cpu_rows": cpu_rows,
                "import": [import_ours, import_ragas],
                "help": help_ours,
                "first_call": first_call,
            }
        )
    )


if __name__ == "__main__":
    main()
