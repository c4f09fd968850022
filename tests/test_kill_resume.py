"""The command line killed with SIGKILL at several points; --resume finishes the run with the
results of an uninterrupted one, and no completed call is sent again (journal + cache).

The point of the kill is set by the server, not by a race: once the journal holds the rows the
test waits for, the server holds every new request unanswered until the kill, so the run cannot
end before it however busy the machine (and nothing is held before: the rows waited for never
wait behind held requests)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fakes.openai_server import FakeOpenAI, Reply
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


def journaled(journal: Path) -> int:
    """The rows in ``journal`` (a header line, then the LLM rows: id_mrr's are not kept)."""
    return journal.read_text(errors="replace").count("\n") - 1 if journal.exists() else 0


def holding(
    journal: Path, rows: int, hold: threading.Event
) -> Callable[[dict[str, Any]], str | Reply]:
    """The judge, except that while ``hold`` is set, the requests that arrive once
    ``journal`` holds ``rows`` rows are answered only when it is cleared."""
    judge = Judge(verdicts={"useful": 1})

    def respond(request: dict[str, Any]) -> str | Reply:
        if hold.is_set() and journaled(journal) >= rows:
            deadline = time.monotonic() + 120
            while hold.is_set() and time.monotonic() < deadline:
                time.sleep(0.01)
        return judge(request)

    return respond


def scores(folder: Path) -> list[tuple[str, str, Any]]:
    lines = (folder / "results.jsonl").read_text().splitlines()
    return [(r["sample_id"], r["metric"], r["score"]) for r in map(json.loads, lines)]


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize("kill_after", [2, 9, 21])
def test_sigkill_then_resume(tmp_path: Path, kill_after: int) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    out = tmp_path / "run"
    journal = out / "journal.jsonl"
    hold = threading.Event()  # set for the interrupted run only
    with FakeOpenAI(holding(journal, kill_after, hold), latency=0.03) as server:
        base = [sys.executable, "-m", "ctxeval", "evaluate", str(data), "-m", "context_precision",
                "-m", "id_mrr", "--model", "openai/judge", "--api-base", server.url,
                "--max-concurrency", str(CONCURRENCY), "-q"]  # fmt: skip
        env = {**os.environ, "OPENAI_API_KEY": "sk-kill", "XDG_CACHE_HOME": str(tmp_path / "cache")}
        full = subprocess.run(
            [*base, "--out", str(tmp_path / "full"), "--no-cache"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert full.returncode == 0, full.stderr
        uninterrupted_requests = server.count

        hold.set()
        process = subprocess.Popen(
            [*base, "--out", str(out)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        deadline = time.monotonic() + 120  # (a bound for a broken run, never reached else)
        while time.monotonic() < deadline and journaled(journal) < kill_after:
            time.sleep(0.005)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=120)
        assert process.returncode == -signal.SIGKILL
        hold.clear()  # the held requests (of a dead client) end; the resume is not held
        killed_at = server.count - uninterrupted_requests

        resumed = subprocess.run(
            [*base, "--out", str(out), "--resume"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert resumed.returncode == 0, resumed.stderr
        total = server.count - uninterrupted_requests
        assert scores(out) == scores(tmp_path / "full")
        # Every call that had completed was answered from the journal or the cache; only the
        # few in flight at the kill could be sent twice.
        assert total <= uninterrupted_requests + CONCURRENCY, (killed_at, total)
