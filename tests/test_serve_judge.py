"""``ctxeval serve-judge``: the scripted local judge (NOT a real judge) answers every prompt of
ctxeval's LLM metrics with a well-formed answer, over real HTTP, in every output mode; the
command line runs the four LLM context metrics against it with no API key; the banner's and
the README's commands are the ones that work; Ctrl-C and SIGTERM stop it cleanly."""

from __future__ import annotations

import http.client
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import ctxeval
from ctxeval._judge_server import MODEL, JudgeServer, answer, make_server, server_url
from ctxeval._judge_server.answers import UnknownPromptError, entities_of, prompt_kind
from ctxeval.cli import build_parser
from ctxeval.cli.serve_judge import DEFAULT_PORT, TRY_METRICS, try_command
from ctxeval_llm import LLMConfig, prompts
from fakes.openai_server import FakeOpenAI, scripted_judge

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "core" / "ctxeval" / "data" / "demo.jsonl"
FOUR = [
    "context_precision",
    "llm_context_precision_without_reference",
    "context_recall",
    "context_entity_recall",
]
KEY_VARIABLES = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_BASE")

VARIABLES: dict[str, dict[str, str]] = {
    "entities": {"text": "The Eiffel Tower is on the Champ de Mars in Paris, France, since 1889."},
    "usefulness": {
        "question": "Where is the Eiffel Tower?",
        "answer": "The Eiffel Tower is in Paris.",
        "context": "The Eiffel Tower is a lattice tower in Paris.",
    },
    "usefulness_batch": {
        "question": "Where is the Eiffel Tower?",
        "answer": "The Eiffel Tower is in Paris.",
        "contexts": "[1] The Eiffel Tower is in Paris.\n[2] Bananas are\nyellow.\n[3] Lyon.",
    },
    "attribution": {
        "question": "Where is the Eiffel Tower?",
        "context": "The Eiffel Tower is in Paris.\nIt is 330 metres tall.",
        "answer": "The Eiffel Tower is in Paris. It was built by the Romans.",
    },
    "attribution_given": {
        "question": "Where is the Eiffel Tower?",
        "context": "The Eiffel Tower is in Paris.",
        "statements": "[1] The Eiffel Tower is in Paris.\n[2] It was built by the Romans.",
    },
    "entity_presence": {
        "entities": "[1] Gustave Eiffel\n[2] Paris\n[3] 1889",
        "context": "The tower in Paris was completed in 1889.",
    },
}
EXPECTED = {"usefulness_batch": 3, "attribution_given": 2, "entity_presence": 3}
PROMPTS = [
    prompts.ENTITIES,
    prompts.USEFULNESS,
    prompts.USEFULNESS_BATCH,
    prompts.ATTRIBUTION,
    prompts.ATTRIBUTION_GIVEN,
    prompts.ENTITY_PRESENCE,
]


def request_for(prompt: prompts.Prompt, mode: str) -> dict[str, Any]:
    """The request ctxeval sends for ``prompt`` in an output mode: ``json_schema``,
    ``json_object`` (schema in the prompt) or ``prompt`` (no response_format)."""
    request: dict[str, Any] = {
        "model": MODEL,
        "messages": prompt.messages(VARIABLES[prompt.name], schema_in_prompt=mode != "json_schema"),
        "temperature": 0,
    }
    if mode == "json_schema":
        request["response_format"] = prompt.response_format()
    elif mode == "json_object":
        request["response_format"] = {"type": "json_object"}
    return request


@pytest.fixture(scope="module")
def judge() -> Iterator[JudgeServer]:
    server = make_server("127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def post(
    server: JudgeServer, body: Any, *, path: str = "/v1/chat/completions", host: str | None = None
) -> tuple[int, dict[str, Any], dict[str, str]]:
    port = server.server_address[1]
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    headers = {"Content-Type": "application/json"}
    if host is not None:
        headers["Host"] = host
    conn.request("POST", path, body=json.dumps(body).encode(), headers=headers)
    response = conn.getresponse()
    data = json.loads(response.read())
    conn.close()
    return response.status, data, dict(response.getheaders())


def no_key_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in KEY_VARIABLES}
    env.update(HOME=str(tmp_path / "home"), XDG_CACHE_HOME=str(tmp_path / "cache"))
    return env


