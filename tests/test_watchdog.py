"""A plugin coroutine that holds the event loop (blocking code inside ``async def``) is cut: past
``metric_timeout`` the run stops with an error naming the plugin, and one Ctrl-C stops the run
(:mod:`ctxeval._run.watchdog`), on asyncio and trio, with the loop in the main thread or not.

No timing is asserted: the hostile plugins hold the loop for far longer than the bounds the
subprocesses get (a run that is not cut fails on its subprocess's timeout), and the in-process
ones loop for a minute at most before they give up on their own (a run that is not cut fails on
its outcome).
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import anyio
import attrs
import pytest

import ctxeval
from ctxeval import MetricResult, Sample
from ctxeval._plugins.base import BaseMetric
from ctxeval._run.watchdog import EventLoopBlockedError, _on_sigint

CUT = 1.0
"""The ``metric_timeout`` of the runs below."""

HOLD = 600
"""Seconds the hostile plugins of the subprocesses hold the loop, were they not cut."""

LIMIT = 60
"""Seconds a subprocess gets (far less than HOLD, far more than a cut run takes)."""

PLUGIN = f"""
import os, time, attrs
from ctxeval import MetricResult
from ctxeval._plugins.base import BaseMetric

@attrs.frozen(kw_only=True)
class Blocks(BaseMetric):
    '''Holds the event loop on sample BLOCK_ON: time.sleep or a busy loop inside async def.'''

    registry_name = "blocks"
    how: str = "sleep"

    async def ascore(self, sample, ctx):
        if sample.id == os.environ.get("BLOCK_ON"):
            open(os.environ["BLOCKING_MARK"], "w").close()
            if self.how == "sleep":
                time.sleep({HOLD})
            else:
                end = time.monotonic() + {HOLD}
                while time.monotonic() < end:
                    pass
        return MetricResult.ok(1.0)
"""

SCRIPT = """
import logging, sys, ctxeval
from blocks_metric import Blocks

logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
how, backend, journal, timeout = sys.argv[1:]
samples = [{"id": str(i)} for i in range(8)]
ctxeval.evaluate(
    samples, [Blocks(how=how)], backend=backend, journal=journal,
    metric_timeout=float(timeout) if timeout != "none" else None,
)
print("finished")
"""

SAMPLES = [{"id": str(i)} for i in range(8)]


def default_ctrl_c() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # (not an inherited SIG_IGN)


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """A folder with the plugin's module and a distribution registering it as ``blocks``."""
    folder = tmp_path / "site"
    folder.mkdir()
    (folder / "blocks_metric.py").write_text(PLUGIN)
    dist = folder / "blocks-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: blocks\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[ctxeval.metrics]\nblocks = blocks_metric:Blocks\n")
    return folder


def environment(site: Path, mark: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(site), "BLOCK_ON": "3", "BLOCKING_MARK": str(mark)}


def journaled(journal: Path) -> dict[str, str]:
    """Sample id -> status of the rows in ``journal``."""
    lines = journal.read_text().splitlines()[1:]
    return {row["sample_id"]: row["status"] for row in map(json.loads, lines)}


def wait_for(mark: Path, process: subprocess.Popen[str]) -> None:
    """Until the plugin holds the loop (or the process ended: the test then fails)."""
    deadline = time.monotonic() + 120  # (a bound for a broken run, never reached otherwise)
    while not mark.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert mark.exists(), process.communicate(timeout=LIMIT)


