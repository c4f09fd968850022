"""Streamed answers on the ``openai`` transport, and what local servers say of themselves.

A server stops computing an answer whose client hung up only when it streams it
(llama-cpp-python looks for the disconnection between chunks), so requests to a local
endpoint go out streamed: these tests hold the streamed path to everything the whole-body path
guarantees (content, finish_reason, usage exact or unknown, the served model, the size limit,
faults failing the attempt), and show the fake server (which stops like llama-cpp-python) stop
when ctxeval gives up. Also: ``usage.requests`` counts only requests that left, when a row's
other calls are cancelled by one failing for good; and vLLM and Ollama recognised from what
they really expose.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import anyio
import attrs
import httpx
import pytest

import ctxeval
from ctxeval import ServiceError, Status
from ctxeval_llm import LLMConfig
from ctxeval_llm._http.errors import ResponseTooLargeError
from ctxeval_llm._local.slots import ServerSlots
from ctxeval_llm._transports.openai_compatible import HTTPCompletion, OpenAITransport, streams
from fakes.openai_server import LLAMA_CPP_PYTHON_MODELS, FakeOpenAI, Reply
from llama_process import LlamaServer
from llm_judge import Judge

KEY = "sk-test-streaming"
REQUEST = {"model": "judge", "messages": [{"role": "user", "content": "is it relevant?"}]}
ANSWER = '{"reason": "it says so", "verdict": 1}'


async def _complete(url: str, **settings: Any) -> HTTPCompletion:
    transport = OpenAITransport(LLMConfig(model="openai/judge", api_base=url, **settings))
    try:
        answer = await transport.complete(None, REQUEST)  # type: ignore[arg-type]  # (unused)
    finally:
        await transport.aclose()
    assert isinstance(answer, HTTPCompletion)
    return answer


def _settle(server: FakeOpenAI, count: int) -> None:
    """Wait (a bounded number of looks) until the server has read ``count`` requests: a
    cancelled request's bytes may still be on their way when the run returns."""
    for _ in range(200):
        if server.count >= count:
            return
        time.sleep(0.02)


# --- which requests stream ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "stream", "streamed"),
    [
        ("http://127.0.0.1:8080/v1", "auto", True),
        ("http://192.168.1.20:8000/v1", "auto", True),
        ("https://api.openai.com/v1", "auto", False),
        ("https://llm.example.com/v1", True, True),
        ("http://127.0.0.1:8080/v1", False, False),
        ("http://127.0.0.1:8080/v1", "false", False),
    ],
)
def test_local_endpoints_stream_by_default(url: str, stream: Any, streamed: bool) -> None:
    assert streams(LLMConfig(model="openai/judge", api_base=url, stream=stream)) is streamed


@pytest.mark.parametrize(
    ("server", "streamed"),
    [("llama-cpp-python", True), (None, True), ("vllm", False), ("llama.cpp", False),
     ("ollama", False)],
)  # fmt: skip
def test_auto_streams_to_the_servers_that_stop_only_a_stream(
    server: str | None, streamed: bool
) -> None:
    local = LLMConfig(model="openai/judge", api_base="http://127.0.0.1:8080/v1")
    assert streams(local, server) is streamed
    assert streams(attrs.evolve(local, stream=True), server) is True  # (as asked)


@pytest.mark.parametrize(
    ("listing", "streamed"),
    [("vllm", False), ("llama-cpp-python", True), (None, True)],
)
def test_a_run_streams_as_the_server_it_finds_needs(listing: str | None, streamed: bool) -> None:
    routes = {
        "vllm": {"/v1/models": VLLM_MODELS},
        "llama-cpp-python": {"/v1/models": LLAMA_CPP_PYTHON_MODELS},
        None: {},
    }[listing]
    sample = {"user_input": "q", "reference": "r", "retrieved_contexts": ["c", "c", "c"]}
    with FakeOpenAI(Judge(verdicts={"c": 1}), routes=routes) as server:
        llm = LLMConfig(model="openai/x", api_base=server.url, api_key=KEY)
        [row] = ctxeval.evaluate([sample], ["context_precision"], llm=llm).results
    assert row.status is Status.OK
    assert {bool(r.get("stream")) for r in server.requests} == {streamed}