# --- the answers ---------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["json_schema", "json_object", "prompt"])
@pytest.mark.parametrize("prompt", PROMPTS, ids=lambda p: p.name)
def test_every_prompt_gets_an_answer_its_check_accepts(prompt: prompts.Prompt, mode: str) -> None:
    request = request_for(prompt, mode)
    assert prompt_kind(request) == prompt.name
    given = answer(request)
    assert json.loads(json.dumps(given)) == given
    prompt.check(given, EXPECTED.get(prompt.name))  # raises MalformedOutputError if not
    assert set(given) == set(prompt.schema["required"])
    assert answer(request) == given  # deterministic


def test_the_answers_follow_the_words_of_the_request() -> None:
    def of(name: str) -> dict[str, Any]:
        return answer(request_for(next(p for p in PROMPTS if p.name == name), "json_schema"))

    assert of("entities")["entities"] == [
        "Eiffel Tower",
        "Champ de Mars",
        "Paris",
        "France",
        "1889",
    ]
    assert of("usefulness")["verdict"] == 1
    assert [v["verdict"] for v in of("usefulness_batch")["verdicts"]] == [1, 0, 0]
    classifications = of("attribution")["classifications"]
    assert [c["statement"] for c in classifications] == [
        "The Eiffel Tower is in Paris.",
        "It was built by the Romans.",
    ]
    assert [c["attributed"] for c in classifications] == [1, 0]
    assert [v["attributed"] for v in of("attribution_given")["verdicts"]] == [1, 0]
    assert of("entity_presence")["present"] == [0, 1, 1]
    assert "not a real" in of("usefulness")["reason"]


def test_a_leading_article_and_a_possessive_are_not_part_of_a_name() -> None:
    text = "It was designed by Gustave Eiffel's company. The Louvre opened in 1793; The tower"
    assert entities_of(text) == ["Gustave Eiffel", "Louvre", "1793"]


@pytest.mark.parametrize(
    "request_",
    [
        {"model": MODEL, "messages": [{"role": "user", "content": "Tell me a joke."}]},
        {"model": MODEL, "messages": []},
        {
            "model": MODEL,
            "messages": [{"role": "user", "content": "Text: x"}],
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "joke", "schema": {"properties": {"joke": {}}}},
            },
        },
    ],
    ids=["chat", "no-messages", "other-schema"],
)
def test_a_request_that_is_no_ctxeval_prompt_is_refused(request_: dict[str, Any]) -> None:
    with pytest.raises(UnknownPromptError, match="only ctxeval's LLM-metric prompts"):
        answer(request_)


# --- the server ----------------------------------------------------------------------------


def test_the_server_answers_a_chat_completion(judge: JudgeServer) -> None:
    status, data, headers = post(judge, request_for(prompts.USEFULNESS, "json_schema"))
    assert status == 200
    assert data["object"] == "chat.completion"
    assert data["model"] == MODEL
    content = json.loads(data["choices"][0]["message"]["content"])
    assert content["verdict"] == 1
    assert data["usage"]["prompt_tokens"] > 0
    assert headers["X-Scripted-Judge"] == "not a real judge"


def test_the_server_lists_its_one_model(judge: JudgeServer) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", judge.server_address[1], timeout=10)
    conn.request("GET", "/v1/models")
    response = conn.getresponse()
    data = json.loads(response.read())
    conn.close()
    assert response.status == 200
    assert [m["id"] for m in data["data"]] == [MODEL]


@pytest.mark.parametrize(
    ("change", "status", "says"),
    [
        ({"model": "gpt-4o-mini"}, 404, "model_not_found"),
        ({"response_format": {"type": "grammar"}}, 400, "response_format"),
        ({"messages": [{"role": "user", "content": "hello"}]}, 400, "LLM-metric prompts"),
    ],
    ids=["other-model", "other-format", "not-a-prompt"],
)
def test_the_server_refuses_what_it_cannot_answer(
    judge: JudgeServer, change: dict[str, Any], status: int, says: str
) -> None:
    body = {**request_for(prompts.USEFULNESS, "json_schema"), **change}
    got, data, _ = post(judge, body)
    assert got == status
    assert says in json.dumps(data["error"])


def test_a_streamed_request_gets_the_same_answer_as_events(judge: JudgeServer) -> None:
    """As OpenAI streams: the text in a chunk, one with ``finish_reason``, the usage when
    asked, then ``[DONE]`` (ctxeval streams to a local server: the scripted judge takes it)."""
    body = request_for(prompts.USEFULNESS, "json_schema")
    _, whole, _ = post(judge, body)
    streamed = {**body, "stream": True, "stream_options": {"include_usage": True}}
    connection = http.client.HTTPConnection("127.0.0.1", judge.server_address[1], timeout=10)
    connection.request(
        "POST", "/v1/chat/completions", json.dumps(streamed), {"Content-Type": "application/json"}
    )
    response = connection.getresponse()
    assert response.status == 200
    assert response.getheader("Content-Type") == "text/event-stream"
    events = [
        line[len("data: ") :]
        for line in response.read().decode().split("\n\n")
        if line.startswith("data: ")
    ]
    connection.close()
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    assert text == whole["choices"][0]["message"]["content"]
    assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]] == [None, "stop"]
    assert chunks[-1]["usage"] == whole["usage"]