# -- past metric_timeout: the run stops, naming the plugin


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@pytest.mark.parametrize("how", ["sleep", "busy"])
def test_a_plugin_holding_the_loop_past_the_timeout_stops_the_run_naming_it(
    tmp_path: Path, site: Path, monkeypatch: pytest.MonkeyPatch, how: str, backend: str
) -> None:
    script = tmp_path / "run.py"
    script.write_text(SCRIPT)
    journal = tmp_path / "journal.jsonl"
    done = subprocess.run(
        [sys.executable, str(script), how, backend, str(journal), str(CUT)],
        capture_output=True,
        text=True,
        env=environment(site, tmp_path / "mark"),
        timeout=LIMIT,  # (the plugin holds the loop for HOLD seconds unless it is cut)
    )
    assert done.returncode != 0
    assert "finished" not in done.stdout
    err = done.stderr
    lines = "17" if how == "sleep" else "(20|21)"  # where the plugin was: its sleep, its loop
    named = (
        r"EventLoopBlockedError: metric 'blocks' "
        rf"\(blocks_metric\.Blocks, at blocks_metric\.py:{lines} in ascore\)"
    )
    assert re.search(named, err), err
    assert f"held the event loop for more than {CUT:g} s (metric_timeout)" in err
    assert "await anyio.to_thread.run_sync(...)" in err
    # the rows finished before are journaled, the held one is not: fixed, the run resumes
    rows = journaled(journal)
    assert "3" not in rows
    assert set(rows.values()) <= {"ok"}
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delenv("BLOCK_ON", raising=False)
    from blocks_metric import Blocks  # type: ignore[import-not-found]

    resumed = ctxeval.evaluate(SAMPLES, [Blocks(how=how)], journal=journal, resume=True)
    assert [r.score for r in resumed.results] == [1.0] * len(SAMPLES)
    assert len(journal.read_text().splitlines()) == 1 + len(SAMPLES)


