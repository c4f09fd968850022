"""The MLflow GenAI adapter (ctxeval_hosts.mlflow) against the real MLflow, offline: a local
SQLite tracking store, traces made with ``@mlflow.trace(span_type="RETRIEVER")``, the LLM
metric against the fake OpenAI server."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from hosts_offline import refuse_network, set_offline_environment

set_offline_environment()

import mlflow  # noqa: E402
from mlflow.entities import AssessmentSourceType, Document, Feedback  # noqa: E402
from mlflow.genai.judges import CategoricalRating  # noqa: E402
from mlflow.genai.scorers import Scorer  # noqa: E402
from mlflow.genai.scorers.base import ScorerKind  # noqa: E402

import ctxeval  # noqa: E402
from ctxeval import DataError, MetricResult, Usage  # noqa: E402
from ctxeval_hosts.mlflow import (  # noqa: E402
    TraceFields,
    ctxeval_scorer,
    feedback_of,
    registrable_scorers,
    sample_from,
    scorers,
)
from ctxeval_llm import LLMConfig  # noqa: E402
from fakes.openai_server import FakeOpenAI  # noqa: E402
from llm_judge import Judge  # noqa: E402

ID_METRICS = ["id_based_context_recall", "id_based_context_precision", "id_mrr"]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One SQLite tracking store for the module (MLflow takes seconds to create one), its
    artifacts in an absolute folder (a relative one would follow the working folder)."""
    folder = tmp_path_factory.mktemp("mlflow")
    uri = f"sqlite:///{folder / 'mlflow.sqlite'}"
    mlflow.set_tracking_uri(uri)
    mlflow.create_experiment("ctxeval-hosts", artifact_location=(folder / "artifacts").as_uri())
    return uri


