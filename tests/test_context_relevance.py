"""Judging retrieval without a reference: ``context_relevance`` (each chunk graded 0 to 3, the
UMBRELA scale, scored by a measure) and ``context_sufficiency`` (are the contexts enough to
answer?), against the fake OpenAI server with a graded scripted judge."""

from __future__ import annotations

import hashlib
import json
import math
import random
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

import ctxeval
from ctxeval import RetryPolicy, Status
from ctxeval._calls.cache import MemoryCache
from ctxeval._judge_server.answers import answer, prompt_kind
from ctxeval_llm import LLMConfig, prompts
from ctxeval_llm.judges import ContextRelevance, SharedJudgements, doc_id_of, relevance_score
from fakes.openai_server import FakeOpenAI, scripted_judge
from llm_judge import Judge, prompt_name, user_text

FAST = RetryPolicy(initial_backoff=0.001, max_backoff=0.02, jitter=0.0)
QUESTION = "How tall is the Eiffel Tower?"
CHUNKS = ["chunk a", "chunk b", "chunk c", "chunk d"]
GRADES = [3, 0, 2, 1]


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(Judge(grades=dict(zip(CHUNKS, GRADES, strict=True)))) as fake:
        yield fake


def llm(server: FakeOpenAI) -> LLMConfig:
    return LLMConfig(model="openai/fake-judge", api_base=server.url, api_key="sk-test-0123456789")


def run(
    samples: list[dict[str, Any]], metrics: list[Any], server: FakeOpenAI, **options: Any
) -> ctxeval.Evaluation:
    options.setdefault("llm", llm(server))
    options.setdefault("retry", FAST)
    options.setdefault("cache", None)
    return ctxeval.evaluate(samples, metrics, **options)


def sample(**more: Any) -> dict[str, Any]:
    return {"id": "s1", "user_input": QUESTION, "retrieved_contexts": CHUNKS, **more}


def relevance(**options: Any) -> ctxeval.Metric:
    return ctxeval.get_metric("context_relevance", **options)


def dcg(gains: list[int]) -> float:
    return sum(g / math.log2(rank + 1) for rank, g in enumerate(gains, start=1))


# --- worked examples: grades [3, 0, 2, 1] -----------------------------------------------------

WORKED = [
    ({}, 6 / 12),  # mean grade / 3
    ({"k": 2}, 3 / 6),
    ({"k": 5}, 6 / 15),  # an empty rank counts grade 0
    ({"measure": "precision"}, 3 / 4),  # grades >= 1 (trec_eval's -l 1): a, c and d
    ({"measure": "precision", "min_grade": 3}, 1 / 4),
    ({"measure": "precision", "min_grade": 2}, 2 / 4),
    ({"measure": "precision", "k": 2}, 1 / 2),
    ({"measure": "precision", "k": 5}, 3 / 5),  # trec_eval's P_5: / k
    ({"measure": "ap"}, (1 / 1 + 2 / 3 + 3 / 4) / 3),  # relevant at ranks 1, 3 and 4
    ({"measure": "ap", "min_grade": 2}, (1 / 1 + 2 / 3) / 2),
    ({"measure": "ap", "k": 2}, (1 / 1) / 3),  # map_cut_2: still / all relevant judged
    ({"measure": "ap", "min_grade": 3}, 1.0),
    ({"measure": "ndcg"}, dcg([3, 0, 2, 1]) / dcg([3, 2, 1, 0])),
    ({"measure": "ndcg", "k": 2}, dcg([3, 0]) / dcg([3, 2])),
    ({"measure": "ndcg", "k": 3}, dcg([3, 0, 2]) / dcg([3, 2, 1])),
    ({"measure": "ndcg", "k": 10}, dcg([3, 0, 2, 1]) / dcg([3, 2, 1])),
]


@pytest.mark.parametrize(("options", "expected"), WORKED, ids=lambda v: str(v))
def test_worked_examples(server: FakeOpenAI, options: dict[str, Any], expected: float) -> None:
    [row] = run([sample()], [relevance(**options)], server).results
    assert row.status is Status.OK, row.reason
    assert row.score == pytest.approx(expected, rel=0, abs=1e-9)
    assert relevance_score(GRADES, **options) == row.score
    assert [c["grade"] for c in row.details["chunks"]] == GRADES
    assert server.count == 4  # one request per chunk


