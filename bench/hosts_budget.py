"""One budget across a host harness's threads: ctxeval's LLM metric inside MLflow GenAI and
DeepEval, side by side with ``ctxeval.evaluate`` on the same rows.

    python bench/hosts_budget.py [--samples 1000] [--chunks 2] [--latency 0.02]
                                 [--concurrency 16] [--hosts mlflow,deepeval] [--repeat 3]
                                 [--store-dir DIR]

For each host, against the fake OpenAI server (bench/fake_judge_server.py, its own process, a
fresh one per run so that its high-water mark of requests in flight is that run's):

1. ``ctxeval.evaluate`` of ``context_precision`` with ``max_concurrency``: wall time, requests;
2. the host's own cost: the same host evaluate with a metric that returns a constant;
3. the host with ctxeval's adapter (``ctxeval_hosts.mlflow.scorers`` through
   ``mlflow.genai.evaluate`` with ``MLFLOW_GENAI_EVAL_MAX_WORKERS=32``;
   ``ctxeval_hosts.deepeval.metrics`` through ``deepeval.evaluate`` in its async mode with
   ``max_concurrent=32``), one session with ``max_concurrency`` and an answer cache;
4. the same again with the same cache.

What must hold: run 3 sends exactly run 1's requests, never more than ``max_concurrency`` in
flight, and takes at most run 2's time + 1.3 x run 1's; run 4 sends none. The four runs are
repeated (``--repeat``, one after the other in each repeat, so they see the same load); the
time check is made on the best and on the median of the repeats. Each MLflow run has a store of
its own (MLflow's time grows with the traces already in its store), and the host alone runs
first in even repeats, last in odd ones.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
for name, value in {
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "DO_NOT_TRACK": "true",
    "DEEPEVAL_TELEMETRY_OPT_OUT": "YES",
    "DEEPEVAL_DISABLE_DOTENV": "1",
    "DEEPEVAL_NO_INSPECT_PROMPT": "1",
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "MLFLOW_GENAI_EVAL_MAX_WORKERS": "32",
    # 32 row threads writing traces and assessments to a local SQLite store: SQLAlchemy's default
    # pool (5 + 10 overflow) makes them wait 30 s for a connection, then drop the trace.
    "MLFLOW_SQLALCHEMYSTORE_POOL_SIZE": "64",
    "MLFLOW_SQLALCHEMYSTORE_MAX_OVERFLOW": "64",
    "MLFLOW_GENAI_EVAL_SKIP_TRACE_VALIDATION": "true",
    "TQDM_DISABLE": "1",
}.items():
    os.environ.setdefault(name, value)

import ctxeval  # noqa: E402
from ctxeval import SQLiteCache  # noqa: E402
from ctxeval_llm import LLMConfig  # noqa: E402


@contextmanager
def server(latency: float) -> Iterator[tuple[str, Callable[[], dict[str, Any]]]]:
    process = subprocess.Popen(
        [sys.executable, str(HERE / "fake_judge_server.py"), "--latency", str(latency)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    assert process.stdin is not None
    url = process.stdout.readline().strip()

    def stats() -> dict[str, Any]:
        with urllib.request.urlopen(url.removesuffix("/v1") + "/stats") as answer:
            return dict(json.load(answer))

    try:
        yield url, stats
    finally:
        process.stdin.close()
        process.wait(timeout=30)


def rows(samples: int, chunks: int) -> list[dict[str, Any]]:
    return [
        {
            "id": f"q{i}",
            "user_input": f"Question {i}: where is the tower?",
            "reference": f"Tower {i} is in Paris.",
            "retrieved_contexts": [
                f"Chunk {j} of question {i}: about Paris." for j in range(chunks)
            ],
        }
        for i in range(samples)
    ]


def statuses(evaluation: Any) -> dict[str, int]:
    """The rows the adapter scored, by status (an error row: the host gave no retrieval)."""
    counts: dict[str, int] = {}
    for row in evaluation.results:
        counts[str(row.status)] = counts.get(str(row.status), 0) + 1
    return counts


def timed(run: Callable[[], object]) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def baseline(samples: list[dict[str, Any]], latency: float, concurrency: int) -> dict[str, Any]:
    with server(latency) as (url, stats):
        llm = LLMConfig(model="openai/fake-judge", api_base=url, api_key="sk-bench")
        seconds = timed(
            lambda: ctxeval.evaluate(
                samples, ["context_precision"], llm=llm, max_concurrency=concurrency
            )
        )
        return {"seconds": seconds, **stats()}


# --- MLflow -------------------------------------------------------------------------------------


def mlflow_runs(
    samples: list[dict[str, Any]], latency: float, concurrency: int, folder: Path, repeat: int = 0
) -> dict[str, Any]:
    """The host alone, the host with the adapter and the cached re-run, each on a store of its
    own (a new SQLite file: MLflow's time grows with the traces already in its store, so runs
    sharing one store would each pay for the ones before), the host alone first in even
    repeats and last in odd ones."""
    import mlflow
    from mlflow.entities import Document
    from mlflow.genai.scorers import scorer

    from ctxeval_hosts.mlflow import scorers

    stores = iter(range(1_000))

    def fresh_store() -> None:
        """A new store, MLflow's first evaluate on it untimed (its tables, imports)."""
        where = folder / f"store-{next(stores)}"
        where.mkdir()
        # ?timeout=: SQLite waits that long for a lock instead of 5 s; with 32 row threads
        # writing traces, the default loses some (MLflow then hands the scorer a row without
        # its spans).
        mlflow.set_tracking_uri(f"sqlite:///{where / 'mlflow.sqlite'}?timeout=300")
        mlflow.create_experiment("hosts-budget", artifact_location=(where / "a").as_uri())
        mlflow.set_experiment("hosts-budget")
        mlflow.genai.evaluate(data=data[:2], predict_fn=app, scorers=[constant])

    by_question = {s["user_input"]: s for s in samples}

    @mlflow.trace(span_type="RETRIEVER")
    def retrieve(question: str) -> list[Document]:
        return [Document(page_content=t) for t in by_question[question]["retrieved_contexts"]]

    def app(question: str) -> str:
        retrieve(question)
        return "an answer"

    data = [
        {
            "inputs": {"question": s["user_input"]},
            "expectations": {"expected_response": s["reference"]},
        }
        for s in samples
    ]

    @scorer
    def constant(inputs: Any, outputs: Any, expectations: Any, trace: Any) -> float:
        return 1.0

    out: dict[str, Any] = {}

    def host_only() -> None:
        fresh_store()
        out["host_only"] = timed(
            lambda: mlflow.genai.evaluate(data=data, predict_fn=app, scorers=[constant])
        )

    if repeat % 2 == 0:
        host_only()
    cache = folder / "mlflow-cache.sqlite"
    with server(latency) as (url, stats):
        llm = LLMConfig(model="openai/fake-judge", api_base=url, api_key="sk-bench")
        made = scorers(
            ["context_precision"], llm=llm, max_concurrency=concurrency, cache=SQLiteCache(cache)
        )
        results: list[Any] = []
        fresh_store()
        out["adapter"] = timed(
            lambda: results.append(mlflow.genai.evaluate(data=data, predict_fn=app, scorers=made))
        )
        frame = results[0].result_df
        errors = frame.get("context_precision/error_message")
        out["host_rows"] = {
            "rows in MLflow's result": len(frame),
            "error feedbacks": 0 if errors is None else int(errors.notna().sum()),
        }
        made[0].session.close()
        out["adapter_stats"] = stats()
        out["statuses"] = statuses(made[0].session.evaluation())
        again = scorers(
            ["context_precision"], llm=llm, max_concurrency=concurrency, cache=SQLiteCache(cache)
        )
        fresh_store()
        out["rerun"] = timed(
            lambda: mlflow.genai.evaluate(data=data, predict_fn=app, scorers=again)
        )
        again[0].session.close()
        out["rerun_requests"] = stats()["requests"] - out["adapter_stats"]["requests"]
    if repeat % 2 == 1:
        host_only()
    return out


