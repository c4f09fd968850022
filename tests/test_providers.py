"""LLM providers: what cannot succeed stops the run at once (exit 2, the rest resumable), what can
succeed loses no row, structured-output fallback, proxies, size limits, a transport of your own.

Everything goes over real HTTP to the fake OpenAI-compatible server (or to nothing at all)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest

import ctxeval
from ctxeval import Limits, RetryPolicy, Status
from ctxeval._calls.limits import Gate
from ctxeval.cli import main
from ctxeval.plugin import Completion, MissingCredentialsError, RunContext
from ctxeval_llm import LLMConfig
from fakes.openai_server import LLAMA_CPP_PYTHON_MODELS, FakeOpenAI, Reply
from fakes.proxy import ForwardProxy
from llm_judge import Judge

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

FAST = RetryPolicy(initial_backoff=0.001, max_backoff=0.02, jitter=0.0, deadline=20)
KEY = "sk-test-providers-0123456789"
SAMPLE = {"user_input": "q", "reference": "r", "retrieved_contexts": ["c"]}


def samples(n: int) -> list[dict[str, Any]]:
    return [{"id": str(i), **SAMPLE} for i in range(n)]


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(Judge(verdicts={"c": 1})) as fake:
        yield fake


@pytest.fixture
def no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_BASE", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A port of 127.0.0.1 that refuses connections: bound for the whole test and never
    listening, so that no other process on the machine can start listening there meanwhile."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield int(s.getsockname()[1])


def cli(args: list[str]) -> int | str | None:
    try:
        return main(args)
    except SystemExit as exc:
        return exc.code


def write_data(tmp_path: Path, n: int = 6) -> Path:
    data = tmp_path / "data.jsonl"
    rows = [
        {**s, "retrieved_context_ids": ["a"], "reference_context_ids": ["a"]} for s in samples(n)
    ]
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return data


# --- fail fast: before the first request ---------------------------------------------------


def test_no_key_for_openai_stops_before_any_request(no_keys: None) -> None:
    with pytest.raises(MissingCredentialsError, match="OPENAI_API_KEY") as caught:
        ctxeval.evaluate(samples(14), ["context_precision"], llm="openai/gpt-4o-mini")
    assert "https://api.openai.com/v1" in str(caught.value)
    assert isinstance(caught.value, ctxeval.UnusableLLMError)


def test_no_key_for_a_litellm_provider_stops_before_any_request(no_keys: None) -> None:
    with pytest.raises(MissingCredentialsError, match="ANTHROPIC_API_KEY"):
        ctxeval.evaluate(samples(3), ["context_precision"], llm="anthropic/claude-3-5-haiku-latest")


def test_a_model_litellm_cannot_place_stops_before_any_request() -> None:
    with pytest.raises(ctxeval.ModelNotFoundError, match="provider/model"):
        ctxeval.evaluate(samples(3), ["context_precision"], llm="no-such-model-anywhere")


def test_cli_no_key_exits_2_with_the_variable_to_set(
    no_keys: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = write_data(tmp_path)
    out = tmp_path / "run"
    code = cli(["evaluate", str(data), "-m", "context_precision", "--model", "openai/gpt-4o-mini",
                 "--out", str(out), "-q"])  # fmt: skip
    assert code == 2
    err = capsys.readouterr().err
    assert "OPENAI_API_KEY" in err
    assert "--resume" in err


def test_a_missing_litellm_exits_2_with_the_install_command(tmp_path: Path) -> None:
    data = write_data(tmp_path, 2)
    script = (
        "import sys; sys.modules['litellm'] = None\n"  # as if it were not installed
        "from ctxeval.cli import main\n"
        f"sys.exit(main(['evaluate', {str(data)!r}, '-m', 'context_precision', '--model', "
        "'anthropic/claude-3-5-haiku-latest', '-q']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env={**os.environ, "ANTHROPIC_API_KEY": "x", "COLUMNS": "200"},
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "pip install 'ctxeval[llm]'" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_broken_aiohttp_stops_the_run_with_what_to_do(tmp_path: Path) -> None:
    """aiohttp installed but not importable (a wheel for another Python, a missing shared
    library): the run stops before any request with exit 2, naming the reinstall and the
    httpx switch, and the switch works (before, every row was an ImportError row)."""
    data = write_data(tmp_path, 6)
    broken = tmp_path / "site" / "aiohttp"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text(
        'raise ImportError("libaiohttp.so: cannot open shared object file")\n'
    )
    path = os.pathsep.join([str(broken.parent), os.environ.get("PYTHONPATH", "")])
    with FakeOpenAI(Judge(verdicts={"c": 1})) as server:

        def run(*extra: str, **env: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [sys.executable, "-m", "ctxeval", "evaluate", str(data), "-m",
                 "context_precision", "--model", "openai/fake-judge", "--api-base", server.url,
                 "--out", str(tmp_path / "run"), "-q", *extra],
                capture_output=True, text=True, timeout=120,
                env={**os.environ, "PYTHONPATH": path, "OPENAI_API_KEY": KEY,
                     "COLUMNS": "300", **env},
            )  # fmt: skip

        done = run()
        assert done.returncode == 2, done.stderr
        said = " ".join(done.stderr.split())
        assert "aiohttp is installed but cannot be imported" in said
        assert "libaiohttp.so" in said
        assert "pip install --force-reinstall aiohttp" in said
        assert "CTXEVAL_HTTP_CLIENT=httpx" in said
        assert "Traceback" not in done.stderr
        assert server.count == 0  # nothing was sent

        done = run("--resume", CTXEVAL_HTTP_CLIENT="httpx")  # as the message says
        assert done.returncode == 0, done.stderr
        rows = [json.loads(line) for line in (tmp_path / "run" / "results.jsonl").open()]
        assert [r["status"] for r in rows if r["metric"] == "context_precision"] == ["ok"] * 6
        assert server.count == 6


# --- fail fast: on the first answer that shows it --------------------------------------------


def test_an_unknown_model_stops_the_run_after_one_answer(tmp_path: Path) -> None:
    with FakeOpenAI(Judge(verdicts={"c": 1}), models={"fake-judge"}) as server:
        llm = LLMConfig(model="openai/not-served", api_base=server.url, api_key=KEY)
        with pytest.raises(ctxeval.ModelNotFoundError, match="not-served"):
            ctxeval.evaluate(samples(40), ["context_precision"], llm=llm, max_concurrency=2)
        assert server.count <= 2  # the calls in flight; nothing after the first answer


def test_cli_unknown_model_exits_2_and_the_fixed_run_resumes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = write_data(tmp_path, 8)
    out = tmp_path / "run"
    with FakeOpenAI(Judge(verdicts={"c": 1}), models={"fake-judge"}) as server:
        common = ["evaluate", str(data), "-m", "context_precision",
                  "-m", "id_based_context_precision",
                  "--api-base", server.url, "--out", str(out), "-q"]  # fmt: skip
        assert cli([*common, "--model", "openai/typo"]) == 2
        err = capsys.readouterr().err
        assert "does not exist" in err
        assert "--resume" in err
        assert main([*common, "--model", "openai/fake-judge", "--resume"]) in (0, 1)
        rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    precision = [r for r in rows if r["metric"] == "context_precision"]
    assert len(precision) == 8
    assert all(r["status"] == "ok" for r in precision)


def test_connection_refused_stops_after_a_few_attempts(tmp_path: Path, closed_port: int) -> None:
    llm = LLMConfig(model="openai/x", api_base=f"http://127.0.0.1:{closed_port}/v1")
    with pytest.raises(ctxeval.EndpointUnreachableError, match="is running") as caught:
        ctxeval.evaluate(samples(30), ["context_precision"], llm=llm, retry=FAST)
    assert "3 connections failed" in str(caught.value)


def test_connection_failures_after_a_success_are_only_retried(server: FakeOpenAI) -> None:
    """Once the endpoint has answered, a refused connection is a blip, not a wrong address."""
    answers = iter([json.dumps({"reason": "ok", "verdict": 1})] + [Reply(reset=True)] * 4)
    server.responder = lambda request: next(answers, json.dumps({"reason": "ok", "verdict": 1}))
    llm = LLMConfig(model="openai/x", api_base=server.url, api_key=KEY)
    ev = ctxeval.evaluate(samples(3), ["context_precision"], llm=llm, retry=FAST, max_concurrency=1)
    assert all(r.status is Status.OK for r in ev.results)


# --- lose no row to what can succeed ------------------------------------------------------------


def test_random_429_and_500_lose_no_row(server: FakeOpenAI) -> None:
    server.faults = {"429": 0.2, "500": 0.1}
    server.retry_after = 0.05
    llm = LLMConfig(model="openai/x", api_base=server.url, api_key=KEY)
    ev = ctxeval.evaluate(samples(150), ["context_precision"], llm=llm, retry=FAST)
    assert all(r.status is Status.OK for r in ev.results), [r.reason for r in ev.results][:3]
    statuses = server.stats()["statuses"]
    assert statuses.get("429", 0) > 20
    assert statuses.get("500", 0) > 5


def test_the_deadline_decides_how_often_a_call_is_tried(server: FakeOpenAI) -> None:
    """Nine attempts where the old fixed cap gave six: the deadline bounds a call, not a count
    (counted, so that a slow machine cannot change the outcome)."""
    answers = iter(["500"] * 8 + [json.dumps({"reason": "ok", "verdict": 1})])
    server.responder = lambda request: next(answers)
    llm = LLMConfig(model="openai/x", api_base=server.url, api_key=KEY)
    policy = RetryPolicy(deadline=120.0, initial_backoff=0.01, max_backoff=0.02, jitter=0.0)
    [row] = ctxeval.evaluate([SAMPLE], ["context_precision"], llm=llm, retry=policy).results
    assert row.status is Status.OK, row.reason
    assert (server.count, row.usage.retries) == (9, 8)


def test_a_call_that_never_succeeds_ends_at_its_deadline(server: FakeOpenAI) -> None:
    """The error names the deadline and the 500s behind it, however many attempts fitted (on
    a busy machine the last one may be cut at what was left of the deadline: the message
    still names the deadline, never that sliver). The exact counts are tested in
    test_scheduler.py on a virtual clock."""
    server.responder = lambda request: "500"
    llm = LLMConfig(model="openai/x", api_base=server.url, api_key=KEY)
    policy = RetryPolicy(deadline=2.0, initial_backoff=0.5, max_backoff=0.5, jitter=0.0)
    [row] = ctxeval.evaluate([SAMPLE], ["context_precision"], llm=llm, retry=policy).results
    assert row.status is Status.ERROR  # (the test's own timeout catches a call never ended)
    reason = row.reason or ""
    assert reason.startswith("CallTimeoutError: no answer from openai/x"), reason
    assert "within its 2 s deadline (" in reason, reason
    assert "HTTP 500 x" in reason, reason
    assert "; last: HTTP 500 from " in reason, reason
    # the first attempt has 1.5 s to come back before no retry fits: generous for a local 500
    assert server.count >= 2


def test_a_hung_call_is_cut_at_its_deadline_not_at_attempts_times_timeout(
    server: FakeOpenAI,
) -> None:
    server.responder = lambda request: "hang"
    llm = LLMConfig(model="openai/x", api_base=server.url, api_key=KEY)
    policy = RetryPolicy(deadline=1.0, initial_backoff=0.05, jitter=0.0)
    [row] = ctxeval.evaluate(
        [SAMPLE], ["context_precision"], llm=llm, retry=policy, timeout=0.6
    ).results
    assert row.status is Status.ERROR
    reason = row.reason or ""
    assert reason.startswith("CallTimeoutError: no answer from openai/x"), reason
    assert "within its 1 s deadline (" in reason, reason
    assert "timeout x1" in reason, reason  # the first attempt, cut at its own 0.6 s timeout
    # the second is cut at the call's deadline (1 s): no third attempt, where attempts x
    # timeout would have allowed six (a slow machine can only leave less time for the second)
    assert server.count <= 2


@pytest.mark.anyio
async def test_random_refusals_do_not_lower_the_concurrency() -> None:
    gate = Gate("r", Limits(max_concurrency=8))
    gate.in_flight = 8
    gate.on_success()  # answered with 8 in flight
    gate.on_rate_limit(1.0)  # the resource lately took 8 at once: a random refusal
    assert gate.concurrency == 8
    capped = Gate("c", Limits(max_concurrency=8))
    capped.in_flight = 4
    capped.on_success()
    capped.in_flight = 5
    capped.on_rate_limit(1.0)  # never answered with 5 in flight: it caps calls in flight
    assert capped.concurrency == 4
    burst = Gate("b", Limits(max_concurrency=16))
    burst.in_flight = 16
    burst.on_success(sent_with=14)  # a lucky call of a burst the resource capped
    burst.on_rate_limit(0.05, sent_with=12)  # as often taken as refused: may be at random
    assert burst.concurrency == 16
    burst.on_rate_limit(0.05, sent_with=11)  # refused more often than taken: a cap
    assert burst.concurrency == 10


def test_a_capped_provider_is_held_at_its_cap_without_lost_rows() -> None:
    with FakeOpenAI(Judge(verdicts={"c": 1}), max_in_flight=4, latency=0.02) as server:
        server.retry_after = 0.05
        llm = LLMConfig(model="openai/x", api_base=server.url, api_key=KEY)
        ev = ctxeval.evaluate(samples(60), ["context_precision"], llm=llm, retry=FAST)
        assert all(r.status is Status.OK for r in ev.results)
        statuses = server.stats()["statuses"]
        # held at the cap: fewer refused than taken (unheld, 16 in flight against a cap of 4
        # would be refused about three times in four); a bound on counts, not on time
        assert statuses.get("429", 0) < statuses["200"]


# --- structured output ---------------------------------------------------------------------


def _modes(requests: list[dict[str, Any]]) -> list[str]:
    """The output mode of each request, as ctxeval names it."""
    found = []
    for request in requests:
        response_format = request.get("response_format") or {}
        kind = response_format.get("type")
        if kind == "json_object" and "schema" in response_format:
            found.append("json_object_schema")
        elif kind is not None:
            found.append(kind)
        else:
            found.append("guided" if "guided_json" in request else "prompt")
    return found


@pytest.mark.parametrize(
    ("accepts", "modes"),
    [
        (("json_object",), ["json_schema", "json_object_schema"] + ["json_object_schema"] * 2),
        # json_object refused too: the server's own fields, which this one ignores
        ((), ["json_schema", "json_object_schema", "json_object"] + ["guided"] * 3),
    ],
)
def test_a_server_without_json_schema_falls_back_once_for_the_run(
    accepts: tuple[str, ...], modes: list[str]
) -> None:
    with FakeOpenAI(Judge(verdicts={"c": 1}), accepts=accepts) as server:
        llm = LLMConfig(model="openai/x", api_base=server.url, api_key=KEY)
        ev = ctxeval.evaluate(samples(3), ["context_precision"], llm=llm, max_concurrency=1)
        assert all(r.status is Status.OK for r in ev.results)
        assert _modes(server.requests) == modes
        schema_at = server.requests[-1]
        assert "JSON schema" in schema_at["messages"][0]["content"]  # from the second step on
        assert ev.results[0].usage.requests == len(modes) - 2  # the refused requests count
        assert ev.results[0].details["provenance"]["judges"][0]["output_mode"] == modes[-1]


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_concurrent_first_requests_probe_the_output_mode_once(backend: str) -> None:
    """The race a real llama.cpp server showed: 16 first requests all refused, and each
    refusal stepping down again. One request probes; the others wait and use what it found."""
    refusal = Reply(
        500, body=b'{"error": {"message": "response_format json_schema is not supported"}}'
    )
    judge = Judge(verdicts={"c": 1})

    def answer(request: dict[str, Any]) -> Any:
        kind = (request.get("response_format") or {}).get("type")
        return refusal if kind == "json_schema" else judge(request)

    with FakeOpenAI(answer, latency=0.01) as server:
        llm = LLMConfig(model="openai/x", api_base=server.url, api_key=KEY)

        async def go() -> Any:
            return await ctxeval.aevaluate(
                samples(40), ["context_precision"], llm=llm, max_concurrency=16
            )

        ev = anyio.run(go, backend=backend)
        assert all(r.status is Status.OK for r in ev.results)
        sent = _modes(server.requests)
        assert sent.count("json_schema") == 1  # the probe, refused once
        assert sent[0] == "json_schema"
        assert set(sent[1:]) == {"json_object_schema"}
        assert sum(r.usage.requests for r in ev.results) == len(sent)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_recognised_llama_cpp_python_server_is_never_sent_what_it_refuses(
    backend: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The slot probe recognised the server: the first request is already in the mode it
    takes (JSON mode with the schema), not a json_schema request it answers with a 500."""
    with FakeOpenAI(
        Judge(verdicts={"c": 1}), accepts=("json_object",),
        routes={"/v1/models": LLAMA_CPP_PYTHON_MODELS},
    ) as server, caplog.at_level("INFO", logger="ctxeval_llm._ask.client"):  # fmt: skip
        llm = LLMConfig(model="openai/x", api_base=server.url)
        ev = anyio.run(
            lambda: ctxeval.aevaluate(samples(6), ["context_precision"], llm=llm),
            backend=backend,
        )
        assert all(r.status is Status.OK for r in ev.results)
        assert server.statuses == [200] * len(server.requests)  # nothing refused
        assert set(_modes(server.requests)) == {"json_object_schema"}
        assert sum(r.usage.requests for r in ev.results) == len(server.requests)
    judges = {j["output_mode"] for r in ev.results for j in r.details["provenance"]["judges"]}
    assert judges == {"json_object_schema"}
    assert "is llama-cpp-python: asking in JSON mode with the schema" in caplog.text


