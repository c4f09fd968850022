"""The ``litellm`` transport honours ``max_response_bytes`` like the ``openai`` one (issue #35).

litellm read every answer whole: a 300 MB body, an endless chunked body or a gzip bomb took
5.2 GB (3.7 GB for the bomb). Each of them is now cut at the bound, on the ``openai/`` route
(litellm's openai SDK client) and on a route through litellm's ``AsyncHTTPHandler``
(``hosted_vllm/``): one request, not retried, an ``error`` row naming the bound and the option
that raises it, and the other rows scored. The memory test runs the client in a process of its
own and compares its peak RSS to its size before the run.
"""

from __future__ import annotations

import gzip
import json
import logging
import os
import subprocess
import sys
import textwrap
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

import ctxeval
from ctxeval import Status
from ctxeval_llm import LLMConfig
from ctxeval_llm._http.litellm_client import (
    CURRENT_CALL,
    BoundedStream,
    BoundedTransport,
    CallRecord,
    ResponseTooLarge,
    bounded_client,
)
from ctxeval_llm._transports.via_litellm import LitellmTransport
from fakes.openai_server import FakeOpenAI, Reply
from fakes.proxy import ForwardProxy
from llm_judge import Judge, user_text

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

KEY = "sk-test-litellm-bounds-0123456789"
LIMIT = 100_000
SAMPLE = {"user_input": "q", "reference": "r", "retrieved_contexts": ["c"]}
ROUTES = ["openai/x", "hosted_vllm/x"]

PREFIX = (
    b'{"id": "x", "object": "chat.completion", "model": "m", "choices": [{"index": 0, '
    b'"finish_reason": "stop", "message": {"role": "assistant", "content": "'
)
SUFFIX = b'"}}], "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}'