# --- DeepEval -----------------------------------------------------------------------------------


def deepeval_runs(
    samples: list[dict[str, Any]], latency: float, concurrency: int, folder: Path, repeat: int = 0
) -> dict[str, Any]:
    from deepeval import evaluate
    from deepeval.evaluate.configs import AsyncConfig, CacheConfig, DisplayConfig
    from deepeval.metrics import BaseMetric
    from deepeval.test_case import LLMTestCase

    from ctxeval_hosts.deepeval import metrics

    class Constant(BaseMetric):  # type: ignore[misc]
        def __init__(self, threshold: float = 0.5) -> None:
            self.threshold = threshold

        def measure(self, test_case: Any, *args: Any, **kwargs: Any) -> float:
            self.score, self.success = 1.0, True
            return 1.0

        async def a_measure(self, test_case: Any, *args: Any, **kwargs: Any) -> float:
            return self.measure(test_case)

        def is_successful(self) -> bool:
            return True

        @property
        def __name__(self) -> str:
            return "constant"

    cases = [
        LLMTestCase(
            input=s["user_input"], actual_output="an answer", expected_output=s["reference"],
            retrieval_context=s["retrieved_contexts"], name=s["id"],
        )
        for s in samples
    ]  # fmt: skip
    quiet = DisplayConfig(show_indicator=False, print_results=False, inspect_after_run=False)
    fast = AsyncConfig(run_async=True, max_concurrent=32)
    # write_cache=False: by default DeepEval rewrites its whole test run and its cache (JSON,
    # fsync) after every test case, a cost quadratic in the cases (a constant metric: 231 s for
    # 1 000 cases) that grows with each case's reason; both runs here go without it.
    nocache = CacheConfig(write_cache=False, use_cache=False)
    os.chdir(folder)  # DeepEval writes its .deepeval folder here
    out: dict[str, Any] = {}
    out["host_only"] = timed(
        lambda: evaluate(
            cases, [Constant()], async_config=fast, display_config=quiet, cache_config=nocache
        )
    )
    cache = folder / "deepeval-cache.sqlite"
    with server(latency) as (url, stats):
        llm = LLMConfig(model="openai/fake-judge", api_base=url, api_key="sk-bench")
        made = metrics(
            ["context_precision"], llm=llm, max_concurrency=concurrency, cache=SQLiteCache(cache)
        )
        out["adapter"] = timed(
            lambda: evaluate(
                cases, made, async_config=fast, display_config=quiet, cache_config=nocache
            )
        )
        made[0].shared.close()
        out["adapter_stats"] = stats()
        out["statuses"] = statuses(made[0].shared.evaluation())
        again = metrics(
            ["context_precision"], llm=llm, max_concurrency=concurrency, cache=SQLiteCache(cache)
        )
        out["rerun"] = timed(
            lambda: evaluate(
                cases, again, async_config=fast, display_config=quiet, cache_config=nocache
            )
        )
        again[0].shared.close()
        out["rerun_requests"] = stats()["requests"] - out["adapter_stats"]["requests"]
    return out