def test_ndcg_by_hand_to_1e_9() -> None:
    # grades [3, 0, 2, 1]: DCG = 3/log2(2) + 0 + 2/log2(4) + 1/log2(5) = 4 + 1/log2(5)
    # ideal [3, 2, 1, 0]: 3 + 2/log2(3) + 1/log2(4) = 3.5 + 2/log2(3)
    by_hand = (4 + 1 / math.log2(5)) / (3.5 + 2 / math.log2(3))
    assert abs(relevance_score(GRADES, "ndcg") - by_hand) < 1e-9
    assert abs(relevance_score(GRADES, "ndcg") - 0.9304509197) < 1e-9
    # at 2: 3 / (3 + 2/log2(3))
    assert abs(relevance_score(GRADES, "ndcg", k=2) - 3 / (3 + 2 / math.log2(3))) < 1e-9


def test_exact_ends_of_the_scale() -> None:
    for measure in ("mean", "precision", "ap", "ndcg"):
        assert relevance_score([3, 3, 3], measure) == 1.0  # exactly
        assert relevance_score([0, 0], measure) == 0.0  # no relevant chunk scores 0
    assert relevance_score([3, 2, 3], "mean") == 8 / 9
    assert relevance_score(GRADES, "ap", min_grade=2) == 5 / 6  # exact: the policy's fractions
    assert relevance_score(GRADES, "ap") == 29 / 36
    assert relevance_score([0, 3], "ndcg") == pytest.approx(1 / math.log2(3) / 3 * 3)


def test_equal_to_trec_eval_on_random_lists() -> None:
    pytrec_eval = pytest.importorskip("pytrec_eval")
    rng = random.Random(20260301)
    lists = {f"q{i}": [rng.randint(0, 3) for _ in range(rng.randint(1, 12))] for i in range(400)}
    qrels = {q: {f"d{r}": g for r, g in enumerate(gs)} for q, gs in lists.items()}
    runs = {q: {f"d{r}": float(100 - r) for r in range(len(gs))} for q, gs in lists.items()}
    for level in (1, 2, 3):
        measures = {"map", "ndcg", "P_5", "ndcg_cut_5", "map_cut_5", "ndcg_cut_3"}
        trec = pytrec_eval.RelevanceEvaluator(qrels, measures, relevance_level=level).evaluate(runs)
        for q, grades in lists.items():
            relevant = any(g >= level for g in grades)
            want = trec.get(q, {})
            cases = [("ap", None, "map"), ("precision", 5, "P_5"), ("ap", 5, "map_cut_5")]
            if level == 1:  # nDCG uses the grades themselves
                cases += [("ndcg", None, "ndcg"), ("ndcg", 5, "ndcg_cut_5")]
                cases += [("ndcg", 3, "ndcg_cut_3")]
            for measure, k, name in cases:
                got = relevance_score(grades, measure, k=k, min_grade=level)
                if name in want:
                    assert got == pytest.approx(want[name], rel=1e-12, abs=1e-12), (q, name)
                else:  # a query trec_eval skips (nothing relevant): 0 here
                    assert not relevant
                    assert got == 0.0


def test_the_row_qrels_give_trec_evals_value(server: FakeOpenAI) -> None:
    pytrec_eval = pytest.importorskip("pytrec_eval")
    ids = ["d1", "d2", "d3", "d4"]
    [row] = run(
        [sample(retrieved_context_ids=ids)], [relevance(measure="ndcg", k=3)], server
    ).results
    qrels = {"s1": dict(row.details["qrels"])}
    ranked = {"s1": {doc: float(10 - r) for r, doc in enumerate(ids)}}
    trec = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut_3"}).evaluate(ranked)
    assert row.score == pytest.approx(trec["s1"]["ndcg_cut_3"], rel=1e-12)


# --- one judgement per chunk, shared across measures -------------------------------------------


