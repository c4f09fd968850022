"""How long ``aevaluate`` and ``summary()`` hold the caller's event loop.

A ticker task sleeps 1 ms in a loop and records the gap between its ticks while the run goes
on beside it: the longest gap is the longest the loop was held at once (a harness serving
requests on the same loop waits that long). Workloads, all deterministic (the fast path):

* 5 000 samples x 10 ID metrics;
* 100 000 samples x 2 ID metrics;
* 2 000 large samples (a 20 kB question, 2 000 retrieved ids) x 2 ID metrics.

For each: the longest gap during ``await aevaluate(...)``, the longest collection of Python's
cycle collector within it (a full collection walks every object of the process, the caller's
too, and holds the loop whoever triggered it) and its wall time; then how long the first
``summary()`` call after it holds the loop, what computing the summary costs (``summary()`` of
a copy of the evaluation with nothing computed yet), and, when the code has it, the longest gap
during ``await copy.asummary()``. Each figure is the worst (gaps) or best (wall times) of
``--repeat`` runs after a warm-up run; *first call* is the longest gap of the first
``aevaluate`` (5 000 x 10) of a fresh process, after ``import ctxeval``; *first LLM call* the
longest gap of the first ``aevaluate`` of another fresh process, 20 samples of
``llm_context_precision_with_reference`` judged by the fake OpenAI-compatible server (its own
process, 10 ms latency): what a harness serving requests on its loop sees when its first
LLM-judged run loads the LLM plugin, its HTTP client and litellm's price table.

Each backend runs in a process of its own. ``--before REV`` measures the code of git
revision ``REV`` too (its ``core/ctxeval`` and ``plugins/ctxeval_llm``, extracted with ``git archive`` to a temporary
folder and put first on ``PYTHONPATH``), in the same run, for a before/after table.
``--where`` names the code the loop was in during stalls over ``--stall`` ms (a watchdog
thread samples the loop thread's stack every 2 ms while the ticker is late; a stall inside
one C call that holds the GIL, a collection say, is not seen).

    python bench/loop_lag.py [--backend asyncio|trio|both] [--repeat 3] [--before HEAD]
"""

from __future__ import annotations

import argparse
import collections
import gc
import inspect
import json
import logging
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

logger = logging.getLogger("loop_lag")

ROOT = Path(__file__).resolve().parent.parent

TEN = [
    "id_based_context_precision",
    "id_based_context_recall",
    "id_ndcg_at_k",
    "id_mrr",
    "id_hit_rate_at_k",
    "id_average_precision",
    "id_precision_at_k",
    "id_recall_at_k",
    "id_f1_at_k",
    "id_r_precision",
]
WORKLOADS: dict[str, tuple[int, list[str], bool]] = {  # samples, metrics, large samples
    "5 000 x 10 metrics": (5_000, TEN, False),
    "100 000 x 2 metrics": (100_000, TEN[:2], False),
    "2 000 large x 2 metrics": (2_000, TEN[:2], True),
}


def make_samples(n: int, *, large: bool = False, seed: int = 0) -> list[dict[str, Any]]:
    """``n`` samples: 10 retrieved ids of 50 and 1 to 4 reference ids; ``large``: a 20 kB
    question and 2 000 retrieved ids of 5 000."""
    rng = random.Random(seed)
    docs = [f"doc_{i}" for i in range(5_000 if large else 50)]
    return [
        {
            "user_input": f"question {i} " + ("x" * 20_000 if large else ""),
            "retrieved_context_ids": rng.sample(docs, 2_000 if large else 10),
            "reference_context_ids": rng.sample(docs, rng.randint(1, 4)),
        }
        for i in range(n)
    ]