def test_another_host_name_is_refused(judge: JudgeServer) -> None:
    status, data, _ = post(judge, request_for(prompts.USEFULNESS, "json_schema"), host="evil.test")
    assert status == 403
    assert "Host" in data["error"]["message"]
    status, _, _ = post(
        judge,
        request_for(prompts.USEFULNESS, "json_schema"),
        host=f"localhost:{judge.server_address[1]}",
    )
    assert status == 200


@pytest.mark.parametrize("json_schema", [True, False], ids=["json_schema", "schema-in-prompt"])
def test_every_llm_part_runs_against_it(judge: JudgeServer, json_schema: bool) -> None:
    """Every LLM part of the plugins, through ctxeval's own transport: the batch judge, the
    LLM entity matcher, a jury (its second judge checks statements already split)."""
    llm = LLMConfig(model=f"openai/{MODEL}", api_base=server_url(judge), json_schema=json_schema)
    rows = [json.loads(line) for line in DEMO.read_text().splitlines()][:6]
    rows = [{**row, "response": row["reference"]} for row in rows]
    metrics = [
        *FOUR,
        ctxeval.get_metric("context_precision", name="precision_batch", batch=True),
        ctxeval.get_metric("context_entity_recall", name="entities_llm", matcher="llm"),
        ctxeval.get_metric("context_recall", name="recall_jury", judges=[llm, llm]),
    ]
    ev = ctxeval.evaluate(rows, metrics, llm=llm, cache=None)
    assert {r.status for r in ev.results} <= {ctxeval.Status.OK, ctxeval.Status.UNDEFINED}
    scores = {r.score for r in ev.results if r.status == ctxeval.Status.OK}
    assert len(scores) > 1  # the scores vary


def test_the_fake_server_answers_as_the_scripted_judge() -> None:
    """The test double answers with the shipped judge and the shipped wire shape."""
    with FakeOpenAI(scripted_judge) as fake:
        ev = ctxeval.evaluate(
            [{"user_input": "Where?", "reference": "Paris is in France.",
              "retrieved_contexts": ["Paris is in France.", "Bananas."]}],
            ["context_precision"],
            llm=LLMConfig(model="openai/fake", api_base=fake.url, api_key="sk-test"),
            cache=None,
        )  # fmt: skip
    assert ev.results[0].score == 1.0


# --- the command ---------------------------------------------------------------------------


