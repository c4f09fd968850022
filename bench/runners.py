"""The ``processes`` runner against the ``local`` one, side by side in one run.

Writes N samples (ID lists, as a retriever's log; one sample in three without an id) to a
JSONL file, then times, alternating the runners ``--repeat`` times:

* ``ctxeval.evaluate(load_samples(path), metrics)``: the local runner (one process);
* the same with ``runner=ProcessesRunner(workers=W)``;

checks that both give the same rows (every row's ``to_dict()``, on the first repeat), and
prints the best and median wall times and their ratio, with each run's CPU time (the driving
process's own, and its workers'). Peak memory is each run's own, in a child process
(``ru_maxrss`` of the parent and its workers). ctxeval's sources are compiled to bytecode
first, as pip compiles an installed package's (``peer_env.compile_ours``): on a machine that
sets ``PYTHONDONTWRITEBYTECODE`` an editable install would otherwise compile every module anew
in the driving process and in each worker, about 0.1 s of CPU each here.

    python bench/runners.py [--samples 1000000] [--workers 2] [--repeat 3]
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
COMPILE = f"import sys; sys.path.insert(0, {str(HERE)!r}); import peer_env; peer_env.compile_ours()"

METRICS = ["id_based_context_precision", "id_ndcg_at_k"]


def write_jsonl(path: Path, n: int) -> None:
    rng = random.Random(7)
    with path.open("w", encoding="utf-8") as handle:
        for i in range(n):
            row: dict[str, object] = {
                "retrieved_context_ids": [f"d{x}" for x in rng.sample(range(50), 10)],
                "reference_context_ids": [f"d{x}" for x in rng.sample(range(50), 4)],
            }
            if i % 3:
                row["id"] = f"q{i}"
            handle.write(json.dumps(row) + "\n")


CHILD = """
import json, multiprocessing, resource, sys, time
import ctxeval
from ctxeval.runners import ProcessesRunner

path, workers, check, metrics = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
if __name__ == "__main__":
    runner = None if workers == 0 else ProcessesRunner(workers=workers)
    start = time.perf_counter()
    cpu = time.process_time()
    evaluation = ctxeval.evaluate(ctxeval.load_samples(path), metrics, runner=runner)
    wall = time.perf_counter() - start
    cpu = time.process_time() - cpu
    while multiprocessing.active_children():  # (the workers, ended: waited for, counted)
        time.sleep(0.01)
    workers_cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    if check != "-":
        with open(check, "w") as out:
            for row in evaluation.results:
                out.write(json.dumps(row.to_dict()) + "\\n")
    del evaluation
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = workers_cpu.ru_utime + workers_cpu.ru_stime  # (the workers ended by now)
    print(json.dumps({"wall": wall, "rss_kb": own, "cpu": cpu, "workers_cpu": children}))
"""


def one(path: Path, workers: int, check: str) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(path), str(workers), check, *METRICS],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=1_000_000)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    # (in a process of its own: a child's peak RSS starts from its parent's, kept across exec)
    subprocess.run([sys.executable, "-c", COMPILE], check=True)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "samples.jsonl"
        write_jsonl(path, args.samples)
        size = path.stat().st_size
        local: list[dict[str, float]] = []
        spread: list[dict[str, float]] = []
        for attempt in range(args.repeat):
            first = attempt == 0
            local.append(one(path, 0, str(Path(folder) / "local.jsonl") if first else "-"))
            spread.append(
                one(path, args.workers, str(Path(folder) / "spread.jsonl") if first else "-")
            )
            if first:
                # (read a block at a time: the next children's peak RSS starts from ours)
                same = filecmp.cmp(
                    Path(folder) / "local.jsonl", Path(folder) / "spread.jsonl", shallow=False
                )
                assert same, "the processes runner's rows differ from the local runner's"
    n = args.samples
    cores = os.cpu_count()

    def walls(runs: list[dict[str, float]]) -> tuple[float, float]:
        times = [r["wall"] for r in runs]
        return min(times), statistics.median(times)

    (lb, lm), (sb, sm) = walls(local), walls(spread)
    print(
        f"{n:,} samples ({size / 1e6:.0f} MB JSONL) x {len(METRICS)} ID metrics, "
        f"{cores} cores, {args.workers} workers, best and median of {args.repeat}; "
        "rows identical\n"
    )

    def cpus(runs: list[dict[str, float]]) -> str:
        own = statistics.median(r["cpu"] for r in runs)
        workers = statistics.median(r["workers_cpu"] for r in runs)
        return f"{own:.2f}" + (f" + {workers:.2f}" if workers else "")

    print(
        "| runner | wall best (s) | wall median (s) | CPU median (s; driving + workers) "
        "| rows/s (best) | peak RSS (MB) |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    # peak memory of the runs that did not also write every row for the check (the first)
    plain_local, plain_spread = local[1:] or local, spread[1:] or spread
    rss_local = max(r["rss_kb"] for r in plain_local) / 1024
    rss_spread = max(r["rss_kb"] for r in plain_spread) / 1024
    rows = n * len(METRICS)
    print(f"| local | {lb:.2f} | {lm:.2f} | {cpus(local)} | {rows / lb:,.0f} | {rss_local:.0f} |")
    print(
        f"| processes | {sb:.2f} | {sm:.2f} | {cpus(spread)} | {rows / sb:,.0f} | "
        f"{rss_spread:.0f} (driving process) |"
    )
    print(f"\nprocesses / local speed-up: {lb / sb:.2f}x best, {lm / sm:.2f}x median")
    pairs = [a["wall"] / b["wall"] for a, b in zip(local, spread, strict=True)]
    print("each repeat's speed-up (local then processes, side by side): ", end="")
    print(", ".join(f"{p:.2f}x" for p in pairs))


if __name__ == "__main__":
    main()
