"""A prompt longer than the judge's context window is an ``error`` row that says so, for every
LLM context metric: refused before it is sent when the window is known (configured, the
provider's table, a local server's ``n_ctx``), and named clearly, not retried, when only the
server says so. Against the fake OpenAI server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import ctxeval
from ctxeval import RetryPolicy, Status
from ctxeval.cli import main
from ctxeval_llm import LLMConfig, prompts
from ctxeval_llm._ask.window import (
    ContextWindowError,
    check_prompt,
    estimate_tokens,
    known_window,
    served_window,
)
from ctxeval_llm._local.slots import server_context
from fakes.openai_server import LLAMA_CPP_PYTHON_MODELS, FakeOpenAI, Reply, scripted_judge

FAST = RetryPolicy(initial_backoff=0.001, max_backoff=0.02, jitter=0.0)
LONG = "The Eiffel Tower is in Paris. " * 400  # 12 000 bytes: ~4 000 tokens by the estimate
SHORT = {
    "id": "short",
    "user_input": "Where is the Eiffel Tower?",
    "retrieved_contexts": ["The Eiffel Tower is in Paris.", "Bananas are yellow."],
    "reference": "The Eiffel Tower is in Paris, France.",
    "response": "In Paris.",
}
LONG_SAMPLE = {**SHORT, "id": "long", "retrieved_contexts": [LONG, "Bananas are yellow."],
               "reference": LONG}  # fmt: skip

# every LLM context metric (and mode), with the prompt each sends
METRICS: list[tuple[str, dict[str, Any], str]] = [
    ("context_precision", {}, "usefulness"),
    ("context_precision", {"batch": True, "name": "precision_batch"}, "usefulness_batch"),
    ("llm_context_precision_without_reference", {}, "usefulness"),
    ("context_utilization", {"batch": True, "name": "utilization_batch"}, "usefulness_batch"),
    ("context_recall", {}, "attribution"),
    ("context_entity_recall", {"extractor": "llm"}, "entities"),
    ("context_relevance", {}, "relevance"),
    ("context_relevance", {"batch": True, "measure": "ndcg"}, "relevance_batch"),
    ("context_sufficiency", {}, "sufficiency"),
]
IDS = [options.get("name") or f"{name}{'-batch' if options.get('batch') else ''}"
       for name, options, _ in METRICS]  # fmt: skip
WINDOW = 3000
"""Fits the short sample's prompts (each under ~800 tokens, + 1024 for the answer), not the
long one's (~4 000 tokens)."""


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(scripted_judge) as fake:
        yield fake


def llm(server: FakeOpenAI, **settings: Any) -> LLMConfig:
    return LLMConfig(
        model="openai/fake-judge", api_base=server.url, api_key="sk-test-0123456789", **settings
    )


def run(samples: list[dict[str, Any]], metrics: list[Any], config: Any) -> ctxeval.Evaluation:
    return ctxeval.evaluate(samples, metrics, llm=config, retry=FAST, cache=None)


def overflow(message: str, window: int = 4096) -> Any:
    """A responder refusing every prompt as too long, with ``message``."""

    def respond(request: dict[str, Any]) -> Reply:
        body = {"error": {"message": message.format(window=window), "type": "invalid_request"}}
        return Reply(400, body=json.dumps(body).encode())

    return respond


# --- refused before sending: the configured window --------------------------------------------


@pytest.mark.parametrize(("name", "options", "prompt"), METRICS, ids=IDS)
def test_a_prompt_over_the_configured_window_is_an_error_row_not_sent(
    server: FakeOpenAI, name: str, options: dict[str, Any], prompt: str
) -> None:
    metric = ctxeval.get_metric(name, **options)
    ev = run([LONG_SAMPLE], [metric], llm(server, context_window=WINDOW))
    (row,) = ev.results
    assert row.status is Status.ERROR
    assert row.score is None
    reason = row.reason or ""
    assert reason.startswith("ContextWindowError: sample 'long': ")
    assert f"the {prompt!r} prompt (v1) is ~" in reason
    assert "(an estimate: UTF-8 bytes / 3)" in reason
    assert f"context window of {WINDOW:,} tokens (context_window, as configured)" in reason
    assert "it was not sent" in reason
    assert "What to do: use shorter chunks" in reason
    assert ("batch=false" in reason) == prompt.endswith("_batch")
    assert server.requests == []  # nothing sent
    assert row.usage.requests == 0
    # who would have been asked, with the prompt's name and version
    assert row.details is not None
    provenance = row.details["provenance"]
    judges = provenance.get("judges", [provenance])
    assert any(f"{prompt}@1" in judge["prompts"] for judge in judges)


