"""``--write-qrels`` fed by the real ``context_relevance`` metric, end to end: the command line
(and its Python equivalent) against the fake OpenAI server answering scripted UMBRELA grades.

What must hold (issue 32): nDCG@k of ``context_relevance`` equals pytrec_eval's on the written
qrels and ctxeval's own ``--qrels/--run`` path to 1e-9; ``measure=mean`` is the mean grade / 3;
each (question, chunk) is judged once for all the measures of the run (requests counted at the
server); a re-run sends no request (the cache); ``Judged@k`` is 1.0 on fully judged queries.
The unit-level checks (worked examples, trec_eval on random grade lists, sharing between
metrics in Python) are in ``test_context_relevance.py``; ``Judged@k`` and the qrels writer on
their own in ``test_judged_qrels.py``.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import ctxeval
from ctxeval._data.trec import read_qrels
from ctxeval._output.qrels import write_qrels
from ctxeval.cli import main
from ctxeval_llm import LLMConfig
from fakes.openai_server import FakeOpenAI
from llm_judge import Judge, prompt_name, user_text

K = 3
GRADES = {  # chunk text -> the grade the scripted judge gives it
    "The Eiffel Tower is 330 metres tall.": 3,
    "At 330 m, the tower was the tallest structure until 1930.": 3,
    "The tower stands on the Champ de Mars in Paris.": 1,
    "The Louvre is the most visited museum in the world.": 0,
    "Its height varies by 15 cm with the temperature; it is about 330 m.": 2,
    "Mount Everest is 8,849 metres high.": 0,
    "Gustave Eiffel's company designed and built the tower.": 3,
    "The tower was built for the 1889 World's Fair by Eiffel's firm.": 2,
    "Eiffel also worked on the Statue of Liberty.": 1,
    "The Seine flows through Paris.": 0,
    "Paris has twenty arrondissements.": 0,
}
C = list(GRADES)
DATA: list[dict[str, Any]] = [
    {  # the best chunks not first: nDCG below 1
        "id": "q1",
        "user_input": "How tall is the Eiffel Tower?",
        "retrieved_contexts": [C[2], C[0], C[3], C[4], C[1]],
        "retrieved_context_ids": ["d3", "d1", "d4", "d5", "d2"],
    },
    {
        "id": "q2",
        "user_input": "Who built the Eiffel Tower?",
        "retrieved_contexts": [C[6], C[8], C[7], C[9]],
        "retrieved_context_ids": ["d7", "d9", "d8", "d10"],
    },
    {  # nothing relevant: nDCG undefined on both routes (0 with trec_eval's averaging)
        "id": "q3",
        "user_input": "How many arrondissements has Paris?",
        "retrieved_contexts": [C[9], C[3], C[5]],
        "retrieved_context_ids": ["d10", "d4", "d6"],
    },
    {  # q1's question again, with two of its chunks: those are not judged again
        "id": "q4",
        "user_input": "How tall is the Eiffel Tower?",
        "retrieved_contexts": [C[1], C[5], C[0]],
        "retrieved_context_ids": ["d2", "d6", "d1"],
    },
    {  # no IDs: the chunks are named by the SHA-1 of their text
        "id": "q5",
        "user_input": "What is near the Eiffel Tower?",
        "retrieved_contexts": [C[3], C[2], C[9]],
    },
]
DISTINCT = {(s["user_input"], c) for s in DATA for c in s["retrieved_contexts"]}
METRICS = [f"context_relevance:measure=ndcg,k={K}", "context_relevance:measure=ndcg",
           "context_relevance"]  # fmt: skip
ROWS = {"ndcg_k": f"context_relevance_ndcg_at_{K}", "ndcg": "context_relevance_ndcg",
        "mean": "context_relevance"}  # fmt: skip
KEY = "sk-test-0123456789"


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(Judge(grades=GRADES)) as fake:
        yield fake


@pytest.fixture
def fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache of this test's own (the command line keeps it in $XDG_CACHE_HOME), and the key."""
    home = tmp_path / "cache-home"
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    return home


def judged_pairs(server: FakeOpenAI) -> Counter[tuple[str, str]]:
    """(question, chunk) of every relevance request the server received."""
    asked: Counter[tuple[str, str]] = Counter()
    for request in server.requests:
        assert prompt_name(request) == "relevance"
        question, passage = user_text(request).split("\nPassage: ", 1)
        asked[question.removeprefix("Query: "), passage] += 1
    return asked


