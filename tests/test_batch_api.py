"""The Batch API mode against the fake server's /v1/files and /v1/batches: same scores as the
normal path for half the price, failed or expired lines sent the normal way, split at the
size limits, and a run killed mid-batch resumes the same batch instead of paying again."""

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

import ctxeval
from ctxeval import RetryPolicy, Status
from ctxeval_llm import LLMConfig
from fakes.openai_server import FakeOpenAI
from llm_judge import Judge

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

FAST = RetryPolicy(initial_backoff=0.001, max_backoff=0.02, jitter=0.0, deadline=20)
KEY = "sk-test-batch-0123456789"
TESTS = Path(__file__).resolve().parent


def samples(n: int) -> list[dict[str, Any]]:
    return [
        {"id": f"s{i}", "user_input": f"question {i}", "reference": f"answer {i}",
         "retrieved_contexts": [f"useful {i}", f"noise {i}"]}
        for i in range(n)
    ]  # fmt: skip


def verdicts(request: dict[str, Any]) -> str:
    """Useful contexts are relevant, noise is not; recall attributes every statement."""
    text = request["messages"][-1]["content"]
    if "Context:" in text:
        context = text.rsplit("Context:", 1)[1]
        return json.dumps({"reason": "r", "verdict": int("useful" in context)})
    return Judge()(request)  # type: ignore[return-value]


LINGER = 0.5
"""Seconds without a new request before a batch goes up: the requests of a run all come in a
burst, and a busy machine that paused it this long would split them into two batches (the
tests below count batches and lines); generous, and paid once per batch."""


def config(server: FakeOpenAI, **options: Any) -> LLMConfig:
    options = {"batch_linger": LINGER, "batch_poll_interval": 0.05, **options}
    return LLMConfig(model="openai/gpt-4o-mini", api_base=server.url, api_key=KEY, batch=True,
                     **options)  # fmt: skip


def run(server: FakeOpenAI, n: int = 12, **options: Any) -> ctxeval.Evaluation:
    llm = options.pop("llm", None) or config(server)
    return ctxeval.evaluate(
        samples(n), ["context_precision"], llm=llm, retry=FAST, samples_in_flight=1000, **options
    )


def test_a_batch_gives_the_same_rows_for_half_the_price() -> None:
    with FakeOpenAI(verdicts, batch_delay=0.1) as server:
        batched = run(server)
        assert len(server.batches) == 1
        assert server.count == 0  # no chat request outside the batch
        assert len(server.batch_lines) == 24  # 12 samples x 2 contexts, one line each
        with FakeOpenAI(verdicts) as other:
            plain = LLMConfig(model="openai/gpt-4o-mini", api_base=other.url, api_key=KEY)
            direct = run(other, llm=plain)
    assert [r.score for r in batched.results] == [r.score for r in direct.results]
    assert [r.score for r in batched.results] == [1.0] * 12
    for b, d in zip(batched.results, direct.results, strict=True):
        assert b.usage.cost_usd == pytest.approx(d.usage.cost_usd / 2)
        assert d.usage.requests == 2
    # the row whose task collected the batch also counts its upload, creation, polls, download
    extra = sorted(r.usage.requests - 2 for r in batched.results)
    assert extra[:-1] == [0] * 11
    assert extra[-1] >= 4


def test_failed_lines_are_sent_again_the_normal_way() -> None:
    with FakeOpenAI(verdicts, faults={"500": 0.3}, seed=3, batch_delay=0.05) as server:
        ev = run(server, n=20)
        failed = sum(
            1 for b in server.batches.values() for _ in range(b["request_counts"]["failed"])
        )
        assert failed > 0
        assert all(r.status is Status.OK for r in ev.results)
        assert server.count >= failed  # each failed line went the normal way (with retries)


@pytest.mark.parametrize("outcome", ["expired", "failed"])
def test_an_expired_or_failed_batch_loses_no_row(outcome: str) -> None:
    with FakeOpenAI(verdicts, batch_delay=0.05, batch_outcome=outcome) as server:
        ev = run(server, n=10)
        assert all(r.status is Status.OK for r in ev.results)
        done_in_batch = 10 if outcome == "expired" else 0  # half of the 20 lines
        assert server.count == 20 - done_in_batch


def test_batches_are_split_at_the_size_limits() -> None:
    with FakeOpenAI(verdicts, batch_delay=0.05) as server:
        ev = run(server, n=10, llm=config(server, batch_max_requests=6))
        assert all(r.status is Status.OK for r in ev.results)
        sizes = sorted(b["request_counts"]["total"] for b in server.batches.values())
        assert sum(sizes) == 20
        assert max(sizes) <= 6


def test_a_refused_upload_stops_the_run() -> None:
    with FakeOpenAI(verdicts) as server:
        server.upload_failures = [401]
        with pytest.raises(ctxeval.AuthenticationError, match="/files"):
            run(server, n=3)
        assert server.count == 0


def test_an_endpoint_without_batches_is_asked_the_normal_way() -> None:
    with FakeOpenAI(verdicts) as server:
        server.upload_failures = [404] * 5
        ev = run(server, n=4)
        assert all(r.status is Status.OK for r in ev.results)
        assert server.count == 8  # every request went the normal way
        assert server.batches == {}


def test_batch_needs_an_openai_compatible_endpoint() -> None:
    with pytest.raises(ctxeval.ConfigError, match="OpenAI-compatible"):
        LLMConfig(model="anthropic/claude-3-5-haiku-latest", batch=True)


def test_a_run_killed_mid_batch_resumes_the_same_batch(tmp_path: Path) -> None:
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(s) + "\n" for s in samples(8)))
    out = tmp_path / "run"
    with FakeOpenAI(verdicts, batch_delay=4.0) as server:
        run_file = tmp_path / "run.toml"
        run_file.write_text(
            f'data = "{data}"\nmodel = "openai/gpt-4o-mini"\napi_base = "{server.url}"\n'
            f'out = "{out}"\nbatch = true\n[[metrics]]\nname = "context_precision"\n'
            f"[llm]\nbatch_linger = {LINGER}\nbatch_poll_interval = 0.05\n"
        )
        env = {**os.environ, "OPENAI_API_KEY": KEY, "PYTHONPATH": str(TESTS)}
        command = [sys.executable, "-m", "ctxeval", "evaluate", "--config", str(run_file)]
        first = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        store_file = out / "llm-batches.jsonl"
        deadline = time.monotonic() + 120  # (a bound for a broken run, never reached else)
        while time.monotonic() < deadline and not (
            server.batches and store_file.exists() and "batch_0" in store_file.read_text()
        ):
            time.sleep(0.02)  # until the batch is created and its id is in the store
        assert server.batches, "no batch was created"
        first.send_signal(signal.SIGKILL)  # (the batch answers 4 s after it was created)
        first.wait(timeout=120)
        store = store_file.read_text()
        assert "batch_0" in store
        assert os.stat(out / "llm-batches.jsonl").st_mode & 0o777 == 0o600
        resumed = subprocess.run(
            [*command, "--resume", "-q"], env=env, capture_output=True, text=True, timeout=120
        )
        assert resumed.returncode == 0, resumed.stderr
        assert list(server.batches) == ["batch_0"]  # polled again, not paid again
        assert server.count == 0
        assert len(server.batch_lines) == 16
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert sorted(r["sample_id"] for r in rows) == sorted(f"s{i}" for i in range(8))
    assert all(r["status"] == "ok" and r["score"] == 1.0 for r in rows)
