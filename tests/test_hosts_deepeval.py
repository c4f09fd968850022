"""The DeepEval adapter (ctxeval_hosts.deepeval) against the real DeepEval, offline (telemetry
off, every non-loopback connection refused and recorded), the LLM metric against the fake
OpenAI server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hosts_offline import refuse_network, set_offline_environment

set_offline_environment()

from deepeval import assert_test, evaluate  # noqa: E402
from deepeval.evaluate.configs import AsyncConfig, DisplayConfig  # noqa: E402
from deepeval.test_case import LLMTestCase, RetrievedContextData  # noqa: E402

import ctxeval  # noqa: E402
from ctxeval import DataError  # noqa: E402
from ctxeval_hosts.deepeval import CtxevalMetric, metrics, sample_from  # noqa: E402
from ctxeval_llm import LLMConfig  # noqa: E402
from fakes.openai_server import FakeOpenAI  # noqa: E402
from llm_judge import Judge  # noqa: E402

QUIET = DisplayConfig(show_indicator=False, print_results=False, inspect_after_run=False)
ID_METRICS = ["id_based_context_recall", "id_based_context_precision", "id_mrr"]
CORPUS = {
    "d1": "Paris is the capital of France.",
    "d2": "The Eiffel Tower is in Paris.",
    "d3": "Rome is the capital of Italy.",
}
ROWS = [
    ("Capital of France?", ["d1", "d2"], ["d1"]),
    ("Tower?", ["d3", "d2"], ["d2"]),
    ("Italy?", ["d1"], ["d3"]),
    ("Nothing to recall?", ["d1"], []),
]


@pytest.fixture(autouse=True)
def offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.chdir(tmp_path)  # DeepEval writes its .deepeval folder in the working folder
    monkeypatch.setenv("DEEPEVAL_NO_INSPECT_PROMPT", "1")
    tried = refuse_network(monkeypatch)
    yield
    assert tried == [], f"DeepEval or the adapter tried the network: {tried}"


def case_of(question: str, ids: list[str], reference: list[str]) -> LLMTestCase:
    return LLMTestCase(
        input=question,
        actual_output="an answer",
        expected_output="Paris.",
        retrieval_context=[RetrievedContextData(context=CORPUS[i], source=i) for i in ids],
        metadata={"reference_context_ids": reference},
        name=question,
    )


def plain(question: str, ids: list[str], reference: list[str]) -> dict[str, Any]:
    return {
        "id": question,
        "user_input": question,
        "response": "an answer",
        "reference": "Paris.",
        "retrieved_contexts": [CORPUS[i] for i in ids],
        "retrieved_context_ids": ids,
        "reference_context_ids": reference,
    }


# --- fields ----------------------------------------------------------------------------------


def test_the_fields_of_a_test_case() -> None:
    case = LLMTestCase(
        input="Where?",
        actual_output="In Paris.",
        expected_output="Paris.",
        context=[CORPUS["d1"]],
        retrieval_context=[
            RetrievedContextData(context=CORPUS["d2"], source="d2"),
            RetrievedContextData(context=CORPUS["d1"], source="d1"),
        ],
        metadata={"reference_context_ids": ["d1"]},
        name="case-1",
    )
    sample = sample_from(case)
    assert sample.id == "case-1"
    assert (sample.user_input, sample.response, sample.reference) == (
        "Where?",
        "In Paris.",
        "Paris.",
    )
    assert sample.retrieved_contexts == (CORPUS["d2"], CORPUS["d1"])
    assert sample.retrieved_context_ids == ("d2", "d1")
    assert sample.reference_contexts == (CORPUS["d1"],)  # `context`, never the retrieved ones
    assert sample.reference_context_ids == ("d1",)


def test_plain_strings_have_no_ids_and_a_mix_is_an_error() -> None:
    strings = sample_from(LLMTestCase(input="q", retrieval_context=["a", "b"]))
    assert (strings.retrieved_contexts, strings.retrieved_context_ids) == (("a", "b"), None)
    mixed = LLMTestCase(
        input="q", retrieval_context=["a", RetrievedContextData(context="b", source="d2")]
    )
    with pytest.raises(DataError, match="would not line up"):
        sample_from(mixed)


# --- through deepeval.evaluate and assert_test -----------------------------------------------


def scores_of(result: Any) -> dict[tuple[str, str], Any]:
    return {
        (test.name, data.name): data for test in result.test_results for data in test.metrics_data
    }


@pytest.mark.parametrize("run_async", [True, False])
def test_id_metrics_through_deepeval_evaluate_equal_ctxeval_evaluate(run_async: bool) -> None:
    made = metrics(ID_METRICS, threshold=0.5)
    result = evaluate(
        [case_of(*row) for row in ROWS],
        made,
        async_config=AsyncConfig(run_async=run_async),
        display_config=QUIET,
    )
    got = scores_of(result)
    expected = ctxeval.evaluate([plain(*row) for row in ROWS], ID_METRICS)
    for row in expected.results:
        data = got[(row.sample_id, row.metric)]
        if row.status is ctxeval.Status.OK:
            assert (data.score, data.error) == (row.score, None)
            assert data.success is (row.score >= 0.5)
        else:  # undefined: not scored, never 0
            assert data.score is None
            assert data.success is False
            assert data.error.startswith("not scored (undefined): ")
    # one session, each test case scored once for all three metrics
    assert len(made[0].shared.evaluation().results) == len(ROWS) * len(ID_METRICS)
    made[0].shared.close()


def test_undefined_can_be_skipped_instead() -> None:
    made = metrics(["id_based_context_recall"], undefined="skip")
    result = evaluate([case_of(*ROWS[3])], made, display_config=QUIET)
    assert result.test_results[0].metrics_data in (None, [])
    made[0].shared.close()


def test_assert_test_passes_fails_and_says_not_scored() -> None:
    metric = CtxevalMetric("id_based_context_recall", threshold=1.0)
    assert_test(case_of(*ROWS[0]), [metric])
    with pytest.raises(AssertionError, match="id_based_context_recall"):
        assert_test(case_of(*ROWS[2]), [metric])
    with pytest.raises(AssertionError, match="not scored"):
        assert_test(case_of(*ROWS[3]), [metric])
    metric.shared.close()


def test_measure_sets_the_attributes_deepeval_reads() -> None:
    metric = CtxevalMetric("id_mrr", threshold=0.75)
    assert metric.measure(case_of(*ROWS[1])) == 0.5
    assert (metric.score, metric.success, metric.is_successful(), metric.error) == (
        0.5,
        False,
        False,
        None,
    )
    assert metric.reason == "first relevant rank: 2"
    assert metric.score_breakdown["status"] == "ok"
    assert metric.__name__ == "id_mrr"
    metric.shared.close()


@pytest.fixture
def judge_server() -> Iterator[FakeOpenAI]:
    judge = Judge(verdicts={CORPUS["d1"]: 1, CORPUS["d2"]: 0, CORPUS["d3"]: 0})
    with FakeOpenAI(judge) as server:
        yield server


def test_an_llm_metric_in_async_mode_equals_ctxeval_evaluate(judge_server: FakeOpenAI) -> None:
    llm = LLMConfig(model="openai/fake-judge", api_base=judge_server.url, api_key="sk-test")
    made = metrics(["context_precision", "id_mrr"], llm=llm, threshold=0.5)
    result = evaluate([case_of(*row) for row in ROWS], made, display_config=QUIET)
    sent = judge_server.count
    assert sent > 0
    expected = ctxeval.evaluate([plain(*row) for row in ROWS], ["context_precision"], llm=llm)
    assert judge_server.count == 2 * sent  # the same requests; each test case scored once
    got = scores_of(result)
    for row in expected.results:
        data = got[(row.sample_id, "context_precision")]
        assert data.score == row.score
        assert data.evaluation_model == "openai/fake-judge"
    made[0].shared.close()


def test_string_metrics_take_context_as_the_reference_contexts() -> None:
    names = ["non_llm_context_recall", "non_llm_context_precision_with_reference"]
    made = metrics(names)
    case = LLMTestCase(
        input="q",
        retrieval_context=[CORPUS["d1"], CORPUS["d3"]],
        context=[CORPUS["d1"], CORPUS["d2"]],
    )
    got = [metric.measure(case) for metric in made]
    expected = ctxeval.evaluate(
        [
            {
                "retrieved_contexts": [CORPUS["d1"], CORPUS["d3"]],
                "reference_contexts": [CORPUS["d1"], CORPUS["d2"]],
            }
        ],
        names,
    ).results
    assert got == [r.score for r in expected]
    assert got != [1.0, 1.0]
    made[0].shared.close()
