"""ctxeval.Session: one row at a time, from many threads and from any event loop, through one
scheduler; the same rows as evaluate(); close() mid-flight leaves nothing behind."""

from __future__ import annotations

import asyncio
import concurrent.futures
import gc
import json
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

import anyio
import attrs
import pytest

import ctxeval
from ctxeval import ConfigError, DataError, MetricResult, Sample, SessionClosedError, Status
from ctxeval._calls.cache import MemoryCache
from ctxeval._plugins.base import BaseMetric
from ctxeval_llm import LLMConfig
from fakes.openai_server import FakeOpenAI, scripted_judge

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

FAST = ctxeval.RetryPolicy(initial_backoff=0.001, max_backoff=0.02, jitter=0.0)
SECRET = "sk-test-SECRET-0123456789abcdef"

ID_AND_STRING = [
    "id_based_context_recall",
    "id_based_context_precision",
    ctxeval.get_metric("id_precision_at_k", k=2),
    "nDCG@10",
    "id_mrr",
    "non_llm_context_recall",
    "non_llm_context_precision_with_reference",
]


def deterministic_samples(n: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(n):
        sample: dict[str, Any] = {
            "retrieved_context_ids": [f"d{(i + j) % 7}" for j in range(4)],
            "reference_context_ids": [f"d{(2 * i + j) % 9}" for j in range(3)],
            "retrieved_contexts": [f"the cat sat on mat {i % 3}", "dogs bark", f"x{i}"],
            "reference_contexts": [f"the cat sat on the mat {i % 2}", "birds sing"],
        }
        if i % 5 == 3:
            del sample["reference_context_ids"]  # an error row for the ID metrics
        if i % 4 == 0:
            sample["id"] = f"s{i}"
        out.append(sample)
    return out


def llm_samples(n: int) -> list[dict[str, Any]]:
    return [
        {
            "user_input": f"Where is the Eiffel Tower, question {i}?",
            "reference": f"The Eiffel Tower is in Paris. It was built in {1880 + i % 10}.",
            "retrieved_contexts": [
                "The Eiffel Tower stands in Paris, France.",
                f"It was completed in {1880 + i % 10} for the World Fair.",
                "Bananas are yellow.",
            ],
            "retrieved_context_ids": [f"d{i % 3}", "d9"],
            "reference_context_ids": [f"d{i % 3}"],
        }
        for i in range(n)
    ]


def same_rows(left: MetricResult, right: MetricResult) -> None:
    assert (left.sample_id, left.metric, left.status, left.score, left.reason) == (
        right.sample_id,
        right.metric,
        right.status,
        right.score,
        right.reason,
    )
    mine, theirs = dict(left.details), dict(right.details)
    for details in (mine, theirs):  # (the judge's endpoint: each test server has its own port)
        for judge in details.get("provenance", {}).get("judges", []):
            judge.pop("endpoint", None)
    assert mine == theirs


def thread_names() -> set[str]:
    return {f"{t.name}#{t.ident}" for t in threading.enumerate()}


def no_threads_left(before: set[str]) -> bool:
    """Whether every thread started since ``before`` has ended (waiting a bounded time for
    threads told to end)."""
    for _ in range(100):
        if thread_names() <= before:
            return True
        time.sleep(0.05)
    return thread_names() <= before


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(scripted_judge) as fake:
        yield fake


def llm(server: FakeOpenAI, **options: Any) -> LLMConfig:
    return LLMConfig(model="openai/fake-judge", api_base=server.url, api_key=SECRET, **options)


# --- deterministic metrics: the calling thread ----------------------------------------------


def test_id_and_string_rows_and_summary_are_evaluates() -> None:
    samples = deterministic_samples(40)
    expected = ctxeval.evaluate(samples, ID_AND_STRING)
    with ctxeval.Session(ID_AND_STRING) as session:
        assert session.metrics == expected.metrics
        rows = [row for sample in samples for row in session.score(sample)]
        evaluation = session.evaluation()
    assert len(rows) == len(expected.results) == 40 * len(ID_AND_STRING)
    for mine, theirs in zip(rows, expected.results, strict=True):
        same_rows(mine, theirs)
    assert evaluation.summary().to_dict() == expected.summary().to_dict()
    assert any(r.status is Status.ERROR for r in rows)  # (the samples lacking an ID field)


def test_ids_count_calls_and_older_field_names_are_read() -> None:
    with ctxeval.Session(["id_based_context_recall", "non_llm_context_recall"]) as session:
        first = session.score({"retrieved_context_ids": ["a"], "reference_context_ids": ["a"]})
        named = session.score(
            Sample(id="mine", retrieved_context_ids=["a"], reference_context_ids=["b"])
        )
        old = session.score({"contexts": ["the cat"], "reference_contexts": ["the cat"]})
    assert [r.sample_id for r in first + named + old] == ["0", "0", "mine", "mine", "2", "2"]
    assert first[0].score == 1.0
    assert named[0].score == 0.0
    assert old[1].score == 1.0  # `contexts` read as retrieved_contexts
    assert old[0].status is Status.ERROR
    assert "retrieved_context_ids" in (old[0].reason or "")


def test_many_threads_score_deterministic_metrics_as_one_thread_does() -> None:
    samples = [{**s, "id": str(i)} for i, s in enumerate(deterministic_samples(400))]
    with ctxeval.Session(ID_AND_STRING) as alone:
        expected = {(r.sample_id, r.metric): r for s in samples for r in alone.score(s)}
    before = thread_names()
    with (
        ctxeval.Session(ID_AND_STRING) as session,
        concurrent.futures.ThreadPoolExecutor(8) as pool,
    ):
        scored = list(pool.map(session.score, samples))
        assert len(session.evaluation()) == 400 * len(ID_AND_STRING)
    for rows in scored:
        assert [r.metric for r in rows] == list(session.metrics)
        for row in rows:
            same_rows(row, expected[row.sample_id, row.metric])
    started = thread_names() - before  # (another test's session may still be ending)
    assert not any(name.startswith("ctxeval-session#") for name in started)  # no loop needed
    assert no_threads_left(before)


# --- errors ---------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class FailsOnOdd(BaseMetric):
    """A third party's async metric that raises on odd references."""

    registry_name = "fails_on_odd"
    requires = ("reference",)

    async def ascore(self, sample: Sample, ctx: ctxeval.RunContext) -> MetricResult:
        if int(sample.reference or 0) % 2:
            raise ZeroDivisionError("the plugin divided by zero")
        return MetricResult.ok(0.5)


def test_a_rows_failure_is_its_error_row_and_the_session_goes_on() -> None:
    with ctxeval.Session([FailsOnOdd(), "id_mrr"]) as session:
        rows = [
            session.score({"reference": str(i), "retrieved_context_ids": ["a"]}) for i in range(4)
        ]
        unreadable = session.score({"reference": "0", "retrieved_context_ids": "not a list"})
        lacking = session.score({"retrieved_context_ids": ["a"]})
    assert [r[0].status for r in rows] == [Status.OK, Status.ERROR] * 2
    assert "ZeroDivisionError" in (rows[1][0].reason or "")
    assert all(r[1].status is Status.ERROR for r in rows)  # id_mrr: no reference ids
    assert [r.status for r in unreadable] == [Status.ERROR, Status.ERROR]
    assert "could not be read" in (unreadable[0].reason or "")
    assert "'reference'" in (lacking[0].reason or "")
    with (
        pytest.raises(DataError, match=r"a ctxeval\.Sample or a mapping"),
        ctxeval.Session(["id_mrr"]) as s,
    ):
        s.score(42)  # type: ignore[arg-type]  # (misuse: raised)


def test_a_refused_key_makes_every_llm_row_an_error_and_scoring_goes_on() -> None:
    with (
        FakeOpenAI(lambda request: "401") as server,
        ctxeval.Session(
            ["context_precision", "id_based_context_recall"], llm=llm(server), retry=FAST
        ) as session,
    ):
        rows = [session.score(s) for s in llm_samples(5)]
        sent = len(server.requests)
    assert all(r[0].status is Status.ERROR for r in rows)
    assert all("401" in (r[0].reason or "") or "key" in (r[0].reason or "") for r in rows)
    assert len({r[0].reason for r in rows[1:]}) == 1  # the same clear reason, every row
    assert all(r[1].status is Status.OK for r in rows)  # the ID rows are scored all the same
    assert sent == 1  # the gate closed after the first refusal: later rows send nothing


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        ({"max_concurency": 4}, "did you mean 'max_concurrency'"),
        ({"max_concurrency": 0}, "max_concurrency"),
        ({"journal": "run.jsonl"}, "keeps no journal"),
        ({"on_progress": print}, "no on_progress"),
        ({"settings": {"max_concurrency": 4}}, "ctxeval.RunSettings"),
    ],
)
def test_wrong_settings_are_a_config_error_at_construction(
    arguments: dict[str, Any], said: str
) -> None:
    with pytest.raises(ConfigError, match=said):
        ctxeval.Session(["id_mrr"], **arguments)