def test_measures_of_one_run_share_one_request_per_chunk(server: FakeOpenAI) -> None:
    metrics = [
        "context_relevance",
        relevance(measure="ndcg", k=5),
        relevance(measure="precision"),
        relevance(measure="ap", k=3),
    ]
    samples = [sample(id=str(i), user_input=f"{QUESTION} ({i})") for i in range(3)]
    ev = run(samples, metrics, server)  # no cache: the sharing is the run's own
    assert {r.status for r in ev.results} == {Status.OK}
    assert server.count == 4 * 3  # one per (question, chunk), not one per metric
    assert ev.usage.requests == 12
    for i in range(3):
        rows = [r for r in ev.results if r.sample_id == str(i)]
        assert sum(r.usage.requests for r in rows) == 4
        assert sum(r.details.get("shared", 0) for r in rows) == 4 * 3  # three rows borrowed
    names = [r.metric for r in ev.results[:4]]
    assert names == [
        "context_relevance",
        "context_relevance_ndcg_at_5",
        "context_relevance_precision",
        "context_relevance_ap_at_3",
    ]


def test_the_command_line_spelling_shares_too(server: FakeOpenAI) -> None:
    from ctxeval.cli.specs import build_metrics, parse_metric

    metrics = build_metrics(
        [
            parse_metric("context_relevance:measure=mean"),
            parse_metric("context_relevance:measure=ndcg,k=5"),
        ]
    )
    rows = run([sample()], metrics, server).results
    assert [r.metric for r in rows] == ["context_relevance", "context_relevance_ndcg_at_5"]
    assert server.count == 4


def test_a_rerun_with_the_cache_sends_nothing(server: FakeOpenAI) -> None:
    cache = MemoryCache()
    metrics = ["context_relevance", relevance(measure="ndcg", k=5)]
    first = run([sample()], metrics, server, cache=cache)
    assert server.count == 4
    second = run([sample()], metrics, server, cache=cache)
    assert server.count == 4  # nothing sent the second time
    assert [r.score for r in second.results] == [r.score for r in first.results]
    assert second.usage.requests == 0
    assert second.usage.cache_hits == 4  # read once, then shared


def test_repeated_chunk_texts_are_judged_once(server: FakeOpenAI) -> None:
    [row] = run(
        [sample(retrieved_contexts=["chunk a", "chunk b", "chunk a"])],
        ["context_relevance"],
        server,
    ).results
    assert server.count == 2
    assert [c["grade"] for c in row.details["chunks"]] == [3, 0, 3]
    assert row.score == 6 / 9


def test_the_same_question_and_chunk_in_two_samples_is_judged_once(server: FakeOpenAI) -> None:
    rows = run([sample(), sample(id="s2")], ["context_relevance"], server).results
    assert server.count == 4
    assert [r.score for r in rows] == [0.5, 0.5]


def test_different_graders_do_not_share(server: FakeOpenAI) -> None:
    other = LLMConfig(model="openai/other", api_base=server.url, api_key="sk-test-0123456789")
    metrics = ["context_relevance", relevance(measure="ndcg", llm=other)]
    run([sample()], metrics, server)
    assert server.count == 8


# --- batch mode --------------------------------------------------------------------------------


def test_batch_mode_grades_a_sample_in_one_request(server: FakeOpenAI) -> None:
    metrics = [relevance(batch=True), relevance(batch=True, measure="ndcg", k=3)]
    rows = run([sample(), sample(id="s2", user_input="Where is it?")], metrics, server).results
    assert server.count == 2  # one per sample, shared by both measures
    assert [prompt_name(r) for r in server.requests] == ["relevance_batch"] * 2
    assert rows[0].score == 0.5
    assert rows[1].score == pytest.approx(dcg([3, 0, 2]) / dcg([3, 2, 1]), abs=1e-9)
    assert rows[0].details["provenance"]["judges"][0]["prompts"] == ["relevance_batch@1"]
    # a blank chunk is not listed, a repeated one listed once
    run([sample(retrieved_contexts=["chunk a", " ", "chunk a", "chunk c"])], metrics[:1], server)
    assert user_text(server.requests[-1]).endswith("Passages:\n[1] chunk a\n[2] chunk c")


def test_a_batch_answer_with_the_wrong_number_of_grades_is_an_error(server: FakeOpenAI) -> None:
    server.responder = lambda request: json.dumps({"grades": [{"reason": "x", "grade": 3}]})
    [row] = run([sample()], [relevance(batch=True)], server).results
    assert row.status is Status.ERROR
    assert "grades has 1 items; 4 were asked for" in (row.reason or "")


# --- the row -----------------------------------------------------------------------------------