@pytest.fixture(autouse=True)
def tracking(store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_GENAI_EVAL_SKIP_TRACE_VALIDATION", "true")
    monkeypatch.setenv("MLFLOW_ENABLE_ASYNC_TRACE_LOGGING", "false")
    tried = refuse_network(monkeypatch)
    mlflow.set_tracking_uri(store)
    mlflow.set_experiment("ctxeval-hosts")
    yield
    assert tried == [], f"MLflow or the adapter tried the network: {tried}"


# --- traces ----------------------------------------------------------------------------------

CORPUS = {
    "d1": "Paris is the capital of France.",
    "d2": "The Eiffel Tower is in Paris.",
    "d3": "Rome is the capital of Italy.",
}


@mlflow.trace(span_type="RETRIEVER")
def retrieve_page_content(question: str, ids: list[str]) -> list[Document]:
    return [Document(page_content=CORPUS[i], metadata={"doc_uri": i}) for i in ids]


@mlflow.trace(span_type="RETRIEVER")
def retrieve_content(question: str, ids: list[str]) -> list[dict[str, Any]]:
    return [{"content": CORPUS[i], "metadata": {"id": i}} for i in ids]


@mlflow.trace(span_type="RETRIEVER", name="rerank")
def rerank(question: str, ids: list[str]) -> list[dict[str, Any]]:
    return [{"page_content": CORPUS[i], "id": i} for i in ids]


def traced(app: Callable[[], Any]) -> Any:
    app()
    trace_id = mlflow.get_last_active_trace_id()
    assert trace_id is not None
    return mlflow.get_trace(trace_id, flush=True)


def test_page_content_documents_give_texts_and_ids_from_the_metadata() -> None:
    trace = traced(lambda: retrieve_page_content("q", ["d2", "d1"]))
    sample = sample_from(
        inputs={"question": "Where?"},
        outputs="In Paris.",
        expectations={"expected_response": "Paris.", "reference_context_ids": ["d1"]},
        trace=trace,
    )
    assert sample.user_input == "Where?"
    assert sample.response == "In Paris."
    assert sample.reference == "Paris."
    assert sample.retrieved_contexts == (CORPUS["d2"], CORPUS["d1"])
    assert sample.retrieved_context_ids == ("d2", "d1")
    assert sample.reference_context_ids == ("d1",)
    assert sample.reference_contexts is None  # never the retrieved contexts
    assert sample.id == trace.info.trace_id


def test_content_documents_and_reference_contexts_in_a_key_of_their_own() -> None:
    trace = traced(lambda: retrieve_content("q", ["d3"]))
    sample = sample_from(
        inputs={"query": "Italy?"},
        expectations={
            "expected_facts": ["Rome is the capital.", "Italy is in Europe."],
            "reference_contexts": [CORPUS["d3"], CORPUS["d1"]],
        },
        trace=trace,
    )
    assert sample.user_input == "Italy?"
    assert sample.retrieved_contexts == (CORPUS["d3"],)
    assert sample.retrieved_context_ids == ("d3",)
    assert sample.reference == "Rome is the capital.\nItaly is in Europe."
    assert sample.reference_contexts == (CORPUS["d3"], CORPUS["d1"])


def two_retrievers() -> None:
    with mlflow.start_span("app"):
        retrieve_content("q", ["d1", "d2", "d3"])
        rerank("q", ["d3", "d1"])


@pytest.mark.parametrize(
    ("which", "ids"),
    [
        ("last", ("d3", "d1")),
        ("first", ("d1", "d2", "d3")),
        ("all", ("d1", "d2", "d3", "d3", "d1")),
        ("retrieve_content", ("d1", "d2", "d3")),
    ],
)
def test_which_retriever_span(which: str, ids: tuple[str, ...]) -> None:
    trace = traced(two_retrievers)
    sample = sample_from(inputs="q", trace=trace, fields=TraceFields(retriever_span=which))
    assert sample.retrieved_context_ids == ids


def test_a_trace_without_a_retriever_span_is_an_error_not_a_score() -> None:
    @mlflow.trace
    def app(question: str) -> str:
        return "no retrieval here"

    trace = traced(lambda: app("q"))
    with pytest.raises(DataError, match="no RETRIEVER span"):
        sample_from(inputs="q", trace=trace)
    with pytest.raises(DataError, match="no RETRIEVER span named 'nope'"):
        sample_from(
            inputs="q", trace=traced(two_retrievers), fields=TraceFields(retriever_span="nope")
        )
    with pytest.raises(DataError, match="no trace"):
        sample_from(inputs="q", trace=None)


def test_documents_of_which_only_some_have_an_id_are_an_error() -> None:
    @mlflow.trace(span_type="RETRIEVER")
    def mixed(q: str) -> list[dict[str, Any]]:
        return [{"content": "a", "metadata": {"id": "d1"}}, {"content": "b"}]

    with pytest.raises(
        DataError, match=r"document 1 of 2 has no ID \(id, metadata.doc_uri, metadata.id\)"
    ):
        sample_from(inputs="q", trace=traced(lambda: mixed("q")))


def test_the_id_keys_are_configurable() -> None:
    @mlflow.trace(span_type="RETRIEVER")
    def keyed(q: str) -> list[dict[str, Any]]:
        return [{"content": "a", "metadata": {"chunk_key": 7, "doc_uri": "x"}}]

    trace = traced(lambda: keyed("q"))
    assert sample_from(inputs="q", trace=trace).retrieved_context_ids == ("x",)
    fields = TraceFields(id_keys=("metadata.chunk_key",))
    assert sample_from(inputs="q", trace=trace, fields=fields).retrieved_context_ids == ("7",)


# --- results ---------------------------------------------------------------------------------


def labelled(result: MetricResult, metric: str) -> MetricResult:
    return result.labelled("s1", metric)


def test_an_ok_row_is_a_code_feedback_with_its_score_and_evidence() -> None:
    row = labelled(MetricResult.ok(0.5, details={"relevant": ["d1"], "missing": ["d4"]}), "id_mrr")
    feedback = feedback_of(row)
    assert isinstance(feedback, Feedback)
    assert (feedback.name, feedback.value, feedback.error) == ("id_mrr", 0.5, None)
    assert feedback.source.source_type == AssessmentSourceType.CODE
    assert feedback.rationale == "relevant: d1; missing: d4"
    assert feedback.metadata["ctxeval.status"] == "ok"


def test_a_threshold_gives_yes_or_no_with_the_score_in_metadata() -> None:
    row = labelled(MetricResult.ok(0.5), "id_mrr")
    assert feedback_of(row, threshold=0.5).value == CategoricalRating.YES
    no = feedback_of(row, threshold=0.75)
    assert no.value == CategoricalRating.NO
    assert (no.metadata["score"], no.metadata["threshold"]) == ("0.5", "0.75")


def test_an_llm_row_is_an_llm_judge_feedback_with_verdicts_and_provenance() -> None:
    details = {
        "verdicts": [{"index": 0, "verdict": 1, "reason": "says it"}, {"index": 1, "verdict": 0}],
        "provenance": {"ctxeval": "x", "judges": [{"model": "openai/judge-1"}]},
    }
    row = MetricResult.ok(1.0, details=details, usage=Usage(requests=2, prompt_tokens=9))
    feedback = feedback_of(labelled(row, "context_precision"))
    assert feedback.source.source_type == AssessmentSourceType.LLM_JUDGE
    assert feedback.source.source_id == "openai/judge-1"
    assert feedback.rationale == "chunk 0: yes (says it); chunk 1: no"
    assert '"verdict":1' in feedback.metadata["ctxeval.verdicts"]
    assert "openai/judge-1" in feedback.metadata["ctxeval.provenance"]


def test_undefined_is_not_scored_and_an_error_is_an_error() -> None:
    undefined = feedback_of(labelled(MetricResult.undefined("nothing to recall"), "id_mrr"))
    assert undefined.value is None
    assert undefined.error.error_code == "CTXEVAL_UNDEFINED"
    assert "nothing to recall" in undefined.error.error_message
    error = feedback_of(labelled(MetricResult.error("no retrieved_context_ids"), "id_mrr"))
    assert (error.value, error.error.error_code) == (None, "CTXEVAL_ERROR")


# --- through mlflow.genai.evaluate -----------------------------------------------------------

ROWS = [
    # (question, retrieved ids, reference ids)
    ("Capital of France?", ["d1", "d2"], ["d1"]),
    ("Tower?", ["d3", "d2"], ["d2"]),
    ("Italy?", ["d1"], ["d3"]),
    ("Nothing to recall?", ["d1"], []),
]


def app(question: str) -> str:
    ids = next(r[1] for r in ROWS if r[0] == question)
    if question.startswith("Tower"):
        retrieve_content(question, ids)
    else:
        retrieve_page_content(question, ids)
    return "an answer"


def data() -> list[dict[str, Any]]:
    return [
        {
            "inputs": {"question": q},
            "expectations": {"expected_response": "Paris.", "reference_context_ids": ref},
        }
        for q, _, ref in ROWS
    ]


def plain_samples() -> list[dict[str, Any]]:
    return [
        {
            "user_input": q,
            "reference": "Paris.",
            "retrieved_contexts": [CORPUS[i] for i in ids],
            "retrieved_context_ids": ids,
            "reference_context_ids": ref,
        }
        for q, ids, ref in ROWS
    ]


def by_question(result: Any, name: str) -> dict[str, Any]:
    frame = result.result_df
    questions = [request["question"] for request in frame["request"]]
    return dict(zip(questions, frame[f"{name}/value"], strict=True))


def test_id_metrics_through_mlflow_evaluate_equal_ctxeval_evaluate() -> None:
    made = scorers(ID_METRICS)
    result = mlflow.genai.evaluate(data=data(), predict_fn=app, scorers=made)
    expected = ctxeval.evaluate(plain_samples(), ID_METRICS)
    for name in ID_METRICS:
        got = by_question(result, name)
        for (question, *_), row in zip(
            ROWS, (r for r in expected.results if r.metric == name), strict=True
        ):
            if row.score is None:
                assert got[question] is None or math.isnan(got[question])
            else:
                assert got[question] == row.score, (name, question)
    # the undefined row (nothing to recall) is left out of MLflow's mean, not counted as 0
    ok = [
        r.score
        for r in expected.results
        if r.metric == "id_based_context_recall" and r.score is not None
    ]
    assert result.metrics["id_based_context_recall/mean"] == pytest.approx(sum(ok) / len(ok))
    assert len(made[0].session.evaluation().results) == len(ROWS) * len(ID_METRICS)
    made[0].session.close()


def test_the_scorer_digest_mlflow_stores_with_each_feedback_reads_no_source(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """MLflow hashes each scorer's definition into every feedback (``scorerDigest``); for a
    ``Scorer`` subclass it cannot serialise, it falls back to parsing the class's source for
    every row (~60 ms of CPU a row under the interpreter lock: what made the adapter slower
    than MLflow's own cost in bench/hosts_budget.py). The adapter's scorer gives its definition
    itself (#51)."""
    import inspect

    from mlflow.genai.scorers.scorer_utils import get_scorer_definition_digest

    def no_source(obj: object) -> str:
        raise AssertionError(f"MLflow read the source of {obj!r} to hash a ctxeval scorer")

    made = scorers(["id_mrr", "id_based_context_recall"])
    again = scorers(["id_mrr"])
    strict = scorers(["id_mrr"], threshold=0.5)
    monkeypatch.setattr(inspect, "getsource", no_source)
    digest = get_scorer_definition_digest(made[0])
    assert digest is not None
    assert digest.startswith("sha256:")
    assert get_scorer_definition_digest(made[0]) == digest  # the same definition, the same hash
    assert get_scorer_definition_digest(again[0]) == digest  # a new session of the same scorer
    assert get_scorer_definition_digest(made[1]) != digest  # another metric
    assert get_scorer_definition_digest(strict[0]) != digest  # another threshold
    definition = made[0].model_dump()
    assert definition["metric"] == "id_mrr"
    assert definition["scorer"] == "ctxeval_hosts.mlflow.CtxevalScorer"
    definition["metric"] = "changed"  # a copy: the scorer's own definition is unchanged
    assert made[0].model_dump()["metric"] == "id_mrr"
    assert made[0].model_dump(include={"metric"}) == {"metric": "id_mrr"}  # pydantic's, asked
    for shared in (made, again, strict):
        shared[0].session.close()


def test_a_closed_session_is_an_error_feedback_never_an_exception_mlflow_would_retry() -> None:
    """MLflow re-runs a scorer that raises what looks like a rate limit (its own retry, outside
    the session's budget): the scorer answers every row with a feedback instead (#51)."""
    made = scorers(["id_mrr"])
    trace = traced(lambda: retrieve_page_content("q", ["d1"]))
    refs = {"reference_context_ids": ["d1"]}
    assert made[0](inputs="q", expectations=refs, trace=trace).value == 1.0
    made[0].session.close()
    feedback = made[0](inputs="q", expectations=refs, trace=trace)
    assert feedback.value is None
    assert feedback.error is not None
    assert "closed" in (feedback.error.error_message or "")


def test_a_row_without_a_retriever_span_is_that_rows_error() -> None:
    @mlflow.trace
    def bare(question: str) -> str:
        return "no retrieval"

    made = scorers(["id_mrr"])
    result = mlflow.genai.evaluate(data=data()[:1], predict_fn=bare, scorers=made)
    frame = result.result_df
    assert "no RETRIEVER span" in frame["id_mrr/error_message"][0]
    made[0].session.close()


@pytest.fixture
def judge_server() -> Iterator[FakeOpenAI]:
    judge = Judge(verdicts={CORPUS["d1"]: 1, CORPUS["d2"]: 0, CORPUS["d3"]: 0})
    with FakeOpenAI(judge) as server:
        yield server


def test_an_llm_metric_through_mlflow_evaluate_equals_ctxeval_evaluate(
    judge_server: FakeOpenAI,
) -> None:
    llm = LLMConfig(model="openai/fake-judge", api_base=judge_server.url, api_key="sk-test")
    made = scorers(["context_precision", "id_mrr"], llm=llm, threshold=0.5)
    result = mlflow.genai.evaluate(data=data(), predict_fn=app, scorers=made)
    sent = judge_server.count
    assert sent > 0
    expected = ctxeval.evaluate(plain_samples(), ["context_precision"], llm=llm)
    assert judge_server.count == 2 * sent  # the same requests, and each row scored once
    frame = result.result_df
    questions = [request["question"] for request in frame["request"]]
    for row, question in zip(expected.results, (q for q, *_ in ROWS), strict=True):
        at = questions.index(question)
        value = frame["context_precision/value"][at]
        assert value == ("yes" if row.score >= 0.5 else "no")
    assessments = [
        a
        for a in mlflow.get_trace(frame["trace_id"][0]).info.assessments
        if a.name == "context_precision"
    ]
    assert assessments[0].source.source_type == AssessmentSourceType.LLM_JUDGE
    assert assessments[0].source.source_id == "openai/fake-judge"
    assert "ctxeval.verdicts" in assessments[0].metadata
    made[0].session.close()


# --- @scorer-kind (registrable) --------------------------------------------------------------


def test_a_registrable_scorer_is_decorator_kind_and_serializes() -> None:
    made = ctxeval_scorer("id_mrr", threshold=0.5)
    assert made.kind == ScorerKind.DECORATOR
    dumped = made.model_dump()
    assert "score_registered" in dumped["call_source"]
    assert "'metric': 'id_mrr'" in dumped["call_source"]
    trace = traced(lambda: retrieve_page_content("q", ["d2", "d1"]))
    feedback = made(
        inputs="q", outputs=None, expectations={"reference_context_ids": ["d1"]}, trace=trace
    )
    assert (feedback.value, feedback.metadata["score"]) == (CategoricalRating.YES, "0.5")


def test_a_rebuilt_registrable_scorer_scores_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLFLOW_SERVER_ENABLE_CUSTOM_SCORERS", "true")
    [made] = registrable_scorers(["id_based_context_recall"])
    rebuilt = Scorer.model_validate(made.model_dump())
    trace = traced(lambda: retrieve_page_content("q", ["d2", "d1"]))
    expectations = {"reference_context_ids": ["d1", "d3"]}
    original = made(inputs="q", outputs=None, expectations=expectations, trace=trace)
    again = rebuilt(inputs="q", outputs=None, expectations=expectations, trace=trace)
    assert original.value == again.value == 0.5


STRING_METRICS = ["non_llm_context_recall", "non_llm_context_precision_with_reference"]


def test_string_metrics_read_the_reference_contexts_of_their_own_key() -> None:
    made = scorers(STRING_METRICS)
    trace = traced(lambda: retrieve_content("q", ["d1", "d3"]))
    expectations = {"reference_contexts": [CORPUS["d1"], CORPUS["d2"]]}
    got = [s(inputs="q", outputs=None, expectations=expectations, trace=trace) for s in made]
    expected = ctxeval.evaluate(
        [
            {
                "retrieved_contexts": [CORPUS["d1"], CORPUS["d3"]],
                "reference_contexts": [CORPUS["d1"], CORPUS["d2"]],
            }
        ],
        STRING_METRICS,
    ).results
    assert [f.value for f in got] == [r.score for r in expected]
    assert [f.value for f in got] != [1.0, 1.0]  # not the retrieved contexts against themselves
    assert all(f.source.source_type == AssessmentSourceType.CODE for f in got)
    made[0].session.close()
