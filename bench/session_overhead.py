"""What ``Session.score`` costs per call beyond the metric's own work, from many threads.

A host harness (MLflow's row threads, a thread pool) calls ``session.score(sample)`` once per
row. This script scores the same samples from ``--threads`` threads two ways, alternating, in
one process:

* **own work**: each thread calls ``metric.score(sample)`` for every metric itself (what the
  metric costs, with nothing around it);
* **session**: each thread calls ``session.score(sample)`` (reading the sample, the missing-
  field checks, labelling each row with its sample and metric, the session-wide id, keeping
  the rows for ``evaluation()``).

It prints the best and median wall time of each and the overhead per call:
``(session - own work) / calls``, for the ID metrics alone and for one ID metric, with
``Sample`` objects and with dicts (a dict is read into a ``Sample`` by the session: that is
counted as overhead, the metric's own work takes a ``Sample``).

It then measures the hand-over to the session's own event loop, which every row of an LLM
metric takes, with an async metric that returns at once (so the figure is the hand-over
alone): ``score()`` from one thread and from ``--threads`` threads, and ``ascore()`` from
``--tasks`` concurrent tasks of an asyncio and of a trio loop, woken through the caller's own
loop (what ctxeval does) or by a worker thread of the caller's loop waiting on the future
(``anyio.to_thread.run_sync(future.result)``, the obvious alternative).

    python bench/session_overhead.py [--samples 100000] [--threads 8] [--repeat 5]
                                     [--hops 20000] [--tasks 1000]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import anyio
import anyio.to_thread
import attrs
from load import rows as sample_rows  # (a script beside this one)

import ctxeval
from ctxeval import MetricResult, Sample
from ctxeval._plugins.base import BaseMetric


@attrs.frozen(kw_only=True)
class Instant(BaseMetric):
    """An async metric with no work: what a row costs is the hand-over to the loop."""

    registry_name = "bench_instant"

    async def ascore(self, sample: Sample, ctx: ctxeval.RunContext) -> MetricResult:
        return MetricResult.ok(1.0)


ID_METRICS = ["id_based_context_recall", "id_based_context_precision", "id_mrr", "nDCG@10"]


def in_threads(
    threads: int, items: Sequence[Any], work: Callable[[Sequence[Any]], None]
) -> tuple[float, float]:
    """Wall and CPU seconds (of this process, every thread) for ``threads`` threads to each
    run ``work`` on its share of ``items``."""
    shares = [items[i::threads] for i in range(threads)]
    workers = [threading.Thread(target=work, args=(share,)) for share in shares]
    gc.collect()
    start, cpu = time.perf_counter(), time.process_time()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return time.perf_counter() - start, time.process_time() - cpu


def own_work(metrics: list[ctxeval.Metric]) -> Callable[[Sequence[Sample]], None]:
    scorers = [m.score for m in metrics]  # type: ignore[attr-defined]

    def work(samples: Sequence[Sample]) -> None:
        for sample in samples:
            for score in scorers:
                score(sample)

    return work


def through_session(session: ctxeval.Session) -> Callable[[Sequence[Any]], None]:
    score = session.score

    def work(samples: Sequence[Any]) -> None:
        for sample in samples:
            score(sample)

    return work


def compare(
    names: list[str], items: Sequence[Any], samples: Sequence[Sample], threads: int, repeat: int
) -> None:
    metrics = [ctxeval.get_metric(name) for name in names]
    own: list[tuple[float, float]] = []
    mine: list[tuple[float, float]] = []
    for _ in range(repeat):
        own.append(in_threads(threads, samples, own_work(metrics)))
        with ctxeval.Session(metrics) as session:
            mine.append(in_threads(threads, items, through_session(session)))
            assert len(session.evaluation()) == len(items) * len(metrics), "rows lost"
        del session
    calls = len(items)
    kind = type(items[0]).__name__
    print(
        f"{len(names)} metric(s) ({', '.join(names)}), {kind} input, {calls} calls, "
        f"{threads} threads"
    )
    for what, index in (("wall", 0), ("CPU", 1)):
        a = [t[index] for t in own]
        b = [t[index] for t in mine]
        print(
            f"  {what:4} own work best {min(a):6.3f} s median {statistics.median(a):6.3f} s | "
            f"session best {min(b):6.3f} s median {statistics.median(b):6.3f} s | overhead "
            f"per call {(min(b) - min(a)) / calls * 1e6:6.2f} us best, "
            f"{(statistics.median(b) - statistics.median(a)) / calls * 1e6:6.2f} us median "
            f"(own work {min(a) / calls * 1e6:.2f} us per call)"
        )
    print()


def hops(calls: int, threads: int, tasks: int) -> None:
    """The hand-over to the session's loop (see the module)."""
    items = [Sample(retrieved_context_ids=["a"]) for _ in range(calls)]
    with ctxeval.Session([Instant()]) as session:
        session.score(items[0])  # (the loop started)
        for count in (1, threads):
            wall, cpu = in_threads(count, items, through_session(session))
            print(
                f"score() through the loop, {count} thread(s): {wall / calls * 1e6:6.1f} us "
                f"wall, {cpu / calls * 1e6:6.1f} us CPU per call"
            )
        for backend in ("asyncio", "trio"):
            for how in ("own loop", "to_thread"):
                wall, cpu = anyio.run(_ascore_all, session, items[:tasks], how, backend=backend)
                print(
                    f"ascore() on {backend:7}, {tasks} tasks, woken by {how:9}: "
                    f"{wall / tasks * 1e6:6.1f} us wall, {cpu / tasks * 1e6:6.1f} us CPU per call"
                )
        assert all(row.status.value == "ok" for row in session.evaluation().results)


async def _ascore_all(
    session: ctxeval.Session, items: Sequence[Sample], how: str
) -> tuple[float, float]:
    scorer = session.ascore
    if how == "to_thread":  # the same hand-over, waited for by a worker thread instead
        loop, inner = session._running_loop()

        async def scorer(sample: Sample) -> list[MetricResult]:
            begun = session._begin(sample)
            assert not isinstance(begun, list)
            future = loop.submit(inner.score, *begun)
            return await anyio.to_thread.run_sync(future.result)

    start, cpu = time.perf_counter(), time.process_time()
    async with anyio.create_task_group() as group:
        for sample in items:
            group.start_soon(scorer, sample)
    return time.perf_counter() - start, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=100_000)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--hops", type=int, default=20_000)
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--only-hops", action="store_true")
    args = parser.parse_args()
    if args.only_hops:
        hops(args.hops, args.threads, args.tasks)
        return
    dicts = list(sample_rows(args.samples))
    samples = [Sample.from_dict(d) for d in dicts]
    for names in (ID_METRICS, ID_METRICS[:1]):
        compare(names, samples, samples, args.threads, args.repeat)
    compare(ID_METRICS, dicts, samples, args.threads, args.repeat)
    hops(args.hops, args.threads, args.tasks)


if __name__ == "__main__":
    main()