def test_a_recognised_server_that_refuses_its_known_mode_still_steps_down() -> None:
    """What a server is known to take is where the ladder starts, not a promise: a build
    that refuses it steps down as any server does."""
    with FakeOpenAI(
        Judge(verdicts={"c": 1}), accepts=(), routes={"/v1/models": LLAMA_CPP_PYTHON_MODELS}
    ) as server:
        llm = LLMConfig(model="openai/x", api_base=server.url)
        ev = ctxeval.evaluate(samples(3), ["context_precision"], llm=llm)
        assert all(r.status is Status.OK for r in ev.results)
        assert _modes(server.requests) == ["json_object_schema", "json_object"] + ["guided"] * 3


def test_a_malformed_answer_is_asked_again_with_a_repair_turn() -> None:
    judge = Judge(verdicts={"c": 1})
    seen: list[dict[str, Any]] = []

    def answer(request: dict[str, Any]) -> Any:
        seen.append(request)
        return "The answer is 340." if len(seen) == 1 else judge(request)

    with FakeOpenAI(answer) as server:
        llm = LLMConfig(model="openai/x", api_base=server.url, api_key=KEY)
        ev = ctxeval.evaluate(samples(1), ["context_precision"], llm=llm, retry=FAST)
        assert [r.status for r in ev.results] == [Status.OK]
        first, second = seen[0]["messages"], seen[1]["messages"]
        assert second[: len(first)] == first
        assert second[-2] == {"role": "assistant", "content": "The answer is 340."}
        assert "cannot be used: the model's answer is not JSON" in second[-1]["content"]


