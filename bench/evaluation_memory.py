"""What a kept :class:`~ctxeval.Evaluation` costs in memory, and that its files do not change.

Two inputs of N samples (``--samples``, 1 000 000 by default), scored by two ID metrics
(``id_based_context_precision``, ``id_ndcg_at_k``):

* ``generated``: samples made as they are scored (a generator of ``Sample``), 10 retrieved
  and 3 reference IDs each;
* ``runners``: ``bench/runners.py``'s JSONL file (10 retrieved, 4 reference IDs, one sample
  in three without an id), read with ``load_samples``.

Each step runs in a fresh process under ``/usr/bin/time -v`` (its peak RSS): ``evaluate``
then ``summary()``; then the same and ``to_pandas()`` (``pandas``),
``to_pandas(details="json")`` (``pandas-json``) or ``to_pandas(details="none")``
(``pandas-none``); then the same and ``to_arrow()`` (these last three this checkout only).
"columns" is what the kept columns hold (ids, scores, the samples' lines; 0 for a checkout
without them: read through private names, for this bench only); "frame" is the
frame's own count (``memory_usage(deep=True)``, which counts a details dict shallowly, or the
table's ``nbytes``). With ``--compare PYTHON`` (another
checkout's interpreter, main's, say) both interpreters also write, on ``--check-samples``
samples of each input, the run folder (``ev.write``), ``to_jsonl`` and the summary, and the
files are compared byte for byte (the run folder's ``summary.json`` without its version and
``report.html`` are not compared: they name the version and the folder).

    python bench/evaluation_memory.py [--samples 1000000] [--compare /work/main/.venv/bin/python]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from runners import write_jsonl  # noqa: E402

METRICS = ["id_based_context_precision", "id_ndcg_at_k"]

CHILD = r"""
import json, os, random, resource, sys, time
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
import ctxeval

kind, n, path, step, out = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
metrics = sys.argv[6:]

def generated(n):
    rng = random.Random(7)
    for i in range(n):
        yield ctxeval.Sample(
            id=f"q{i}",
            retrieved_context_ids=[f"d{x}" for x in rng.sample(range(50), 10)],
            reference_context_ids=[f"d{x}" for x in rng.sample(range(50), 3)],
        )

def columnar_bytes(ev):
    # what the kept columns hold: ids, scores, lines (rows kept whole not counted)
    try:
        from ctxeval._results.columns import Lines, RowBlock, Scores, Texts
    except ImportError:  # (a checkout without them)
        return 0
    total = 0
    for part in getattr(ev, "parts", ()):
        if not isinstance(part, RowBlock):
            continue
        ids, sources = part.sample_ids, part.sources
        if isinstance(ids, Texts):
            total += len(ids._text.encode("utf-8", "surrogatepass")) + 8 * len(ids)
        if isinstance(sources, Lines):
            total += len(sources._buffer) + 8 * len(sources)
        for column in part.columns:
            if isinstance(column.scores, Scores):
                values = column.scores.values  # (an array("d"))
                total += len(values) * values.itemsize
    return total

samples = generated(n) if kind == "generated" else ctxeval.load_samples(path)
start = time.perf_counter()
ev = ctxeval.evaluate(samples, metrics)
summary = ev.summary()
seconds = time.perf_counter() - start
report = {"seconds": seconds, "rows": len(ev), "columnar_mb": columnar_bytes(ev) / 1e6}
if step.startswith("pandas"):  # pandas, pandas-json, pandas-none: to_pandas(details=...)
    form = step.partition("-")[2]
    frame = ev.to_pandas(details=form) if form else ev.to_pandas()
    report["frame_mb"] = frame.memory_usage(deep=True).sum() / 1e6
    del frame
if step == "arrow":
    table = ev.to_arrow()
    report["frame_mb"] = table.nbytes / 1e6
    del table
if step == "files":
    folder = os.path.join(out, "run")
    ev.write(folder)
    ev.to_jsonl(os.path.join(out, "to_jsonl.jsonl"))
    with open(os.path.join(out, "summary.txt"), "w") as handle:
        handle.write(json.dumps(summary.to_dict(), sort_keys=True) + "\n" + str(ev) + "\n")
report["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps(report))
"""


def run(python: str, kind: str, n: int, path: Path, step: str, out: Path) -> dict[str, float]:
    done = subprocess.run(
        ["/usr/bin/time", "-v", python, "-c", CHILD, kind, str(n), str(path), step, str(out),
         *METRICS],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    report = json.loads(done.stdout.splitlines()[-1])
    peak = re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)
    if peak:
        report["time_v_mb"] = int(peak.group(1)) / 1024
    return report


def same_files(first: Path, second: Path) -> list[str]:
    """The files of ``first`` that differ from ``second``'s (summary.json without its
    ``ctxeval`` version; report.html left out)."""
    differ = []
    for path in sorted(first.rglob("*")):
        if path.is_dir() or path.name in ("report.html", ".lock"):
            continue
        other = second / path.relative_to(first)
        a, b = path.read_bytes(), other.read_bytes() if other.exists() else b""
        if path.name == "summary.json":
            a, b = (re.sub(rb'"ctxeval": "[^"]*"', b"", x) for x in (a, b))
        if a != b:
            differ.append(str(path.relative_to(first)))
    return differ


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=1_000_000)
    parser.add_argument("--check-samples", type=int, default=100_000)
    parser.add_argument("--compare", help="another interpreter to run side by side")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--inputs", default="generated,runners", help="of generated,runners")
    parser.add_argument(
        "--steps",
        default="summary,pandas,arrow",
        help="of summary,pandas,pandas-json,pandas-none,arrow (pandas-*: to_pandas(details=*),"
        " this checkout only)",
    )
    args = parser.parse_args()
    pythons = [sys.executable] + ([args.compare] if args.compare else [])
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        path = folder / "runners.jsonl"
        write_jsonl(path, args.samples)
        print(f"{args.samples:,} samples x {len(METRICS)} ID metrics; peak RSS (MB, time -v)\n")
        print(
            "| input | step | interpreter | wall (s) | peak RSS (MB) | columns (MB) | frame (MB) |"
        )
        print("|---|---|---|---:|---:|---:|---:|")
        for _ in range(args.repeat):
            for kind in args.inputs.split(","):
                for step in args.steps.split(","):
                    mine = step == "arrow" or step.startswith("pandas-")  # (this checkout's)
                    for python in pythons[:1] if mine else pythons:  # (alternating)
                        r = run(python, kind, args.samples, path, step, folder)
                        frame = f"{r['frame_mb']:.0f}" if "frame_mb" in r else ""
                        print(
                            f"| {kind} | {step} | {python} | {r['seconds']:.1f} | "
                            f"{r['time_v_mb']:.0f} | {r['columnar_mb']:.0f} | {frame} |",
                            flush=True,
                        )
        if args.compare:
            small = folder / "small.jsonl"
            write_jsonl(small, args.check_samples)
            for kind in ("generated", "runners"):
                outs = []
                for number, python in enumerate(pythons):
                    out = folder / f"files-{kind}-{number}"
                    out.mkdir()
                    run(python, kind, args.check_samples, small, "files", out)
                    outs.append(out)
                differ = same_files(outs[0], outs[1])
                said = "byte-identical" if not differ else f"DIFFER: {differ}"
                print(f"\n{kind}, {args.check_samples:,} samples: files {said}")


if __name__ == "__main__":
    main()
