"""The LLM plugin over real HTTP against the fake OpenAI-compatible server."""

from __future__ import annotations

import json
import logging
import os
import stat
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

import ctxeval
from ctxeval import RetryPolicy, Status
from ctxeval._calls.cache import MemoryCache, SQLiteCache
from ctxeval_llm import LLMConfig
from fakes.openai_server import FakeOpenAI, Reply
from llm_judge import Judge, prompt_name
from seed_data import EIFFEL_CONTEXT, EIFFEL_REFERENCE, TAJ_HIGH, TAJ_LOW, TAJ_REFERENCE

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

FAST = RetryPolicy(initial_backoff=0.001, max_backoff=0.02, jitter=0.0)
SECRET = "sk-test-SECRET-0123456789abcdef"

TAJ_ENTITIES = {
    TAJ_REFERENCE: ["Taj Mahal", "Yamuna", "Agra", "1631", "Shah Jahan", "Mumtaz Mahal"],
    TAJ_HIGH: ["Taj Mahal", "Agra", "Shah Jahan", "Mumtaz Mahal", "India"],
    TAJ_LOW: ["Taj Mahal", "UNESCO", "India"],
}


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(Judge()) as fake:
        yield fake


def llm(server: FakeOpenAI, **options: Any) -> LLMConfig:
    return LLMConfig(model="openai/fake-judge", api_base=server.url, api_key=SECRET, **options)


def run(
    samples: list[dict[str, Any]], metrics: list[Any], server: FakeOpenAI, **options: Any
) -> ctxeval.Evaluation:
    options.setdefault("llm", llm(server))
    options.setdefault("retry", FAST)
    return ctxeval.evaluate(samples, metrics, **options)


# --- the seeds' worked examples ------------------------------------------------------------


@pytest.mark.parametrize("transport", ["openai", "litellm"])
def test_taj_mahal_entity_recall_intersection(server: FakeOpenAI, transport: str) -> None:
    server.responder = Judge(entities=TAJ_ENTITIES)
    metric = ctxeval.get_metric("context_entity_recall", mode="intersection")
    samples = [
        {"id": "high", "reference": TAJ_REFERENCE, "retrieved_contexts": [TAJ_HIGH]},
        {"id": "low", "reference": TAJ_REFERENCE, "retrieved_contexts": [TAJ_LOW]},
    ]
    high, low = run(samples, [metric], server, llm=llm(server, transport=transport)).results
    assert high.score == 4 / 6
    assert low.score == 1 / 6
    assert high.details["missing"] == ["Yamuna", "1631"]
    assert server.count == 4  # two extractions per sample, as ragas makes


def test_eiffel_entity_recall_verify_needs_one_request(server: FakeOpenAI) -> None:
    server.responder = Judge(entities={EIFFEL_REFERENCE: ["Gustave Eiffel", "Paris", "1889"]})
    [row] = run(
        [{"reference": EIFFEL_REFERENCE, "retrieved_contexts": [EIFFEL_CONTEXT]}],
        ["context_entity_recall"],
        server,
    ).results
    assert row.score == 2 / 3
    assert row.details["missing"] == ["Gustave Eiffel"]
    assert row.details["found"] == ["Paris", "1889"]
    assert server.count == 1


def test_eiffel_entity_recall_with_the_llm_matcher(server: FakeOpenAI) -> None:
    server.responder = Judge(
        entities={EIFFEL_REFERENCE: ["Gustave Eiffel", "Paris", "1889"]},
        presence={"Gustave Eiffel": 0, "Paris": 1, "1889": 1},
    )
    metric = ctxeval.get_metric("context_entity_recall", matcher="llm")
    [row] = run(
        [{"reference": EIFFEL_REFERENCE, "retrieved_contexts": [EIFFEL_CONTEXT]}], [metric], server
    ).results
    assert row.score == 2 / 3
    assert server.count == 2