def test_a_stream_setting_that_is_not_one_is_refused() -> None:
    with pytest.raises(ctxeval.ConfigError, match="stream must be"):
        LLMConfig(model="openai/judge", stream="sometimes")


# --- the streamed answer ----------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_streamed_answer_is_the_whole_answer() -> None:
    with FakeOpenAI(lambda request: ANSWER, model="judge.gguf") as server:
        streamed = await _complete(server.url)
        whole = await _complete(server.url, stream=False)
    first, second = server.requests
    assert first["stream"] is True
    assert first["stream_options"] == {"include_usage": True}
    assert "stream" not in second
    assert "stream_options" not in second
    assert server.streams == 1
    assert server.stream_chunks > 5
    assert streamed.content == whole.content == ANSWER
    assert streamed.finish_reason == whole.finish_reason == "stop"
    assert (streamed.prompt_tokens, streamed.completion_tokens) == (
        whole.prompt_tokens,
        whole.completion_tokens,
    )
    assert streamed.usage_known
    assert whole.usage_known
    assert streamed.model == "judge"  # as the chunks name it


@pytest.mark.anyio
async def test_a_stream_without_usage_leaves_the_usage_unknown() -> None:
    with FakeOpenAI(lambda request: ANSWER, stream_usage=False) as server:  # llama-cpp-python
        answer = await _complete(server.url)
    assert answer.content == ANSWER
    assert not answer.usage_known
    assert (answer.prompt_tokens, answer.completion_tokens) == (0, 0)


def test_a_row_without_usage_has_no_cost_and_no_tokens() -> None:
    sample = {"user_input": "q", "reference": "r", "retrieved_contexts": ["c"]}
    with FakeOpenAI(Judge(verdicts={"c": 1}), stream_usage=False) as server:
        llm = LLMConfig(
            model="openai/x", api_base=server.url, api_key=KEY, price_per_million_tokens=(1, 1)
        )
        [row] = ctxeval.evaluate([sample], ["context_precision"], llm=llm).results
    assert row.status is Status.OK
    assert row.usage.requests == 1
    assert (row.usage.prompt_tokens, row.usage.completion_tokens) == (0, 0)
    assert row.usage.cost_usd is None  # unknown, not 0.0: the server did not say


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("fault", "said"),
    [
        ("stream-cut", None),  # (the HTTP client's own words for a body cut short)
        ("stream-garbage", "not a chat completion chunk"),
        ("stream-error", "in the stream: the model crashed"),
    ],
)
async def test_a_broken_stream_fails_the_attempt(fault: str, said: str | None) -> None:
    with (
        FakeOpenAI(lambda request: fault) as server,
        pytest.raises(ServiceError, match=said),  # transient: the scheduler retries it
    ):
        await _complete(server.url)


@pytest.mark.anyio
async def test_a_stream_that_never_ends_is_cut_at_the_size_limit() -> None:
    with FakeOpenAI(lambda request: "stream-endless") as server:
        with pytest.raises(ResponseTooLargeError, match="max_response_bytes"):  # not retried
            await _complete(server.url, max_response_bytes=20_000)
        assert server.hung_up.wait(10)  # (a bound, not a measure)
    assert server.hangups == 1


