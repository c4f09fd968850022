"""What a local judge needs beyond the protocol: entities the model invents are not scored,
a cached run whose price is unknown does not claim a cost of 0, rows say what answered."""

from __future__ import annotations

import json
from typing import Any

import pytest

import ctxeval
from ctxeval import SQLiteCache, Status
from ctxeval_llm import LLMConfig
from ctxeval_llm._local.slots import _listed_slots, _llama_cpp_python, _total_slots, is_local
from ctxeval_llm.judges._metrics import in_text
from fakes.openai_server import LLAMA_CPP_PYTHON_MODELS, FakeOpenAI, Reply
from llm_judge import Judge

KEY = "sk-test-local"


def test_the_llm_extractor_keeps_only_entities_the_text_holds() -> None:
    text = "The tower was built by the company of Gustave Eiffel's engineers in Paris."
    listed = ["Gustave Eiffel", "Paris", "1889", "World's Fair", "the company", "  ", "eiffel"]
    kept = [u.text for u in in_text(listed, text)]
    assert kept == ["Gustave Eiffel", "Paris", "the company", "eiffel"]  # word for word
    assert [u.text for u in in_text(["Par"], "Paris")] == []  # not part of a word


def test_entity_recall_does_not_score_invented_entities() -> None:
    reference = "Marie Curie won the Nobel Prize in 1903."
    judge = Judge(entities={reference: ["Marie Curie", "Nobel Prize", "1903", "Warsaw"]})
    with FakeOpenAI(judge) as server:
        llm = LLMConfig(model="openai/x", api_base=server.url, api_key=KEY)
        sample = {
            "user_input": "q",
            "reference": reference,
            "retrieved_contexts": ["Marie Curie won the Nobel Prize."],
        }
        ev = ctxeval.evaluate(
            [sample], [ctxeval.get_metric("context_entity_recall", extractor="llm")], llm=llm
        )
    [row] = ev.results
    assert row.status is Status.OK
    assert row.score == 2 / 3  # Warsaw, not in the reference, is not one of its entities


def test_a_cached_run_with_an_unknown_price_says_unknown(tmp_path: Any) -> None:
    sample = {"user_input": "q", "reference": "r", "retrieved_contexts": ["c"]}
    with FakeOpenAI(Judge(verdicts={"c": 1})) as server:
        llm = LLMConfig(model="openai/local-model", api_base=server.url, api_key=KEY)
        cache = SQLiteCache(tmp_path / "cache.sqlite")
        live = ctxeval.evaluate([sample], ["context_precision"], llm=llm, cache=cache)
        cached = ctxeval.evaluate([sample], ["context_precision"], llm=llm, cache=cache)
    assert live.results[0].usage.cost_usd is None
    assert cached.results[0].usage.cache_hits == 1
    assert cached.results[0].usage.cost_usd is None  # free, but not "0.0" next to "unknown"
    priced = LLMConfig(
        model="openai/local-model",
        api_base=server.url,
        api_key=KEY,
        price_per_million_tokens=(0.1, 0.1),
    )
    again = ctxeval.evaluate([sample], ["context_precision"], llm=priced, cache=cache)
    assert again.results[0].usage.cost_usd == 0.0  # a known price: the cache is free


def test_a_local_server_gets_no_more_requests_than_its_slots() -> None:
    samples = [
        {"id": str(i), "user_input": "q", "reference": "r", "retrieved_contexts": ["c"] * 3}
        for i in range(12)
    ]
    with FakeOpenAI(Judge(verdicts={"c": 1}), latency=0.02) as server:
        server.props = {"total_slots": 2}  # llama.cpp's llama-server -np 2
        llm = LLMConfig(model="openai/x", api_base=server.url, api_key=KEY)
        ev = ctxeval.evaluate(samples, ["context_precision"], llm=llm, max_concurrency=16)
        assert all(r.status is Status.OK for r in ev.results)
        assert server.peak_in_flight <= 2
    with FakeOpenAI(Judge(verdicts={"c": 1}), latency=0.02) as server:  # says nothing: not capped
        llm = LLMConfig(model="openai/x", api_base=server.url, api_key=KEY)
        ev = ctxeval.evaluate(samples, ["context_precision"], llm=llm, max_concurrency=16)
        assert all(r.status is Status.OK for r in ev.results)
        assert server.peak_in_flight > 2  # 36 requests of 20 ms, 16 at a time


@pytest.mark.parametrize(
    ("url", "local"),
    [
        ("http://127.0.0.1:8080/v1", True),
        ("http://localhost:11434/v1", True),
        ("http://[::1]:8000/v1", True),
        ("http://192.168.1.20:8000/v1", True),
        ("http://gpu-box.local:8000/v1", True),
        ("https://api.openai.com/v1", False),
        ("https://llm.example.com/v1", False),
        ("http://8.8.8.8/v1", False),
    ],
)
def test_only_a_local_server_is_asked_for_its_slots(url: str, local: bool) -> None:
    assert is_local(url) is local


def test_what_each_server_says_of_its_slots() -> None:
    assert _total_slots({"total_slots": 4, "model_path": "m.gguf"}) == 4
    assert _total_slots({"total_slots": 0}) is None
    assert _listed_slots([{"id": 0}, {"id": 1}]) == 2
    vllm = {"data": [{"id": "Qwen", "owned_by": "vllm", "permissions": [{"id": "p"}]}]}
    assert _llama_cpp_python(LLAMA_CPP_PYTHON_MODELS) == 1
    assert _llama_cpp_python(vllm) is None


@pytest.mark.parametrize("tokens", [10**300, -5])
def test_usage_that_cannot_be_true_is_not_counted(tokens: int) -> None:
    body = {
        "choices": [{"message": {"role": "assistant", "content": '{"reason": "r", "verdict": 1}'},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": tokens, "completion_tokens": 3},
    }  # fmt: skip
    reply = Reply(200, body=json.dumps(body).encode())
    sample = {"user_input": "q", "reference": "r", "retrieved_contexts": ["c"]}
    with FakeOpenAI(lambda request: reply) as server:
        llm = LLMConfig(
            model="openai/x", api_base=server.url, api_key=KEY,
            price_per_million_tokens=(1.0, 1.0),
        )  # fmt: skip
        [row] = ctxeval.evaluate([sample], ["context_precision"], llm=llm).results
    assert row.status is Status.OK
    assert (row.usage.prompt_tokens, row.usage.completion_tokens) == (0, 0)
    assert row.usage.cost_usd is None  # unknown, not 1e294 dollars
    assert row.usage.requests == 1


def test_a_key_the_judge_echoes_is_never_stored(tmp_path: Any, monkeypatch: Any) -> None:
    secret = "gw-7f3a9c1e5b2d4"  # a gateway's key: no sk- shape to recognise
    monkeypatch.setenv("MY_GATEWAY_TOKEN", secret)
    echo = json.dumps({"reason": f"keys {KEY} and {secret} seen", "verdict": 1})
    sample = {"user_input": "q", "reference": "r", "retrieved_contexts": ["c"]}
    cache = SQLiteCache(tmp_path / "cache.sqlite")
    with FakeOpenAI(lambda request: echo) as server:
        llm = LLMConfig(model="openai/x", api_base=server.url, api_key=KEY)
        ev = ctxeval.evaluate([sample], ["context_precision"], llm=llm, cache=cache)
    ev.write(tmp_path / "run")
    [row] = ev.results
    assert row.status is Status.OK
    assert "keys *** and *** seen" in json.dumps(row.details)
    stored = b"".join(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())
    assert KEY.encode() not in stored
    assert secret.encode() not in stored