@pytest.mark.parametrize("batch", [False, True])
@pytest.mark.parametrize(
    ("verdicts", "expected"),
    [
        ([1, 0], Fraction(1)),
        ([0, 1], Fraction(1, 2)),
        ([1, 0, 1], Fraction(5, 6)),
        ([0, 0], Fraction(0)),
    ],
)
def test_precision_verdicts_give_exact_average_precision(
    server: FakeOpenAI, verdicts: list[int], expected: Fraction, batch: bool
) -> None:
    contexts = [f"chunk number {i}" for i in range(len(verdicts))]
    server.responder = Judge(verdicts=dict(zip(contexts, verdicts, strict=False)))
    sample = {
        "user_input": "q?",
        "reference": "ref",
        "response": "resp",
        "retrieved_contexts": contexts,
    }
    with_ref = ctxeval.get_metric("context_precision", batch=batch)
    without_ref = ctxeval.get_metric("context_utilization", batch=batch)
    rows = run([sample], [with_ref, without_ref], server).results
    assert [r.score for r in rows] == [float(expected)] * 2
    assert [v["verdict"] for v in rows[0].details["verdicts"]] == verdicts
    assert server.count == (2 if batch else 2 * len(verdicts))


def test_context_recall(server: FakeOpenAI) -> None:
    reference = "France is in Western Europe and its capital is Paris."
    server.responder = Judge(attributions={reference: [1, 0]})
    [row] = run(
        [
            {
                "user_input": "Where is France?",
                "reference": reference,
                "retrieved_contexts": ["France, in Western Europe..."],
            }
        ],
        ["context_recall"],
        server,
    ).results
    assert (row.metric, row.score) == ("context_recall", 0.5)  # the name as written
    assert len(row.details["statements"]) == 2
    assert row.usage.requests == 1
    assert row.usage.prompt_tokens > 0
    assert row.usage.completion_tokens > 0


# --- degenerate inputs: decided without a request ------------------------------------------


def test_degenerate_inputs_make_no_request(server: FakeOpenAI) -> None:
    samples = [
        {
            "id": "empty-ref",
            "user_input": "q",
            "reference": " ",
            "response": "",
            "retrieved_contexts": ["c"],
        },
        {
            "id": "no-contexts",
            "user_input": "q",
            "reference": "ref",
            "response": "",
            "retrieved_contexts": [],
        },
    ]
    metrics = [
        "context_precision",
        "context_utilization",
        "context_recall",
        "context_entity_recall",
    ]
    rows = {(r.sample_id, r.metric): r for r in run(samples, metrics, server).results}
    assert server.count == 0
    assert rows["empty-ref", "context_precision"].status is Status.UNDEFINED
    assert rows["empty-ref", "context_recall"].status is Status.UNDEFINED
    assert rows["empty-ref", "context_entity_recall"].status is Status.UNDEFINED
    assert rows["empty-ref", "context_utilization"].status is Status.UNDEFINED
    assert rows["no-contexts", "context_precision"].status is Status.UNDEFINED
    assert rows["no-contexts", "context_utilization"].status is Status.UNDEFINED
    assert rows["no-contexts", "context_recall"].score == 0.0
    assert rows["no-contexts", "context_entity_recall"].score == 0.0


def test_a_metric_without_an_llm_says_how_to_give_one() -> None:
    # one ConfigError before the run (it used to be an error row per sample: issue #30)
    with pytest.raises(ctxeval.ConfigError, match="needs an LLM and the run has none: pass "
                       "llm='openai/gpt-4o-mini'"):  # fmt: skip
        ctxeval.evaluate(
            [{"user_input": "q", "reference": "r", "retrieved_contexts": ["c"]}],
            ["context_recall"],
        )


# --- faults ----------------------------------------------------------------------------------