def compressed(size: int, *, layers: int = 1) -> bytes:
    """A chat answer whose content is ``size`` bytes, gzipped ``layers`` times (a bomb)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    block = b"x" * (1 << 20)
    parts = [packer.compress(PREFIX)]
    for _ in range(size // len(block)):
        parts.append(packer.compress(block))
    parts += [packer.compress(SUFFIX), packer.flush()]
    body = b"".join(parts)
    for _ in range(layers - 1):
        body = gzip.compress(body, 9)
    return body


BOMB = compressed(64 << 20)  # 64 MiB once inflated, 64 KiB on the wire
DOUBLE_BOMB = compressed(64 << 20, layers=2)


def hostile(kind: str) -> Reply:
    if kind == "large":  # a whole body, its size announced
        return Reply(body=PREFIX + b"x" * (4 << 20) + SUFFIX)
    if kind == "endless":  # chunked, never ending, no size announced
        return Reply(endless=True)
    if kind == "gzip-bomb":
        return Reply(body=BOMB, headers={"Content-Encoding": "gzip"})
    assert kind == "double-gzip-bomb"
    return Reply(body=DOUBLE_BOMB, headers={"Content-Encoding": "gzip, gzip"})


def config(server: FakeOpenAI, model: str, **options: Any) -> LLMConfig:
    return LLMConfig(
        model=model,
        api_base=server.url,
        api_key=KEY,
        transport="litellm",
        max_response_bytes=LIMIT,
        **options,
    )


def run(samples: list[dict[str, Any]], llm: LLMConfig, **options: Any) -> ctxeval.Evaluation:
    async def main() -> ctxeval.Evaluation:
        with anyio.fail_after(120):  # a run must never hang
            return await ctxeval.aevaluate(samples, ["context_precision"], llm=llm, **options)

    return anyio.run(main)


@pytest.mark.parametrize("model", ROUTES)
@pytest.mark.parametrize("kind", ["large", "endless", "gzip-bomb", "double-gzip-bomb"])
def test_a_hostile_answer_is_cut_at_the_bound_once(model: str, kind: str) -> None:
    with FakeOpenAI(lambda request: hostile(kind)) as server:
        [row] = run([SAMPLE], config(server, model)).results
        sent = server.count
    assert row.status is Status.ERROR
    reason = row.reason or ""
    assert reason.startswith("ResponseTooLargeError: "), reason
    assert f"larger than {LIMIT} bytes (max_response_bytes)" in reason
    assert "LLMConfig(max_response_bytes=...)" in reason
    assert KEY not in reason
    assert sent == 1  # not retried: the next attempt would be as large
    assert row.usage.requests == 1


@pytest.mark.parametrize("model", ROUTES)
def test_one_hostile_answer_loses_no_other_row(model: str) -> None:
    judge = Judge(verdicts={"good": 1})

    def answer(request: dict[str, Any]) -> str | Reply:
        if "bomb" in user_text(request):
            return hostile("gzip-bomb")
        return judge(request)

    samples = [
        {"id": str(i), **SAMPLE, "retrieved_contexts": ["bomb" if i == 2 else "good"]}
        for i in range(5)
    ]
    with FakeOpenAI(answer) as server:
        evaluation = run(samples, config(server, model), max_concurrency=2)
        sent = server.count
    statuses = {r.sample_id: r.status for r in evaluation.results}
    assert statuses == {"0": Status.OK, "1": Status.OK, "2": Status.ERROR, "3": Status.OK,
                        "4": Status.OK}  # fmt: skip
    assert [r.score for r in evaluation.results if r.status is Status.OK] == [1.0] * 4
    assert sum(r.usage.requests for r in evaluation.results) == sent
    assert all(r.usage.prompt_tokens > 0 for r in evaluation.results if r.status is Status.OK)


@pytest.mark.parametrize("model", ROUTES)
@pytest.mark.parametrize("coding", ["gzip", "deflate", "raw-deflate"])
def test_a_compressed_answer_within_the_bound_is_read(model: str, coding: str) -> None:
    judge = Judge(verdicts={"c": 1})

    def answer(request: dict[str, Any]) -> Reply:
        body = json.dumps(
            {"id": "x", "object": "chat.completion", "model": "m",
             "choices": [{"index": 0, "finish_reason": "stop",
                          "message": {"role": "assistant", "content": judge(request)}}],
             "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}}
        ).encode()  # fmt: skip
        if coding == "gzip":
            return Reply(body=gzip.compress(body), headers={"Content-Encoding": "gzip"})
        wbits = zlib.MAX_WBITS if coding == "deflate" else -zlib.MAX_WBITS
        packer = zlib.compressobj(6, zlib.DEFLATED, wbits)
        packed = packer.compress(body) + packer.flush()
        return Reply(body=packed, headers={"Content-Encoding": "deflate"})

    with FakeOpenAI(answer) as server:
        [row] = run([SAMPLE], config(server, model)).results
        accepted = {h.get("accept-encoding") for h in server.headers}
    assert row.status is Status.OK, row.reason
    assert row.score == 1.0
    assert (row.usage.prompt_tokens, row.usage.completion_tokens) == (7, 3)
    assert accepted == {"gzip, deflate"}


def test_an_answer_in_a_coding_not_asked_for_is_refused() -> None:
    reply = Reply(body=b"\x1b\x00\x00", headers={"Content-Encoding": "br"})
    with FakeOpenAI(lambda request: reply) as server:
        [row] = run([SAMPLE], config(server, "openai/x")).results
        sent = server.count
    assert row.status is Status.ERROR
    assert "Content-Encoding br, which was not asked for" in (row.reason or "")
    assert sent == 1


def test_a_provider_litellm_serves_with_its_own_client_is_named_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Azure goes through the openai SDK's Azure client, which ctxeval does not replace: the
    bound cannot hold there, and a warning says so (once)."""
    transport = LitellmTransport(LLMConfig(model="azure/x", api_key=KEY, transport="litellm"))
    transport._provider = "azure"
    with caplog.at_level(logging.WARNING, logger="ctxeval_llm._transports.via_litellm"):
        assert transport._bounded() is None
        assert transport._bounded() is None
    [warning] = [r.getMessage() for r in caplog.records]
    assert "azure's requests" in warning
    assert "not cut at max_response_bytes" in warning
    anyio.run(transport.aclose)