def evaluate_argv(data: Path, server: FakeOpenAI, *more: str) -> list[str]:
    argv = ["evaluate", str(data), "--model", "openai/fake-judge", "--api-base", server.url]
    for metric in METRICS:
        argv += ["-m", metric]
    return [*argv, *more, "-q"]


def rows_of(folder: Path) -> dict[tuple[str, str], dict[str, Any]]:
    rows = [json.loads(line) for line in (folder / "results.jsonl").open()]
    return {(r["sample_id"], r["metric"]): r for r in rows}


def body(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if not line.startswith("#")]


def doc_ids(sample: dict[str, Any]) -> list[str]:
    from ctxeval_llm.judges import doc_id_of

    ids = sample.get("retrieved_context_ids")
    return list(ids) if ids else [doc_id_of(c) for c in sample["retrieved_contexts"]]


def write_run(path: Path) -> None:
    """The retrieved order of the data as a TREC run (scores falling with the rank)."""
    path.write_text(
        "".join(
            f"{s['id']} Q0 {doc} {rank} {100 - rank} e2e\n"
            for s in DATA
            for rank, doc in enumerate(doc_ids(s), start=1)
        )
    )


def dcg(gains: list[int]) -> float:
    return sum(g / math.log2(rank + 1) for rank, g in enumerate(gains, start=1))


def ndcg_by_hand(grades: list[int], k: int | None = None) -> float:
    ideal = dcg(sorted(grades, reverse=True)[:k])
    return dcg(grades[:k]) / ideal if ideal else 0.0


def test_write_qrels_from_context_relevance_end_to_end(
    tmp_path: Path, server: FakeOpenAI, fresh_cache: Path
) -> None:
    pytrec_eval = pytest.importorskip("pytrec_eval")
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(s) + "\n" for s in DATA))
    judged = tmp_path / "judged.qrels"

    # 1. three measures of one judge: each (question, chunk) judged once, all told
    out = tmp_path / "run1"
    assert main(evaluate_argv(data, server, "--write-qrels", str(judged), "--out", str(out))) == 0
    asked = judged_pairs(server)
    assert set(asked) == DISTINCT
    assert set(asked.values()) == {1}
    assert server.count == len(DISTINCT) == 16  # not 3 measures x 18 chunks
    rows = rows_of(out)
    undefined = {key for key, r in rows.items() if r["status"] != "ok"}
    assert undefined == {("q3", ROWS["ndcg_k"]), ("q3", ROWS["ndcg"])}  # nothing relevant
    summary = json.loads((out / "summary.json").read_text())
    assert summary["usage"]["requests"] == len(DISTINCT)

    # 2. the written qrels: one line per (query, document), the judge's grades
    qrels = read_qrels(judged)
    for sample in DATA:
        grades = [GRADES[c] for c in sample["retrieved_contexts"]]
        assert qrels[sample["id"]] == dict(zip(doc_ids(sample), grades, strict=True))
    assert len(body(judged)) == sum(len(s["retrieved_contexts"]) for s in DATA)
    assert any("context_relevance" in line for line in judged.read_text().splitlines()[:20])

    # 3. measure=mean is the mean grade / 3, exactly
    for sample in DATA:
        grades = [GRADES[c] for c in sample["retrieved_contexts"]]
        assert rows[sample["id"], ROWS["mean"]]["score"] == sum(grades) / (3 * len(grades))

    # 4. nDCG equals pytrec_eval's on the written qrels, and a computation by hand
    run_file = tmp_path / "retrieved.run"
    write_run(run_file)
    trec_run = {
        s["id"]: {doc: float(100 - r) for r, doc in enumerate(doc_ids(s), start=1)} for s in DATA
    }
    trec = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg", f"ndcg_cut_{K}"}).evaluate(trec_run)
    for sample in DATA:
        grades = [GRADES[c] for c in sample["retrieved_contexts"]]
        theirs = trec.get(sample["id"], {})  # (a query with nothing relevant: 0)
        for row, measure, k in ((ROWS["ndcg_k"], f"ndcg_cut_{K}", K), (ROWS["ndcg"], "ndcg", None)):
            ours = rows[sample["id"], row]["score"]
            if sample["id"] == "q3":  # nothing relevant: undefined (trec_eval: 0)
                assert ours is None
                continue
            assert abs(ours - theirs.get(measure, 0.0)) < 1e-9, (sample["id"], measure)
            assert abs(ours - ndcg_by_hand(grades, k)) < 1e-9, (sample["id"], measure)
    assert 0 < rows["q1", ROWS["ndcg_k"]]["score"] < 1
    assert rows["q3", ROWS["ndcg_k"]]["status"] == "undefined"

    # 5. ctxeval's own --qrels/--run path gives the same, and Judged@k is 1.0 throughout
    ir_out = tmp_path / "ir"
    argv = ["evaluate", "--qrels", str(judged), "--run", str(run_file), "-m", f"nDCG@{K}",
            "-m", f"Judged@{K}", "-m", "Judged@10", "--out", str(ir_out), "-q"]  # fmt: skip
    assert main(argv) == 0
    ir = rows_of(ir_out)
    for sample in DATA:
        query = sample["id"]
        assert ir[query, f"Judged@{K}"]["score"] == 1.0
        assert ir[query, "Judged@10"]["score"] == 1.0
        ndcg = ir[query, f"nDCG@{K}"]
        mine = rows[query, ROWS["ndcg_k"]]
        assert ndcg["status"] == mine["status"], query  # one rule on both routes (#57)
        if ndcg["status"] == "ok":
            assert abs(ndcg["score"] - mine["score"]) < 1e-9, query
        else:  # no relevant document: undefined on both
            assert query == "q3"
    # with trec_eval's averaging, the query with nothing relevant is 0, as pytrec_eval
    # scores it
    averaged = tmp_path / "ir-averaged"
    argv = ["evaluate", "--qrels", str(judged), "--run", str(run_file), "-m", f"nDCG@{K}",
            "--trec-eval-averaging", "--out", str(averaged), "-q"]  # fmt: skip
    assert main(argv) == 0
    for (query, _), row in rows_of(averaged).items():
        assert abs(row["score"] - (rows[query, ROWS["ndcg_k"]]["score"] or 0.0)) < 1e-9, query
        assert abs(row["score"] - trec.get(query, {}).get(f"ndcg_cut_{K}", 0.0)) < 1e-9, query
    assert server.count == len(DISTINCT)  # the IR path asks no judge

    # 6. a re-run with the cache sends nothing, and scores and qrels come out the same
    again = tmp_path / "judged-again.qrels"
    out2 = tmp_path / "run2"
    assert main(evaluate_argv(data, server, "--write-qrels", str(again), "--out", str(out2))) == 0
    assert server.count == len(DISTINCT)
    rows2 = rows_of(out2)
    assert {k: r["score"] for k, r in rows2.items()} == {k: r["score"] for k, r in rows.items()}
    assert json.loads((out2 / "summary.json").read_text())["usage"]["requests"] == 0
    assert body(again) == body(judged)


