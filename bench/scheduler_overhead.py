"""The scheduler's own overhead per call.

N samples, each making one call to a zero-latency fake service, at a concurrency limit of L:

* **bare**: an anyio task group, one task per call, each under one ``CapacityLimiter(L)``: the
  least any scheduler can do;
* **ctxeval**: ``ctxeval.aevaluate`` with a metric that makes the call through
  ``RunContext.call`` (shared gate, tenacity retry wrapper, per-call timeout, usage accounting,
  ordered streaming of rows, error-row safety net).

Both run in the same process, alternating, ``--repeat`` times; medians are reported.
"""

from __future__ import annotations

import argparse
import gc
import platform
import statistics
import time
from importlib.metadata import version

import anyio
import attrs
from anyio.lowlevel import checkpoint

import ctxeval
from ctxeval import MetricResult, Sample
from ctxeval.plugin import BaseMetric


async def fake_call() -> str:
    """A service that answers at once (one trip through the event loop)."""
    await checkpoint()
    return "answer"


@attrs.frozen(kw_only=True)
class OneCall(BaseMetric):
    registry_name = "one_call"

    async def ascore(self, sample: Sample, ctx: ctxeval.RunContext) -> MetricResult:
        await ctx.call(fake_call, resource="fake")
        return MetricResult.ok(1.0)


async def bare(n: int, limit: int) -> None:
    limiter = anyio.CapacityLimiter(limit)

    async def one() -> None:
        async with limiter:
            await fake_call()

    async with anyio.create_task_group() as group:
        for _ in range(n):
            group.start_soon(one)


async def with_ctxeval(n: int, limit: int) -> None:
    samples = [Sample(id=str(i)) for i in range(n)]
    evaluation = await ctxeval.aevaluate(
        samples, [OneCall()], max_concurrency=limit, samples_in_flight=max(256, limit * 4)
    )
    assert evaluation.ok
    assert len(evaluation.results) == n


def timed(func, n: int, limit: int, backend: str) -> float:
    gc.collect()
    start = time.perf_counter()
    anyio.run(func, n, limit, backend=backend)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=10_000)
    parser.add_argument("--limit", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--backend", choices=["asyncio", "trio"], default="asyncio")
    args = parser.parse_args()
    n, limit = args.samples, args.limit
    timed(with_ctxeval, 200, limit, args.backend)  # warm up imports and caches
    bare_times, ctx_times = [], []
    for _ in range(args.repeat):
        bare_times.append(timed(bare, n, limit, args.backend))
        ctx_times.append(timed(with_ctxeval, n, limit, args.backend))
    b, c = statistics.median(bare_times), statistics.median(ctx_times)
    print(f"# scheduler overhead: {n} samples, 1 zero-latency call each, concurrency {limit}")
    print(
        f"python {platform.python_version()}, {args.backend}, anyio {version('anyio')}, "
        f"ctxeval {ctxeval.__version__}, median of {args.repeat}"
    )
    print()
    print("| run | wall time (s) | per call (µs) |")
    print("|---|---:|---:|")
    print(f"| bare anyio task group + CapacityLimiter | {b:.3f} | {b / n * 1e6:.1f} |")
    print(f"| ctxeval.aevaluate + RunContext.call | {c:.3f} | {c / n * 1e6:.1f} |")
    print()
    print(f"ctxeval / bare: {c / b:.2f}x; scheduler overhead per call: {(c - b) / n * 1e6:.1f} µs")


if __name__ == "__main__":
    main()