@pytest.mark.parametrize("model", ROUTES)
def test_the_bounded_client_goes_through_the_environment_proxy(
    model: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    with FakeOpenAI(Judge(verdicts={"c": 1})) as server, ForwardProxy() as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        [row] = run([SAMPLE], config(server, model)).results
    assert row.status is Status.OK, row.reason
    assert proxy.posts == [f"POST {server.url}/chat/completions"]
    assert proxy.probed_only(server.url.removesuffix("/v1"))  # (the probe: the same route)


def test_every_transport_of_the_bounded_client_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.example:3128")
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    client = bounded_client(LIMIT)
    assert client._mounts  # (one per proxy of the environment)
    transports = [client._transport, *client._mounts.values()]
    assert all(isinstance(t, BoundedTransport) for t in transports if t is not None)
    assert client.follow_redirects is False
    anyio.run(client.aclose)


# --- the stream itself -----------------------------------------------------------------------


class Chunks(httpx.AsyncByteStream):
    def __init__(self, *chunks: bytes) -> None:
        self.chunks = chunks
        self.closed = False

    async def __aiter__(self) -> Iterator[bytes]:  # type: ignore[override]
        for chunk in self.chunks:
            yield chunk

    async def aclose(self) -> None:
        self.closed = True


def read(stream: BoundedStream) -> tuple[bytes, CallRecord]:
    record = CallRecord()

    async def main() -> bytes:
        token = CURRENT_CALL.set(record)
        try:
            return b"".join([piece async for piece in stream])
        finally:
            CURRENT_CALL.reset(token)

    return anyio.run(main), record


def test_the_stream_inflates_a_piece_at_a_time_and_counts_the_output() -> None:
    body = b"y" * 300_000
    packed = gzip.compress(gzip.compress(body))
    halves = (packed[: len(packed) // 2], packed[len(packed) // 2 :])
    data, record = read(BoundedStream(Chunks(*halves), "u", 400_000, ["gzip", "gzip"]))
    assert data == body
    assert record.refused is None
    with pytest.raises(ResponseTooLarge, match="larger than 200000 bytes") as cut:
        read(BoundedStream(Chunks(*halves), "u", 200_000, ["gzip", "gzip"]))
    assert 200_000 < cut.value.size <= 200_000 + 64 * 1024  # stopped within one step


# --- memory ----------------------------------------------------------------------------------

CLIENT = textwrap.dedent(
    """
    import os, resource, sys, json
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    import litellm, ctxeval
    from ctxeval_llm import LLMConfig
    def peak():
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    found = {"before_kb": peak()}
    for url in sys.argv[1:]:
        llm = LLMConfig(model="openai/x", api_base=url, api_key="sk-test-rss-123456",
                        transport="litellm")
        rows = ctxeval.evaluate(
            [{"user_input": "q", "reference": "r", "retrieved_contexts": ["c"]}],
            ["context_precision"], llm=llm, timeout=60).results
        found[url] = {"peak_kb": peak(), "reason": rows[0].reason}
    print(json.dumps(found))
    """
)


def test_the_memory_of_a_run_stays_bounded(tmp_path: Path) -> None:
    """At the default bound (8 MiB), the client's peak grows by far less than the answers:
    before, it grew by 1.2 GB for a 300 MB body, by 2 GB in 8 s of an endless body and by
    4.1 GB for a 1 GB gzip bomb."""
    large = Reply(body=PREFIX + b"x" * (300 << 20) + SUFFIX)
    bomb = Reply(body=compressed(512 << 20), headers={"Content-Encoding": "gzip"})
    script = tmp_path / "client.py"
    script.write_text(CLIENT)
    with (
        FakeOpenAI(lambda request: large) as first,  # (the servers in this process)
        FakeOpenAI(lambda request: "endless") as second,
        FakeOpenAI(lambda request: bomb) as third,
    ):
        urls = [first.url, second.url, third.url]
        done = subprocess.run(
            [sys.executable, str(script), *urls],
            capture_output=True,
            text=True,
            timeout=300,
            check=True,
        )
    found = json.loads(done.stdout.strip().splitlines()[-1])
    for url in urls:
        assert "larger than 8388608 bytes (max_response_bytes)" in found[url]["reason"]
        grown_mb = (found[url]["peak_kb"] - found["before_kb"]) / 1024
        assert grown_mb < 150, (url, grown_mb)
