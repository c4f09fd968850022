"""The Inspect AI scorer (issue #51) in a real ``inspect_ai.eval`` of a small Task, offline
(the ``mockllm/model`` model under evaluation, no key, no network): the scores of
``ctxeval.evaluate`` on the same rows, undefined rows unscored (kept in the log, out of the mean),
a missing field that sample's clear error score; an LLM metric against the fake OpenAI server,
and the same metric judged by Inspect's own model (a scripted ``mockllm``)."""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import ctxeval

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("INSPECT_DISPLAY", "none")

pytest.importorskip("inspect_ai", reason="pip install 'ctxeval[inspect]'")

from inspect_ai import Task
from inspect_ai import eval as inspect_eval
from inspect_ai.dataset import Sample
from inspect_ai.log import EvalLog
from inspect_ai.model import Model, ModelOutput, ModelUsage, get_model
from inspect_ai.solver import Generate, TaskState, generate, solver

from ctxeval_hosts.inspect_ai import InspectJudge, ctxeval_scorer
from ctxeval_llm import LLMConfig
from fakes.openai_server import FakeOpenAI
from hosts_offline import refuse_network
from llm_judge import Judge

ROWS: list[dict[str, Any]] = [
    {"retrieved_context_ids": ["d1", "d2", "d3"], "reference_context_ids": ["d2", "d9"]},
    {"retrieved_context_ids": ["d5"], "reference_context_ids": ["d5"]},
    {"retrieved_context_ids": ["d1"], "reference_context_ids": []},  # undefined
    {"retrieved_context_ids": ["d7", "d8"], "reference_context_ids": ["d4"]},
]
LLM_ROWS: list[dict[str, Any]] = [
    {
        "user_input": "What is the capital of France?",
        "reference": "Paris.",
        "retrieved_contexts": ["Berlin.", "Paris is the capital."],
    },
    {
        "user_input": "Where is the Eiffel Tower?",
        "reference": "In Paris.",
        "retrieved_contexts": ["The Eiffel Tower is in Paris.", "Berlin.", "Rome."],
    },
]
VERDICTS = {"Paris is the capital.": 1, "The Eiffel Tower is in Paris.": 1}


