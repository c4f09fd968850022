"""The command line killed with SIGKILL at several points; --resume finishes the run with the
results of an uninterrupted one, and no completed call is sent again (journal + cache)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from fakes.openai_server import FakeOpenAI
from llm_judge import Judge

ROWS = [
    {
        "id": f"s{i}",
        "user_input": "q",
        "reference": f"reference {i}",
        "retrieved_contexts": ["useful", f"useless {i}"],
        "retrieved_context_ids": ["x", str(i)],
        "reference_context_ids": [str(i)],
    }
    for i in range(30)
]
CONCURRENCY = 3


def scores(folder: Path) -> list[tuple[str, str, Any]]:
    lines = (folder / "results.jsonl").read_text().splitlines()
    return [(r["sample_id"], r["metric"], r["score"]) for r in map(json.loads, lines)]


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize("kill_after", [2, 9, 21])
def test_sigkill_then_resume(tmp_path: Path, kill_after: int) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    with FakeOpenAI(Judge(verdicts={"useful": 1}), latency=0.03) as server:
        base = [sys.executable, "-m", "ctxeval", "evaluate", str(data), "-m", "context_precision",
                "-m", "id_mrr", "--model", "openai/judge", "--api-base", server.url,
                "--max-concurrency", str(CONCURRENCY), "-q"]  # fmt: skip
        env = {**os.environ, "OPENAI_API_KEY": "sk-kill", "XDG_CACHE_HOME": str(tmp_path / "cache")}
        full = subprocess.run(
            [*base, "--out", str(tmp_path / "full"), "--no-cache"],
            env=env,
            capture_output=True,
            text=True,
        )
        assert full.returncode == 0, full.stderr
        uninterrupted_requests = server.count

        out = tmp_path / "run"
        process = subprocess.Popen(
            [*base, "--out", str(out)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        journal = out / "journal.jsonl"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if (
                journal.exists()
                and journal.read_text(errors="replace").count("llm_context") >= kill_after
            ):
                break
            time.sleep(0.005)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
        assert process.returncode == -signal.SIGKILL
        killed_at = server.count - uninterrupted_requests

        resumed = subprocess.run(
            [*base, "--out", str(out), "--resume"], env=env, capture_output=True, text=True
        )
        assert resumed.returncode == 0, resumed.stderr
        total = server.count - uninterrupted_requests
        assert scores(out) == scores(tmp_path / "full")
        # Every call that had completed was answered from the journal or the cache; only the
        # few in flight at the kill could be sent twice.
        assert total <= uninterrupted_requests + CONCURRENCY, (killed_at, total)
