"""The parts every host adapter shares (ctxeval_hosts._shared, _results, _fields): one session
whose rows are scored once however many host metrics ask for them, from threads or tasks."""

from __future__ import annotations

import concurrent.futures
import itertools

import anyio
import pytest

import ctxeval
from ctxeval import ConfigError, DataError, MetricResult
from ctxeval_hosts import SharedSession
from ctxeval_hosts._fields import document_id, document_text, read_documents
from ctxeval_hosts._results import translate

METRICS = ["id_based_context_recall", "id_based_context_precision", "id_mrr"]


def samples(count: int) -> list[ctxeval.Sample]:
    return [
        ctxeval.Sample(
            id=f"s{i}",
            retrieved_context_ids=[f"d{i}", f"d{i + 1}", "x"],
            reference_context_ids=[f"d{i + 1}"] if i % 5 else [],
        )
        for i in range(count)
    ]


def test_host_metrics_on_many_threads_score_each_row_once() -> None:
    shared = SharedSession.build(METRICS)
    for metric in shared.metrics:
        shared.want(metric)
    rows = samples(60)
    calls = list(itertools.product(rows, shared.metrics))
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        got = list(pool.map(lambda call: shared.result(*call), calls))
    expected = ctxeval.evaluate(rows, METRICS).results
    by_key = {(r.sample_id, r.metric): r for r in got}
    for row in expected:
        assert (
            by_key[(row.sample_id, row.metric)].status,
            by_key[(row.sample_id, row.metric)].score,
        ) == (row.status, row.score)
    assert len(shared.evaluation().results) == len(rows) * len(METRICS)  # each row once
    shared.close()


@pytest.mark.anyio
async def test_host_metrics_as_tasks_score_each_row_once() -> None:
    shared = SharedSession.build(METRICS)
    for metric in shared.metrics:
        shared.want(metric)
    rows = samples(30)
    got: list[MetricResult] = []

    async def one(sample: ctxeval.Sample, metric: str) -> None:
        got.append(await shared.aresult(sample, metric))

    async with anyio.create_task_group() as tasks:
        for sample, metric in itertools.product(rows, shared.metrics):
            tasks.start_soon(one, sample, metric)
    assert len(got) == len(rows) * len(METRICS)
    assert len(shared.evaluation().results) == len(rows) * len(METRICS)
    shared.close()


def test_a_row_asked_again_is_scored_again() -> None:
    shared = SharedSession.build(["id_mrr"])
    shared.want("id_mrr")
    [row] = samples(1)
    first, second = shared.result(row, "id_mrr"), shared.result(row, "id_mrr")
    assert first.score == second.score
    assert len(shared.evaluation().results) == 2
    shared.close()


def test_a_metric_the_session_lacks_is_a_config_error() -> None:
    shared = SharedSession.build(["id_mrr"])
    with pytest.raises(ConfigError, match="no metric 'id_ndcg'; its metrics are id_mrr"):
        shared.want("id_ndcg")
    shared.close()


def test_undefined_translates_to_not_scored_never_zero() -> None:
    host = translate(
        MetricResult.undefined("nothing to recall").labelled("s", "id_mrr"), threshold=0.5
    )
    assert (host.score, host.passed, host.error_code) == (None, None, "CTXEVAL_UNDEFINED")
    assert host.error == "not scored (undefined): nothing to recall"


def test_documents_texts_and_ids() -> None:
    assert document_text({"page_content": "a", "content": "b"}) == "a"
    assert document_text({"content": "b"}) == "b"
    assert document_id({"id": None, "metadata": {"doc_uri": "u", "id": 3}}) == "u"
    assert document_id({"metadata": {"id": 3}}) == "3"
    docs = read_documents([{"content": "a"}, {"content": "b"}], field="f")
    assert (docs.texts, docs.ids) == (("a", "b"), None)
    with pytest.raises(DataError, match="document 0 of 2 has no text"):
        read_documents([{"id": "1"}, {"content": "b", "id": "2"}], field="f")
    with pytest.raises(DataError, match="expected a list of documents"):
        read_documents("text", field="f")
