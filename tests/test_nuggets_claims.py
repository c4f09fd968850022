"""Nuggets and claims (#55): ``context_nugget_recall`` (TREC RAG's AutoNuggetizer: vital /
okay nuggets, 3-level support of each against the retrieved context, batched per sample) and
RAGChecker's ``claim_recall`` / ``claim_context_precision``, against the fake OpenAI server;
the scores compared with the ``nuggetizer`` package's own scoring functions and with
RAGChecker's formulas (transcribed: ``ragchecker`` needs refchecker, not installed here)."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

import ctxeval
import ctxeval.runners
from ctxeval import DataError, RetryPolicy, Status
from ctxeval.cli import main
from ctxeval_llm import LLMConfig
from ctxeval_llm.judges import (
    NUGGET_VARIANTS,
    ContextNuggetRecall,
    nugget_scores,
    read_nuggets,
    records_of,
    write_nuggets,
)
from fakes.openai_server import FakeOpenAI
from llm_judge import Judge, prompt_name

FAST = RetryPolicy(initial_backoff=0.001, max_backoff=0.02, jitter=0.0)

# --- the worked example of docs/metrics/nuggets.md ---------------------------------------------

QUESTION = "When was the Eiffel Tower built, how tall is it and who designed it?"
REFERENCE = (
    "It was built from 1887 to 1889 by Gustave Eiffel's company, is 330 metres tall and was "
    "the world's tallest structure until 1930."
)
RETRIEVED = [
    "The Eiffel Tower was built between 1887 and 1889.",
    "Eiffel's engineers designed the tower; it was the tallest structure in the world.",
]
NUGGETS = [
    ("built from 1887 to 1889", "vital"),
    ("designed by Gustave Eiffel's company", "vital"),
    ("330 metres tall", "vital"),
    ("world's tallest structure until 1930", "okay"),
]
SUPPORT = {
    "built from 1887 to 1889": "support",
    "designed by Gustave Eiffel's company": "partial_support",
    "330 metres tall": "not_support",
    "world's tallest structure until 1930": "support",
}
# by hand: vital credits 1, 0.5, 0 (strict 1, 0, 0); the okay nugget 1; weights 1, 1, 1, 0.5
WORKED = {
    "vital_strict": 1 / 3,
    "vital": 1.5 / 3,
    "all_strict": 2 / 4,
    "all": 2.5 / 4,
    "weighted_strict": (1 + 0.5) / 3.5,
    "weighted": (1 + 0.5 + 0.5) / 3.5,
}

CLAIMS = ["The tower was built 1887-1889.", "Eiffel's company designed it.", "It is 330 m tall."]
CHUNKS = ["chunk A", "chunk B", "chunk C", "chunk D"]
ENTAILS = {"chunk A": [CLAIMS[0]], "chunk B": [CLAIMS[0], CLAIMS[1]]}


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    judge = Judge(
        nuggets={REFERENCE: NUGGETS},
        support=SUPPORT,
        claims={REFERENCE: CLAIMS},
        entails=ENTAILS,
    )
    with FakeOpenAI(judge) as fake:
        yield fake


def llm(server: FakeOpenAI) -> LLMConfig:
    return LLMConfig(model="openai/fake-judge", api_base=server.url, api_key="sk-test-0123456789")


def run(
    samples: list[dict[str, Any]], metrics: list[Any], server: FakeOpenAI
) -> ctxeval.Evaluation:
    return ctxeval.evaluate(samples, metrics, llm=llm(server), retry=FAST, cache=None)


def sample(**more: Any) -> dict[str, Any]:
    base = {"id": "q1", "user_input": QUESTION, "reference": REFERENCE}
    return {**base, "retrieved_contexts": RETRIEVED, **more}


def nugget_recall(**options: Any) -> ctxeval.Metric:
    return ctxeval.get_metric("context_nugget_recall", **options)


def kinds(server: FakeOpenAI) -> list[str]:
    return [prompt_name(r) for r in server.requests]


# --- nuggets -----------------------------------------------------------------------------------


def test_worked_example_every_variant_from_two_requests(server: FakeOpenAI) -> None:
    metrics = [nugget_recall(variant=v) for v in NUGGET_VARIANTS]
    rows = run([sample()], metrics, server).results
    assert [r.metric for r in rows] == [
        "context_nugget_recall",
        *(f"context_nugget_recall_{v}" for v in NUGGET_VARIANTS[1:]),
    ]
    for row, variant in zip(rows, NUGGET_VARIANTS, strict=True):
        assert row.status is Status.OK, row.reason
        assert row.score == pytest.approx(WORKED[variant], abs=1e-12), variant
        assert row.details["scores"] == pytest.approx(WORKED)
    # one request writes the nuggets, one judges all four: shared by the six metrics
    assert sorted(kinds(server)) == ["nugget_support_batch", "nuggets"]
    nuggets = rows[0].details["nuggets"]
    assert [(n["text"], n["importance"]) for n in nuggets] == NUGGETS
    assert [n["assignment"] for n in nuggets] == [SUPPORT[t] for t, _ in NUGGETS]
    assert rows[0].details["nuggets_from"] == "extracted"
    assert sum(r.usage.requests for r in rows) == 2  # metered like every LLM metric
    assert sum(r.usage.prompt_tokens for r in rows) > 0
    judges = rows[0].details["provenance"]["judges"]
    assert [j["prompts"] for j in judges] == [["nuggets@1"], ["nugget_support_batch@1"]]


def test_equal_to_the_nuggetizers_own_scoring(server: FakeOpenAI) -> None:
    metrics_module = pytest.importorskip("nuggetizer.core.metrics")
    [row] = run([sample()], [nugget_recall(variant="vital")], server).results
    theirs = metrics_module.calculate_nugget_scores("q1", row.details["nuggets"])
    scores = row.details["scores"]
    assert scores["vital_strict"] == theirs.strict_vital_score
    assert scores["vital"] == theirs.vital_score
    assert scores["all_strict"] == theirs.strict_all_score
    assert scores["all"] == theirs.all_score


def test_equal_to_the_nuggetizer_on_recorded_judgements() -> None:
    metrics_module = pytest.importorskip("nuggetizer.core.metrics")
    rng = random.Random(55)
    for _ in range(500):
        size = rng.randint(1, 12)
        importances = [rng.choice(["vital", "okay"]) for _ in range(size)]
        labels = [rng.choice(["support", "partial_support", "not_support"]) for _ in range(size)]
        ours = nugget_scores(importances, labels)
        nuggets = [
            {"importance": i, "assignment": a} for i, a in zip(importances, labels, strict=False)
        ]
        theirs = metrics_module.calculate_nugget_scores("q", nuggets)
        # the nuggetizer writes 0.0 where there is no vital nugget; ctxeval: undefined (None)
        assert ours["vital_strict"] == (
            theirs.strict_vital_score if "vital" in importances else None
        )
        assert ours["vital"] == (theirs.vital_score if "vital" in importances else None)
        assert ours["all_strict"] == theirs.strict_all_score
        assert ours["all"] == theirs.all_score
        # weighted (2411.09607 §3): vital weighs 1, okay 0.5
        weights = [1.0 if i == "vital" else 0.5 for i in importances]
        credit = [{"support": 1.0, "partial_support": 0.5}.get(a, 0.0) for a in labels]
        expected = sum(w * c for w, c in zip(weights, credit, strict=False)) / sum(weights)
        assert ours["weighted"] == pytest.approx(expected, abs=1e-12)


def test_exact_ends_of_the_scale() -> None:
    assert set(nugget_scores(["vital", "okay"], ["support"] * 2).values()) == {1.0}
    assert set(nugget_scores(["vital", "okay"], ["not_support"] * 2).values()) == {0.0}
    assert nugget_scores([], [])["all"] is None
    with pytest.raises(ValueError, match="importance must be vital or okay"):
        nugget_scores(["must"], ["support"])


def test_one_request_per_nugget_when_not_batched(server: FakeOpenAI) -> None:
    [row] = run([sample()], [nugget_recall(batch=False)], server).results
    assert row.score == pytest.approx(WORKED["vital_strict"])
    assert sorted(kinds(server)) == ["nugget_support"] * 4 + ["nuggets"]


def test_at_most_max_nuggets_vital_ones_first(server: FakeOpenAI) -> None:
    [row] = run([sample()], [nugget_recall(max_nuggets=2, variant="all")], server).results
    assert [n["text"] for n in row.details["nuggets"]] == [NUGGETS[0][0], NUGGETS[1][0]]
    assert row.score == 1.5 / 2
    assert "At most: 2 nuggets" in server.requests[0]["messages"][-1]["content"]


def test_a_sample_carrying_its_nuggets_needs_no_extraction(server: FakeOpenAI) -> None:
    given = [{"text": t, "importance": i} for t, i in NUGGETS[:2]]
    [row] = run([sample(nuggets=given)], [nugget_recall(variant="vital")], server).results
    assert row.score == 1.5 / 2
    assert row.details["nuggets_from"] == "given"
    assert kinds(server) == ["nugget_support_batch"]


def test_nuggets_from_a_nuggetizer_file_and_back(server: FakeOpenAI, tmp_path: Path) -> None:
    path = tmp_path / "nuggets.jsonl"
    record = {
        "qid": "q1",
        "query": QUESTION,
        "nuggets": [dict(zip(("text", "importance"), n, strict=False)) for n in NUGGETS],
    }
    path.write_text(json.dumps(record) + "\n\n", encoding="utf-8")
    assert [n.text for n in read_nuggets(path)["q1"]] == [t for t, _ in NUGGETS]
    metric = nugget_recall(nuggets_file=str(path), variant="all")
    ev = run([sample(reference=None)], [metric], server)
    [row] = ev.results
    assert row.score == WORKED["all"]
    assert kinds(server) == ["nugget_support_batch"]  # nothing written
    out = tmp_path / "judged.jsonl"
    assert write_nuggets(out, records_of(ev.results)) == 1
    [written] = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert written["qid"] == "q1"
    assert written["query"] == QUESTION
    assert [n["assignment"] for n in written["nuggets"]] == [SUPPORT[t] for t, _ in NUGGETS]
    metrics_module = pytest.importorskip("nuggetizer.core.metrics")
    assert metrics_module.calculate_global_metrics([written])["all_score"] == row.score
    assert read_nuggets(out)["q1"] == read_nuggets(path)["q1"]  # the export reads back


def test_a_sample_missing_from_the_file_is_an_error_row(server: FakeOpenAI, tmp_path: Path) -> None:
    path = tmp_path / "nuggets.jsonl"
    path.write_text(json.dumps({"qid": "other", "nuggets": ["a fact"]}) + "\n", encoding="utf-8")
    [row] = run([sample()], [nugget_recall(nuggets_file=str(path))], server).results
    assert row.status is Status.ERROR
    assert "q1" in row.reason
    assert str(path) in row.reason
    assert server.count == 0


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ("not json", "not JSON"),
        ('{"nuggets": []}', 'needs a "qid"'),
        ('{"qid": "q9"}', 'no "nuggets"'),
        ('{"qid": "q9", "nuggets": [{"text": "x", "importance": "high"}]}', "'q9'"),
        ('{"qid": "q9", "nuggets": [{"text": ""}]}', "nuggets[0]"),
    ],
)
def test_a_bad_nuggets_file_names_file_line_and_qid(tmp_path: Path, line: str, words: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"qid": "q1", "nuggets": ["fine"]}\n' + line + "\n", encoding="utf-8")
    with pytest.raises(DataError) as caught:
        nugget_recall(nuggets_file=str(path))
    assert caught.value.path == str(path)
    assert caught.value.line == 2
    assert words in str(caught.value)


def test_a_bad_nugget_in_a_sample_is_an_error_row(server: FakeOpenAI) -> None:
    [row] = run(
        [sample(nuggets=[{"text": "x", "importance": "high"}])], [nugget_recall()], server
    ).results
    assert row.status is Status.ERROR
    assert "'q1'" in row.reason
    assert "importance" in row.reason
    assert server.count == 0


def test_degenerate_samples_are_decided_without_the_judge(server: FakeOpenAI) -> None:
    rows = run(
        [
            sample(id="none", retrieved_contexts=[]),
            sample(id="blank", reference=None),
            sample(id="okay-only", nuggets=[{"text": "330 metres tall", "importance": "okay"}]),
        ],
        [nugget_recall(), nugget_recall(variant="all")],
        server,
    ).results
    by = {(r.sample_id, r.metric): r for r in rows}
    assert by["none", "context_nugget_recall"].score == 0.0
    assert by["none", "context_nugget_recall"].details["nothing_retrieved"] is True
    assert by["blank", "context_nugget_recall"].status is Status.UNDEFINED
    assert "no nuggets given" in by["blank", "context_nugget_recall"].reason
    assert by["okay-only", "context_nugget_recall"].status is Status.UNDEFINED  # no vital one
    assert by["okay-only", "context_nugget_recall_all"].score == 0.0
    assert kinds(server) == ["nugget_support_batch"]  # the okay-only sample, once


@pytest.mark.anyio
async def test_async_on_both_libraries(server: FakeOpenAI, anyio_backend: str) -> None:
    metrics = [nugget_recall(), "claim_recall", "claim_context_precision"]
    ev = await ctxeval.aevaluate(
        [sample(retrieved_contexts=CHUNKS)], metrics, llm=llm(server), retry=FAST, cache=None
    )
    assert [r.score for r in ev.results] == pytest.approx([1 / 3, 2 / 3, 2 / 4])


def test_dry_run_counts_the_new_calls(
    server: FakeOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "d.jsonl"
    rows = [sample(id=str(i), retrieved_contexts=CHUNKS) for i in range(5)]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    args = ["evaluate", str(data), "-m", "context_nugget_recall", "-m", "claim_recall",
            "--model", "openai/gpt-4o-mini", "--api-base", server.url, "--dry-run"]  # fmt: skip
    assert main(args) == 0
    printed = " ".join(capsys.readouterr().out.split())
    # per sample: nuggets 1 + support 1; claims 1 + one check per chunk (4)
    assert "35 LLM calls" in printed
    assert server.count == 0
    metric = nugget_recall(batch=False)
    assert isinstance(metric, ContextNuggetRecall)
    one = ctxeval.Sample(user_input=QUESTION, reference=REFERENCE, retrieved_contexts=CHUNKS)
    assert len(metric.estimate_calls(one)) == 2  # (the nuggets are not known before)


def test_dry_run_counts_shared_requests_once_as_the_run_sends_them(
    server: FakeOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "d.jsonl"
    rows = [
        sample(id=str(i), user_input=f"{QUESTION} ({i})", retrieved_contexts=CHUNKS)
        for i in range(5)
    ]  # (alike samples would share their requests in the run too)
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    args = ["evaluate", str(data), "--model", "openai/gpt-4o-mini", "--api-base", server.url]
    for variant in NUGGET_VARIANTS:
        args += ["-m", f"context_nugget_recall:variant={variant}"]
    args += ["-m", "claim_recall", "-m", "claim_context_precision"]
    assert main([*args, "--dry-run"]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    # per sample: nuggets 1 + support 1, for the six variants; claims 1 + 4 checks, for both
    assert "35 LLM calls" in printed
    assert "claim_context_precision: shares the requests of claim_recall (sent once)" in printed
    assert (
        "context_nugget_recall_all: shares the requests of context_nugget_recall (sent once)"
        in printed
    )
    assert server.count == 0
    assert main([*args, "--no-cache", "--out", str(tmp_path / "run")]) == 0
    assert server.count == 35  # what the dry run said (shared within a sample, not cached)
    capsys.readouterr()


# --- claims ------------------------------------------------------------------------------------


def ragchecker_retrieval(retrieved2answer: list[list[str]]) -> tuple[float, float]:
    """``ragchecker`` 0.1.9, ``computation.evaluate_retrieval``, transcribed without numpy:
    ``retrieved2answer[claim][chunk]`` labels; claim recall = mean over claims of the max over
    chunks of "Entailment", context precision = mean over chunks of the max over claims."""
    table = [[label == "Entailment" for label in row] for row in retrieved2answer]
    claim_recalled = [max(row) for row in table]
    psg_useful = [max(column) for column in zip(*table, strict=False)]
    return sum(claim_recalled) / len(claim_recalled), sum(psg_useful) / len(psg_useful)


def test_claims_worked_example_shares_every_request(server: FakeOpenAI) -> None:
    ev = run(
        [sample(retrieved_contexts=CHUNKS)], ["claim_recall", "claim_context_precision"], server
    )
    recall, precision = ev.results
    assert (recall.score, precision.score) == (2 / 3, 2 / 4)  # by hand: c1, c2 of 3; A, B of 4
    table = [
        ["Entailment" if c in ENTAILS.get(chunk, ()) else "Neutral" for chunk in CHUNKS]
        for c in CLAIMS
    ]
    assert ragchecker_retrieval(table) == (recall.score, precision.score)
    # one extraction and one check per chunk, shared by the two metrics
    assert sorted(kinds(server)) == ["claim_entailment"] * 4 + ["claims"]
    assert [c["entailed"] for c in recall.details["claims"]] == [1, 1, 0]
    assert [c["chunk"] for c in recall.details["claims"]] == [0, 1, None]
    assert [c["entails"] for c in precision.details["chunks"]] == [1, 1, 0, 0]
    assert recall.usage.requests + precision.usage.requests == 5


def test_claims_policy_where_ragchecker_writes_zero(server: FakeOpenAI) -> None:
    rows = run(
        [sample(id="none", retrieved_contexts=[]), sample(id="noclaim", reference="Nothing.")],
        ["claim_recall", "claim_context_precision"],
        server,
    ).results
    by = {(r.sample_id, r.metric): r for r in rows}
    assert by["none", "claim_recall"].score == 0.0
    assert by["none", "claim_context_precision"].status is Status.UNDEFINED
    assert by["noclaim", "claim_recall"].status is Status.UNDEFINED
    assert by["noclaim", "claim_context_precision"].status is Status.UNDEFINED
    assert kinds(server) == ["claims"]  # the one reference with text, once for both


async def by_table(labels: list[list[str]]) -> tuple[float, float]:
    """Claim recall and context precision through :class:`ClaimChecker` given its table of
    labels (``labels[chunk][claim]``)."""
    from ctxeval_llm.judges import ClaimChecker

    class Table(ClaimChecker):
        async def table(self, claims: Any, chunks: Any, ctx: Any) -> Any:
            return [[{"label": x, "reason": ""} for x in row] for row in labels]

    claims = [f"c{i}" for i in range(len(labels[0]))]
    chunks = [f"p{j}" for j in range(len(labels))]
    by_claim = await Table(judged="claims").match(claims, chunks, None)  # type: ignore[arg-type]
    by_chunk = await Table(judged="chunks").match(chunks, claims, None)  # type: ignore[arg-type]
    return (
        sum(v.matched for v in by_claim) / len(claims),
        sum(v.matched for v in by_chunk) / len(chunks),
    )


def test_on_random_tables_equal_to_ragcheckers_formula() -> None:
    rng = random.Random(8067)
    choices = ["entailment", "neutral", "contradiction"]
    for _ in range(200):
        n_claims, n_chunks = rng.randint(1, 6), rng.randint(1, 6)
        labels = [[rng.choice(choices) for _ in range(n_claims)] for _ in range(n_chunks)]
        theirs = ragchecker_retrieval(
            [[labels[j][i].capitalize() for j in range(n_chunks)] for i in range(n_claims)]
        )
        assert anyio.run(by_table, labels) == theirs


# --- the scripted judge (ctxeval serve-judge) answers the new prompts ---------------------------

FACT_VARIABLES = {
    "nuggets": {
        "question": "Where is the Eiffel Tower?",
        "max_nuggets": "1",
        "material": "[1] The Eiffel Tower is in Paris. It opened in 1889.\n[2] It is tall.",
    },
    "nugget_support": {
        "question": "Where is the Eiffel Tower?",
        "nugget": "in Paris",
        "context": "[1] The Eiffel Tower is in Paris.",
    },
    "nugget_support_batch": {
        "question": "Where is the Eiffel Tower?",
        "context": "[1] The Eiffel Tower is in Paris.",
        "nuggets": "[1] in Paris\n[2] in Paris, France\n[3] built by Romans",
    },
    "claims": {"question": "Where?", "text": "The tower is in Paris. It opened in 1889."},
    "claim_entailment": {
        "question": "Where?",
        "passage": "The Eiffel Tower is in Paris.",
        "claims": "[1] The tower is in Paris.\n[2] It opened in 1889.",
    },
}
FACT_ANSWERS = {
    "nuggets": {"nuggets": [{"text": "The Eiffel Tower is in Paris.", "importance": "vital"}]},
    "nugget_support": "support",
    "nugget_support_batch": ["support", "partial_support", "not_support"],
    "claims": {"claims": ["The tower is in Paris.", "It opened in 1889."]},
    "claim_entailment": ["entailment", "neutral"],
}


@pytest.mark.parametrize("mode", ["json_schema", "json_object", "prompt"])
@pytest.mark.parametrize("name", list(FACT_VARIABLES))
def test_the_scripted_judge_answers_every_new_prompt(name: str, mode: str) -> None:
    from ctxeval._judge_server.answers import KINDS, answer, prompt_kind
    from ctxeval_llm.judges import fact_prompts

    prompt = {p.name: p for p in vars(fact_prompts).values() if hasattr(p, "check")}[name]
    request: dict[str, Any] = {
        "messages": prompt.messages(FACT_VARIABLES[name], schema_in_prompt=mode != "json_schema")
    }
    if mode == "json_schema":
        request["response_format"] = prompt.response_format()
    elif mode == "json_object":
        request["response_format"] = {"type": "json_object"}
    assert name in KINDS
    assert prompt_kind(request) == name
    given = answer(request)
    expect = {"nugget_support_batch": 3, "claim_entailment": 2}.get(name)
    checked = prompt.check(given, expect)  # raises MalformedOutputError if not
    wanted = FACT_ANSWERS[name]
    if name == "nugget_support":
        assert checked["support"] == wanted
    elif name == "nugget_support_batch":
        assert [a["support"] for a in checked] == wanted
    elif name == "claim_entailment":
        assert [a["label"] for a in checked] == wanted
    else:
        assert given == wanted


def test_the_three_metrics_run_against_the_scripted_judge() -> None:
    from fakes.openai_server import scripted_judge

    with FakeOpenAI(scripted_judge) as fake:
        rows = run(
            [sample(retrieved_contexts=CHUNKS + RETRIEVED)],
            [nugget_recall(), "claim_recall", "claim_context_precision"],
            fake,
        ).results
    assert [r.status for r in rows] == [Status.OK] * 3, [r.reason for r in rows]


def test_a_sample_without_an_id_says_so_with_a_nuggets_file(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    path = tmp_path / "nuggets.jsonl"
    path.write_text(
        json.dumps({"qid": "0", "nuggets": ["330 metres tall"]}) + "\n", encoding="utf-8"
    )
    no_id = {k: v for k, v in sample().items() if k != "id"}
    [row] = run([no_id], [nugget_recall(nuggets_file=str(path))], server).results
    assert row.status is Status.ERROR
    assert "has no id" in row.reason
    assert "give each sample an id" in row.reason


@pytest.mark.slow
def test_the_processes_runner_gives_the_local_rows(server: FakeOpenAI, tmp_path: Path) -> None:
    path = tmp_path / "nuggets.jsonl"
    record = {"qid": "q1", "nuggets": [{"text": t, "importance": i} for t, i in NUGGETS]}
    path.write_text(json.dumps(record) + "\n", encoding="utf-8")
    metrics = [nugget_recall(nuggets_file=str(path)), "claim_recall", "claim_context_precision"]
    samples = [sample(retrieved_contexts=CHUNKS)]
    options = {"llm": llm(server), "retry": FAST, "cache": None}
    local = ctxeval.evaluate(samples, metrics, **options)
    runner = ctxeval.runners.get_runner("processes", workers=2)
    spread = ctxeval.evaluate(samples, metrics, runner=runner, **options)
    assert [r.score for r in spread.results] == [r.score for r in local.results]
    assert [r.score for r in local.results] == [1 / 3, 2 / 3, 2 / 4]


def test_other_nuggets_in_the_file_change_the_fingerprint(tmp_path: Path) -> None:
    path = tmp_path / "nuggets.jsonl"
    path.write_text(json.dumps({"qid": "q1", "nuggets": ["a fact"]}) + "\n", encoding="utf-8")
    first = nugget_recall(nuggets_file=str(path)).fingerprint_data  # type: ignore[attr-defined]
    path.write_text(json.dumps({"qid": "q1", "nuggets": ["b fact"]}) + "\n", encoding="utf-8")
    second = nugget_recall(nuggets_file=str(path)).fingerprint_data  # type: ignore[attr-defined]
    assert first != second
    assert first.startswith("nuggets@1,max=30,nugget_support_batch@1,nuggets=")


def test_an_answer_short_of_nuggets_is_asked_again_then_an_error_row() -> None:
    def short(request: dict[str, Any]) -> str | None:
        if prompt_name(request) == "nugget_support_batch":
            return json.dumps({"assignments": [{"reason": "one", "support": "support"}]})
        return None

    judge = Judge(nuggets={REFERENCE: NUGGETS}, fallback=short)
    with FakeOpenAI(judge) as fake:
        [row] = run([sample()], [nugget_recall()], fake).results
        asked = kinds(fake).count("nugget_support_batch")
    assert row.status is Status.ERROR
    assert "1 items; 4 were asked for" in row.reason
    assert asked >= 2  # re-asked with the error, never scored from a short answer


def test_blank_chunks_never_reach_the_judge(server: FakeOpenAI) -> None:
    chunks = [*CHUNKS[:2], "  "]
    metrics = [nugget_recall(), "claim_recall", "claim_context_precision"]
    rows = run([sample(retrieved_contexts=chunks)], metrics, server).results
    assert [r.score for r in rows] == [1 / 3, 2 / 3, 2 / 3]  # the blank chunk entails nothing
    assert sorted(kinds(server)) == ["claim_entailment"] * 2 + [
        "claims",
        "nugget_support_batch",
        "nuggets",
    ]
    support = next(r for r in server.requests if prompt_name(r) == "nugget_support_batch")
    assert "[3]" not in support["messages"][-1]["content"].split("\nNuggets:\n")[0]


def test_a_prompt_over_the_window_is_an_error_row_never_sent(server: FakeOpenAI) -> None:
    small = LLMConfig(
        model="openai/fake-judge",
        api_base=server.url,
        api_key="sk-test-0123456789",
        context_window=64,
    )
    metrics = [nugget_recall(), "claim_recall"]
    rows = ctxeval.evaluate([sample()], metrics, llm=small, retry=FAST, cache=None).results
    assert [r.status for r in rows] == [Status.ERROR, Status.ERROR]
    assert "'nuggets' prompt" in rows[0].reason
    assert "'claims' prompt" in rows[1].reason
    assert server.count == 0


def test_the_nuggets_of_a_run_folder_export(server: FakeOpenAI, tmp_path: Path) -> None:
    ev = run([sample()], [nugget_recall()], server)
    ev.to_jsonl(tmp_path / "results.jsonl")
    lines = (tmp_path / "results.jsonl").read_text(encoding="utf-8").splitlines()
    [record] = records_of(json.loads(line) for line in lines)
    assert record == next(records_of(ev.results))
    assert record["qid"] == "q1"
    assert [n["importance"] for n in record["nuggets"]] == [i for _, i in NUGGETS]


def test_an_error_row_names_its_judge(server: FakeOpenAI) -> None:
    def broken(request: dict[str, Any]) -> str | None:
        return json.dumps({"nuggets": "not a list"})

    judge = Judge(fallback=broken)
    with FakeOpenAI(judge) as fake:
        [row] = run([sample()], [nugget_recall()], fake).results
    assert row.status is Status.ERROR
    prompts_named = [j["prompts"] for j in row.details["provenance"]["judges"]]
    assert prompts_named == [["nuggets@1"], ["nugget_support_batch@1"]]