@pytest.mark.anyio
async def test_a_whole_body_to_a_streamed_request_is_read_as_one() -> None:
    body = {
        "model": "m.gguf",
        "choices": [{"message": {"content": ANSWER}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 7, "completion_tokens": 3},
    }
    with FakeOpenAI(lambda request: Reply(body=json.dumps(body).encode())) as server:
        answer = await _complete(server.url)
    assert server.requests[0]["stream"] is True
    assert (answer.content, answer.prompt_tokens, answer.model) == (ANSWER, 7, "m.gguf")


def test_a_server_that_refuses_streaming_is_asked_whole_and_counted() -> None:
    sample = {"user_input": "q", "reference": "r", "retrieved_contexts": ["c", "d"]}
    judge = Judge(verdicts={"c": 1, "d": 0})
    with FakeOpenAI(judge, stream_refusal=True) as server:  # as ctxeval serve-judge
        llm = LLMConfig(model="openai/x", api_base=server.url, api_key=KEY)
        ev = ctxeval.evaluate([sample], ["context_precision"], llm=llm, max_concurrency=1)
    assert [r.status for r in ev.results] == [Status.OK]
    assert [bool(r.get("stream")) for r in server.requests] == [True, False, False]
    assert ev.results[0].usage.requests == server.count == 3  # the refused one too


def test_streamed_requests_refused_at_once_are_all_asked_again() -> None:
    samples = [
        {"id": str(i), "user_input": "q", "reference": "r", "retrieved_contexts": ["c"] * 4}
        for i in range(4)
    ]
    with FakeOpenAI(Judge(verdicts={"c": 1}), stream_refusal=True, latency=0.05) as server:
        llm = LLMConfig(model="openai/x", api_base=server.url, api_key=KEY, json_schema=False)
        ev = ctxeval.evaluate(samples, ["context_precision"], llm=llm, max_concurrency=8)
    assert {r.status for r in ev.results} == {Status.OK}
    refused = [r for r in server.requests if r.get("stream")]
    assert len(refused) > 1  # sent at once, before the first refusal came back
    assert sum(r.usage.requests for r in ev.results) == server.count == 16 + len(refused)


def test_an_answer_cut_at_max_tokens_in_a_stream_gets_twice_the_budget_then_fails() -> None:
    sample = {"user_input": "q", "reference": "r", "retrieved_contexts": ["c"]}
    cut = Reply(content='{"reason": "it', finish_reason="length")
    with FakeOpenAI(lambda request: cut) as server:
        llm = LLMConfig(model="openai/x", api_base=server.url, api_key=KEY, max_tokens=50)
        [row] = ctxeval.evaluate([sample], ["context_precision"], llm=llm).results
    assert row.status is Status.ERROR
    assert "cut at max_tokens" in (row.reason or "")
    assert [r["max_tokens"] for r in server.requests if r.get("stream")][-2:] == [50, 100]


# --- an abandoned request stops the server's work --------------------------------------------


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_an_abandoned_streamed_request_stops_the_server(backend: str) -> None:
    """The fake server generates one word at a time and stops, as llama-cpp-python does, when
    a write finds the client gone: a request ctxeval gives up on (its timeout) is not computed
    to its end."""
    long_answer = " ".join(["word"] * 200)  # 200 chunks of 20 ms: 4 s, against a 0.3 s timeout
    sample = {"user_input": "q", "reference": "r", "retrieved_contexts": ["c"]}
    with FakeOpenAI(lambda request: long_answer, stream_delay=0.02) as server:
        llm = LLMConfig(model="openai/x", api_base=server.url, api_key=KEY, timeout=0.3)
        once = ctxeval.RetryPolicy(max_attempts=1)
        [row] = ctxeval.evaluate(
            [sample], ["context_precision"], llm=llm, backend=backend, retry=once
        ).results
        assert row.status is Status.ERROR
        assert server.hung_up.wait(10)  # (a bound, not a measure)
        _settle(server, server.streams)
        for _ in range(200):  # every abandoned stream noticed (bounded looks)
            if server.hangups >= server.streams:
                break
            time.sleep(0.02)
    assert server.streams >= 1
    assert server.hangups == server.streams  # none of them computed to its end
    assert server.stream_chunks < server.streams * 200


# --- usage.requests on a row whose other calls are cancelled ---------------------------------


def _one_chunk_fails(request: dict[str, Any]) -> str | Reply:
    text = json.dumps(request["messages"])
    if "Chunk 1" in text:
        return "400"  # fatal at once: the row's other calls are cancelled
    return Reply(content=ANSWER, delay=0.2)  # in flight (or opening a connection) meanwhile


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@pytest.mark.parametrize("stream", [True, False])
def test_requests_are_exact_on_rows_whose_calls_were_cancelled(backend: str, stream: bool) -> None:
    samples = [
        {"id": str(i), "user_input": "q", "reference": "r",
         "retrieved_contexts": [f"Chunk {j} text." for j in range(4)]}
        for i in range(6)
    ]  # fmt: skip
    with FakeOpenAI(_one_chunk_fails, accepts=("json_object",)) as server:  # a probe refused too
        llm = LLMConfig(model="openai/x", api_base=server.url, api_key=KEY, stream=stream)
        ev = ctxeval.evaluate(
            samples, ["llm_context_precision_with_reference"], llm=llm, backend=backend
        )
        counted = sum(r.usage.requests for r in ev.results)
        _settle(server, counted)
        sent = server.count
    assert all(r.status is Status.ERROR for r in ev.results)
    assert counted == sent  # not one more per row for a call cancelled before it left


# --- what vLLM and Ollama say of themselves ---------------------------------------------------

VLLM_MODELS = {
    "object": "list",
    "data": [
        {"id": "Qwen/Qwen2.5-7B-Instruct", "object": "model", "created": 0, "owned_by": "vllm",
         "root": "Qwen/Qwen2.5-7B-Instruct", "parent": None, "max_model_len": 32768,
         "permission": [{"id": "modelperm-1", "object": "model_permission"}]},
    ],
}  # fmt: skip
VLLM_METRICS = """# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="Qwen/Qwen2.5-7B-Instruct"} 0.0
vllm:num_requests_waiting{engine="0",model_name="Qwen/Qwen2.5-7B-Instruct"} 0.0
"""
OLLAMA_PS = {
    "models": [
        {"name": "qwen2.5:7b", "model": "qwen2.5:7b", "size": 5618579456, "digest": "dae161e2",
         "details": {"format": "gguf", "family": "qwen2"},
         "expires_at": "2025-08-06T14:23:28.7482+02:00", "size_vram": 5618579456,
         "context_length": 4096},
    ]
}  # fmt: skip
OLLAMA_MODELS = {
    "object": "list",
    "data": [{"id": "qwen2.5:7b", "object": "model", "created": 0, "owned_by": "library"}],
}


async def _discovered(server: FakeOpenAI) -> ServerSlots:
    slots = ServerSlots(server.url)
    await slots.limiter()
    return slots


@pytest.mark.anyio
async def test_vllm_is_recognised_and_not_capped() -> None:
    routes = {"/v1/models": VLLM_MODELS, "/metrics": VLLM_METRICS}
    with FakeOpenAI(routes=routes) as server:
        slots = await _discovered(server)
    assert slots.kind == "vllm"
    assert await slots.limiter() is None  # it batches: --max-num-seqs is not exposed
    assert slots.context_window == 32768  # max_model_len
    assert slots.models == ["Qwen/Qwen2.5-7B-Instruct"]


@pytest.mark.anyio
async def test_ollama_is_recognised_and_the_user_told_what_to_set(
    caplog: pytest.LogCaptureFixture,
) -> None:
    routes = {"/v1/models": OLLAMA_MODELS, "/api/version": {"version": "0.11.4"},
              "/api/ps": OLLAMA_PS}  # fmt: skip
    with FakeOpenAI(routes=routes) as server, caplog.at_level("WARNING"):
        slots = await _discovered(server)
    assert slots.kind == "ollama"
    assert await slots.limiter() is None  # OLLAMA_NUM_PARALLEL is not exposed
    assert slots.context_window == 4096  # of the loaded model
    assert "OLLAMA_NUM_PARALLEL" in caplog.text
    assert "--max-concurrency" in caplog.text


@pytest.mark.anyio
async def test_llama_cpp_and_llama_cpp_python_are_still_capped() -> None:
    with FakeOpenAI() as server:
        server.props = {"total_slots": 3, "default_generation_settings": {"n_ctx": 8192}}
        slots = await _discovered(server)
    assert (slots.kind, slots.slots, slots.context_window) == ("llama.cpp", 3, 8192)
    with FakeOpenAI(routes={"/v1/models": LLAMA_CPP_PYTHON_MODELS}) as server:
        slots = await _discovered(server)
    assert (slots.kind, slots.slots, slots.models) == ("llama-cpp-python", 1, ["/m.gguf"])


@pytest.mark.anyio
async def test_a_server_that_says_nothing_is_not_capped() -> None:
    with FakeOpenAI() as server:  # LM Studio, or anything answering none of the probes
        slots = await _discovered(server)
    assert (slots.kind, slots.slots, await slots.limiter()) == (None, None, None)


def test_the_fake_server_stream_faults_have_names() -> None:
    for name in ("stream-cut", "stream-garbage", "stream-error", "stream-endless"):
        assert FakeOpenAI().fault_reply(name).stream == name.split("-", 1)[1]


@pytest.mark.anyio
async def test_a_stream_on_each_event_loop_uses_its_client() -> None:
    with FakeOpenAI(lambda request: ANSWER) as server:
        transport = OpenAITransport(LLMConfig(model="openai/judge", api_base=server.url))
        try:
            answer = await transport.complete(None, REQUEST)  # type: ignore[arg-type]
            assert transport.client_name == ("aiohttp" if _on_asyncio() else "httpx")
        finally:
            await transport.aclose()
    assert answer.content == ANSWER


def _on_asyncio() -> bool:
    import sniffio

    return sniffio.current_async_library() == "asyncio"


# --- against a real server: llama-cpp-python stops computing an abandoned streamed request --
# (the session's one server, ``conftest.py``'s ``llama``: tests/llama_process.py)


def _evaluations(counter: Path) -> list[int]:
    return [int(line) for line in counter.read_text().split()]


@pytest.mark.xdist_group("llama")  # one real model computing at a time (see conftest.py)
@pytest.mark.timeout(1200)  # a real model on CPU, on cores other jobs may share: never speed
@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
def test_llama_cpp_python_stops_an_abandoned_streamed_request(
    llama: LlamaServer, stream: bool, record_property: Any
) -> None:
    """A request abandoned while the server generates: streamed, the server computes at most a
    token or two more; whole (as before), it computes the answer to its end. Counted by the
    server itself, with no timing: the tokens it evaluated after ctxeval hung up, up to when
    it serves the next request (``GET /v1/models`` waits for the model's lock)."""
    url, counter = llama.url, llama.counter
    request = {
        "model": "smollm2",
        "messages": [{"role": "user", "content": "Write a long story about a lighthouse."}],
        "max_tokens": 600,
        "min_tokens": 600,  # llama-cpp-python's: no early end of the answer
        "temperature": 0,
    }
    before = len(_evaluations(counter))

    async def abandon() -> None:
        transport = OpenAITransport(LLMConfig(model="openai/smollm2", api_base=url, stream=stream))
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(transport.complete, None, request)
                for _ in range(3000):  # until it generates (a bound on looks, not a measure)
                    if len(_evaluations(counter)) >= before + 10:  # the prompt, 9 tokens
                        break
                    await anyio.sleep(0.02)
                group.cancel_scope.cancel()  # ctxeval gives up (a timeout, a failed sibling)
        finally:
            await transport.aclose()

    anyio.run(abandon)
    given_up = len(_evaluations(counter))
    assert given_up >= before + 10  # it was generating
    assert httpx.get(f"{url}/models", timeout=600).status_code == 200  # once it is idle
    after = sum(_evaluations(counter)[given_up:])
    record_property("tokens_after_hang_up", after)  # (in a JUnit XML report)
    if stream:
        assert after <= 3, after  # stopped at its next chunk
    else:
        assert after >= 500, after  # the whole answer, for nobody