def test_an_answer_cut_at_max_tokens_gets_twice_the_budget_once_then_says_so() -> None:
    cut = Reply(
        200,
        body=json.dumps(
            {
                "choices": [
                    {
                        "message": {"role": "assistant", "content": '{"reason": "because'},
                        "finish_reason": "length",
                    }
                ],
                "usage": {"prompt_tokens": 50, "completion_tokens": 600},
            }
        ).encode(),
    )
    judge = Judge(verdicts={"c": 1})
    budgets: list[int] = []

    def answer(request: dict[str, Any]) -> Any:
        budgets.append(request["max_tokens"])
        return judge(request) if request["max_tokens"] > 1000 and fixed else cut

    for fixed in (True, False):
        budgets.clear()
        with FakeOpenAI(answer) as server:
            llm = LLMConfig(model="openai/x", api_base=server.url, api_key=KEY, max_tokens=600)
            ev = ctxeval.evaluate(samples(1), ["context_precision"], llm=llm, retry=FAST)
        [row] = ev.results
        assert budgets == [600, 1200]
        if fixed:
            assert row.status is Status.OK
        else:
            assert row.status is Status.ERROR
            assert "cut at max_tokens (1200) again" in (row.reason or "")
            assert "raise max_tokens" in (row.reason or "")
            # an error row says who was asked, as a scored row does
            said = row.details["provenance"]["judges"][0]
            assert (said["max_tokens"], said["output_mode"]) == (600, "json_schema")