def report(
    host: str, bases: list[dict[str, Any]], runs: list[dict[str, Any]], concurrency: int
) -> bool:
    """The repeats side by side: each repeat ran evaluate, the host alone and the host with the
    adapter one after the other, so a repeat's three times saw the same load; the time check
    holds on the best and on the median of the repeats, and in each repeat."""
    seconds = [b["seconds"] for b in bases]
    host_only = [r["host_only"] for r in runs]
    adapter = [r["adapter"] for r in runs]
    rerun = [r["rerun"] for r in runs]
    limits = [h + 1.3 * e for h, e in zip(host_only, seconds, strict=True)]
    checks = {
        "same requests (every repeat)": all(
            r["adapter_stats"]["requests"] == b["requests"]
            for r, b in zip(runs, bases, strict=True)
        ),
        f"<= {concurrency} in flight (every repeat)": all(
            r["adapter_stats"]["peak_in_flight"] <= concurrency for r in runs
        ),
        "time within host + 1.3x (best)": min(adapter) <= min(host_only) + 1.3 * min(seconds),
        "time within host + 1.3x (median)": _median(adapter)
        <= _median(host_only) + 1.3 * _median(seconds),
        "re-run sends none (every repeat)": all(r["rerun_requests"] == 0 for r in runs),
    }
    print(f"\n{host}: {len(runs)} repeats, seconds as best / median (each repeat: ...)")
    for what, values in (
        ("ctxeval.evaluate", seconds),
        (f"{host} + constant scorer (host's own cost)", host_only),
        (f"{host} + ctxeval adapter", adapter),
        ("limit: host + 1.3x evaluate", limits),
        ("re-run, same cache", rerun),
    ):
        each = ", ".join(f"{v:.2f}" for v in values)
        print(f"  {what:44} {min(values):8.2f} / {_median(values):8.2f}  ({each})")
    for r, b in zip(runs, bases, strict=True):
        stats = r["adapter_stats"]
        print(f"  requests evaluate / adapter {b['requests']} / {stats['requests']}, peak "
              f"{b['peak_in_flight']} / {stats['peak_in_flight']} in flight, re-run "
              f"{r['rerun_requests']}; rows {r['statuses']} {r.get('host_rows', '')}")  # fmt: skip
    for what, ok in checks.items():
        print(f"  {'ok  ' if ok else 'FAIL'} {what}")
    return all(checks.values())


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--chunks", type=int, default=2)
    parser.add_argument("--latency", type=float, default=0.02)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--hosts", default="mlflow,deepeval")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--store-dir",
        default=None,
        help="where the MLflow stores and caches go (default: the system's temporary folder; "
        "/dev/shm takes the disk's fsync out of MLflow's own time)",
    )
    args = parser.parse_args()
    samples = rows(args.samples, args.chunks)
    print(f"{args.samples} samples x {args.chunks} chunks, context_precision, latency "
          f"{args.latency * 1000:.0f} ms, max_concurrency {args.concurrency}, "
          f"{args.repeat} repeats")  # fmt: skip
    hosts = args.hosts.split(",")
    bases: dict[str, list[dict[str, Any]]] = {host: [] for host in hosts}
    runs: dict[str, list[dict[str, Any]]] = {host: [] for host in hosts}
    with tempfile.TemporaryDirectory(prefix="ctxeval-hosts-bench-", dir=args.store_dir) as tmp:
        for repeat in range(args.repeat):
            for host in hosts:
                folder = Path(tmp) / f"{host}-{repeat}"
                folder.mkdir()
                run = mlflow_runs if host == "mlflow" else deepeval_runs
                bases[host].append(baseline(samples, args.latency, args.concurrency))
                runs[host].append(run(samples, args.latency, args.concurrency, folder, repeat))
                base, made = bases[host][-1], runs[host][-1]
                print(f"repeat {repeat + 1} {host}: evaluate {base['seconds']:.2f} s "
                      f"({base['requests']} requests), host {made['host_only']:.2f} s, adapter "
                      f"{made['adapter']:.2f} s ({made['adapter_stats']['requests']} requests, "
                      f"peak {made['adapter_stats']['peak_in_flight']}), re-run "
                      f"{made['rerun']:.2f} s ({made['rerun_requests']} requests)",
                      flush=True)  # fmt: skip
    good = True
    for host in hosts:
        good = report(host, bases[host], runs[host], args.concurrency) and good
    sys.exit(0 if good else 1)


if __name__ == "__main__":
    main()
