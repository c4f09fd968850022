"""The ``spark`` runner and ``evaluate_frame`` against the ``local`` and ``processes`` runners,
side by side in one run (pyspark in local mode, ``local[W]``).

Writes N ID samples (as bench/runners.py: 10 retrieved and 4 reference ids, one sample in
three without an id) to a JSONL file, starts Spark once (its start-up is reported apart), then
times, alternating ``--repeat`` times:

* ``local``: ``ctxeval.evaluate(load_samples(path), metrics)`` in this process (and, timed
  apart, the same with its rows then written with their evidence, ``to_jsonl``: the work a
  frame's rows with ``details`` do);
* ``processes``: the same with ``runner=ProcessesRunner(workers=W)``;
* ``spark``: the same with ``runner=SparkRunner(workers=W)`` (rows back to the driver, in
  order, as every runner);
* ``evaluate_frame``: a DataFrame of the samples scored by the executors and written as
  Parquet by them (the rows stay in Spark), with each row's evidence (``details``) and
  without it; the DataFrame read by Spark from the JSONL file (``spark.read.json``: the JVM
  parses the JSON) and, as a Spark user usually holds a table, from a Parquet copy of it
  (written once before the runs, not timed).

Prints best and median wall times, each one's ratio to ``local`` (best against best) and the
median of the ratios of each repeat (the runs of one repeat are side by side: on a shared
machine, the fairer figure); the first repeat checks that the spark runner's rows equal the
local ones (scores per sample and metric). ``--frame-only`` leaves out the processes and
spark runners; ``--batch-rows`` sets ``spark.sql.execution.arrow.maxRecordsPerBatch`` (the
samples of one Arrow batch handed to the batch scorer; Spark's default 10 000). ``--floor``
adds "Spark alone" (the Parquet frame through ``mapInArrow`` with rows of the same shape made
without scoring: Spark's own part; and the same with the usage as one JSON text, the rows'
shape before #53 flattened it) and, after the Spark runs, the batch scorer alone on the same
samples in this process (CPU a sample, with and without evidence), with what 1.5x ``local``
would need of the frame against the two. ``--lean`` leaves out the runs that write each row's
evidence (``local + results.jsonl`` and the frames with ``details``).

    python bench/spark.py [--samples 1000000] [--workers 2] [--repeat 3] [--frame-only]
        [--floor] [--lean]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import ctxeval
from ctxeval.runners import ProcessesRunner

METRICS = ["id_based_context_precision", "id_ndcg_at_k"]
SCHEMA = "id string, retrieved_context_ids array<string>, reference_context_ids array<string>"


def write_jsonl(path: Path, n: int, *, ids: bool) -> None:
    rng = random.Random(7)
    with path.open("w", encoding="utf-8") as handle:
        for i in range(n):
            row: dict[str, object] = {
                "retrieved_context_ids": [f"d{x}" for x in rng.sample(range(50), 10)],
                "reference_context_ids": [f"d{x}" for x in rng.sample(range(50), 4)],
            }
            if ids or i % 3:
                row["id"] = f"q{i}"
            handle.write(json.dumps(row) + "\n")


JSON_USAGE_SCHEMA = (
    "sample_id string, metric string, status string, score double, reason string, "
    "details string, usage string"
)
"""The rows' Spark schema before #53 flattened their usage (one JSON text): ``--floor``
times Spark's own part with it too."""


def unscored_rows(batches: Any) -> Any:
    """Rows of the batch scorer's shape for each Arrow batch of samples, without scoring (a
    sample's id, the metric's name, "ok", 0.5, no reason, no details, zero usage in six
    columns): what Spark's own part of ``evaluate_frame`` costs (``--floor``)."""
    import pyarrow as pa

    from ctxeval.runners import ROW_COLUMNS

    for batch in batches:
        count = len(METRICS) * batch.num_rows
        zero = pa.repeat(pa.scalar(0, pa.int64()), count)
        usage = [zero] * 4 + [pa.repeat(pa.scalar(0.0), count), zero]
        yield pa.RecordBatch.from_arrays([*_unscored(batch), *usage], names=list(ROW_COLUMNS))


