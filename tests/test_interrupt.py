"""Ctrl-C on a blocking evaluate: the journal stays consistent, the log says how to resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import ctxeval

METRIC = r"""
import os, anyio, attrs
from ctxeval import MetricResult
from ctxeval._plugins.base import BaseMetric

@attrs.frozen(kw_only=True)
class Slow(BaseMetric):
    registry_name = "slow"
    async def ascore(self, sample, ctx):
        await anyio.sleep(0.02)
        if int(sample.id) >= int(os.environ.get("SLOW_HOLD_FROM", "1000000")):
            await anyio.sleep_forever()  # held until Ctrl-C: the run cannot end before it
        return MetricResult.ok(int(sample.id) % 7 / 7)
"""

SCRIPT = r"""
import logging, sys, ctxeval
from slowmetric import Slow

logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
samples = [{"id": str(i)} for i in range(400)]
try:
    ctxeval.evaluate(
        samples, [Slow()], journal=sys.argv[1], max_concurrency=4, samples_in_flight=4,
        backend=sys.argv[2],
    )
except KeyboardInterrupt:  # (what a harness catches, whichever the backend)
    print("interrupted")
    raise
print("finished")
"""


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_ctrl_c_leaves_a_journal_that_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, backend: str
) -> None:
    journal = tmp_path / "journal.jsonl"
    script = tmp_path / "run.py"
    script.write_text(SCRIPT)
    (tmp_path / "slowmetric.py").write_text(METRIC)
    monkeypatch.syspath_prepend(str(tmp_path))
    process = subprocess.Popen(
        [sys.executable, str(script), str(journal), backend],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # not inherited SIG_IGN
        env={**os.environ, "SLOW_HOLD_FROM": "100"},  # samples 100 on never end on their own
    )
    deadline = time.monotonic() + 120  # (a bound for a broken run, never reached otherwise)
    while time.monotonic() < deadline:
        if journal.exists() and len(journal.read_text().splitlines()) > 20:
            break
        time.sleep(0.02)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=120)
    assert process.returncode != 0
    assert "finished" not in out
    assert "interrupted" in out, err  # a KeyboardInterrupt, not an exception group
    assert "KeyboardInterrupt" in err
    assert "run again with resume=True" in err

    lines = journal.read_text().splitlines()
    saved = [json.loads(line) for line in lines[1:]]  # every line whole and readable
    assert 20 <= len(saved) <= 100
    assert all(row["status"] == "ok" for row in saved)

    from slowmetric import Slow  # type: ignore[import-not-found]

    slow = Slow()
    samples = [{"id": str(i)} for i in range(400)]
    resumed = ctxeval.evaluate(samples, [slow], journal=journal, resume=True, max_concurrency=64)
    assert [r.score for r in resumed.results] == [i % 7 / 7 for i in range(400)]
    assert len(journal.read_text().splitlines()) == 401