def test_unknown_metrics_and_llm_metrics_without_llm_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="nope"):
        ctxeval.Session(["nope"])
    with pytest.raises(ConfigError, match="LLM"):
        ctxeval.Session(["context_recall"])


# --- LLM metrics: one scheduler across threads ----------------------------------------------


def sent(server: FakeOpenAI) -> list[str]:
    """The requests the server received, as comparable text, sorted."""
    return sorted(json.dumps(r["messages"], sort_keys=True) for r in server.requests)


def test_32_threads_share_one_budget_send_evaluates_requests_and_a_second_pass_none() -> None:
    metrics = ["context_recall", "context_precision", "id_based_context_recall"]
    samples = llm_samples(48)
    with FakeOpenAI(scripted_judge) as reference_server:
        expected = ctxeval.evaluate(
            samples, metrics, llm=llm(reference_server), max_concurrency=4, retry=FAST
        )
        expected_requests = sent(reference_server)
    before = thread_names()
    with (
        FakeOpenAI(scripted_judge, latency=0.01) as server,
        ctxeval.Session(
            metrics, llm=llm(server), max_concurrency=4, retry=FAST, cache=MemoryCache()
        ) as session,
    ):
        with concurrent.futures.ThreadPoolExecutor(32) as pool:
            scored = list(pool.map(session.score, samples))
        assert server.peak_in_flight <= 4
        assert server.peak_in_flight == 4  # (the budget was used, not just respected)
        assert sent(server) == expected_requests
        first_pass = len(server.requests)
        with concurrent.futures.ThreadPoolExecutor(32) as pool:
            again = list(pool.map(session.score, samples))
        assert len(server.requests) == first_pass  # all from the session's one cache
        evaluation = session.evaluation()
    for mine, theirs in zip([r for rows in scored for r in rows], expected.results, strict=True):
        same_rows(mine, theirs)
        assert mine.usage.requests == theirs.usage.requests
    for first, second in zip(scored, again, strict=True):
        assert [r.score for r in first] == [r.score for r in second]
        assert second[0].usage.cache_hits > 0
    assert len(evaluation) == 2 * len(expected.results)
    provenance = scored[0][0].details["provenance"]["judges"][0]
    assert provenance["model"] == "openai/fake-judge"
    assert no_threads_left(before)


