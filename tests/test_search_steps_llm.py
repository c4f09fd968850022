"""The LLM context metrics over a multi-step search (#55): ``context="steps"`` judges the union
of the sample's ``retrieval_steps``, against the fake OpenAI server with a scripted judge."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import ctxeval
from ctxeval import RetryPolicy
from ctxeval_llm import LLMConfig
from fakes.openai_server import FakeOpenAI
from llm_judge import Judge, prompt_name, user_text

FAST = RetryPolicy(initial_backoff=0.001, max_backoff=0.02, jitter=0.0)
STEPS = [
    {"query": "dune", "retrieved_context_ids": ["a", "b"], "retrieved_contexts": ["A", "B"]},
    {"query": "herbert", "retrieved_context_ids": ["b", "c"], "retrieved_contexts": ["B", "C"]},
]
SAMPLE = {
    "id": "s1",
    "user_input": "Who wrote Dune?",
    "reference": "Herbert.",
    "retrieval_steps": STEPS,
}


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    judge = Judge(verdicts={"A": 1, "B": 0, "C": 1}, grades={"A": 3, "B": 0, "C": 3})
    with FakeOpenAI(judge) as fake:
        yield fake


def run(
    samples: list[dict[str, Any]], metrics: list[Any], server: FakeOpenAI
) -> ctxeval.Evaluation:
    config = LLMConfig(model="openai/fake-judge", api_base=server.url, api_key="sk-test-0123456789")
    return ctxeval.evaluate(samples, metrics, llm=config, retry=FAST, cache=None)


def test_precision_judges_the_union_of_the_steps_each_chunk_once(server: FakeOpenAI) -> None:
    metric = ctxeval.get_metric("llm_context_precision_with_reference", context="steps")
    assert metric.requires == ("user_input", "reference", "retrieval_steps")
    row = run([SAMPLE], [metric], server).results[0]
    # the union A, B, C (B returned twice, judged once): verdicts 1, 0, 1 -> (1/1 + 2/3) / 2
    assert row.score == pytest.approx((1 + 2 / 3) / 2)
    judged = sorted(user_text(r).split("\nContext: ", 1)[1] for r in server.requests)
    assert judged == ["A", "B", "C"]


def test_relevance_and_recall_take_the_union_and_the_dry_run_counts_its_calls(
    server: FakeOpenAI,
) -> None:
    relevance = ctxeval.get_metric("context_relevance", context="steps")
    recall = ctxeval.get_metric("llm_context_recall", context="steps")
    assert relevance.estimate_calls(ctxeval.Sample.from_dict(SAMPLE)) != []
    assert len(relevance.estimate_calls(ctxeval.Sample.from_dict(SAMPLE))) == 3  # A, B, C
    rows = run([SAMPLE], [relevance, recall], server).results
    assert rows[0].score == pytest.approx((3 + 0 + 3) / 9)  # mean grade / 3 over A, B, C
    assert [doc for doc, _ in rows[0].details["qrels"]] == ["a", "b", "c"]  # the steps' IDs
    assert rows[1].status.value == "ok"
    asked = [user_text(r) for r in server.requests if prompt_name(r) == "attribution"]
    assert len(asked) == 1
    assert all(text in asked[0] for text in ("A", "B", "C"))


def test_without_the_option_the_steps_are_not_the_context(server: FakeOpenAI) -> None:
    plain, steps = (
        ctxeval.get_metric("context_sufficiency", context=c) for c in ("retrieved", "steps")
    )
    rows = run(
        [SAMPLE],
        [plain, ctxeval.get_metric("context_sufficiency", context="steps", name="s")],
        server,
    )
    first, second = rows.results
    assert first.status.value == "error"
    assert "retrieved_contexts" in (first.reason or "")  # a missing field, as before
    assert second.status.value == "ok"
    assert steps.requires == ("user_input", "retrieval_steps")


def test_a_step_without_texts_is_an_error_row_with_no_request(server: FakeOpenAI) -> None:
    sample = {**SAMPLE, "retrieval_steps": [*STEPS, {"retrieved_context_ids": ["d"]}]}
    row = run([sample], [ctxeval.get_metric("context_relevance", context="steps")], server).results[
        0
    ]
    assert row.status.value == "error"
    assert "retrieval_steps[2] has no retrieved_contexts" in (row.reason or "")
    assert server.requests == []
    with pytest.raises(ctxeval.ConfigError, match="context"):
        ctxeval.get_metric("llm_context_recall", context="all")
