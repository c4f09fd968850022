"""Every piece of synchronous plugin work has a time bound, and one Ctrl-C stops any of it.

The worker (:mod:`ctxeval._run.worker`) on its own, on both backends; then whole runs: a
deterministic plugin that loops on one sample, a ``score_batch`` that hangs, a call blocked in
C code, and Ctrl-C on a run whose plugin never returns (from Python and from the command line).
"""

from __future__ import annotations

import contextvars
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import anyio
import attrs
import pytest

import ctxeval
from ctxeval import MetricResult, Sample
from ctxeval._plugins.base import BaseDeterministicMetric, BaseMetric
from ctxeval._run.worker import TIMED_OUT, SyncWorker

HANGS = "3"  # the id of the sample the hostile plugins below never finish
CUT = 1.0
"""The time bound of the tests below: what the hostile calls are cut at, and what the quick
calls next to them get. A quick call is cut only if its thread gets no CPU for this long, so it
is generous for a busy machine, and it costs a test about one to two of it."""


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """An event that calls blocked in C wait on; set at the end, so their threads end."""
    event = threading.Event()
    yield event
    event.set()


def spin(_: object = None) -> None:
    while True:
        pass


def swallower(release: threading.Event) -> Callable[[object], None]:
    """A plugin call that swallows every exception until ``release`` is set."""

    def swallow(_: object) -> None:
        while not release.is_set():
            try:
                while not release.is_set():
                    pass
            except BaseException:  # the hostile plugin under test
                pass

    return swallow


# -- the worker itself


@pytest.mark.anyio
async def test_a_call_past_its_timeout_is_cut_and_the_next_calls_are_made() -> None:
    worker = SyncWorker()
    start = time.monotonic()
    results = await worker.run([str, spin, str, int], [1, None, 2, "x"], CUT)
    took = time.monotonic() - start
    worker.close()
    assert results[0] == "1"
    assert results[1] is TIMED_OUT
    assert results[2] == "2"
    assert isinstance(results[3], ValueError)  # a failure is handed back, not raised
    # not cut before its time (the test's timeout catches one never cut); a lower bound only,
    # which a busy machine cannot break (it can only make the run longer)
    assert took >= CUT


@pytest.mark.anyio
async def test_a_call_blocked_in_c_code_is_left_behind(release: threading.Event) -> None:
    name = f"left-behind-{id(release)}"
    worker = SyncWorker(name)
    results = await worker.run([str, release.wait, str], [1, 3600, 2], CUT)
    assert results == ["1", TIMED_OUT, "2"]
    # two threads of this worker alive: the one left behind, the new one (counted by name:
    # threads of other tests may end meanwhile)
    assert sum(t.name == name for t in threading.enumerate()) == 2
    assert await worker.run([str], [5], CUT) == ["5"]  # the new thread serves the next job
    worker.close()


@pytest.mark.anyio
async def test_a_plugin_that_swallows_the_cut_is_left_behind(release: threading.Event) -> None:
    worker = SyncWorker()
    results = await worker.run([swallower(release), str], [None, 7], CUT)
    worker.close()
    assert results == [TIMED_OUT, "7"]


@pytest.mark.anyio
async def test_cancelling_the_wait_cuts_the_call_in_progress() -> None:
    worker = SyncWorker()
    stopped = threading.Event()

    def loop_until_cut(_: object) -> None:
        try:
            spin()
        finally:
            stopped.set()

    with anyio.move_on_after(0.3):
        await worker.run([loop_until_cut], [None], None)  # no timeout: only the cancel cuts it
    assert stopped.wait(60)  # (returns as soon as the call is cut)
    assert await worker.run([str], [1], None) == ["1"]  # the same thread is free again
    worker.close()


@pytest.mark.anyio
async def test_calls_see_the_context_of_the_caller() -> None:
    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")
    var.set("the caller's")
    worker = SyncWorker()
    assert await worker.run([lambda _: var.get()], [None], 1.0) == ["the caller's"]
    worker.close()


@pytest.mark.anyio
async def test_many_calls_keep_their_order_and_a_late_cut_loses_nothing() -> None:
    worker = SyncWorker()
    values = list(range(20_000))
    results = await worker.run([abs] * len(values), values, 0.002)  # cuts may land anywhere
    worker.close()
    assert len(results) == len(values)
    assert all(r == v or r is TIMED_OUT for r, v in zip(results, values, strict=True))
    # how many calls are cut depends on how often the thread is paused for 2 ms (a busy
    # machine pauses it often): only bounded here, so that a worker that cuts them all fails
    assert sum(r is TIMED_OUT for r in results) < len(values) // 10


# -- whole runs


@attrs.frozen(kw_only=True)
class LoopsOnOne(BaseDeterministicMetric):
    registry_name = "loops_on_one"

    def score(self, sample: Sample) -> MetricResult:
        if sample.id == HANGS:
            spin()
        return MetricResult.ok(1.0)