def test_summary_of_a_session_is_evaluates(server: FakeOpenAI) -> None:
    metrics = ["context_precision", "id_mrr", "non_llm_context_recall"]
    samples = [
        {**s, "reference_contexts": ["The Eiffel Tower stands in Paris."]} for s in llm_samples(12)
    ]
    expected = ctxeval.evaluate(samples, metrics, llm=llm(server), retry=FAST)
    with ctxeval.Session(metrics, llm=llm(server), retry=FAST) as session:
        for sample in samples:
            session.score(sample)
        summary = session.evaluation().summary()
    assert summary.to_dict() == expected.summary().to_dict()  # usage included


def test_score_from_inside_a_running_asyncio_loop(server: FakeOpenAI) -> None:
    sample = llm_samples(1)[0]
    with ctxeval.Session(["context_precision", "id_mrr"], llm=llm(server), retry=FAST) as session:

        async def notebook_cell() -> list[MetricResult]:
            return session.score(sample)  # (a notebook: a loop runs in this thread)

        rows = asyncio.run(notebook_cell())
    expected = ctxeval.evaluate([sample], ["context_precision", "id_mrr"], llm=llm(server))
    for mine, theirs in zip(rows, expected.results, strict=True):
        same_rows(mine, theirs)


@pytest.mark.anyio
async def test_ascore_from_the_callers_own_loop(anyio_backend: str) -> None:
    metrics = ["context_precision", "id_mrr"]
    samples = [{**s, "id": str(i)} for i, s in enumerate(llm_samples(16))]
    with FakeOpenAI(scripted_judge) as reference_server:
        expected = await ctxeval.aevaluate(samples, metrics, llm=llm(reference_server), retry=FAST)
    with FakeOpenAI(scripted_judge, latency=0.05) as server:
        results: dict[str, list[MetricResult]] = {}
        ticks = 0
        async with ctxeval.Session(
            metrics, llm=llm(server), retry=FAST, max_concurrency=4
        ) as session:

            async def one(sample: dict[str, Any]) -> None:
                results[sample["id"]] = await session.ascore(sample)

            async def ticker() -> None:
                nonlocal ticks
                while len(results) < len(samples):
                    ticks += 1
                    await anyio.sleep(0.005)

            async with anyio.create_task_group() as group:
                group.start_soon(ticker)
                for sample in samples:
                    group.start_soon(one, sample)
            assert server.peak_in_flight <= 4
        assert session.closed
    assert ticks > 1  # the caller's loop ran its other tasks while the rows were scored
    for theirs in expected.results:
        position = list(metrics).index(theirs.metric)
        same_rows(results[theirs.sample_id][position], theirs)