def unscored_json_rows(batches: Any) -> Any:
    """As :func:`unscored_rows`, the usage as one JSON text (``JSON_USAGE_SCHEMA``, the shape
    before #53 flattened it)."""
    import pyarrow as pa

    usage = json.dumps(
        {"requests": 0, "retries": 0, "prompt_tokens": 0, "completion_tokens": 0}
        | {"cost_usd": 0.0, "cache_hits": 0},
        separators=(",", ":"),
    )
    names = [field.split()[0] for field in JSON_USAGE_SCHEMA.split(", ")]
    for batch in batches:
        count = len(METRICS) * batch.num_rows
        columns = [*_unscored(batch), pa.repeat(pa.scalar(usage), count)]
        yield pa.RecordBatch.from_arrays(columns, names=names)


def _unscored(batch: Any) -> list[Any]:
    """The first six columns of the rows of ``batch``, unscored (see :func:`unscored_rows`)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    width = len(METRICS)
    count = width * batch.num_rows
    index = pa.array(range(count), pa.int64())
    sample = pc.divide(index, width)
    metric = pc.subtract(index, pc.multiply(sample, width))
    return [
        batch.column("id").take(sample),
        pa.array(METRICS).take(metric),
        pa.repeat(pa.scalar("ok"), count),
        pa.repeat(pa.scalar(0.5), count),
        pa.nulls(count, pa.string()),
        pa.nulls(count, pa.string()),
    ]


def ray_side_by_side(path: Path, workers: int, repeat: int) -> None:
    """The batch scorer in ``ray.data.map_batches`` against the ``ray`` runner, on the same
    file, rows consumed by the driver in both."""
    import ray.data

    from ctxeval.runners import BatchScorer
    from ctxeval_ray import RayRunner, ray_init

    ray_init(num_cpus=workers)
    runner = RayRunner(workers=workers)
    scorer = BatchScorer.build(METRICS, workers=workers)
    times: dict[str, list[float]] = {"ray runner": [], "map_batches(BatchScorer)": []}
    for _ in range(repeat):
        started = time.perf_counter()
        ctxeval.evaluate(ctxeval.load_samples(path), METRICS, runner=runner)
        times["ray runner"].append(time.perf_counter() - started)
        started = time.perf_counter()
        rows = ray.data.read_json(str(path), lines=True).map_batches(
            scorer,
            batch_format="pyarrow",
            batch_size=4096,
            concurrency=workers,
            num_cpus=0.25,
        )
        count = sum(batch.num_rows for batch in rows.iter_batches(batch_format="pyarrow"))
        times["map_batches(BatchScorer)"].append(time.perf_counter() - started)
        assert count == 2 * sum(1 for _ in path.open())
    base = min(times["ray runner"])
    for name, values in times.items():
        best = min(values)
        print(
            f"{name:26} best {best:7.2f} s, median {statistics.median(values):7.2f} s, "
            f"{best / base:.2f}x the ray runner"
        )


def descendants_cpu() -> float:
    """CPU seconds (user + system) of this process's descendants: Spark's JVM and its Python
    workers, with what their finished children spent. On a shared machine the wall time of a
    two-core run is the load's as much as its own; its CPU is its own."""
    tick = os.sysconf("SC_CLK_TCK")
    parents: dict[int, tuple[int, int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", encoding="ascii") as handle:
                    fields = handle.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parents[int(name)] = (int(fields[1]), sum(map(int, fields[11:15])))
    total, todo = 0, [os.getpid()]
    while todo:
        parent = todo.pop()
        for pid, (ppid, ticks) in parents.items():
            if ppid == parent:
                total += ticks
                todo.append(pid)
    return total / tick


def time_frame(
    spark: Any, source: str, path: Path, details: bool | str | None, workers: int
) -> tuple[float, float]:
    """Seconds to score the samples at ``path`` (``source``: "json" or "parquet") with
    ``evaluate_frame`` and write its rows as Parquet (``details`` None: not scored, rows of
    the same shape made by :func:`unscored_rows`; "json usage": by
    :func:`unscored_json_rows`), and the CPU seconds it took (this process's and Spark's)."""
    from ctxeval_spark import evaluate_frame
    from ctxeval_spark.frames import ROW_SCHEMA

    out = path.parent / "rows.parquet"
    started, cpu = time.perf_counter(), time.process_time() + descendants_cpu()
    if source == "json":
        frame = spark.read.json(str(path), schema=SCHEMA)
    else:
        frame = spark.read.parquet(str(path))
    if details is None:
        frame.mapInArrow(unscored_rows, ROW_SCHEMA).write.mode("overwrite").parquet(str(out))
    elif details == "json usage":
        rows = frame.mapInArrow(unscored_json_rows, JSON_USAGE_SCHEMA)
        rows.write.mode("overwrite").parquet(str(out))
    else:
        assert isinstance(details, bool)
        evaluate_frame(
            frame, METRICS, workers=workers, output=out, mode="overwrite", details=details
        )
    spent = time.process_time() + descendants_cpu() - cpu
    return time.perf_counter() - started, spent


def scorer_alone(table_path: Path, repeat: int) -> dict[str, float]:
    """CPU seconds a sample of the batch scorer alone, in this process, on the Parquet copy's
    samples in Spark's batches of 10 000 (best of ``repeat``), with and without each row's
    evidence: ctxeval's own part of ``evaluate_frame``, which the executors split among them."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ctxeval.runners import BatchScorer

    table = pq.read_table(str(table_path)).combine_chunks()
    batches = [pa.Table.from_batches([b]) for b in table.to_batches(max_chunksize=10_000)]
    out = {}
    for label, details in (("details", True), ("no details", False)):
        scorer = BatchScorer.build(METRICS, details=details)
        scorer(batches[0])  # (its event loop started, the metrics imported)
        best = float("inf")
        for _ in range(repeat):
            started = time.process_time()
            for batch in batches:
                scorer(batch)
            best = min(best, time.process_time() - started)
        scorer.close()
        out[label] = best / table.num_rows
    return out


def floor_report(times: dict[str, list[float]], per_sample: dict[str, float], args: Any) -> None:
    """What 1.5x ``local`` needs of the frame without evidence, against what Spark alone and
    the batch scorer alone take (the scorer's CPU split over the workers)."""
    goal = min(times["local"]) / 1.5
    spark_alone = min(times["spark alone (parquet, not scored)"])
    print(
        f"\nbatch scorer alone (one process, CPU): {per_sample['no details'] * 1e6:.2f} us a "
        f"sample without evidence, {per_sample['details'] * 1e6:.2f} us with it"
    )
    for label in ("no details", "details"):
        scorer = per_sample[label] * args.samples / args.workers
        print(
            f"  {label:10}: 1.5x local needs <= {goal:.2f} s; Spark alone {spark_alone:.2f} s "
            f"+ the scorer's CPU over {args.workers} workers {scorer:.2f} s = "
            f"{spark_alone + scorer:.2f} s if they do not overlap"
        )


def report(
    times: dict[str, list[float]], cpu: dict[str, list[float]], args: argparse.Namespace
) -> None:
    """Best, median, best against local's best, the median of the ratios to local in each
    repeat (runs side by side), and the median CPU seconds (every process of the run)."""
    base = min(times["local"])
    print(f"\n{args.samples:,} samples x {len(METRICS)} ID metrics, {args.workers} workers")
    print(f"{'':34} {'best':>8} {'median':>8} {'local/x':>8} {'same-run':>9} {'CPU':>8}")
    for name, values in times.items():
        best = min(values)
        ratios = [local / x for local, x in zip(times["local"], values, strict=True)]
        spent = f"{statistics.median(cpu[name]):7.2f}s" if cpu.get(name) else ""
        print(
            f"{name:34} {best:8.2f} {statistics.median(values):8.2f} {base / best:8.2f}x "
            f"{statistics.median(ratios):8.2f}x {spent:>8}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=1_000_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--ray", action="store_true", help="also: BatchScorer in Ray Data against the ray runner"
    )
    parser.add_argument("--frame-only", action="store_true", help="local and evaluate_frame only")
    parser.add_argument("--batch-rows", type=int, default=None, help="Arrow batch size in Spark")
    parser.add_argument(
        "--floor", action="store_true", help="also: the Parquet frame through Spark, not scored"
    )
    parser.add_argument(
        "--lean", action="store_true", help="leave out the runs that write the evidence"
    )
    args = parser.parse_args()
    from ctxeval_spark import SparkRunner, spark_session

    folder = Path(tempfile.mkdtemp(prefix="ctxeval-bench-spark-"))
    data, with_ids = folder / "samples.jsonl", folder / "with_ids.jsonl"
    write_jsonl(data, args.samples, ids=False)
    write_jsonl(with_ids, args.samples, ids=True)
    started = time.perf_counter()
    spark = spark_session(workers=args.workers)
    spark.range(10).count()
    print(f"spark start-up: {time.perf_counter() - started:.1f} s (not in the times below)")
    if args.batch_rows is not None:
        spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", str(args.batch_rows))
    table = folder / "samples.parquet"  # as a Spark user holds samples: not timed
    spark.read.json(str(with_ids), schema=SCHEMA).write.parquet(str(table))
    runners: dict[str, object] = {"local": None}
    if not args.frame_only:
        runners["processes"] = ProcessesRunner(workers=args.workers)
        runners["spark"] = SparkRunner(workers=args.workers)
    frames: dict[str, tuple[str, bool | str | None]] = {
        "frame json": ("json", True),
        "frame json, no details": ("json", False),
        "frame parquet": ("parquet", True),
        "frame parquet, no details": ("parquet", False),
    }
    if args.lean:
        frames = {label: how for label, how in frames.items() if how[1] is False}
    print(f"load average at the start: {os.getloadavg()}")
    if args.floor:
        frames["spark alone (parquet, not scored)"] = ("parquet", None)
        frames["spark alone, usage as JSON"] = ("parquet", "json usage")
    times: dict[str, list[float]] = {
        name: [] for name in ["local", "local + results.jsonl", *runners, *frames]
    }
    if args.lean:
        del times["local + results.jsonl"]
    driver_cpu: dict[str, list[float]] = {name: [] for name in runners}
    frame_cpu: dict[str, list[float]] = {name: [] for name in frames}
    for repeat in range(args.repeat):
        kept = {}
        for name, runner in runners.items():
            started, cpu = time.perf_counter(), time.process_time()
            evaluation = ctxeval.evaluate(ctxeval.load_samples(data), METRICS, runner=runner)
            times[name].append(time.perf_counter() - started)
            driver_cpu[name].append(time.process_time() - cpu)
            if name == "local" and not args.lean:  # and its rows written with their evidence
                evaluation.to_jsonl(folder / "rows.jsonl")
                times["local + results.jsonl"].append(time.perf_counter() - started)
            if repeat == 0 and name in ("local", "spark"):
                kept[name] = [(r.sample_id, r.metric, r.score) for r in evaluation.results]
            del evaluation
        if repeat == 0 and "spark" in kept:
            assert kept["local"] == kept["spark"], "the spark runner's rows differ from local"
        del kept
        for label, (source, details) in frames.items():
            path = with_ids if source == "json" else table
            wall, spent = time_frame(spark, source, path, details, args.workers)
            times[label].append(wall)
            frame_cpu[label].append(spent)
        print(f"repeat {repeat + 1}: " + ", ".join(f"{k} {v[-1]:.1f} s" for k, v in times.items()))
    frame_cpu["local"] = driver_cpu["local"]
    report(times, frame_cpu, args)
    if args.floor:
        floor_report(times, scorer_alone(table, args.repeat), args)
    print("\nthe driving process's own CPU (reading, collecting, ordering the rows) per run:")
    for name, values in driver_cpu.items():
        wall = statistics.median(times[name])
        cpu = statistics.median(values)
        print(f"  {name:10} {cpu:6.2f} s of {wall:6.2f} s wall ({cpu / wall:.0%})")
    spark.stop()
    if args.ray:
        ray_side_by_side(with_ids, args.workers, args.repeat)
    shutil.rmtree(folder, ignore_errors=True)
    sys.exit(0)


if __name__ == "__main__":
    main()