def test_row_details_and_qrels_with_ids(server: FakeOpenAI) -> None:
    ids = ["d1", "d2", "d3", "d1"]  # two chunks of document d1
    [row] = run([sample(retrieved_context_ids=ids)], [relevance(measure="ap")], server).results
    assert row.details["measure"] == "ap"
    assert row.details["min_grade"] == 1
    assert row.details["chunks"][1] == {
        "index": 1,
        "doc_id": "d2",
        "grade": 0,
        "reason": "scripted 0",
    }
    assert row.details["qrels"] == [["d1", 3], ["d2", 0], ["d3", 2]]  # d1: its best chunk
    provenance = row.details["provenance"]
    assert provenance["ctxeval"] == ctxeval.__version__
    assert provenance["judges"][0]["prompts"] == ["relevance@1"]
    assert provenance["judges"][0]["model"] == "openai/fake-judge"


def test_qrels_without_ids_name_chunks_by_their_sha1(server: FakeOpenAI) -> None:
    [row] = run([sample()], ["context_relevance"], server).results
    expected = ["sha1:" + hashlib.sha1(c.encode("utf-8")).hexdigest()[:16] for c in CHUNKS]
    assert [q[0] for q in row.details["qrels"]] == expected
    assert [q[1] for q in row.details["qrels"]] == GRADES
    assert doc_id_of("chunk a") == expected[0]
    assert doc_id_of("café") == "sha1:" + hashlib.sha1("café".encode()).hexdigest()[:16]


def test_degenerate_inputs_make_no_request(server: FakeOpenAI) -> None:
    samples = [
        {"id": "no-question", "user_input": " ", "retrieved_contexts": CHUNKS},
        {"id": "nothing", "user_input": QUESTION, "retrieved_contexts": []},
        {"id": "blank", "user_input": QUESTION, "retrieved_contexts": ["", "  "]},
        {
            "id": "ids",
            "user_input": QUESTION,
            "retrieved_contexts": CHUNKS,
            "retrieved_context_ids": ["d1"],
        },
    ]
    metrics = ["context_relevance", relevance(measure="ndcg"), "context_sufficiency"]
    rows = {(r.sample_id, r.metric): r for r in run(samples, metrics, server).results}
    assert server.count == 1  # only the sufficiency of "ids", which needs no IDs
    assert rows["no-question", "context_relevance"].status is Status.UNDEFINED
    assert "no question" in (rows["no-question", "context_relevance"].reason or "")
    assert rows["no-question", "context_sufficiency"].status is Status.UNDEFINED
    assert rows["nothing", "context_relevance"].status is Status.UNDEFINED
    assert rows["nothing", "context_relevance_ndcg"].status is Status.UNDEFINED
    assert rows["nothing", "context_sufficiency"].score == 0.0  # nothing is not enough
    assert rows["nothing", "context_sufficiency"].details["reason"] == "nothing retrieved"
    blank = rows["blank", "context_relevance"]
    assert blank.score == 0.0  # retrieved, but blank: grade 0 each, nobody asked
    assert "provenance" not in blank.details
    assert rows["blank", "context_sufficiency"].score == 0.0
    assert rows["ids", "context_relevance"].status is Status.ERROR
    assert "1 IDs for 4 retrieved contexts" in (rows["ids", "context_relevance"].reason or "")


def test_a_grade_outside_the_scale_is_retried_then_reported(server: FakeOpenAI) -> None:
    server.responder = lambda request: json.dumps({"reason": "very", "grade": 4})
    [row] = run([sample(retrieved_contexts=["chunk a"])], ["context_relevance"], server).results
    assert row.status is Status.ERROR
    assert "grade must be a whole number from 0 to 3, got 4" in (row.reason or "")
    for bad in (True, "3", 2.5):
        with pytest.raises(ctxeval.MalformedOutputError):
            prompts.RELEVANCE.check({"reason": "r", "grade": bad}, None)


# --- options and names -------------------------------------------------------------------------