@pytest.mark.anyio
async def test_ascore_of_deterministic_rows_and_aclose(anyio_backend: str) -> None:
    session = ctxeval.Session(["id_mrr"])
    rows = await session.ascore({"retrieved_context_ids": ["a"], "reference_context_ids": ["a"]})
    assert rows[0].score == 1.0
    assert rows[0].sample_id == "0"
    await session.aclose()
    with pytest.raises(SessionClosedError):
        await session.ascore({"retrieved_context_ids": ["a"], "reference_context_ids": ["a"]})


# --- closing ---------------------------------------------------------------------------------


def test_close_mid_flight_cancels_requests_keeps_scored_rows_and_leaves_no_thread() -> None:
    before = thread_names()
    with FakeOpenAI(scripted_judge, stream_delay=0.5) as server:
        session = ctxeval.Session(
            ["context_precision", "id_mrr"], llm=llm(server, stream=True), retry=FAST
        )
        kept = session.score({"retrieved_context_ids": ["a"], "reference_context_ids": ["a"]})
        outcomes: list[BaseException | list[MetricResult]] = []

        def host_row(sample: dict[str, Any]) -> None:
            try:
                outcomes.append(session.score(sample))
            except BaseException as exc:  # (what the host's thread gets)
                outcomes.append(exc)

        threads = [threading.Thread(target=host_row, args=(s,)) for s in llm_samples(3)]
        for thread in threads:
            thread.start()
        for _ in range(200):  # (a bound: until a stream is under way)
            if server.streams:
                break
            time.sleep(0.02)
        assert server.streams
        session.close()
        for thread in threads:
            thread.join(10)
        assert server.hung_up.wait(10)  # the requests were cancelled, not left to run
        assert len(outcomes) == 3
        assert all(isinstance(o, SessionClosedError) for o in outcomes)
        assert "closed while sample" in str(outcomes[0])
        evaluation = session.evaluation()
        assert [r.sample_id for r in evaluation.results] == ["0", "0"]  # the row scored before
        same_rows(evaluation.results[1], kept[1])
        with pytest.raises(SessionClosedError, match="is closed"):
            session.score(llm_samples(1)[0])
        with pytest.raises(ConfigError):  # (a SessionClosedError is a ConfigError)
            session.score({"retrieved_context_ids": ["a"]})
        session.close()  # (again: nothing)
    assert no_threads_left(before)


def test_a_session_dropped_without_close_ends_its_loop(server: FakeOpenAI) -> None:
    before = thread_names()
    session = ctxeval.Session(["context_precision"], llm=llm(server), retry=FAST)
    [row] = session.score(llm_samples(1)[0])
    assert row.status is Status.OK
    assert any(t.name == "ctxeval-session" for t in threading.enumerate())
    del session
    gc.collect()
    assert no_threads_left(before)


@pytest.mark.anyio
async def test_cancelling_ascore_cancels_the_rows_request(anyio_backend: str) -> None:
    with FakeOpenAI(scripted_judge, stream_delay=0.5) as server:
        async with ctxeval.Session(
            ["context_precision"], llm=llm(server, stream=True), retry=FAST
        ) as session:
            async with anyio.create_task_group() as group:

                async def row() -> None:
                    await session.ascore(llm_samples(1)[0])
                    raise AssertionError("not cancelled")

                group.start_soon(row)
                for _ in range(500):  # (a bound: until the row's stream is under way)
                    if server.streams:
                        break
                    await anyio.sleep(0.02)
                group.cancel_scope.cancel()  # the caller gives up on the row
            assert server.streams
            assert server.hung_up.wait(10)  # the session's loop hung up: before any close()
            assert len(session.evaluation()) == 0  # no row for a cancelled call
            rows = await session.ascore({"user_input": "q", "reference": "r"})
            assert rows[0].status is Status.ERROR  # (no retrieved_contexts: the session goes on)


