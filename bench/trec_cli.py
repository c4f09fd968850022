"""The IR user's path: ``ctxeval evaluate --qrels QRELS --run RUN`` against pytrec_eval parsing
and scoring the same two files, each a whole process, side by side.

The files: ``--queries`` queries (100 000), each with 20 retrieved documents (in rank order, as a
run is written; scores with two decimals: ties occur) and 8 judged ones graded 0-3 (a third of them judged not relevant), out of
1 000 documents. Five measures: nDCG@10, AP, P@5, RR, R@100 (pytrec_eval: ``ndcg_cut_10``,
``map``, ``P_5``, ``recip_rank``, ``recall_100``, and their means, as ctxeval's summary gives).

Each tool runs in a fresh process (``python -m ctxeval evaluate ... -q``; ``python -c`` with
pytrec_eval's ``parse_qrel``, ``parse_run``, ``RelevanceEvaluator`` and the means), alternating,
``--repeat`` times; the table gives wall time and CPU time (user + system of the child), best and
median, and the ratios. ``--with-out`` adds ``--out DIR`` (results.jsonl, summary, report).
``--before DIR`` adds a third tool, alternating with the two: ctxeval imported from ``DIR``
(``PYTHONPATH``; an older checkout's ``core``, e.g. from ``git archive``), to measure a change
side by side.

    python bench/trec_cli.py [--queries 100000] [--repeat 5] [--before DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from peer_env import compile_ours

MEASURES = {
    "nDCG@10": "ndcg_cut_10",
    "AP": "map",
    "P@5": "P_5",
    "RR": "recip_rank",
    "R@100": "recall_100",
}

PYTREC = r"""
import json, sys
import pytrec_eval
with open(sys.argv[1]) as handle:
    qrels = pytrec_eval.parse_qrel(handle)
with open(sys.argv[2]) as handle:
    run = pytrec_eval.parse_run(handle)
measures = json.loads(sys.argv[3])
per_query = pytrec_eval.RelevanceEvaluator(qrels, set(measures)).evaluate(run)
means = {m: sum(q[m] for q in per_query.values()) / len(per_query) for m in measures}
print(json.dumps({"queries": len(per_query), "means": means}))
"""


def write_files(folder: Path, queries: int) -> tuple[Path, Path]:
    rng = random.Random(5)
    qrels, run = folder / "qrels.txt", folder / "run.txt"
    with qrels.open("w") as q_out, run.open("w") as r_out:
        for i in range(queries):
            pool = rng.sample(range(1000), 24)
            for doc in pool[:8]:
                q_out.write(f"q{i} 0 doc{doc} {rng.choice([0, 0, 1, 2, 3])}\n")
            scored = [(round(rng.uniform(0, 20), 2), f"doc{doc}") for doc in pool[4:24]]
            for rank, (score, doc) in enumerate(sorted(scored, reverse=True), start=1):
                r_out.write(f"q{i} Q0 {doc} {rank} {score:.2f} bench\n")  # as runs are written
    return qrels, run


def timed(command: list[str], env: dict[str, str] | None = None) -> tuple[float, float, str]:
    """Wall and CPU seconds (user + system) of a child process, and its output."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=True, env=env)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--with-out", action="store_true", help="ctxeval writes --out DIR too")
    parser.add_argument("--before", metavar="DIR", help="also ctxeval imported from DIR")
    args = parser.parse_args()
    compile_ours()
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    os.environ.update(env)
    with tempfile.TemporaryDirectory() as folder:
        qrels, run = write_files(Path(folder), args.queries)
        ours = [sys.executable, "-m", "ctxeval", "evaluate", "--qrels", str(qrels), "--run",
                str(run), "-q"]  # fmt: skip
        for name in MEASURES:
            ours += ["-m", name]
        theirs = [sys.executable, "-c", PYTREC, str(qrels), str(run),
                  json.dumps(list(MEASURES.values()))]  # fmt: skip
        times: dict[str, list[tuple[float, float]]] = {"ctxeval": [], "pytrec_eval": []}
        if args.before:
            times["ctxeval (before)"] = []
        for attempt in range(args.repeat):
            out = ["--out", str(Path(folder) / f"out{attempt}")] if args.with_out else []
            command = ours + out
            wall, cpu, _ = timed(command)
            times["ctxeval"].append((wall, cpu))
            wall, cpu, _ = timed(theirs)
            times["pytrec_eval"].append((wall, cpu))
            if args.before:
                old = {**env, "PYTHONPATH": str(Path(args.before).resolve())}
                out_before = [out[0], out[1] + "-before"] if out else []
                wall, cpu, _ = timed(ours + out_before, old)
                times["ctxeval (before)"].append((wall, cpu))
    print(
        f"# {args.queries} queries x 20 retrieved, 5 measures, whole processes, "
        f"best and median of {args.repeat}, alternating\n"
    )
    print("| tool | wall best (s) | wall median (s) | CPU best (s) | CPU median (s) |")
    print("|---|---:|---:|---:|---:|")
    summary = {}
    for tool, pairs in times.items():
        walls, cpus = [w for w, _ in pairs], [c for _, c in pairs]
        summary[tool] = (min(walls), statistics.median(walls), min(cpus), statistics.median(cpus))
        print(f"| {tool} | " + " | ".join(f"{v:.2f}" for v in summary[tool]) + " |")
    b = summary["pytrec_eval"]
    for tool in [t for t in summary if t != "pytrec_eval"]:
        a = summary[tool]
        print(
            f"\n{tool} against pytrec_eval: wall {b[0] / a[0]:.2f}x best, "
            f"{b[1] / a[1]:.2f}x median; CPU {b[2] / a[2]:.2f}x best, {b[3] / a[3]:.2f}x median"
        )
    print(json.dumps(times))


if __name__ == "__main__":
    main()