def test_the_python_equivalent(tmp_path: Path, server: FakeOpenAI) -> None:
    """``ctxeval.evaluate`` and the qrels writer (what ``--write-qrels`` calls), then
    ``ctxeval.load_trec`` (what ``--qrels/--run`` read): the same figures."""
    from ctxeval._calls.cache import MemoryCache

    llm = LLMConfig(model="openai/fake-judge", api_base=server.url, api_key=KEY)
    metrics = [
        ctxeval.get_metric("context_relevance", measure="ndcg", k=K),
        ctxeval.get_metric("context_relevance", measure="ndcg"),
        ctxeval.get_metric("context_relevance"),
    ]
    cache = MemoryCache()
    ev = ctxeval.evaluate(DATA, metrics, llm=llm, cache=cache)
    assert ev.ok
    assert server.count == len(DISTINCT)
    judged = tmp_path / "judged.qrels"
    written = write_qrels(ev, judged)
    assert written.lines == sum(len(s["retrieved_contexts"]) for s in DATA)
    run_file = tmp_path / "retrieved.run"
    write_run(run_file)
    ir = ctxeval.evaluate(ctxeval.load_trec(judged, run_file), [f"nDCG@{K}", f"Judged@{K}"])
    ours = {(r.sample_id, r.metric): r.score for r in ev.results}
    compared = 0
    for row in ir.results:
        if row.metric == f"Judged@{K}":
            assert row.score == 1.0
        elif row.score is not None:  # (q3, nothing relevant, is undefined there)
            assert abs(row.score - (ours[row.sample_id, ROWS["ndcg_k"]] or 0.0)) < 1e-9
            compared += 1
    assert compared == len(DATA) - 1
    again = ctxeval.evaluate(DATA, metrics, llm=llm, cache=cache)
    assert server.count == len(DISTINCT)  # nothing sent again
    assert again.usage.requests == 0
    assert [r.score for r in again.results] == [r.score for r in ev.results]