def test_the_cost_cap_makes_later_llm_rows_errors_without_a_request(server: FakeOpenAI) -> None:
    price = (1_000_000.0, 1_000_000.0)  # one USD a token: the first request spends the cap
    priced = llm(server, price_per_million_tokens=price)
    with ctxeval.Session(
        ["context_precision", "id_mrr"], llm=priced, max_cost_usd=1e-9, max_concurrency=1
    ) as session:
        first = session.score(llm_samples(1)[0])
        sent = len(server.requests)
        later = [session.score(s) for s in llm_samples(3)]
        assert len(server.requests) == sent  # the cap is reached: no request
        summary = session.evaluation().summary()
    assert first[0].usage.cost_usd is not None
    assert first[0].usage.cost_usd > 1e-9
    for rows in later:
        assert rows[0].status is Status.ERROR
        assert "BudgetExceededError" in (rows[0].reason or "")
        assert rows[1].status is Status.OK  # (the ID rows are scored all the same)
    assert summary.usage.cost_usd == first[0].usage.cost_usd  # one meter: the session's


def test_rows_from_many_host_loops_share_one_budget() -> None:
    """Four threads, each with an event loop of its own (two asyncio, two trio), each awaiting
    rows concurrently: the server never sees more than the session's 3 requests at once."""
    samples = llm_samples(24)
    with FakeOpenAI(scripted_judge) as reference_server:
        expected = ctxeval.evaluate(samples, ["context_precision"], llm=llm(reference_server))
        expected_requests = sent(reference_server)
    scored: dict[str, list[MetricResult]] = {}
    with (
        FakeOpenAI(scripted_judge, latency=0.02) as server,
        ctxeval.Session(
            ["context_precision"], llm=llm(server), max_concurrency=3, retry=FAST
        ) as session,
    ):

        async def host(part: list[tuple[int, dict[str, Any]]]) -> None:
            async def one(index: int, sample: dict[str, Any]) -> None:
                scored[str(index)] = await session.ascore({**sample, "id": str(index)})

            async with anyio.create_task_group() as group:
                for index, sample in part:
                    group.start_soon(one, index, sample)

        numbered = list(enumerate(samples))
        threads = [
            threading.Thread(
                target=anyio.run, args=(host, numbered[i::4]), kwargs={"backend": backend}
            )
            for i, backend in enumerate(["asyncio", "trio", "asyncio", "trio"])
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert server.peak_in_flight <= 3
        assert sent(server) == expected_requests
    assert len(scored) == len(samples)
    for theirs in expected.results:
        same_rows(scored[theirs.sample_id][0], theirs)


def test_kept_rows_are_packed_and_read_back_equal_in_order() -> None:
    """Past COMPACT_AT rows, a session packs its rows; evaluation() reads them back equal, each
    sample's rows together, from 8 threads."""
    from ctxeval._session.store import COMPACT_AT

    metrics = ["id_based_context_recall", "non_llm_context_recall", "nDCG@10"]
    samples = [{**s, "id": str(i)} for i, s in enumerate(deterministic_samples(3000))]
    assert len(samples) * len(metrics) > COMPACT_AT
    with (
        ctxeval.Session(metrics) as session,
        concurrent.futures.ThreadPoolExecutor(8) as pool,
    ):
        scored = {rows[0].sample_id: rows for rows in pool.map(session.score, samples)}
        kept = session.evaluation().results
    assert len(kept) == len(samples) * len(metrics)
    for start in range(0, len(kept), len(metrics)):
        rows = kept[start : start + len(metrics)]
        assert [r.metric for r in rows] == metrics
        for mine, returned in zip(rows, scored[rows[0].sample_id], strict=True):
            assert mine == returned
            same_rows(mine, returned)


def test_a_row_store_packs_as_it_goes_and_loses_nothing() -> None:
    from ctxeval._session.store import RowStore

    store = RowStore(compact_at=7)
    details = {"provenance": {"judges": [{"model": "m", "prompts": ["p@1"]}]}, "n": 1}

    def add(part: range) -> None:
        for i in part:
            row = MetricResult.ok(i / 10_000, details=details)
            store.add([row.labelled(str(i), "a"), MetricResult.error("x").labelled(str(i), "b")])

    threads = [threading.Thread(target=add, args=(range(i, 4000, 8),)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    rows = store.rows()
    assert len(rows) == len(store) == 8000
    assert [r.metric for r in rows] == ["a", "b"] * 4000  # each sample's rows together
    assert sorted(r.score for r in rows if r.score is not None) == [i / 10_000 for i in range(4000)]
    assert rows[0].details == details