def test_200_samples_survive_429s_500s_and_malformed_answers(server: FakeOpenAI) -> None:
    contexts = ["useful chunk", "useless chunk"]
    server.responder = Judge(verdicts={"useful chunk": 1})
    server.faults = {"429": 0.20, "500": 0.10, "malformed": 0.05}
    server.retry_after = 0.01  # every 429 pauses the whole resource that long
    samples = [
        {"id": str(i), "user_input": "q", "reference": "r", "retrieved_contexts": contexts}
        for i in range(200)
    ]
    policy = RetryPolicy(
        max_attempts=10,
        initial_backoff=0.001,
        max_backoff=0.02,
        jitter=0.0,
        max_malformed_retries=5,
    )
    evaluation = run(samples, ["context_precision"], server, retry=policy, max_concurrency=16)
    assert [r.status for r in evaluation.results] == [Status.OK] * 200
    assert all(r.score == 1.0 for r in evaluation.results)
    assert server.statuses.count(429) > 30
    assert server.statuses.count(500) > 10
    assert sum(r.usage.retries for r in evaluation.results) > 50
    assert server.count == sum(r.usage.requests for r in evaluation.results)


def test_wrong_schema_and_non_binary_verdicts_are_retried_then_reported(server: FakeOpenAI) -> None:
    server.responder = lambda request: '{"reason": "x", "verdict": 2}'
    [row] = run(
        [{"user_input": "q", "reference": "r", "retrieved_contexts": ["c"]}],
        ["context_precision"],
        server,
    ).results
    assert row.status is Status.ERROR
    assert "MalformedOutputError: verdict must be exactly 0 or 1, got 2" in (row.reason or "")
    assert server.count == 3  # the first try and two retries (max_malformed_retries)


@pytest.mark.parametrize("transport", ["openai", "litellm"])
def test_401_stops_the_run_at_once_and_the_rest_resumes(
    server: FakeOpenAI, transport: str, tmp_path: Path
) -> None:
    server.responder = lambda request: "401"
    samples = [
        {"id": str(i), "user_input": "q", "reference": "r", "retrieved_contexts": ["c"]}
        for i in range(50)
    ]
    journal = tmp_path / "journal.jsonl"
    options: dict[str, Any] = {"llm": llm(server, transport=transport), "journal": journal}
    with pytest.raises(ctxeval.AuthenticationError, match="Incorrect API key") as caught:
        run(samples, ["context_precision"], server, max_concurrency=4, **options)
    assert SECRET not in str(caught.value)
    assert server.count <= 4  # only the calls already in flight; the rest are never sent
    server.responder = Judge()  # the key is fixed: the resume scores every row
    evaluation = run(samples, ["context_precision"], server, resume=True, **options)
    assert [r.sample_id for r in evaluation.results] == [str(i) for i in range(50)]
    assert all(r.status is Status.OK for r in evaluation.results)


def test_a_hung_request_is_cut_by_the_timeout_and_retried(server: FakeOpenAI) -> None:
    good = json.dumps({"reason": "ok", "verdict": 1})
    answers = iter(["hang"])
    server.responder = lambda request: next(answers, good)  # the first hangs, then answers
    [row] = run(
        [{"user_input": "q", "reference": "r", "retrieved_contexts": ["c"]}],
        ["context_precision"],
        server,
        timeout=1.0,  # what cuts the hung request; long for a healthy one, even on a busy machine
    ).results
    assert row.score == 1.0
    # the hung request was cut and retried; on a loaded machine a retry may be cut too, so
    # count attempts rather than expect exactly two (each counts at both ends: every attempt
    # reached the server before it was cut)
    assert row.usage.retries >= 1
    assert row.usage.requests == row.usage.retries + 1 == server.count


