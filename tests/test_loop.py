"""A run leaves its event loop free: the loop's other tasks run between the chunks of the
deterministic fast path, the chunks follow how long they hold the loop, the summary of an
``aevaluate`` is computed in a worker thread, with the same numbers as ``summary()``, and so
are the plugins' discovery and the import of the HTTP client's library.

No test here measures time (``bench/loop_lag.py`` does): they count.
"""

from __future__ import annotations

import functools
import sys
import threading
from typing import Any

import anyio
import anyio.lowlevel
import attrs
import pytest

import ctxeval
from ctxeval import Evaluation, MetricResult, Sample
from ctxeval._plugins.base import BaseDeterministicMetric
from ctxeval._run import api, fastpath
from ctxeval_llm import LLMConfig
from ctxeval_llm._http import choice as http_choice
from fakes.openai_server import FakeOpenAI
from llm_judge import Judge

pytestmark = pytest.mark.anyio

METRICS = ["id_based_context_precision", "id_based_context_recall", "id_mrr"]


def _rows(n: int) -> list[dict[str, Any]]:
    return [
        {
            "user_input": f"question {i}",
            "retrieved_context_ids": [f"d{(i * 7 + k) % 13}" for k in range(5)],
            "reference_context_ids": [f"d{(i + k) % 13}" for k in range(1 + i % 3)],
        }
        for i in range(n)
    ]


class Ticker:
    """A task of the loop that counts how often it got to run."""

    def __init__(self) -> None:
        self.count = 0

    async def run(self) -> None:
        while True:
            await anyio.lowlevel.checkpoint()
            self.count += 1


@attrs.frozen(kw_only=True)
class Watched(BaseDeterministicMetric):
    """Scores 1.0; each ``score_batch`` call notes how often the ticker had run by then."""

    registry_name = "watched"
    requires = ("retrieved_context_ids",)
    ticker: Ticker = attrs.field(eq=False)
    seen: list[int] = attrs.field(eq=False, factory=list)

    def score(self, sample: Sample) -> MetricResult:
        return MetricResult.ok(1.0)

    def score_batch(self, samples: list[Sample]) -> list[MetricResult]:
        self.seen.append(self.ticker.count)
        return [MetricResult.ok(1.0)] * len(samples)


@pytest.mark.parametrize("metric_timeout", [None, 60.0], ids=["loop-thread", "worker"])
async def test_the_loop_runs_other_tasks_between_chunks(
    anyio_backend: str, monkeypatch: pytest.MonkeyPatch, metric_timeout: float | None
) -> None:
    monkeypatch.setattr(fastpath, "CHUNK", 4)
    ticker = Ticker()
    metric = Watched(ticker=ticker)
    async with anyio.create_task_group() as group:
        group.start_soon(ticker.run)
        evaluation = await ctxeval.aevaluate(_rows(20), [metric], metric_timeout=metric_timeout)
        group.cancel_scope.cancel()
    assert len(metric.seen) >= 5  # chunks of at most 4 (smaller when a chunk is slow)
    assert all(a < b for a, b in zip(metric.seen, metric.seen[1:], strict=False))
    assert ticker.count > metric.seen[-1]  # and after the last one, before the run returns
    assert evaluation.ok


def _chunk_sizes(evaluation: Evaluation, width: int) -> list[int]:
    return [len(part) // width for part in evaluation._parts]


def test_chunks_grow_to_the_largest_while_they_hold_the_loop_briefly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(fastpath, "LOOP_TIME", 1e9)
    n = 256 + 512 + 1024 + 2048 + 2048 + 100
    evaluation = ctxeval.evaluate(_rows(n), METRICS)
    assert _chunk_sizes(evaluation, len(METRICS)) == [256, 512, 1024, 2048, 2048, 100]


def test_chunks_shrink_when_they_hold_the_loop_long(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fastpath, "LOOP_TIME", 1e-12)
    data = _rows(260)
    evaluation = ctxeval.evaluate(data, METRICS)
    assert _chunk_sizes(evaluation, len(METRICS)) == [256, 1, 1, 1, 1]
    monkeypatch.undo()
    whole = ctxeval.evaluate(data, METRICS)
    assert [r.to_dict() for r in evaluation.results] == [r.to_dict() for r in whole.results]


async def test_aevaluate_computes_the_summary_in_a_worker_thread(
    anyio_backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads: list[int] = []
    summaries = Evaluation._summaries

    def noting(self: Evaluation) -> Any:
        threads.append(threading.get_ident())
        return summaries(self)

    monkeypatch.setattr(Evaluation, "_summaries", noting)
    data = _rows(3000)
    evaluation = await ctxeval.aevaluate(data, METRICS)
    assert len(threads) == 1
    assert threads[0] != threading.get_ident()
    summary = evaluation.summary()  # computed already: not again
    assert len(threads) == 1
    monkeypatch.undo()
    expected = ctxeval.evaluate(data, METRICS).summary()
    assert summary == expected  # to the bit: the same seed, the same draws
    assert [s.ci95 for s in summary.values()] == [s.ci95 for s in expected.values()]
    assert all(s.ci95 is not None for s in summary.values())


async def test_asummary_is_summary_computed_off_the_loop(anyio_backend: str) -> None:
    evaluation = ctxeval.evaluate(_rows(2500), METRICS)
    copy = evaluation.with_labels(None)  # the same rows, no summary yet
    first = await copy.asummary()
    assert first == evaluation.summary()
    assert await copy.asummary() == first == copy.summary()


async def test_the_plugins_are_discovered_in_a_worker_thread(
    anyio_backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads: list[int] = []
    real = ctxeval.default_registry()

    @functools.cache
    def discover() -> ctxeval.Registry:
        threads.append(threading.get_ident())
        return real

    monkeypatch.setattr(api, "default_registry", discover)
    await ctxeval.aevaluate(_rows(3), METRICS)
    async with ctxeval.stream(_rows(3), METRICS) as rows:
        assert len([row async for row in rows]) == 9
    assert len(threads) == 1
    assert threads[0] != threading.get_ident()


async def test_the_http_client_library_is_imported_in_a_worker_thread(
    anyio_backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # aiohttp's import loads the system's certificates (0.1 to 0.2 s): on the loop, it would
    # stall every task of a host application; a stand-in notes the thread importing it
    marker = "fakes.import_marker"
    monkeypatch.delitem(sys.modules, marker, raising=False)
    monkeypatch.setattr(http_choice, "_MODULES", {"aiohttp": marker, "httpx": marker})
    sample = {"id": "s", "user_input": "q", "reference": "r", "retrieved_contexts": ["c", "d"]}
    with FakeOpenAI(Judge(verdicts={"c": 1, "d": 0})) as server:
        llm = LLMConfig(model="openai/x", api_base=server.url, api_key="sk-test-0000")
        evaluation = await ctxeval.aevaluate(
            [sample], ["llm_context_precision_with_reference"], llm=llm
        )
    [row] = evaluation.results
    assert row.score == 1.0, row.to_dict()
    imported_in = sys.modules[marker].IMPORTED_IN
    assert imported_in != threading.get_ident()  # a worker thread
