"""What the time bound on synchronous plugin work costs the deterministic fast path.

With ``metric_timeout`` set (the default, 3600 s), a run makes its synchronous plugin calls in
a worker thread that can cut them (:mod:`ctxeval._run.worker`); with ``metric_timeout=None`` it makes
them in its own thread, unbounded, as before the bound existed. This script runs the same
samples both ways, alternating, in one process, and prints the best and median wall time of
each and their ratio, for three kinds of deterministic work:

* the ID metrics (``score_batch``: one hand-over per chunk of 2 048 samples and metric);
* the string metrics (``score_batch`` too, more work per sample);
* a third-party metric with only ``score`` (one bounded call per sample, made in the worker).

    python bench/timeouts.py [--samples 100000] [--repeat 9]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections.abc import Callable

import attrs
from load import rows as sample_rows  # (a script beside this one)

import ctxeval
from ctxeval import MetricResult, Sample
from ctxeval._plugins.base import BaseMetric


@attrs.frozen(kw_only=True)
class Overlap(BaseMetric):
    """A plugin as a user writes it: a plain ``score``, no batch form."""

    registry_name = "bench_overlap"
    requires = ("retrieved_context_ids", "reference_context_ids")

    def score(self, sample: Sample) -> MetricResult:
        reference = set(sample.reference_context_ids or ())
        retrieved = sample.retrieved_context_ids or ()
        if not reference:
            return MetricResult.undefined("no reference")
        return MetricResult.ok(sum(r in reference for r in retrieved) / len(reference) / 8)


def timed(run: Callable[[], ctxeval.Evaluation], rows: int) -> float:
    gc.collect()  # (the rows of the run before)
    start = time.perf_counter()
    evaluation = run()
    seconds = time.perf_counter() - start
    assert len(evaluation.results) == rows, "rows lost"
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args()
    data = list(sample_rows(args.samples))  # the samples of bench/load.py
    kinds: dict[str, list[str | ctxeval.Metric]] = {
        "ID metrics (3), score_batch": [
            "id_based_context_precision",
            "id_based_context_recall",
            "id_ndcg_at_k",
        ],
        "string metrics (2), score_batch": [
            "non_llm_context_precision_with_reference",
            "non_llm_context_recall",
        ],
        "plugin with score only (1)": [Overlap()],
    }
    print(f"{args.samples} samples, best and median of {args.repeat}, alternating\n")
    print("| work | unbounded (s) | bounded (s) | bounded / unbounded (best) | (median) |")
    print("|---|---:|---:|---:|---:|")
    for name, metrics in kinds.items():
        times: dict[float | None, list[float]] = {None: [], 3600.0: []}
        rows = args.samples * len(metrics)
        for turn in range(args.repeat):
            for timeout in list(times)[:: 1 if turn % 2 else -1]:  # alternating who goes first
                times[timeout].append(
                    timed(
                        lambda t=timeout, m=metrics: ctxeval.evaluate(data, m, metric_timeout=t),
                        rows,
                    )
                )
        free, bound = times[None], times[3600.0]
        print(
            f"| {name} | {min(free):.2f} | {min(bound):.2f} | {min(bound) / min(free):.3f} "
            f"| {statistics.median(bound) / statistics.median(free):.3f} |"
        )


if __name__ == "__main__":
    main()