@pytest.mark.parametrize(("name", "options", "prompt"), METRICS, ids=IDS)
def test_a_prompt_within_the_window_is_scored_and_names_its_prompt(
    server: FakeOpenAI, name: str, options: dict[str, Any], prompt: str
) -> None:
    metric = ctxeval.get_metric(name, **options)
    (row,) = run([SHORT], [metric], llm(server, context_window=WINDOW)).results
    assert row.status is Status.OK, row.reason
    assert row.details is not None
    provenance = row.details["provenance"]
    judges = provenance.get("judges", [provenance])
    assert any(f"{prompt}@1" in judge["prompts"] for judge in judges)
    assert server.requests


def test_the_answer_budget_counts(server: FakeOpenAI) -> None:
    """The same prompt fits with a small max_tokens and not with a large one."""
    metric = ctxeval.get_metric("context_sufficiency")
    fits = run([SHORT], [metric], llm(server, context_window=1500, max_tokens=100)).results
    assert fits[0].status is Status.OK, fits[0].reason
    (over,) = run([SHORT], [metric], llm(server, context_window=1500, max_tokens=1400)).results
    assert over.status is Status.ERROR
    assert "with up to 1,400 for the answer (max_tokens)" in (over.reason or "")


def test_only_the_long_sample_fails(server: FakeOpenAI) -> None:
    metric = ctxeval.get_metric("context_relevance")
    ev = run([SHORT, LONG_SAMPLE], [metric], llm(server, context_window=WINDOW))
    assert [r.status for r in ev.results] == [Status.OK, Status.ERROR]
    assert {r.sample_id for r in ev.results} == {"short", "long"}
    assert len(server.requests) == 2  # the short sample's two chunks


# --- a local server's n_ctx (llama.cpp's /props) ----------------------------------------------


def test_a_local_servers_n_ctx_is_the_window(server: FakeOpenAI) -> None:
    server.props = {"total_slots": 2, "default_generation_settings": {"n_ctx": WINDOW}}
    ev = run([SHORT, LONG_SAMPLE], ["context_sufficiency"], llm(server))
    short, long = ev.results
    assert short.status is Status.OK, short.reason
    assert long.status is Status.ERROR
    assert f"window of {WINDOW:,} tokens (n_ctx of the server's /props or /slots)" in (
        long.reason or ""
    )
    assert len(server.requests) == 1  # the long prompt was not sent


def test_the_configured_window_wins_over_the_servers(server: FakeOpenAI) -> None:
    server.props = {"total_slots": 1, "default_generation_settings": {"n_ctx": 100}}
    (row,) = run([SHORT], ["context_sufficiency"], llm(server, context_window=WINDOW)).results
    assert row.status is Status.OK, row.reason


def test_server_context_reads_props_and_slots() -> None:
    assert server_context({"default_generation_settings": {"n_ctx": 4096}}) == 4096
    assert server_context({"n_ctx": 2048}) == 2048
    assert server_context([{"id": 0, "n_ctx": 4096}, {"id": 1, "n_ctx": 2048}]) == 2048
    assert server_context({"total_slots": 4}) is None
    assert server_context([{"id": 0}]) is None
    assert server_context({"n_ctx": True}) is None
    assert server_context("nonsense") is None


def test_a_server_s_counts_are_whole_numbers_not_bools_or_strings() -> None:
    from ctxeval_llm._local.slots import _total_slots
    from ctxeval_llm._parsing import whole_number

    assert whole_number(4) == 4
    assert whole_number(0) is None  # a size: at least 1
    assert whole_number(0, least=0) == 0  # a count of tokens may be 0
    for bad in (True, False, "4", 4.0, None, -1, [4]):
        assert whole_number(bad) is None, bad
    assert _total_slots({"total_slots": 2}) == 2
    assert _total_slots({"total_slots": True}) is None  # not one slot
    assert _total_slots({"total_slots": "2"}) is None


