"""Deterministic metrics on a Ray cluster: throughput with 2 workers against 1, and what Ray
costs to start, against one process.

Writes N samples (ID lists, as a retriever's log) to a Parquet file, then, in one run:

* one process: ``ctxeval.evaluate`` on the samples read by ``ctxeval.load_samples`` (rows as
  columns, evidence left uncomputed), then every row written to ``results.jsonl`` (evidence
  and JSON per row: what the command line and the Ray workers do);
* Ray start-up: ``ray.init`` of a local cluster (and the first, empty, dataset run);
* ``ctxeval_ray.score_dataset`` on the Parquet file with 1 worker, then with 2 (rows counted
  as they arrive at the driver).

    python bench/ray_scaling.py [--samples 1000000] [--batch-size 8192]
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import ctxeval

METRICS = ["id_based_context_precision", "id_based_context_recall", "id_ndcg_at_k"]


def write_parquet(path: Path, n: int) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = random.Random(3)
    ids = [str(i) for i in range(n)]
    retrieved = [[f"d{rng.randint(0, 200)}" for _ in range(8)] for _ in range(n)]
    reference = [[f"d{rng.randint(0, 200)}" for _ in range(3)] for _ in range(n)]
    table = pa.table(
        {"id": ids, "retrieved_context_ids": retrieved, "reference_context_ids": reference}
    )
    pq.write_table(table, path, row_group_size=65_536)


def on_ray(path: Path, workers: int, batch_size: int) -> tuple[float, int]:
    from ctxeval_ray import score_dataset

    start = time.perf_counter()
    rows = 0
    dataset = score_dataset(str(path), METRICS, workers=workers, batch_size=batch_size)
    for batch in dataset.iter_batches(batch_format="pyarrow", batch_size=None):
        rows += batch.num_rows
    return time.perf_counter() - start, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=1_000_000)
    parser.add_argument("--batch-size", type=int, default=8192)
    args = parser.parse_args()
    n = args.samples
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "samples.parquet"
        write_parquet(path, n)

        start = time.perf_counter()
        evaluation = ctxeval.evaluate(ctxeval.load_samples(path), METRICS)
        alone = time.perf_counter() - start
        assert len(evaluation) == n * len(METRICS)
        start = time.perf_counter()
        evaluation.to_jsonl(Path(folder) / "results.jsonl")  # every row's evidence, as JSON
        written = time.perf_counter() - start
        del evaluation

        import ray

        from ctxeval_ray import ray_init

        start = time.perf_counter()
        ray_init(None)
        started = time.perf_counter() - start
        warm, _ = on_ray(path, 1, args.batch_size) if n <= 10_000 else on_ray_small(path)
        one, rows_one = on_ray(path, 1, args.batch_size)
        two, rows_two = on_ray(path, 2, args.batch_size)
        assert rows_one == rows_two == n * len(METRICS)
        ray.shutdown()
    cores = os.cpu_count()
    print(f"{n} samples x {len(METRICS)} ID metrics, {cores} cores, batch {args.batch_size}\n")
    print("| run | wall (s) | rows/s |")
    print("|---|---:|---:|")
    print(f"| one process (`ctxeval.evaluate`) | {alone:.1f} | {n * 3 / alone:,.0f} |")
    both = alone + written
    print(f"| one process, and every row written as JSON | {both:.1f} | {n * 3 / both:,.0f} |")
    print(f"| `ray.init`, local cluster | {started:.1f} | |")
    print(f"| first dataset run (workers start), 1 000 samples | {warm:.1f} | |")
    print(f"| Ray, 1 worker | {one:.1f} | {n * 3 / one:,.0f} |")
    print(f"| Ray, 2 workers | {two:.1f} | {n * 3 / two:,.0f} |")
    print(f"\n2 workers / 1 worker throughput: {one / two:.2f}x")


def on_ray_small(path: Path) -> tuple[float, int]:
    """The cost of a first, small run (worker start-up), on the first 1 000 samples."""
    import ray.data

    from ctxeval_ray import score_dataset

    start = time.perf_counter()
    small = ray.data.read_parquet(str(path)).limit(1000)
    rows = score_dataset(small, METRICS, workers=1, batch_size=1000).count()
    return time.perf_counter() - start, rows


if __name__ == "__main__":
    main()