class Ticker:
    """Ticks every millisecond on the loop: the longest gap between two ticks and the longest
    collection since :meth:`reset`, and (with a ``stall`` threshold) where the loop was
    during the long gaps."""

    def __init__(self, stall: float | None) -> None:
        self.max_gap = 0.0
        self.max_gc = 0.0
        self._last = time.perf_counter()
        self._gc_start = 0.0
        self._stall = stall
        self._loop_thread = threading.get_ident()
        self.where: collections.Counter[str] = collections.Counter()
        self._stop = threading.Event()
        self._watchdog: threading.Thread | None = None

    async def run(self, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        self._last = time.perf_counter()
        task_status.started()
        while True:
            await anyio.sleep(0.001)
            now = time.perf_counter()
            self.max_gap = max(self.max_gap, now - self._last)
            self._last = now

    def reset(self) -> None:
        self.max_gap = self.max_gc = 0.0
        self._last = time.perf_counter()

    def _collection(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._gc_start = time.perf_counter()
        else:
            self.max_gc = max(self.max_gc, time.perf_counter() - self._gc_start)

    def __enter__(self) -> Ticker:
        gc.callbacks.append(self._collection)
        if self._stall is not None:
            self._watchdog = threading.Thread(target=self._watch, daemon=True)
            self._watchdog.start()
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._collection)
        self._stop.set()
        if self._watchdog is not None:
            self._watchdog.join()

    def _watch(self) -> None:
        """Sample the loop thread's stack every 2 ms while the ticker is late."""
        assert self._stall is not None
        while not self._stop.wait(0.002):
            if time.perf_counter() - self._last > self._stall:
                frame = sys._current_frames().get(self._loop_thread)
                if frame is not None:
                    self.where[_site(frame)] += 1


def _site(frame: Any) -> str:
    """The innermost three frames of ctxeval in a stack (else of the stack)."""
    stack = traceback.extract_stack(frame)
    ours = [f for f in stack if "ctxeval" in f.filename]
    shown = ours[-3:] if ours else stack[-3:]
    return " < ".join(f"{f.filename.rsplit('/', 1)[-1]}:{f.lineno} {f.name}" for f in shown[::-1])


async def measure(
    ticker: Ticker, work: Callable[[], Awaitable[Any]]
) -> tuple[Any, dict[str, float]]:
    """Run ``work`` with the ticker beside it: its result, and its wall time, longest gap and
    longest collection."""
    ticker.reset()
    start = time.perf_counter()
    result = await work()
    wall = time.perf_counter() - start
    await anyio.sleep(0.002)  # one more tick: a stall at the very end counts too
    return result, {"wall": wall, "gap": ticker.max_gap, "gc": ticker.max_gc}


async def one_workload(
    ticker: Ticker, samples: list[dict[str, Any]], metrics: list[str]
) -> dict[str, float]:
    import ctxeval

    gc.collect()  # (the garbage of the run before)
    evaluation, run = await measure(ticker, lambda: ctxeval.aevaluate(samples, metrics))
    out = {f"run_{key}": value for key, value in run.items()}
    start = time.perf_counter()
    evaluation.summary()  # what a harness does next: it holds the loop this long
    out["summary_holds"] = time.perf_counter() - start
    fresh = evaluation.with_labels(None)  # the same rows, nothing computed yet
    start = time.perf_counter()
    fresh.summary()
    out["summary_cost"] = time.perf_counter() - start
    if inspect.iscoroutinefunction(getattr(evaluation, "asummary", None)):
        fresh = evaluation.with_labels(None)
        _, summarized = await measure(ticker, fresh.asummary)
        assert fresh.summary() == evaluation.summary(), "asummary() differs from summary()"
        out["asummary_gap"] = summarized["gap"]
    return out


async def measure_all(repeat: int, stall: float | None) -> dict[str, Any]:
    """Every workload, ``repeat`` times after a warm-up: the worst gaps, the best times."""
    import ctxeval

    results: dict[str, Any] = {}
    with Ticker(stall) as ticker:
        async with anyio.create_task_group() as group:
            await group.start(ticker.run)
            await ctxeval.aevaluate(make_samples(200), TEN)  # warm-up (imports, plugins)
            for name, (n, metrics, large) in WORKLOADS.items():
                samples = make_samples(n, large=large)
                runs = [await one_workload(ticker, samples, metrics) for _ in range(repeat)]
                results[name] = {
                    key: (min if key.endswith(("wall", "cost")) else max)(r[key] for r in runs)
                    for key in runs[0]
                }
                del samples
            group.cancel_scope.cancel()
    results["where"] = ticker.where.most_common(12)
    return results


async def first_call() -> dict[str, Any]:
    """The longest gap of the first ``aevaluate`` of this process (5 000 x 10)."""
    import ctxeval

    aevaluate = ctxeval.aevaluate  # (importing the API is the caller's, not the run's)
    samples = make_samples(5_000)
    with Ticker(None) as ticker:
        async with anyio.create_task_group() as group:
            await group.start(ticker.run)
            _, run = await measure(ticker, lambda: aevaluate(samples, TEN))
            group.cancel_scope.cancel()
    return {"first_gap": run["gap"]}


async def first_llm_call(url: str) -> dict[str, Any]:
    """The longest gap of the first ``aevaluate`` of this process with an LLM metric (20
    samples x 5 chunks against the fake judge at ``url``)."""
    from peer_env import landmark_samples

    import ctxeval
    from ctxeval_llm import LLMConfig

    aevaluate = ctxeval.aevaluate
    llm = LLMConfig(model="openai/fake-judge", api_base=url, api_key="sk-bench")
    samples = landmark_samples(20, 5)
    metrics = ["llm_context_precision_with_reference"]
    with Ticker(None) as ticker:
        async with anyio.create_task_group() as group:
            await group.start(ticker.run)
            evaluation, run = await measure(ticker, lambda: aevaluate(samples, metrics, llm=llm))
            group.cancel_scope.cancel()
    ok = sum(r.status.value == "ok" for r in evaluation.results)
    assert ok == len(samples), f"{len(samples) - ok} rows not ok"
    return {"first_llm_gap": run["gap"]}


def child(args: argparse.Namespace) -> None:
    """Measure in this process and print the figures as one JSON line."""
    stall = args.stall / 1000 if args.where else None
    if args.first_llm:
        out = anyio.run(first_llm_call, args.first_llm, backend=args.backend)
    elif args.first:
        out = anyio.run(first_call, backend=args.backend)
    else:
        out = anyio.run(measure_all, args.repeat, stall, backend=args.backend)
    print(json.dumps(out))


def run_child(
    backend: str, args: argparse.Namespace, path: str | None, first: bool, llm: str | None = None
) -> Any:
    command = [sys.executable, __file__, "--child", "--backend", backend]
    command += ["--repeat", str(args.repeat), "--stall", str(args.stall)]
    command += ["--first"] if first else []
    command += ["--first-llm", llm] if llm else []
    command += ["--where"] if args.where and not first else []
    env = dict(os.environ)
    if path is not None:
        env["PYTHONPATH"] = os.pathsep.join([path, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if done.returncode:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 1000:.1f} ms"


def report(label: str, backend: str, figures: dict[str, Any], first: dict[str, Any]) -> None:
    logger.info(
        "%s, %s (first call: longest gap %s; first LLM call: %s)",
        label, backend, ms(first["first_gap"]), ms(first["first_llm_gap"]),
    )  # fmt: skip
    logger.info(
        "  %-24s %13s %10s %9s %15s %13s %15s",
        "workload", "aevaluate gap", "of it gc", "wall", "summary() holds", "summary cost",
        "asummary() gap",
    )  # fmt: skip
    for name in WORKLOADS:
        r = figures[name]
        logger.info(
            "  %-24s %13s %10s %7.2f s %15s %13s %15s",
            name, ms(r["run_gap"]), ms(r["run_gc"]), r["run_wall"], ms(r["summary_holds"]),
            ms(r["summary_cost"]), ms(r.get("asummary_gap")),
        )  # fmt: skip
    if figures["where"]:
        logger.info("  where the loop was during stalls (samples, innermost first):")
        for site, count in figures["where"]:
            logger.info("    %4d  %s", count, site)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=["asyncio", "trio", "both"], default="both")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--before", metavar="REV", help="also measure git revision REV")
    parser.add_argument("--where", action="store_true", help="name the code during stalls")
    parser.add_argument("--stall", type=float, default=20.0, help="ms; with --where")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--first", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--first-llm", metavar="URL", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:  # (no logging: httpx's line per request would be measured too)
        child(args)
        return
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    backends = ["asyncio", "trio"] if args.backend == "both" else [args.backend]
    judge = subprocess.Popen(
        [sys.executable, str(ROOT / "bench" / "fake_judge_server.py"), "--latency", "0.01"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert judge.stdout is not None
    assert judge.stdin is not None
    url = judge.stdout.readline().strip()
    with tempfile.TemporaryDirectory() as folder:
        versions: list[tuple[str, str | None]] = []
        if args.before:
            archive = subprocess.run(
                ["git", "archive", args.before, "core/ctxeval", "plugins/ctxeval_llm"],
                cwd=ROOT, capture_output=True, check=True,
            )  # fmt: skip
            subprocess.run(["tar", "-x", "-C", folder], input=archive.stdout, check=True)
            paths = [str(Path(folder) / "core"), str(Path(folder) / "plugins")]
            versions.append((f"before ({args.before})", os.pathsep.join(paths)))
        versions.append(("now", None))
        try:
            for label, path in versions:
                for backend in backends:
                    first = run_child(backend, args, path, first=True)
                    first.update(run_child(backend, args, path, first=False, llm=url))
                    report(label, backend, run_child(backend, args, path, first=False), first)
        finally:
            judge.stdin.close()
            judge.wait(timeout=30)


if __name__ == "__main__":
    main()