@pytest.fixture(autouse=True)
def no_calls_home(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every connection (and name lookup) outside the loopback is refused and recorded: the
    test fails if the host tried one (telemetry, tracing, an update check, a download)."""
    tried = refuse_network(monkeypatch)
    yield
    assert tried == [], f"{tried}: the hosts must stay offline"


def _samples(rows: list[dict[str, Any]], **target: Any) -> list[Sample]:
    return [
        Sample(
            id=f"s{i}",
            input=row.get("user_input", "q"),
            target=row.get("reference", ""),
            metadata={k: v for k, v in row.items() if k not in ("user_input", "reference")},
        )
        for i, row in enumerate(rows)
    ]


def _with_usage(output: ModelOutput) -> ModelOutput:
    # (mockllm counts the tokens of an output without usage with tiktoken, whose encoding is
    # downloaded on first use: an output that says its usage keeps the eval offline)
    output.usage = ModelUsage(input_tokens=10, output_tokens=5, total_tokens=15)
    return output


def mock_model() -> Model:
    """Inspect's ``mockllm/model``, answering every sample with a fixed text."""

    def answer(messages: list[Any], tools: Any, tool_choice: Any, config: Any) -> ModelOutput:
        return _with_usage(ModelOutput.from_content("mockllm/model", "an answer"))

    return get_model("mockllm/model", custom_outputs=answer, memoize=False)


def run(task: Task, tmp_path: Path, **options: Any) -> EvalLog:
    [log] = inspect_eval(
        task,
        model=options.pop("model", None) or mock_model(),
        log_dir=str(tmp_path),
        display="none",
        **options,
    )
    assert log.status == "success", log.error
    return log


def scores_of(log: EvalLog, name: str) -> dict[str, Any]:
    assert log.samples is not None
    return {str(s.id): s.scores[name] for s in log.samples if s.scores}


def expected(rows: list[dict[str, Any]], metric: str, **options: Any) -> dict[str, float | None]:
    ev = ctxeval.evaluate(rows, [metric], **options)
    return {
        f"s{i}": (r.score if r.status is ctxeval.Status.OK else None)
        for i, r in enumerate(ev.results)
    }


def value(score: Any) -> float | None:
    number = float(score.value)
    return None if math.isnan(number) else number


@pytest.mark.parametrize("metric", ["id_based_context_recall", "id_based_context_precision"])
def test_an_eval_gives_evaluate_s_scores_and_leaves_undefined_rows_unscored(
    metric: str, tmp_path: Path
) -> None:
    scorer = ctxeval_scorer(metric)
    log = run(Task(dataset=_samples(ROWS), solver=[generate()], scorer=scorer), tmp_path)
    got = scores_of(log, metric)
    want = expected(ROWS, metric)
    assert {k: value(s) for k, s in got.items()} == want
    undefined = got["s2"]
    assert undefined.reason == "undefined"
    assert "nothing to recall" in (undefined.explanation or "")
    assert undefined.metadata["ctxeval.status"] == "undefined"
    # the mean is over the scored samples only (an unscored row is not a 0)
    scored = [v for v in want.values() if v is not None]
    assert log.results is not None
    metrics = log.results.scores[0].metrics
    assert metrics["mean"].value == pytest.approx(sum(scored) / len(scored))
    assert "stderr" in metrics
    # one session for the eval: every sample's row is in it
    assert len(scorer.ctxeval_session.evaluation().results) == len(ROWS)  # type: ignore[attr-defined]
    scorer.ctxeval_session.close()  # type: ignore[attr-defined]


def test_a_missing_field_is_that_samples_error_score(tmp_path: Path) -> None:
    samples = _samples(ROWS[:2])
    samples[1].metadata = {"retrieved_context_ids": ["d5"], "gold": ["d5"]}
    log = run(
        Task(
            dataset=samples, solver=[generate()], scorer=ctxeval_scorer("id_based_context_recall")
        ),
        tmp_path,
    )
    got = scores_of(log, "id_based_context_recall")
    assert value(got["s0"]) == 0.5
    error = got["s1"]
    assert value(error) is None
    assert error.reason == "scoring_failed"
    assert "metadata has no key 'reference_context_ids'" in (error.explanation or "")
    assert "'gold'" in (error.explanation or "")


@solver
def retrieve() -> Any:
    """A solver that retrieves at run time: the IDs go to the store."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        state.store.set("hits", state.metadata["run_ids"])
        return state

    return solve


def test_fields_from_the_store_and_the_target_list(tmp_path: Path) -> None:
    samples = [
        Sample(id="s0", input="q", target=["d2", "d9"], metadata={"run_ids": ["d1", "d2"]}),
        Sample(id="s1", input="q", target=["d5"], metadata={"run_ids": ["d5"]}),
    ]
    scorer = ctxeval_scorer(
        "id_based_context_recall",
        fields={"retrieved_context_ids": "store.hits", "reference_context_ids": "target_list"},
    )
    log = run(Task(dataset=samples, solver=[retrieve()], scorer=scorer), tmp_path)
    got = scores_of(log, "id_based_context_recall")
    assert {k: value(s) for k, s in got.items()} == {"s0": 0.5, "s1": 1.0}


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(Judge(verdicts=VERDICTS)) as fake:
        yield fake


def test_an_llm_metric_against_the_fake_server(server: FakeOpenAI, tmp_path: Path) -> None:
    llm = LLMConfig(model="openai/fake-judge", api_base=server.url, api_key="sk-test")
    want = expected(LLM_ROWS, "context_precision", llm=llm)
    sent = len(server.requests)
    scorer = ctxeval_scorer("context_precision", llm=llm)
    log = run(Task(dataset=_samples(LLM_ROWS), solver=[generate()], scorer=scorer), tmp_path)
    got = scores_of(log, "context_precision")
    assert {k: value(s) for k, s in got.items()} == want
    assert len(server.requests) - sent == sent  # the requests evaluate() sends, no more
    assert got["s0"].metadata["ctxeval.usage"]["requests"] >= 1


def _scripted(judge: Judge, calls: list[str]) -> Any:
    """A mockllm ``custom_outputs`` answering ctxeval's prompts as the fake server does."""

    def answer(messages: list[Any], tools: Any, tool_choice: Any, config: Any) -> ModelOutput:
        request: dict[str, Any] = {
            "messages": [{"role": m.role, "content": m.text} for m in messages]
        }
        if config.response_schema is not None:
            request["response_format"] = {"json_schema": {"name": config.response_schema.name}}
        calls.append(request["messages"][-1]["content"][:40])
        reply = judge(request)
        assert isinstance(reply, str)
        return _with_usage(ModelOutput.from_content("mockllm/model", reply))

    return answer


def test_inspects_own_model_as_the_judge(server: FakeOpenAI, tmp_path: Path) -> None:
    llm = LLMConfig(model="openai/fake-judge", api_base=server.url, api_key="sk-test")
    want = expected(LLM_ROWS, "context_precision", llm=llm)
    calls: list[str] = []
    grader = get_model(
        "mockllm/model", custom_outputs=_scripted(Judge(verdicts=VERDICTS), calls), memoize=False
    )
    scorer = ctxeval_scorer("context_precision", llm=InspectJudge(grader))
    sent = len(server.requests)
    log = run(
        Task(dataset=_samples(LLM_ROWS), solver=[], scorer=scorer), tmp_path, max_connections=2
    )
    got = scores_of(log, "context_precision")
    assert {k: value(s) for k, s in got.items()} == want
    assert len(calls) == sent  # one Inspect model call per judge request evaluate() sent
    assert len(server.requests) == sent  # and none went to the server
    [judged] = got["s0"].metadata["ctxeval.provenance"]["judges"]
    assert judged["model"] == "inspect/mockllm/model"


def test_the_judge_outside_an_eval_says_where_it_belongs() -> None:
    judge = InspectJudge("mockllm/model")
    with ctxeval.Session(["context_precision"], llm=judge) as session:
        [row] = session.score(LLM_ROWS[0])
    assert row.status is ctxeval.Status.ERROR
    assert "inside an Inspect eval" in (row.reason or "")


def test_fields_name_only_sample_fields() -> None:
    with pytest.raises(ctxeval.ConfigError, match="contexts"):
        ctxeval_scorer("id_mrr", fields={"contexts": "metadata.docs"})


def test_inspects_max_connections_bounds_the_judge(tmp_path: Path) -> None:
    """The judge's requests go through Inspect's model (its OpenAI provider, here at the fake
    server): Inspect's ``max_connections`` for that model holds, whatever ctxeval's own limit."""
    from inspect_ai.model import GenerateConfig

    rows = [
        {
            "user_input": f"question {i}?",
            "reference": "Paris.",
            "retrieved_contexts": [f"Berlin {i}.", f"Rome {i}.", "Paris is the capital."],
        }
        for i in range(6)
    ]
    with FakeOpenAI(Judge(verdicts=VERDICTS), latency=0.05) as server:
        grader = get_model(
            "openai/fake-judge",
            base_url=server.url,
            api_key="sk-test",
            responses_api=False,
            config=GenerateConfig(max_connections=2),
            memoize=False,
        )
        scorer = ctxeval_scorer("context_precision", llm=InspectJudge(grader), max_concurrency=16)
        log = run(Task(dataset=_samples(rows), solver=[], scorer=scorer), tmp_path)
        got = scores_of(log, "context_precision")
        assert all(value(s) == pytest.approx(1 / 3) for s in got.values())
        assert len(server.requests) == 18
        assert server.peak_in_flight <= 2