def test_names_and_options() -> None:
    assert relevance().name == "context_relevance"
    assert relevance(k=5).name == "context_relevance_mean_at_5"
    assert relevance(measure="ndcg", k=10).name == "context_relevance_ndcg_at_10"
    assert relevance(measure="precision", min_grade=3).name == "context_relevance_precision_min3"
    assert relevance(measure="ap", min_grade=1).name == "context_relevance_ap"
    assert relevance(measure="ap", min_grade=2).name == "context_relevance_ap_min2"
    assert ctxeval.get_metric("context_sufficiency", with_reference=True).name == (
        "context_sufficiency_with_reference"
    )
    with pytest.raises(ValueError, match="min_grade applies to measure='precision' or 'ap'"):
        relevance(measure="ndcg", min_grade=2)
    with pytest.raises(ValueError, match="did you mean 'ndcg'"):
        relevance(measure="ndgc")
    with pytest.raises(ValueError, match="min_grade must be 1, 2 or 3"):
        relevance(measure="ap", min_grade=0)
    metric = relevance()
    assert metric.requires == ("user_input", "retrieved_contexts")
    assert metric.needs_llm  # type: ignore[attr-defined]
    assert metric.fingerprint_data == "relevance@1"  # type: ignore[attr-defined]
    assert relevance(batch=True).fingerprint_data == "relevance_batch@1"  # type: ignore[attr-defined]


def test_dry_run_estimate_counts_distinct_chunks() -> None:
    metric = relevance()
    assert isinstance(metric, ContextRelevance)
    one = ctxeval.Sample(user_input=QUESTION, retrieved_contexts=["a", "b", "a", " "])
    assert len(metric.estimate_calls(one)) == 2
    assert len(relevance(batch=True).estimate_calls(one)) == 1  # type: ignore[attr-defined]
    none = ctxeval.Sample(user_input="", retrieved_contexts=["a"])
    assert metric.estimate_calls(none) == []
    sufficiency = ctxeval.get_metric("context_sufficiency")
    assert len(sufficiency.estimate_calls(one)) == 1  # type: ignore[attr-defined]
    assert sufficiency.estimate_calls(none) == []  # type: ignore[attr-defined]


# --- the shared judgements ---------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_failed_judgement_fails_its_waiters_and_a_cancelled_one_is_made_again() -> None:
    memo = SharedJudgements(size=2)
    started = anyio.Event()
    calls: list[str] = []

    async def failing() -> Any:
        calls.append("fail")
        started.set()
        await anyio.sleep(0.01)
        raise ValueError("bad answer")

    async def asker(out: list[Any], wait: bool) -> None:
        if wait:
            await started.wait()
        try:
            await memo.get("k", failing)
        except ValueError as exc:
            out.append(str(exc))

    errors: list[Any] = []
    async with anyio.create_task_group() as group:
        group.start_soon(asker, errors, False)
        group.start_soon(asker, errors, True)
    assert errors == ["bad answer", "bad answer"]
    assert calls == ["fail"]  # one attempt, both failed

    # the maker cancelled: the waiter makes it
    started = anyio.Event()

    async def slow() -> Any:
        calls.append("slow")
        started.set()
        await anyio.sleep(10)

    async def quick() -> Any:
        calls.append("quick")
        return 7

    got: list[Any] = []

    async def second() -> None:
        await started.wait()
        got.append(await memo.get("c", quick))

    async with anyio.create_task_group() as group:
        group.start_soon(second)
        with anyio.move_on_after(0.05):
            await memo.get("c", slow)
    assert got == [(7, False)]
    assert await memo.get("c", quick) == (7, True)
    for key in ("x", "y"):  # the oldest finished judgement goes first
        await memo.get(key, quick)
    calls.clear()
    assert await memo.get("c", quick) == (7, False)  # evicted: made again
    assert calls == ["quick"]


# --- context sufficiency -----------------------------------------------------------------------


def test_sufficiency_scores_one_judgement_per_sample(server: FakeOpenAI) -> None:
    server.responder = Judge(sufficient={QUESTION: 1, "Who built it?": 0})
    samples = [sample(), sample(id="s2", user_input="Who built it?")]
    yes, no = run(samples, ["context_sufficiency"], server).results
    assert (yes.score, no.score) == (1.0, 0.0)
    assert yes.details["sufficient"] == 1
    assert yes.details["reason"] == "scripted 1"
    assert no.details["sufficient"] == 0
    assert yes.details["flags"] == [1]
    assert yes.details["provenance"]["judges"][0]["prompts"] == ["sufficiency@1"]
    assert server.count == 2
    assert [prompt_name(r) for r in server.requests] == ["sufficiency"] * 2
    assert user_text(server.requests[0]) == (
        f"Question: {QUESTION}\nRetrieved contexts:\n[1] chunk a\n[2] chunk b\n[3] chunk c\n"
        "[4] chunk d"
    )