@pytest.mark.parametrize(
    ("kind", "source"),
    [
        ("llama.cpp", "n_ctx of the server's /props or /slots"),
        ("vllm", "max_model_len of the server's /v1/models"),
        ("ollama", "context_length of the loaded model at the server's /api/ps"),
        (None, "as the server said"),
    ],
)
def test_served_window_names_where_the_server_said_it(kind: str | None, source: str) -> None:
    assert served_window(SimpleNamespace(context_window=2048, kind=kind)) == (2048, source)
    assert served_window(SimpleNamespace(context_window=None, kind=kind)) is None


def test_the_servers_window_comes_before_the_providers_table() -> None:
    """The server's setting (Ollama's num_ctx, say) beats the model's nominal window; the
    configured one beats both."""
    ctx = SimpleNamespace(sample=None)
    body = {"messages": [{"role": "user", "content": "x" * 3000}], "max_tokens": 10}
    table = LLMConfig(model="ollama/llama3")
    if known_window(table) is None:
        pytest.skip("litellm's model table is not installed")
    check_prompt(ctx, table, prompts.SUFFICIENCY, body)  # fits the table's window
    with pytest.raises(ContextWindowError, match=r"window of 500 tokens \(the server's\)"):
        check_prompt(ctx, table, prompts.SUFFICIENCY, body, (500, "the server's"))
    configured = LLMConfig(model="ollama/llama3", context_window=100_000)
    check_prompt(ctx, configured, prompts.SUFFICIENCY, body, (500, "the server's"))


# --- the provider's known window (litellm's model table, offline) -----------------------------


def test_the_providers_table_gives_the_window_of_a_litellm_model() -> None:
    found = known_window(LLMConfig(model="ollama/llama3"))
    if found is None:
        pytest.skip("litellm's model table is not installed")
    size, source = found
    assert size > 0
    assert "litellm's model table" in source
    # a model served by an OpenAI-compatible server of one's own: not the table's
    assert (
        known_window(LLMConfig(model="openai/gpt-4o-mini", api_base="http://127.0.0.1:1/v1"))
        is None
    )
    assert known_window(LLMConfig(model="openai/x", context_window=77)) == (
        77, "context_window, as configured"
    )  # fmt: skip