class Judge:
    """``ctxeval serve-judge --port 0`` in a child process."""

    def __init__(self, tmp_path: Path, *args: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "ctxeval", "serve-judge", "--port", "0", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=no_key_env(tmp_path),
            cwd=ROOT,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        assert self.process.stdout is not None
        self.banner_lines = []
        for line in self.process.stdout:  # the banner ends with "Ctrl-C to stop."
            self.banner_lines.append(line)
            if line.startswith("Ctrl-C"):
                break
        self.banner = "".join(self.banner_lines)
        found = re.search(r"http://127\.0\.0\.1:(\d+)/v1", self.banner)
        assert found, self.banner + self.process.stderr.read()  # type: ignore[union-attr]
        self.url = found.group(0)
        self.port = int(found.group(1))

    def stop(self, sig: int = signal.SIGINT) -> tuple[int, str]:
        self.process.send_signal(sig)
        _, err = self.process.communicate(timeout=30)
        return self.process.returncode, err


def ctxeval_cli(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ctxeval", *args],
        capture_output=True,
        text=True,
        env=no_key_env(tmp_path),
        cwd=ROOT,
        timeout=300,
    )


def rows_of(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines()]


def test_end_to_end_the_four_llm_metrics_without_a_key(tmp_path: Path) -> None:
    data = tmp_path / "demo-with-response.jsonl"
    rows = [json.loads(line) for line in DEMO.read_text().splitlines()]
    data.write_text("".join(json.dumps({**r, "response": r["reference"]}) + "\n" for r in rows))
    judge = Judge(tmp_path)
    try:
        print(f"scripted judge on port {judge.port}")
        assert "NOT A REAL JUDGE — for trying the plumbing" in judge.banner
        metrics = [word for m in FOUR for word in ("-m", m)]
        out = tmp_path / "run"
        done = ctxeval_cli(
            ["evaluate", str(data), *metrics, "--model", f"openai/{MODEL}",
             "--api-base", judge.url, "--out", str(out)],
            tmp_path,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        assert "WARNING" not in done.stderr, done.stderr  # (streamed, as to any local server)
        results = rows_of(out)
        assert len(results) == 4 * len(rows)
        assert {r["status"] for r in results} <= {"ok", "undefined"}
        per_metric: dict[str, int] = {}
        for row in results:
            per_metric[row["metric"]] = per_metric.get(row["metric"], 0) + 1
        assert sorted(per_metric.values()) == [len(rows)] * 4
        scored = [r for r in results if r["status"] == "ok"]
        # a sample with nothing retrieved scores 0 without asking the judge
        judged = [r for r in scored if not r["details"].get("nothing_retrieved")]
        assert len(judged) > 100
        for row in judged:
            (who,) = row["details"]["provenance"]["judges"]
            assert who["model"] == f"openai/{MODEL}"
            assert who["endpoint"] == judge.url
        assert len({r["score"] for r in scored}) > 2
        # said where a person looks: the terminal, summary.json, the report's header
        assert "NOT A REAL JUDGE" in done.stdout
        summary = json.loads((out / "summary.json").read_text())
        assert summary["scripted_judge"].startswith("NOT A REAL JUDGE")
        for name in FOUR:
            [who] = {json.dumps(j, sort_keys=True) for j in summary["metrics"][name]["judges"]}
            assert json.loads(who)["model"] == f"openai/{MODEL}"
        header = (out / "report.html").read_text().split("</header>")[0]
        assert "NOT A REAL JUDGE" in header
        assert f"openai/{MODEL}" in header
    finally:
        code, err = judge.stop()
    assert code == 0, err
    assert "scripted judge stopped" in err
    assert "Traceback" not in err


def test_the_banner_command_runs_as_printed(tmp_path: Path) -> None:
    judge = Judge(tmp_path, "--latency", "0.01")
    try:
        printed = next(line.strip() for line in judge.banner_lines if " evaluate " in line)
        # started as `python -m ctxeval`: the command says so, to be typed as it is
        assert printed.endswith(try_command(judge.url).split(" ", 1)[1])
        words = shlex.split(printed)
        python = os.path.relpath(sys.executable, ROOT)
        python = sys.executable if python.startswith("..") else python
        assert words[:3] == [python, "-m", "ctxeval"]
        assert words[4] == "core/ctxeval/data/demo.jsonl"  # run from a clone, as the docs do
        words[words.index("--out") + 1] = str(tmp_path / "scripted-run")
        done = subprocess.run(
            words, capture_output=True, text=True, env=no_key_env(tmp_path), cwd=ROOT, timeout=300
        )
        assert done.returncode == 0, done.stdout + done.stderr
        results = rows_of(tmp_path / "scripted-run")
        assert len(results) == 30 * len(TRY_METRICS)
        assert {r["status"] for r in results} <= {"ok", "undefined"}
    finally:
        code, err = judge.stop(signal.SIGTERM)
    assert code == 0, err


def test_a_port_in_use_is_a_usage_error(tmp_path: Path) -> None:
    judge = Judge(tmp_path)
    try:
        done = ctxeval_cli(["serve-judge", "--port", str(judge.port)], tmp_path)
        assert done.returncode == 2
        assert "--port 0" in done.stderr
    finally:
        judge.stop()


def test_the_readme_quick_start_is_the_banner_command() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = next(
        b for b in re.findall(r"```bash\n(.*?)```", readme, re.DOTALL) if "serve-judge" in b
    )
    commands = [
        shlex.split(line.split("#", 1)[0].replace(".venv/bin/", ""))
        for line in block.replace("\\\n", " ").splitlines()
        if line.strip()
    ]
    assert commands[0] == ["ctxeval", "serve-judge"]
    assert build_parser().parse_args(commands[0][1:]).port == DEFAULT_PORT
    url = f"http://127.0.0.1:{DEFAULT_PORT}/v1"
    assert commands[1] == shlex.split(try_command(url, "core/ctxeval/data/demo.jsonl"))
    assert build_parser().parse_args(commands[1][1:]).api_base == url
    for page in ("README.md", "docs/llm.md"):
        assert "NOT A REAL JUDGE" in (ROOT / page).read_text(encoding="utf-8")