def test_sufficiency_with_the_reference_when_there_is_one(server: FakeOpenAI) -> None:
    server.responder = Judge(sufficient={QUESTION: 1})
    metric = ctxeval.get_metric("context_sufficiency", with_reference=True)
    with_ref, without = run(
        [sample(reference="330 metres."), sample(id="s2", reference="")], [metric], server
    ).results
    assert sorted(prompt_name(r) for r in server.requests) == [
        "sufficiency",
        "sufficiency_with_reference",
    ]
    assert any("\nReference answer: 330 metres.\n" in user_text(r) for r in server.requests)
    assert with_ref.details["with_reference"] is True
    assert with_ref.details["provenance"]["judges"][0]["prompts"] == [
        "sufficiency_with_reference@1"
    ]
    assert without.details["provenance"]["judges"][0]["prompts"] == ["sufficiency@1"]
    assert with_ref.score == without.score == 1.0


def test_sufficiency_takes_repeats(server: FakeOpenAI) -> None:
    server.responder = Judge(sufficient={QUESTION: 1})
    [row] = run([sample()], [ctxeval.get_metric("context_sufficiency", repeats=3)], server).results
    assert row.score == 1.0
    assert server.count == 3
    assert row.details["votes"][0]["judges"] == {"judge": [1, 1, 1]}


# --- the scripted judge (ctxeval serve-judge) ---------------------------------------------------

VARIABLES = {
    "relevance": {"question": QUESTION, "context": "The Eiffel Tower is 330 m tall."},
    "relevance_batch": {
        "question": QUESTION,
        "contexts": "[1] The Eiffel Tower is 330 m tall.\n[2] Bananas.\n[3] A tower in Paris.",
    },
    "sufficiency": {"question": QUESTION, "contexts": "[1] The Eiffel Tower is 330 m tall."},
    "sufficiency_with_reference": {
        "question": QUESTION,
        "reference": "330 metres.",
        "contexts": "[1] The Eiffel Tower is 330 m tall.",
    },
}
NEW_PROMPTS = [
    prompts.RELEVANCE,
    prompts.RELEVANCE_BATCH,
    prompts.SUFFICIENCY,
    prompts.SUFFICIENCY_WITH_REFERENCE,
]


@pytest.mark.parametrize("mode", ["json_schema", "json_object", "prompt"])
@pytest.mark.parametrize("prompt", NEW_PROMPTS, ids=lambda p: p.name)
def test_the_scripted_judge_answers_the_new_prompts(prompt: prompts.Prompt, mode: str) -> None:
    request: dict[str, Any] = {
        "model": "scripted-judge",
        "messages": prompt.messages(VARIABLES[prompt.name], schema_in_prompt=mode != "json_schema"),
    }
    if mode == "json_schema":
        request["response_format"] = prompt.response_format()
    elif mode == "json_object":
        request["response_format"] = {"type": "json_object"}
    assert prompt_kind(request) == prompt.name
    given = answer(request)
    prompt.check(given, 3 if prompt.name == "relevance_batch" else None)
    assert answer(request) == given


def test_the_scripted_judge_grades_by_the_querys_words() -> None:
    request = {"messages": prompts.RELEVANCE_BATCH.messages(
        VARIABLES["relevance_batch"], schema_in_prompt=True
    )}  # fmt: skip
    assert [g["grade"] for g in answer(request)["grades"]] == [3, 0, 1]


def test_the_new_metrics_run_against_the_scripted_judge() -> None:
    with FakeOpenAI(scripted_judge) as fake:
        ev = ctxeval.evaluate(
            [sample(retrieved_contexts=["The Eiffel Tower is 330 m tall.", "Bananas."])],
            [
                "context_relevance",
                relevance(measure="ndcg", batch=True),
                "context_sufficiency",
                ctxeval.get_metric("context_sufficiency", with_reference=True),
            ],
            llm=LLMConfig(model="openai/scripted", api_base=fake.url, api_key="sk-test"),
            cache=None,
        )
    assert [r.status for r in ev.results] == [Status.OK] * 4
    assert [r.score for r in ev.results] == [0.5, 1.0, 1.0, 1.0]