def test_a_429_with_retry_after_from_the_server_is_honoured(
    server: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    """The header's 1 s is the wait the scheduler chose (its own backoff would be a few ms);
    that the scheduler sleeps the wait it chose is tested on a virtual clock (test_scheduler.py),
    so nothing here depends on how fast the machine is."""
    answers = iter(
        [
            Reply(429, body=b"{}", headers={"Retry-After": "1"}),
            json.dumps({"reason": "ok", "verdict": 1}),
        ]
    )
    server.responder = lambda request: next(answers)
    caplog.set_level(logging.INFO, logger="ctxeval._calls.scheduler")
    [row] = run(
        [{"user_input": "q", "reference": "r", "retrieved_contexts": ["c"]}],
        ["context_precision"],
        server,
    ).results
    assert row.score == 1.0
    assert (row.usage.requests, server.count) == (2, 2)
    [retry] = [r.getMessage() for r in caplog.records if "retrying in" in r.getMessage()]
    assert "RateLimitError" in retry
    assert retry.endswith("retrying in 1.00 s")


# --- cache ------------------------------------------------------------------------------------


def test_a_second_identical_run_makes_no_request(server: FakeOpenAI, tmp_path: Path) -> None:
    contexts = ["a", "b", "c"]
    server.responder = Judge(
        verdicts={"a": 1, "c": 1}, entities={"Paris is in France.": ["Paris", "France"]}
    )
    samples = [
        {
            "id": str(i),
            "user_input": "q",
            "reference": "Paris is in France.",
            "retrieved_contexts": contexts,
        }
        for i in range(10)
    ]
    metrics = ["context_precision", "context_recall", "context_entity_recall"]
    cache = SQLiteCache(tmp_path / "cache" / "llm.sqlite")
    first = run(samples, metrics, server, cache=cache)
    sent = server.count
    assert sent > 0
    second = run(samples, metrics, server, cache=SQLiteCache(tmp_path / "cache" / "llm.sqlite"))
    assert server.count == sent  # zero requests the second time
    assert [r.score for r in second.results] == [r.score for r in first.results]
    assert second.usage.requests == 0
    assert second.usage.cache_hits > 0
    assert stat.S_IMODE(os.stat(tmp_path / "cache" / "llm.sqlite").st_mode) == 0o600


def test_cache_keys_change_with_the_model_and_the_prompt_inputs(server: FakeOpenAI) -> None:
    server.responder = Judge(verdicts={"a": 1})
    cache = MemoryCache()
    sample = [{"user_input": "q", "reference": "r", "retrieved_contexts": ["a"]}]
    run(sample, ["context_precision"], server, cache=cache)
    run(
        sample,
        ["context_precision"],
        server,
        cache=cache,
        llm=LLMConfig(model="openai/other", api_base=server.url, api_key=SECRET),
    )
    run([{**sample[0], "reference": "r2"}], ["context_precision"], server, cache=cache)
    assert len(cache) == 3
    assert server.count == 3


# --- secrets ----------------------------------------------------------------------------------


def test_the_api_key_never_leaks(
    server: FakeOpenAI, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    echo = iter(
        [
            Reply(
                401,
                body=json.dumps(
                    {"error": {"message": f"Incorrect API key provided: {SECRET}"}}
                ).encode(),
            )
        ]
    )
    server.responder = Judge(fallback=lambda request: next(echo, None), verdicts={"c": 1})
    samples = [
        {"id": str(i), "user_input": "q", "reference": "r", "retrieved_contexts": ["c"]}
        for i in range(3)
    ]
    cache = SQLiteCache(tmp_path / "llm.sqlite")
    journal = tmp_path / "journal.jsonl"
    with pytest.raises(ctxeval.AuthenticationError) as caught:  # the refused key stops the run
        run(samples, ["context_precision"], server, cache=cache, journal=journal, max_concurrency=1)
    assert server.headers[0]["authorization"] == f"Bearer {SECRET}"  # it was really sent
    reasons = str(caught.value)
    assert "Incorrect API key provided: ***" in reasons
    server.responder = Judge(verdicts={"c": 1})
    evaluation = run(
        samples, ["context_precision"], server, cache=cache, journal=journal, resume=True
    )
    evaluation.to_jsonl(tmp_path / "results.jsonl")
    reasons += " ".join(r.reason or "" for r in evaluation.results)
    cache.close()
    for path in tmp_path.iterdir():
        assert SECRET.encode() not in path.read_bytes(), path
    assert SECRET not in caplog.text
    assert SECRET not in reasons
    assert SECRET not in repr(llm(server))
    assert SECRET not in repr(ctxeval.get_metric("context_precision", llm=llm(server)))


# --- transports -------------------------------------------------------------------------------


def test_direct_and_litellm_send_the_same_request(server: FakeOpenAI) -> None:
    server.responder = Judge(verdicts={"a": 1})
    sample = [{"user_input": "q", "reference": "r", "retrieved_contexts": ["a"]}]
    direct = run(sample, ["context_precision"], server, llm=llm(server, transport="openai"))
    via_litellm = run(sample, ["context_precision"], server, llm=llm(server, transport="litellm"))
    assert direct.results[0].score == via_litellm.results[0].score == 1.0
    first, second = server.requests
    keys = ("model", "messages", "temperature", "max_tokens", "response_format")
    assert {k: first.get(k) for k in keys} == {k: second.get(k) for k in keys}
    assert first["model"] == "fake-judge"
    assert direct.results[0].usage.prompt_tokens == via_litellm.results[0].usage.prompt_tokens


def test_schema_in_the_prompt_when_json_schema_is_off(server: FakeOpenAI) -> None:
    server.responder = lambda request: (
        "Sure! ```json\n" + json.dumps({"reason": "fine", "verdict": 1}) + "\n``` Hope this helps."
    )
    [row] = run(
        [{"user_input": "q", "reference": "r", "retrieved_contexts": ["a"]}],
        ["context_precision"],
        server,
        llm=llm(server, json_schema=False),
    ).results
    assert row.score == 1.0
    request = server.requests[0]
    assert "response_format" not in request
    assert "following this JSON schema" in request["messages"][0]["content"]
    assert prompt_name(request) == "usefulness"


def test_bring_your_own_callable() -> None:
    seen: list[dict[str, Any]] = []

    async def my_client(request: dict[str, Any]) -> dict[str, Any]:
        seen.append(request)
        return {
            "content": json.dumps({"reason": "yes", "verdict": 1}),
            "prompt_tokens": 7,
            "completion_tokens": 3,
        }

    [row] = ctxeval.evaluate(
        [{"user_input": "q", "reference": "r", "retrieved_contexts": ["a"]}],
        ["context_precision"],
        llm=my_client,
    ).results
    assert row.score == 1.0
    assert (row.usage.prompt_tokens, row.usage.completion_tokens) == (7, 3)
    assert seen[0]["messages"][-1]["content"].startswith("Question: q")


def test_cost_from_the_local_price_table(server: FakeOpenAI) -> None:
    server.responder = Judge(verdicts={"a": 1})
    sample = [{"user_input": "q", "reference": "r", "retrieved_contexts": ["a"]}]
    known = run(
        sample,
        ["context_precision"],
        server,
        llm=LLMConfig(model="openai/gpt-4o-mini", api_base=server.url, api_key=SECRET),
    )
    unknown = run(sample, ["context_precision"], server)
    assert known.results[0].usage.cost_usd is not None
    assert known.results[0].usage.cost_usd > 0
    assert unknown.results[0].usage.cost_usd is None  # never a made-up number


def test_price_table_read_from_litellms_file_and_a_damaged_one_is_no_price(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import importlib.util
    from types import SimpleNamespace

    from ctxeval_llm import _pricing as pricing

    real = importlib.util.find_spec("litellm")
    assert real is not None
    assert real.submodule_search_locations
    path = Path(next(iter(real.submodule_search_locations))) / pricing._TABLE
    expected = json.loads(path.read_text(encoding="utf-8"))
    pricing.price_table.cache_clear()
    try:
        assert pricing.price_table() == expected  # orjson reads what json reads
        entry = expected["gpt-4o-mini"]
        price = pricing.price_of("openai/gpt-4o-mini")
        assert price is not None
        assert (price.prompt, price.completion) == (
            entry["input_cost_per_token"],
            entry["output_cost_per_token"],
        )

        (tmp_path / pricing._TABLE).write_text('{"gpt-x": {"input_cost_per_token": 1e-6,')
        fake = SimpleNamespace(submodule_search_locations=[str(tmp_path)])
        monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: fake)
        pricing.price_table.cache_clear()
        with caplog.at_level("WARNING", logger="ctxeval_llm._pricing"):
            assert pricing.price_table() == {}
        assert pricing.price_of("gpt-x") is None  # never a made-up number
        assert "could not read litellm's price table" in caplog.text
        assert str(tmp_path) in caplog.text
    finally:
        pricing.price_table.cache_clear()
        pricing._mentioned.cache_clear()


def test_a_model_the_table_never_names_is_priced_without_parsing_it() -> None:
    from ctxeval_llm import _pricing as pricing
    from ctxeval_llm._ask.window import known_window

    pricing.price_table.cache_clear()
    pricing._mentioned.cache_clear()
    try:
        local = LLMConfig(model="openai/smollm2-135m-q8-local", api_base="http://127.0.0.1:8080/v1")
        assert pricing.price_of(local.model) is None
        assert local.price() is None
        assert pricing.price_table.cache_info().currsize == 0  # never parsed
        # every key of the table is found in its file (a sample: each look reads the file)
        keys = sorted(json.loads(pricing._table_path().read_bytes()))  # type: ignore[union-attr]
        for key in keys[:: max(1, len(keys) // 25)]:
            assert pricing._mentioned(key), key
        assert pricing.price_table.cache_info().currsize == 0
        # a model it names: the same price and window as from the parsed table
        listed = LLMConfig(model="gpt-4o-mini", api_key="sk-test-0000")
        entry = pricing.price_table()["gpt-4o-mini"]
        price = pricing.price_of("openai/gpt-4o-mini")
        assert price is not None
        assert (price.prompt, price.completion) == (
            entry["input_cost_per_token"],
            entry["output_cost_per_token"],
        )
        assert known_window(listed) == (
            entry["max_input_tokens"],
            "max_input_tokens of 'gpt-4o-mini' in litellm's model table",
        )
        assert pricing.table_entry('gpt-4o-mini"') is None  # (a name with a quote: parsed)
    finally:
        pricing.price_table.cache_clear()
        pricing._mentioned.cache_clear()


def test_auto_transport_is_openai_for_openai_models_even_behind_a_proxy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    config = LLMConfig(model="openai/gpt-4o-mini")
    assert config.chosen_transport() == "openai"
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")  # httpx reads it
    assert config.chosen_transport() == "openai"
    assert LLMConfig(model="gpt-4o-mini", transport="direct").transport == "openai"  # old name
    assert LLMConfig(model="anthropic/claude-3-5-haiku-latest").chosen_transport() == "litellm"


def test_runs_opening_one_cache_at_the_same_moment_all_get_it(tmp_path: Path) -> None:
    """Concurrent starts used to fail 'PRAGMA journal_mode=WAL' with 'database is locked'."""
    import multiprocessing

    context = multiprocessing.get_context("fork")
    for round_ in range(15):
        path = tmp_path / f"cache{round_}.sqlite"
        barrier = context.Barrier(6)
        processes = [
            context.Process(target=_open_cache_after, args=(barrier, path)) for _ in range(6)
        ]
        for process in processes:
            process.start()
        for process in processes:
            process.join(60)
        assert [p.exitcode for p in processes] == [0] * 6, round_


def _open_cache_after(barrier: Any, path: Path) -> None:
    barrier.wait()
    cache = SQLiteCache(path)
    cache.set("k", {"v": 1})
    assert cache.get("k") == {"v": 1}
    cache.close()