# -- one Ctrl-C


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize("how", ["sleep", "busy"])
def test_one_ctrl_c_stops_a_command_line_run_whose_plugin_holds_the_loop(
    tmp_path: Path, site: Path, how: str
) -> None:
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(s) + "\n" for s in SAMPLES))
    out = tmp_path / "run"
    mark = tmp_path / "mark"
    process = subprocess.Popen(
        [
            *(sys.executable, "-m", "ctxeval", "evaluate", str(data)),
            *("-m", f"blocks:how={how}", "--out", str(out)),  # (metric_timeout: an hour)
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment(site, mark),
        preexec_fn=default_ctrl_c,
    )
    wait_for(mark, process)
    process.send_signal(signal.SIGINT)  # once (a run that ignored it would time out here)
    _, err = process.communicate(timeout=LIMIT)
    assert process.returncode == 130, err
    assert "Traceback" not in err
    assert "--resume" in err
    rows = journaled(out / "journal.jsonl")
    assert "3" not in rows
    assert {"0", "1", "2"} <= set(rows)  # (scored before it, on asyncio's ordered queue)
    assert set(rows.values()) == {"ok"}
    assert sorted(p.name for p in out.iterdir()) == ["journal.jsonl"]


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_one_ctrl_c_stops_an_evaluate_whose_plugin_holds_the_loop_without_a_timeout(
    tmp_path: Path, site: Path, backend: str
) -> None:
    script = tmp_path / "run.py"
    script.write_text(SCRIPT)
    journal = tmp_path / "journal.jsonl"
    mark = tmp_path / "mark"
    process = subprocess.Popen(
        [sys.executable, str(script), "sleep", backend, str(journal), "none"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment(site, mark),
        preexec_fn=default_ctrl_c,
    )
    wait_for(mark, process)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=LIMIT)
    assert process.returncode != 0
    assert "finished" not in out
    assert "KeyboardInterrupt" in err
    assert "EventLoopBlockedError" not in err
    rows = journaled(journal)
    assert "3" not in rows
    assert set(rows.values()) <= {"ok"}


# -- in this process


@attrs.frozen(kw_only=True)
class Spins(BaseMetric):
    """Holds the loop on sample "3" with a Python loop (a minute at most)."""

    registry_name = "spins"
    swallow: bool = False
    """Catch every exception in the loop, the cut included, and return a score."""

    async def ascore(self, sample: Sample, ctx: ctxeval.RunContext) -> MetricResult:
        if sample.id == "3":
            end = time.monotonic() + 60
            while time.monotonic() < end:
                try:
                    while time.monotonic() < end:
                        pass
                except BaseException:
                    if not self.swallow:
                        raise
                    break
        return MetricResult.ok(1.0)


@attrs.frozen(kw_only=True)
class Sleeps(BaseMetric):
    """Holds the loop on sample "3" in ``time.sleep`` (C code) for ``seconds``."""

    registry_name = "sleeps"
    seconds: float = 3.0

    async def ascore(self, sample: Sample, ctx: ctxeval.RunContext) -> MetricResult:
        if sample.id == "3":
            time.sleep(self.seconds)
        return MetricResult.ok(1.0)


@pytest.mark.anyio
async def test_the_cut_holds_on_the_callers_loop(anyio_backend: str) -> None:
    with pytest.raises(EventLoopBlockedError, match="metric 'spins'") as caught:
        await ctxeval.aevaluate(SAMPLES, [Spins()], metric_timeout=CUT)
    assert caught.value.metric == "spins"


def test_a_plugin_that_swallows_the_cut_still_stops_the_run() -> None:
    with pytest.raises(EventLoopBlockedError, match="metric 'spins'"):
        ctxeval.evaluate(SAMPLES, [Spins(swallow=True)], metric_timeout=CUT)


@pytest.mark.anyio
@pytest.mark.parametrize("inner", ["asyncio", "trio"])
async def test_a_loop_in_another_thread_is_cut_too(anyio_backend: str, inner: str) -> None:
    # evaluate() where a loop runs already: the run gets a loop of its own in a worker thread
    with pytest.raises(EventLoopBlockedError, match="metric 'spins'"):
        ctxeval.evaluate(SAMPLES, [Spins()], metric_timeout=CUT, backend=inner)


@pytest.mark.anyio
async def test_in_another_thread_a_call_blocked_in_c_is_cut_when_it_returns(
    anyio_backend: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="ctxeval._run.watchdog")
    with pytest.raises(EventLoopBlockedError, match="metric 'sleeps'"):
        ctxeval.evaluate(SAMPLES, [Sleeps(seconds=3 * CUT)], metric_timeout=CUT)
    assert "metric 'sleeps' has held the event loop" in caplog.text
    assert "blocked in C code that Python cannot interrupt" in caplog.text


@pytest.mark.anyio
async def test_a_loop_held_by_other_code_is_not_blamed_on_a_plugin(anyio_backend: str) -> None:
    started = anyio.Event()

    @attrs.frozen(kw_only=True)
    class Awaits(BaseMetric):
        registry_name = "awaits"

        async def ascore(self, sample: Sample, ctx: ctxeval.RunContext) -> MetricResult:
            started.set()
            await anyio.sleep(0.01)
            return MetricResult.ok(1.0)

    async def hold() -> None:
        await started.wait()
        time.sleep(3 * CUT)  # the caller's own code holds the loop, with plugin calls pending

    async with anyio.create_task_group() as group:
        group.start_soon(hold)
        evaluation = await ctxeval.aevaluate(SAMPLES, [Awaits()], metric_timeout=CUT)
    assert len(evaluation.results) == len(SAMPLES)  # (rows, maybe timed out: not stopped)


def test_a_run_puts_the_sigint_handler_back_and_leaves_no_thread() -> None:
    before = signal.getsignal(signal.SIGINT)
    during: list[object] = []

    @attrs.frozen(kw_only=True)
    class Looks(BaseMetric):
        registry_name = "looks"

        async def ascore(self, sample: Sample, ctx: ctxeval.RunContext) -> MetricResult:
            during.append(signal.getsignal(signal.SIGINT))
            return MetricResult.ok(1.0)

    others = set(threading.enumerate())  # (another test's open Session may keep its own)
    ctxeval.evaluate(SAMPLES, [Looks()])
    assert during[0] is _on_sigint
    assert signal.getsignal(signal.SIGINT) is before
    for thread in set(threading.enumerate()) - others:
        if thread.name == "ctxeval-watchdog":
            thread.join(60)  # (ends at its next look)
            assert not thread.is_alive()


def test_a_command_line_run_whose_plugin_holds_the_loop_past_the_timeout_exits_2(
    tmp_path: Path, site: Path
) -> None:
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(s) + "\n" for s in SAMPLES))
    out = tmp_path / "run"
    done = subprocess.run(
        [
            *(sys.executable, "-m", "ctxeval", "evaluate", str(data)),
            *("-m", "blocks:how=sleep", "--out", str(out), "--metric-timeout", str(CUT)),
        ],
        capture_output=True,
        text=True,
        env=environment(site, tmp_path / "mark"),
        timeout=LIMIT,
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert "metric 'blocks'" in done.stderr
    assert "--resume" in done.stderr
    assert "3" not in journaled(out / "journal.jsonl")
