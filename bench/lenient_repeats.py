"""``--lenient`` on a file where every row has one id (``"id": ""``): wall time, peak memory
and the size of results.jsonl, in a fresh process per size (issue 56).

The repeats of an id are set aside as error rows under ids of their own; they used to be
named by adding ``#`` until unseen (quadratic), now from a counter per id.

    python bench/lenient_repeats.py [--rows 10000,1000000] [--timeout 900]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROW = {"id": "", "retrieved_context_ids": ["a", "b"], "reference_context_ids": ["a"]}


def run(rows: int, folder: Path, timeout: float) -> str:
    data = folder / f"one_id_{rows}.jsonl"
    data.write_text((json.dumps(ROW) + "\n") * rows)
    out = folder / f"run_{rows}"
    argv = [sys.executable, "-m", "ctxeval", "evaluate", str(data), "-m", "id_mrr",
            "--lenient", "-q", "--out", str(out)]  # fmt: skip
    started = time.perf_counter()
    try:
        subprocess.run(argv, capture_output=True, timeout=timeout, check=False,
                       env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})  # fmt: skip
    except subprocess.TimeoutExpired:
        return f"{rows:>9,} rows: not finished in {timeout:.0f} s"
    wall = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # (the largest child)
    size = (out / "results.jsonl").stat().st_size / 1e6
    return f"{rows:>9,} rows: {wall:7.1f} s, peak RSS {peak:6.0f} MB, results.jsonl {size:6.1f} MB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="10000,1000000")
    parser.add_argument("--timeout", type=float, default=900.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        for rows in (int(n) for n in args.rows.split(",")):
            print(run(rows, Path(folder), args.timeout), flush=True)


if __name__ == "__main__":
    main()
