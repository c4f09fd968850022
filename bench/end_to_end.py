"""What a command-line user runs end to end, side by side in one run: ``ctxeval evaluate``
with and without ``--out``, ragas's ``evaluate`` plus ``to_csv``, peak memory against the
data's size, the report's size, and whether ``ctxeval view`` indexes every row.

Writes N samples (ID lists, as a retriever's log; one sample in three without an id) per size,
then, alternating the two CLI runs ``--repeat`` times per size:

* ``ctxeval evaluate DATA -m id_based_context_precision -m id_based_context_recall --quiet``
  (no files: the summary only);
* the same with ``--out DIR`` (``results.jsonl``, ``summary.json``, ``report.html``,
  the journal);

each in its own process, wall time and peak memory (``ru_maxrss`` from ``wait4``). At the
``--ragas`` size: ragas 0.4.3's ``evaluate`` with its two ID metrics and ``to_csv`` (its own
environment, see peer_env.py) against ``ctxeval evaluate --out DIR --format csv``. At the
largest size: the size of each file, and the rows of the viewer's index (``--view``).

    python bench/end_to_end.py [--sizes 30000,300000,1000000] [--ragas 100000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from runners import write_jsonl  # noqa: E402  (the same samples as bench/runners.py)

METRICS = ["id_based_context_precision", "id_based_context_recall"]


def timed(command: list[str]) -> tuple[float, float, str]:
    """Wall seconds, peak memory (MB) and standard output of ``command``."""
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - start
    out = process.stdout.read().decode() if process.stdout else ""
    err = process.stderr.read().decode() if process.stderr else ""
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise SystemExit(f"{' '.join(command)} exited {code}:\n{err[-2000:]}")
    return seconds, usage.ru_maxrss / 1024, out


def ctxeval_cli(data: Path, *extra: str) -> list[str]:
    metrics = [a for m in METRICS for a in ("-m", m)]
    return [sys.executable, "-m", "ctxeval", "evaluate", str(data), *metrics, "--quiet", *extra]


def sizes_of(folder: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in sorted(folder.iterdir()) if p.is_file()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="30000,300000,1000000")
    parser.add_argument("--ragas", type=int, default=100_000, help="0: skip ragas")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--view", action="store_true", help="index the largest run for the viewer")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    work = Path(tempfile.mkdtemp(prefix="ctxeval-e2e-"))
    rows = []
    try:
        for n in sizes:
            data = work / f"s{n}.jsonl"
            write_jsonl(data, n)
            plain: list[tuple[float, float]] = []
            out: list[tuple[float, float]] = []
            folder = work / f"run{n}"
            for _ in range(args.repeat):
                seconds, peak, _ = timed(ctxeval_cli(data))
                plain.append((seconds, peak))
                shutil.rmtree(folder, ignore_errors=True)
                seconds, peak, _ = timed(ctxeval_cli(data, "--out", str(folder)))
                out.append((seconds, peak))
            files = sizes_of(folder)
            view_rows = None
            if args.view and n == max(sizes):
                from ctxeval._output.run_source import run_source
                from ctxeval._view.index import ensure_index

                index = ensure_index([run_source(folder, data)])
                with sqlite3.connect(index) as db:
                    view_rows = db.execute("select count(*) from rows").fetchone()[0]
            best_plain = min(s for s, _ in plain)
            best_out = min(s for s, _ in out)
            rows.append(
                {
                    "samples": n,
                    "no_out_best": best_plain,
                    "no_out_median": statistics.median(s for s, _ in plain),
                    "out_best": best_out,
                    "out_median": statistics.median(s for s, _ in out),
                    "ratio_best": best_out / best_plain,
                    "peak_no_out_mb": max(p for _, p in plain),
                    "peak_out_mb": max(p for _, p in out),
                    "files": files,
                    "view_rows": view_rows,
                }
            )
            shutil.rmtree(folder, ignore_errors=True)
            data.unlink()
        ragas_row = None
        if args.ragas:
            from peer_env import python_of

            data = work / f"s{args.ragas}.jsonl"
            write_jsonl(data, args.ragas)
            peer = python_of("ragas")
            theirs, ours = [], []
            for _ in range(args.repeat):
                _, _, printed = timed(
                    [
                        str(peer),
                        str(HERE / "peers" / "ragas_evaluate.py"),
                        str(data),
                        str(work / "r.csv"),
                    ]
                )
                theirs.append(json.loads(printed.strip().splitlines()[-1])["seconds"])
                folder = work / "ours"
                shutil.rmtree(folder, ignore_errors=True)
                seconds, _, _ = timed(ctxeval_cli(data, "--out", str(folder), "--format", "csv"))
                ours.append(seconds)
            ragas_row = {
                "samples": args.ragas,
                "ragas_best": min(theirs),
                "ragas_median": statistics.median(theirs),
                "ctxeval_best": min(ours),
                "ctxeval_median": statistics.median(ours),
                "speedup_best": min(theirs) / min(ours),
            }
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(
        "| samples | no --out best / median s | --out best / median s | --out / no --out | peak MB no --out | peak MB --out |"
    )
    print("|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['samples']:,} | {r['no_out_best']:.2f} / {r['no_out_median']:.2f} | "
            f"{r['out_best']:.2f} / {r['out_median']:.2f} | {r['ratio_best']:.2f}x | "
            f"{r['peak_no_out_mb']:.0f} | {r['peak_out_mb']:.0f} |"
        )
    if len(rows) > 1:
        small, large = rows[0], rows[-2] if len(rows) > 2 else rows[-1]
        print(
            f"\npeak memory with --out, {large['samples']:,} against {small['samples']:,} samples: "
            f"{large['peak_out_mb'] / small['peak_out_mb']:.2f}x"
        )
    last = rows[-1]
    print(f"\nfiles at {last['samples']:,} samples (bytes): {json.dumps(last['files'])}")
    if last["view_rows"] is not None:
        print(f"rows in the viewer's index: {last['view_rows']:,}")
    if ragas_row is not None:
        print(
            f"\n{ragas_row['samples']:,} samples, ragas evaluate + to_csv: "
            f"{ragas_row['ragas_best']:.2f} s best ({ragas_row['ragas_median']:.2f} median); "
            f"ctxeval evaluate --out --format csv: {ragas_row['ctxeval_best']:.2f} s best "
            f"({ragas_row['ctxeval_median']:.2f} median): {ragas_row['speedup_best']:.1f}x"
        )
    print("\n" + json.dumps({"runs": rows, "ragas": ragas_row}))


if __name__ == "__main__":
    main()