def test_a_litellm_model_is_refused_before_anything_is_called() -> None:
    config = LLMConfig(model="ollama/llama3", api_base="http://127.0.0.1:9")
    found = known_window(config)
    if found is None:
        pytest.skip("litellm's model table is not installed")
    huge = {**LONG_SAMPLE, "retrieved_contexts": [LONG * (found[0] // 3000 + 1)]}
    (row,) = run([huge], ["context_sufficiency"], config).results
    assert row.status is Status.ERROR
    assert "litellm's model table" in (row.reason or "")
    assert "it was not sent" in (row.reason or "")


# --- the window unknown: the server's own refusal ---------------------------------------------

REFUSALS = [
    # OpenAI, vLLM
    "This model's maximum context length is {window} tokens. However, your messages resulted "
    "in 5000 tokens. Please reduce the length of the messages.",
    # llama.cpp's llama-server
    "request (5000 tokens) exceeds the available context size ({window} tokens), try increasing it",
    # llama-cpp-python's server
    "Requested tokens (5000) exceed context window of {window}",
]


@pytest.mark.parametrize("message", REFUSALS, ids=["openai", "llama.cpp", "llama-cpp-python"])
def test_a_servers_context_length_refusal_is_named_and_not_retried(message: str) -> None:
    with FakeOpenAI(overflow(message)) as fake:
        (row,) = run([SHORT], ["context_sufficiency"], llm(fake)).results
        assert row.status is Status.ERROR
        reason = row.reason or ""
        assert reason.startswith("ContextWindowError: sample 'short': the judge refused the ")
        assert (
            "'sufficiency' prompt (v1) as longer than its context window (4096 tokens, as "
            "the server said; the prompt is ~" in reason
        )
        assert "not retried" in reason
        assert "--context-window N" in reason
        assert len(fake.requests) == 1  # one request, not retried
        assert row.usage.requests == 1


def test_litellms_context_window_exceeded_error_is_named_too() -> None:
    """litellm raises ContextWindowExceededError (a 400): through any transport, the same row."""

    class ContextWindowExceededError(Exception):
        status_code = 400

    calls: list[dict[str, Any]] = []

    async def judge(request: dict[str, Any]) -> str:
        calls.append(request)
        raise ContextWindowExceededError("litellm.ContextWindowExceededError: prompt too long")

    (row,) = run([SHORT], ["context_sufficiency"], judge).results
    assert row.status is Status.ERROR
    assert (row.reason or "").startswith("ContextWindowError: sample 'short': the judge refused")
    assert len(calls) == 1


def test_a_500_saying_the_context_is_exceeded_is_not_retried() -> None:
    def respond(request: dict[str, Any]) -> Reply:
        body = {"error": {"message": "the prompt exceeds the context window"}}
        return Reply(500, body=json.dumps(body).encode())

    with FakeOpenAI(respond) as fake:
        (row,) = run([SHORT], ["context_sufficiency"], llm(fake)).results
        assert row.status is Status.ERROR
        assert "as longer than its context window" in (row.reason or "")
        assert len(fake.requests) == 1


def test_other_bad_requests_are_left_as_they_were() -> None:
    with FakeOpenAI(lambda request: Reply(400, body=b'{"error": {"message": "no"}}')) as fake:
        (row,) = run([SHORT], ["context_sufficiency"], llm(fake)).results
        assert row.status is Status.ERROR
        assert (row.reason or "").startswith("BadRequestError: ")


def test_every_chunk_of_a_relevance_row_refused_makes_one_error_row() -> None:
    with FakeOpenAI(overflow(REFUSALS[0])) as fake:
        (row,) = run([SHORT], ["context_relevance"], llm(fake)).results
        assert row.status is Status.ERROR
        assert row.score is None
        assert "'relevance' prompt" in (row.reason or "")
        # none retried: each chunk's request at most once. Whether the second chunk's went out
        # before the first refusal cancelled it is timing (under load, once, it did not)
        sent = [json.dumps(r["messages"], sort_keys=True) for r in fake.requests]
        assert 1 <= len(sent) <= 2
        assert len(set(sent)) == len(sent)
        assert len(sent) <= row.usage.requests <= 2


# --- the estimate, the option, the command line -----------------------------------------------


def test_the_estimate_is_bytes_over_three_plus_the_messages() -> None:
    messages = [{"role": "system", "content": "abc"}, {"role": "user", "content": "é" * 5}]
    assert estimate_tokens(messages) == 1 + 4 + 2 * 4  # 3 + 10 bytes -> 5 tokens, 2 messages
    assert estimate_tokens(messages, {"a": 1}) == -(-(13 + 8) // 3) + 8
    assert estimate_tokens(messages, '{"a": 1}') == estimate_tokens(messages, {"a": 1})


def test_a_prompts_fixed_parts_are_made_once_and_not_kept_by_a_changed_copy() -> None:
    import attrs

    from ctxeval_llm.judges.prompts import USEFULNESS

    variables = {"question": "q?", "answer": "a.", "context": "c."}
    for with_schema in (True, False):
        first = USEFULNESS.messages(variables, schema_in_prompt=with_schema)
        again = USEFULNESS.messages(variables, schema_in_prompt=with_schema)
        assert first == again
        assert first[0]["content"] is again[0]["content"]  # the system message, made once
        assert ("following this JSON schema" in first[0]["content"]) is with_schema
    assert USEFULNESS.schema_json == json.dumps(USEFULNESS.schema, sort_keys=True)
    changed = attrs.evolve(USEFULNESS, schema={"type": "object", "title": "changed"})
    assert '"changed"' in changed.messages(variables, schema_in_prompt=True)[0]["content"]
    assert '"changed"' in changed.schema_json
    assert '"changed"' not in USEFULNESS.schema_json
    assert changed != USEFULNESS
    assert attrs.evolve(USEFULNESS) == USEFULNESS


@pytest.mark.parametrize("bad", [0, -5, 1.5, "big", True])
def test_a_bad_context_window_is_a_config_error(bad: Any) -> None:
    with pytest.raises(ValueError, match="context_window"):
        LLMConfig(model="openai/x", context_window=bad)


def test_the_error_is_a_bad_request_that_pickles() -> None:
    import pickle

    from ctxeval import BadRequestError

    error = pickle.loads(pickle.dumps(ContextWindowError("too long")))
    assert isinstance(error, BadRequestError)
    assert str(error) == "too long"


def test_the_command_line_option(server: FakeOpenAI, tmp_path: Path, capsys: Any) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text("\n".join(json.dumps(s) for s in (SHORT, LONG_SAMPLE)) + "\n")
    out = tmp_path / "run"
    code = main([
        "evaluate", str(data), "-m", "context_sufficiency", "--model", "openai/fake-judge",
        "--api-base", server.url, "--context-window", str(WINDOW), "--no-cache", "--out",
        str(out), "-q",
    ])  # fmt: skip
    assert code == 1  # an error row
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [r["status"] for r in rows] == ["ok", "error"]
    assert "context window of 3,000 tokens (context_window, as configured)" in rows[1]["reason"]
    assert len(server.requests) == 1


def test_the_command_line_refuses_a_window_below_one(
    server: FakeOpenAI, tmp_path: Path, capsys: Any
) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps(SHORT) + "\n")
    with pytest.raises(SystemExit) as exited:
        main([
            "evaluate", str(data), "-m", "context_sufficiency", "--model", "openai/fake-judge",
            "--api-base", server.url, "--context-window", "0", "-q",
        ])  # fmt: skip
    assert exited.value.code == 2
    assert "--context-window: give the window in tokens (>= 1), got 0" in capsys.readouterr().err
    assert server.requests == []


# --- near the edge: the local server's own count (ctxeval_llm._local.counting) ---------------
#
# The estimate (bytes / 3) says the long prompt does not fit; the fake servers' tokenizer (one
# token a word: about 5 bytes a token here) says it does. A window between the two is refused
# by the estimate alone, sent once the server has counted it.

ANSWER = 1024  # max_tokens, the answer's budget


def _words(text: str) -> list[int]:
    return list(range(len(text.split())))


def _template(messages: list[dict[str, Any]]) -> str:
    """A ChatML-like chat template, as a server's ``/apply-template`` gives the prompt."""
    return "".join(f"<|im_start|> {m['role']}\n{m['content']} <|im_end|>\n" for m in messages)


def _long_prompt(server: FakeOpenAI) -> tuple[int, int]:
    """The long sample's prompt sizes (the estimate, the words of its template), from a run
    with no window to refuse it; the fake server then forgets the run."""
    run([LONG_SAMPLE], ["context_sufficiency"], llm(server, context_window=10**6))
    (request,) = server.requests
    server.requests.clear()
    return estimate_tokens(request["messages"]), len(_template(request["messages"]).split())


def _between(server: FakeOpenAI) -> int:
    """A window the long prompt fits by its count (with room for the answer and for a
    template's 8 tokens a message), not by the estimate."""
    estimate, counted = _long_prompt(server)
    window = counted + 2 * 8 + ANSWER + 50
    assert estimate + ANSWER > window  # refused by the estimate alone
    return window


def test_llama_cpp_counts_a_prompt_the_estimate_refuses(server: FakeOpenAI) -> None:
    window = _between(server)
    server.props = {"total_slots": 2, "default_generation_settings": {"n_ctx": window}}
    server.post_routes["/apply-template"] = lambda body: {"prompt": _template(body["messages"])}
    server.post_routes["/tokenize"] = lambda body: {"tokens": _words(body["content"])}
    short, long = run([SHORT, LONG_SAMPLE], ["context_sufficiency"], llm(server)).results
    assert short.status is Status.OK, short.reason
    assert long.status is Status.OK, long.reason  # sent: the count fits
    assert len(server.requests) == 2
    # only the long prompt was counted: the template applied, then tokenized
    (templated, tokenized) = server.post_route_requests
    assert templated[0] == "/apply-template"
    assert tokenized[0] == "/tokenize"
    assert LONG in templated[1]["messages"][-1]["content"]
    assert tokenized[1] == {
        "content": _template(templated[1]["messages"]), "add_special": True, "parse_special": True
    }  # fmt: skip


def test_a_count_over_the_window_is_refused_and_says_it_was_counted(server: FakeOpenAI) -> None:
    _, counted = _long_prompt(server)
    window = counted + ANSWER - 10  # the count does not fit either
    server.props = {"total_slots": 1, "default_generation_settings": {"n_ctx": window}}
    server.post_routes["/apply-template"] = lambda body: {"prompt": _template(body["messages"])}
    server.post_routes["/tokenize"] = lambda body: {"tokens": _words(body["content"])}
    (row,) = run([LONG_SAMPLE], ["context_sufficiency"], llm(server)).results
    assert row.status is Status.ERROR
    assert (
        f"is {counted:,} tokens (counted by the server's tokenizer, chat template applied "
        f"(POST /apply-template, /tokenize)), and with up to {ANSWER:,} for the answer"
    ) in (row.reason or "")
    assert f"context window of {window:,} tokens (n_ctx of the server's /props" in row.reason
    assert server.requests == []  # not sent


def test_an_older_llama_cpp_tokenizes_the_text_plus_the_template_allowance(
    server: FakeOpenAI,
) -> None:
    window = _between(server)
    server.props = {"total_slots": 1, "default_generation_settings": {"n_ctx": window}}
    server.post_routes["/tokenize"] = lambda body: {"tokens": _words(body["content"])}
    (row,) = run([LONG_SAMPLE], ["context_sufficiency"], llm(server)).results
    assert row.status is Status.OK, row.reason
    ((path, body),) = server.post_route_requests  # (/apply-template answered 404)
    assert path == "/tokenize"
    assert body["add_special"] is True
    assert LONG in body["content"]
    assert "<|im_start|>" not in body["content"]


def test_vllm_counts_the_messages_with_its_chat_template(server: FakeOpenAI) -> None:
    window = _between(server)
    server.routes["/v1/models"] = {
        "object": "list",
        "data": [{"id": "fake-judge", "owned_by": "vllm", "max_model_len": window}],
    }

    def tokenize(body: dict[str, Any]) -> dict[str, Any]:
        words = _words(_template(body["messages"]))
        return {"count": len(words), "max_model_len": window, "tokens": words}

    server.post_routes["/tokenize"] = tokenize
    (row,) = run([LONG_SAMPLE], ["context_sufficiency"], llm(server)).results
    assert row.status is Status.OK, row.reason
    ((path, body),) = server.post_route_requests
    assert path == "/tokenize"
    assert body["model"] == "fake-judge"
    assert body["add_generation_prompt"] is True
    assert LONG in body["messages"][-1]["content"]


def test_llama_cpp_python_counts_while_the_run_holds_its_one_slot(server: FakeOpenAI) -> None:
    """Its one model is behind one lock, and a request waiting for it interrupts a streamed
    answer: the count is asked with no request of the run's in flight."""
    window = _between(server)
    server.routes["/v1/models"] = LLAMA_CPP_PYTHON_MODELS
    in_flight: list[int] = []

    def count(body: dict[str, Any]) -> dict[str, Any]:
        in_flight.append(server.in_flight)
        return {"count": len(body["input"].split())}

    server.post_routes["/extras/tokenize/count"] = count
    samples = [{**s, "id": f"{s['id']}{i}"} for i in range(4) for s in (SHORT, LONG_SAMPLE)]
    ev = run(samples, ["context_sufficiency"], llm(server, context_window=window))
    assert [r.status for r in ev.results] == [Status.OK] * 8, [r.reason for r in ev.results]
    assert in_flight == [0, 0, 0, 0]  # four long prompts counted, each with nothing in flight
    assert server.peak_in_flight == 1


def test_the_server_counts_the_prompt_as_it_is_sent(server: FakeOpenAI) -> None:
    """llama-cpp-python is asked in JSON mode with the schema written in the prompt: its count
    is of that prompt, the schema included, not of the first mode's body."""
    window = _between(server)
    server.routes["/v1/models"] = LLAMA_CPP_PYTHON_MODELS
    counted: list[str] = []

    def count(body: dict[str, Any]) -> dict[str, Any]:
        counted.append(body["input"])
        return {"count": len(body["input"].split())}

    server.post_routes["/extras/tokenize/count"] = count
    (row,) = run([LONG_SAMPLE], ["context_sufficiency"], llm(server, context_window=window)).results
    assert row.status is Status.OK, row.reason
    (text,) = counted
    (sent,) = server.requests
    assert sent["response_format"]["type"] == "json_object"  # the schema is in the prompt
    assert all(message["content"] in text for message in sent["messages"])


def test_a_failed_count_leaves_the_estimates_verdict(server: FakeOpenAI) -> None:
    window = _between(server)
    server.props = {"total_slots": 1, "default_generation_settings": {"n_ctx": window}}
    server.post_routes["/apply-template"] = lambda body: None  # 404
    server.post_routes["/tokenize"] = lambda body: None
    (row,) = run([LONG_SAMPLE], ["context_sufficiency"], llm(server)).results
    assert row.status is Status.ERROR
    assert "(an estimate: UTF-8 bytes / 3)" in (row.reason or "")
    assert server.requests == []


def test_a_prompt_the_estimate_lets_through_is_not_counted(server: FakeOpenAI) -> None:
    server.props = {"total_slots": 1, "default_generation_settings": {"n_ctx": WINDOW}}
    server.post_routes["/tokenize"] = lambda body: {"tokens": _words(body["content"])}
    (row,) = run([SHORT], ["context_sufficiency"], llm(server)).results
    assert row.status is Status.OK, row.reason
    assert server.post_route_requests == []


@pytest.mark.parametrize(
    ("kind", "counts"),
    [("llama.cpp", True), ("llama-cpp-python", True), ("vllm", True), ("ollama", False),
     (None, False)],
)  # fmt: skip
def test_which_servers_are_asked_to_count(kind: str | None, counts: bool) -> None:
    from ctxeval_llm._local.counting import can_count
    from ctxeval_llm._local.slots import ServerSlots

    slots = ServerSlots("http://127.0.0.1:8080/v1")
    slots.kind = kind
    assert can_count(slots) is counts


def test_a_local_servers_own_window_comes_before_the_providers_table(server: FakeOpenAI) -> None:
    """A local server's setting (Ollama's num_ctx, llama.cpp's n_ctx) may be larger than the
    model's window in litellm's table: the server's decides, as for a prompt within it."""
    table = 128_000  # gpt-4o-mini's max_input_tokens in litellm's table
    server.props = {"total_slots": 1, "default_generation_settings": {"n_ctx": 1_000_000}}
    huge = {**SHORT, "id": "huge", "retrieved_contexts": ["Paris is in France. " * 20_000]}
    config = LLMConfig(model="openai/gpt-4o-mini", api_base=server.url, transport="litellm",
                       api_key="sk-test-0123456789")  # fmt: skip
    assert known_window(config) == (
        table,
        "max_input_tokens of 'gpt-4o-mini' in litellm's model table",
    )
    (row,) = run([huge], ["context_sufficiency"], config).results
    assert row.status is Status.OK, row.reason  # ~134 000 tokens by the estimate: sent
    assert len(server.requests) == 1


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_the_counter_keeps_one_pool_for_the_run_and_closes_it(
    server: FakeOpenAI, backend: str
) -> None:
    import anyio

    from ctxeval_llm._local.counting import TokenCounter
    from ctxeval_llm._local.slots import ServerSlots

    server.post_routes["/tokenize"] = lambda body: {"count": 7, "max_model_len": 9, "tokens": []}
    slots = ServerSlots(server.url)
    slots.kind = "vllm"
    request = {"model": "fake-judge", "messages": [{"role": "user", "content": "hi"}]}

    async def main() -> None:
        counter = TokenCounter(server.url)
        first = await counter.count(slots, request, None, timeout=5)
        pool = counter._pool.current
        second = await counter.count(slots, request, None, timeout=5)
        assert counter._pool.current is pool is not None  # one pool for every count
        assert first == second
        assert first is not None
        assert first.tokens == 7
        await counter.aclose()
        assert counter._pool.current is None

    anyio.run(main, backend=backend)  # aiohttp on asyncio, httpx on trio
    assert len(server.post_route_requests) == 2