def test_a_500_refusing_json_schema_also_falls_back() -> None:
    """Some llama.cpp builds answer 500 'response_format type must be one of "text" or
    "json_object"'; that is a refusal of the mode, not an outage."""
    refusal = Reply(
        500,
        body=b'{"error": {"code": 500, "message": "response_format type must be one of '
        b'\\"text\\" or \\"json_object\\", but got: json_schema", "type": "server_error"}}',
    )
    judge = Judge(verdicts={"c": 1})

    def answer(request: dict[str, Any]) -> Any:
        kind = (request.get("response_format") or {}).get("type")
        return refusal if kind == "json_schema" else judge(request)

    with FakeOpenAI(answer) as server:
        llm = LLMConfig(model="openai/x", api_base=server.url, api_key=KEY)
        ev = ctxeval.evaluate(samples(3), ["context_precision"], llm=llm, max_concurrency=1)
        assert all(r.status is Status.OK for r in ev.results)
        assert _modes(server.requests) == ["json_schema"] + ["json_object_schema"] * 3


# --- the transport ---------------------------------------------------------------------------


def test_requests_go_through_an_http_proxy(
    server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    with ForwardProxy() as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        llm = LLMConfig(model="openai/x", api_base=server.url, api_key=KEY)
        ev = ctxeval.evaluate(samples(3), ["context_precision"], llm=llm)
    assert all(r.status is Status.OK for r in ev.results)
    assert proxy.posts == [f"POST {server.url}/chat/completions"] * 3
    assert proxy.probed_only(server.url.removesuffix("/v1"))  # (the probe: the same route)
    assert server.count == 3


def test_no_proxy_bypasses_the_proxy(server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    with ForwardProxy() as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        llm = LLMConfig(model="openai/x", api_base=server.url, api_key=KEY)
        ctxeval.evaluate(samples(2), ["context_precision"], llm=llm)
    assert proxy.seen == []
    assert server.count == 2


def test_an_endless_answer_is_cut_at_the_size_limit(server: FakeOpenAI) -> None:
    server.responder = lambda request: "endless"
    llm = LLMConfig(model="openai/x", api_base=server.url, api_key=KEY, max_response_bytes=100_000)
    [row] = ctxeval.evaluate([SAMPLE], ["context_precision"], llm=llm).results
    assert row.status is Status.ERROR
    assert "ResponseTooLargeError" in (row.reason or "")
    assert "larger than 100000 bytes" in (row.reason or "")
    assert "LLMConfig(max_response_bytes=...)" in (row.reason or "")  # what to do
    chunks = len(SAMPLE["retrieved_contexts"])
    assert server.count <= chunks  # one request per chunk at most: never retried


def test_one_pool_per_run_with_keep_alive(server: FakeOpenAI) -> None:
    llm = LLMConfig(model="openai/x", api_base=server.url, api_key=KEY)
    ev = ctxeval.evaluate(samples(40), ["context_precision"], llm=llm, max_concurrency=4)
    assert all(r.status is Status.OK for r in ev.results)
    assert server.peak_in_flight <= 4
    assert {h["authorization"] for h in server.headers} == {f"Bearer {KEY}"}


class EchoTransport:
    """A transport of one's own (a company gateway's, say): no HTTP at all."""

    name = "echo"

    def __init__(self) -> None:
        self.ready_calls = 0
        self.requests: list[Mapping[str, Any]] = []
        self.closed = False

    async def ready(self, ctx: RunContext) -> None:
        self.ready_calls += 1

    async def complete(self, ctx: RunContext, request: Mapping[str, Any]) -> Completion:
        self.requests.append(request)
        await anyio.sleep(0)
        return Completion(json.dumps({"reason": "echo", "verdict": 1}), 10, 2)

    async def aclose(self) -> None:
        self.closed = True


def test_a_transport_of_ones_own() -> None:
    transport = EchoTransport()
    ev = ctxeval.evaluate(
        samples(5), ["context_precision"], llm={"model": "gateway/judge", "transport": transport}
    )
    assert [r.score for r in ev.results] == [1.0] * 5
    assert transport.ready_calls == 1
    assert len(transport.requests) == 5
    assert transport.requests[0]["model"] == "gateway/judge"
    assert not transport.closed  # the caller's object: the caller closes it
    assert ev.results[0].usage.prompt_tokens == 10


def test_bad_llm_settings_are_refused_when_built() -> None:
    with pytest.raises(ctxeval.ConfigError, match="transport"):
        LLMConfig(model="openai/x", transport="carrier-pigeon")  # type: ignore[arg-type]
    with pytest.raises(ctxeval.ConfigError, match="OpenAI API only"):
        LLMConfig(model="anthropic/claude", transport="openai")
    with pytest.raises(ValueError, match="timeout"):
        LLMConfig(model="openai/x", timeout=-5)
    with pytest.raises(ValueError, match="max_response_bytes"):
        LLMConfig(model="openai/x", max_response_bytes=0)
    with pytest.raises(ctxeval.ConfigError, match="deadline or max_attempts"):
        RetryPolicy(deadline=None)


def test_every_judged_row_says_who_judged_it(server: FakeOpenAI) -> None:
    llm = LLMConfig(model="openai/judge-a", api_base=server.url, api_key=KEY)
    ev = ctxeval.evaluate(
        [SAMPLE, {**SAMPLE, "retrieved_contexts": []}],
        ["context_precision", "context_recall", "id_based_context_precision"],
        llm=llm,
    )
    by_metric = {(r.sample_id, r.metric): r for r in ev.results}
    judged = by_metric[("0", "context_precision")].details["provenance"]
    assert judged == {
        "ctxeval": ctxeval.__version__,
        "judges": [
            {
                "model": "openai/judge-a",
                "endpoint": server.url,
                "prompts": ["usefulness@1"],
                "temperature": 0.0,
                "max_tokens": 1024,
                "output_mode": "json_schema",
            }
        ],
    }
    recall = by_metric[("0", "context_recall")].details["provenance"]
    assert recall["judges"][0]["prompts"] == ["attribution@1"]
    # no judge, no provenance: a row decided without a call, a deterministic metric
    assert "provenance" not in (by_metric[("1", "context_precision")].details)
    assert all("provenance" not in r.details for r in ev.results if r.metric.startswith("id_"))


@pytest.mark.anyio
async def test_the_httpx_transport_and_the_batch_mode_on_asyncio_and_trio(
    server: FakeOpenAI,
) -> None:
    server.faults = {"429": 0.2, "500": 0.1}
    server.retry_after = 0.05
    plain = LLMConfig(model="openai/x", api_base=server.url, api_key=KEY)
    ev = await ctxeval.aevaluate(samples(20), ["context_precision"], llm=plain, retry=FAST)
    assert all(r.status is Status.OK for r in ev.results)
    batched = LLMConfig(model="openai/y", api_base=server.url, api_key=KEY, batch=True,
                        batch_linger=0.05, batch_poll_interval=0.05)  # fmt: skip
    server.batch_delay = 0.05
    ev = await ctxeval.aevaluate(samples(20), ["context_precision"], llm=batched, retry=FAST)
    assert all(r.status is Status.OK for r in ev.results)
    assert len(server.batches) == 1


def test_an_answer_echoing_the_key_is_masked_in_every_log_line(
    server: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    import logging

    caplog.set_level(logging.DEBUG)
    answers = iter([f"my key is {KEY}, not JSON", json.dumps({"reason": "r", "verdict": 1})])
    server.responder = lambda request: next(answers)
    llm = LLMConfig(model="openai/x", api_base=server.url, api_key=KEY)
    [row] = ctxeval.evaluate([SAMPLE], ["context_precision"], llm=llm, retry=FAST).results
    assert row.status is Status.OK
    assert "not JSON" in caplog.text  # the failed attempt was logged...
    assert KEY not in caplog.text  # ...with the key masked


def test_resuming_with_another_judge_scores_again(server: FakeOpenAI, tmp_path: Path) -> None:
    data = write_data(tmp_path, 8)
    out = tmp_path / "run"
    common = ["evaluate", str(data), "-m", "context_precision", "--api-base", server.url,
              "--out", str(out), "--no-cache", "-q"]  # fmt: skip
    assert cli([*common, "--model", "openai/judge-a"]) == 0
    assert server.count == 8
    assert cli([*common, "--model", "openai/judge-a", "--resume"]) == 0
    assert server.count == 8  # same judge: every row reused
    assert cli([*common, "--model", "openai/judge-b", "--resume"]) == 0
    assert server.count == 16  # another judge: every row scored again
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    judges = {r["details"]["provenance"]["judges"][0]["model"] for r in rows}
    assert judges == {"openai/judge-b"}