@attrs.frozen(kw_only=True)
class HangingBatch(BaseDeterministicMetric):
    """A batch form that never returns, and a ``score`` that works."""

    registry_name = "hanging_batch"

    def score(self, sample: Sample) -> MetricResult:
        return MetricResult.ok(0.5)

    def score_batch(self, samples: Sequence[Sample]) -> list[MetricResult]:
        spin()
        raise AssertionError("unreachable")


@attrs.frozen(kw_only=True)
class Waits(BaseMetric):
    """An async metric, so that the run takes the sample-by-sample path."""

    registry_name = "waits"

    async def ascore(self, sample: Sample, ctx: ctxeval.RunContext) -> MetricResult:
        await anyio.sleep(0)
        return MetricResult.ok(1.0)


SAMPLES = [{"id": str(i)} for i in range(8)]


def by_id(evaluation: ctxeval.Evaluation, metric: str) -> dict[str, MetricResult]:
    return {r.sample_id: r for r in evaluation.results if r.metric == metric}


@pytest.mark.parametrize("path", ["chunks", "sample by sample"])
def test_a_deterministic_plugin_that_loops_gets_an_error_row(path: str) -> None:
    metrics: list[ctxeval.Metric] = [LoopsOnOne()] + ([Waits()] if path != "chunks" else [])
    evaluation = ctxeval.evaluate(SAMPLES, metrics, metric_timeout=CUT)
    rows = by_id(evaluation, "loops_on_one")
    assert rows[HANGS].status.value == "error"
    assert f"did not finish within {CUT:g} s (metric_timeout)" in str(rows[HANGS].reason)
    assert all(r.score == 1.0 for i, r in rows.items() if i != HANGS)
    assert len(evaluation.results) == len(SAMPLES) * len(metrics)


def test_a_hanging_score_batch_gives_way_to_score(caplog: pytest.LogCaptureFixture) -> None:
    evaluation = ctxeval.evaluate(SAMPLES, [HangingBatch()], metric_timeout=CUT)
    assert [r.score for r in evaluation.results] == [0.5] * len(SAMPLES)
    assert f"score_batch() did not finish within {CUT:g} s" in caplog.text


def test_without_a_timeout_plugins_run_in_the_callers_thread() -> None:
    seen: list[str] = []

    @attrs.frozen(kw_only=True)
    class Where(BaseDeterministicMetric):
        registry_name = "where"

        def score(self, sample: Sample) -> MetricResult:
            seen.append(threading.current_thread().name)
            return MetricResult.ok(1.0)

    ctxeval.evaluate(SAMPLES[:2], [Where()], metric_timeout=None)
    ctxeval.evaluate(SAMPLES[:2], [Where()])
    assert seen[:2] == [threading.current_thread().name] * 2
    assert seen[2:] == ["ctxeval-sync"] * 2


@pytest.mark.anyio
async def test_the_bound_holds_on_both_backends() -> None:
    evaluation = await ctxeval.aevaluate(SAMPLES, [LoopsOnOne(), Waits()], metric_timeout=CUT)
    rows = by_id(evaluation, "loops_on_one")
    assert rows[HANGS].status.value == "error"
    assert sum(r.status.value == "ok" for r in rows.values()) == len(SAMPLES) - 1


# -- one Ctrl-C


PLUGIN = """
import attrs
from ctxeval import MetricResult
from ctxeval._plugins.base import BaseDeterministicMetric

@attrs.frozen(kw_only=True)
class Endless(BaseDeterministicMetric):
    registry_name = "endless"

    def score(self, sample):
        if sample.id == "2100":  # in the second chunk of 2 048 samples
            import os

            open(os.environ["ENDLESS_MARK"], "w").close()
            while True:
                pass
        return MetricResult.ok(1.0)
"""


def default_ctrl_c() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.fixture
def endless_plugin(tmp_path: Path) -> Path:
    """A site folder with a distribution whose metric ``endless`` loops on sample "2100"."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "endless_metric.py").write_text(PLUGIN)
    dist = site / "endless-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: endless\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[ctxeval.metrics]\nendless = endless_metric:Endless\n")
    return site


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_one_ctrl_c_stops_a_run_whose_plugin_never_returns(
    tmp_path: Path, endless_plugin: Path
) -> None:
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps({"id": str(i)}) + "\n" for i in range(3000)))
    out = tmp_path / "run"
    mark = tmp_path / "looping"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ctxeval",
            "evaluate",
            str(data),
            "-m",
            "endless",
            "--out",
            str(out),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(endless_plugin), "ENDLESS_MARK": str(mark)},
        preexec_fn=default_ctrl_c,
    )
    journal = out / "journal.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not mark.exists():  # in the endless loop
        time.sleep(0.05)
    time.sleep(0.3)
    process.send_signal(signal.SIGINT)  # once (a run that ignored it would time out here)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 130, err
    assert "Traceback" not in err
    assert "--resume" in err
    # deterministic rows are scored again on resume (not journaled); no half-written file
    assert journal.read_text().count("\n") == 1
    assert sorted(p.name for p in out.iterdir()) == ["journal.jsonl"]
