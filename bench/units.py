"""Retrieval units (#55) at scale: the ID metrics at chunk and at document level, side by side.

Writes N generated samples (10 retrieved chunk IDs ``doc#segment`` over 6 documents, 3
reference chunk IDs) to a JSONL file, then scores them from the command line in a fresh
process per run, ``--unit chunk`` and ``--unit document --doc-id-separator '#'`` alternating,
``--repeat`` times; wall time and peak RSS (``ru_maxrss`` of the child) per run, best and
median.

    python bench/units.py [--samples 1000000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

METRICS = ["id_based_context_precision", "id_based_context_recall", "nDCG@10"]


def write(path: Path, samples: int) -> None:
    rng = random.Random(55)
    with path.open("w", encoding="utf-8") as out:
        for n in range(samples):
            docs = [f"d{rng.randrange(5000)}" for _ in range(6)]
            retrieved = [f"{rng.choice(docs)}#{rng.randrange(40)}" for _ in range(10)]
            reference = [f"{rng.choice(docs)}#{rng.randrange(40)}" for _ in range(3)]
            row = {"id": f"q{n}", "retrieved_context_ids": retrieved,
                   "reference_context_ids": reference}  # fmt: skip
            out.write(json.dumps(row) + "\n")


def run(path: Path, unit: str) -> tuple[float, float]:
    args = [sys.executable, "-m", "ctxeval", "evaluate", str(path), "-q"]
    for metric in METRICS:
        args += ["-m", metric]
    if unit == "document":
        args += ["--unit", "document", "--doc-id-separator", "#"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.perf_counter()
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return wall, max(peak, before) / 1024  # (the largest child so far: runs grow)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--samples", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "units.jsonl"
        write(path, options.samples)
        times: dict[str, list[float]] = {"chunk": [], "document": []}
        peaks: dict[str, float] = {}
        for _ in range(options.repeat):
            for unit in times:
                wall, peak = run(path, unit)
                times[unit].append(wall)
                peaks[unit] = peak
        for unit, walls in times.items():
            print(f"{unit}: best {min(walls):.2f} s, median {statistics.median(walls):.2f} s, "
                  f"peak RSS (largest child so far) {peaks[unit]:.0f} MB")  # fmt: skip
        ratio = statistics.median(times["document"]) / statistics.median(times["chunk"])
        print(f"document / chunk (median): {ratio:.2f}x")


if __name__ == "__main__":
    main()
