"""TREC files as columns (#58): the command line's ``--qrels``/``--run`` source
(:func:`ctxeval._data.trec_columns.open_trec`) reads the samples ``load_trec`` reads, and a
run of ranked ID metrics over it scores the queries' columns (``ScoresRankedColumns``, no
sample per query) to exactly the rows the sample path gives: scores to the last bit, reasons,
details, summaries, and the files of ``--out``, byte for byte."""

from __future__ import annotations

import json
import math
import random
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ctxeval
from ctxeval import policy
from ctxeval._data import trec_columns
from ctxeval._data.ranked import RankedColumns
from ctxeval._data.trec_columns import TrecSource, open_trec
from ctxeval._pipeline.ranked import ranked_scores
from ctxeval._run import columnar, fastpath
from ctxeval.cli import main

FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(autouse=True)
def _in_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    """Small files read as columns too, in chunks of a few queries."""
    monkeypatch.setattr(trec_columns, "BULK_FROM", 0)
    monkeypatch.setattr(fastpath, "FIRST_CHUNK", 3)
    monkeypatch.setattr(fastpath, "CHUNK", 7)
    monkeypatch.setattr(columnar, "RANKED_CHUNK", 7)


def write_files(folder: Path, seed: int, *, deep: bool = False) -> tuple[Path, Path]:
    """Qrels and a run with every odd shape: ties in scores, unjudged documents, queries in
    one file only, grades -1 to 3, queries judging nothing relevant, runs deeper than the
    exact AP's integers (``deep``), queries not grouped."""
    rng = random.Random(seed)
    docs = [f"d{i}" for i in range(70)] + ["d\u00a0x", "é-1", "a#b"]
    qrels_lines, run_lines = [], []
    for q in rng.sample(range(30), 30):
        query = f"q{q}"
        if q % 6:
            grades = [rng.choice([-1, 0, 0, 1, 2, 3]) for _ in range(rng.randint(1, 9))]
            if q % 11 == 1:
                grades = [rng.choice([-1, 0]) for _ in grades]  # nothing relevant
            for doc, grade in zip(rng.sample(docs, len(grades)), grades, strict=True):
                qrels_lines.append(f"{query} 0 {doc} {grade}\n")
        if q % 5:
            depth = rng.randint(1, 60 if deep else 25)
            for rank, doc in enumerate(rng.sample(docs, depth), start=1):
                score = rng.choice(["1", "2", "2.5", "3", "-0.5", "0"])  # ties
                run_lines.append(f"{query}\tQ0 {doc} {rank} {score} run\n")
    rng.shuffle(run_lines)
    qrels, run = folder / "qrels.txt", folder / "run.txt"
    qrels.write_text("".join(qrels_lines), encoding="utf-8")
    run.write_text("".join(run_lines), encoding="utf-8")
    return qrels, run


def metrics() -> list[Any]:
    get = ctxeval.get_metric
    return [
        get("id_ndcg_at_k", k=10),
        get("id_ndcg_at_k", k=3, trec_eval_averaging=True, name="ndcg3_trec"),
        get("id_average_precision"),
        get("id_average_precision", relevance_level=2, name="ap_2"),
        get("id_precision_at_k", k=5),
        get("id_mrr"),
        get("id_recall_at_k", k=100),
        get("id_recall_at_k", k=4, relevance_level=3, name="r4_3"),
        get("id_hit_rate_at_k", k=2, trec_eval_averaging=True, name="hit2_trec"),
        get("id_based_context_precision"),
        get("id_based_context_recall"),
        get("id_based_context_recall", relevance_level=2, name="recall_2"),
        get("id_based_context_precision", trec_eval_averaging=True, name="precision_trec"),
    ]


def rows_of(samples: Any, chosen: list[Any]) -> tuple[list[bytes], dict[str, Any]]:
    evaluation = ctxeval.evaluate(samples, chosen)
    rows = [orjson.dumps(row.to_dict()) for row in evaluation.results]
    return rows, {name: s.to_dict() for name, s in evaluation.summary().items()}


def columnar_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the runs that take the columnar path."""
    calls: list[int] = []
    original = columnar.score_ranked_in_chunks

    async def counted(*args: Any) -> None:
        calls.append(1)
        await original(*args)

    monkeypatch.setattr("ctxeval._run.local.score_ranked_in_chunks", counted)
    return calls


@pytest.mark.parametrize("seed", range(4))
def test_the_source_reads_the_samples_load_trec_reads(tmp_path: Path, seed: int) -> None:
    qrels, run = write_files(tmp_path, seed)
    for complete in (False, True):
        source = open_trec(qrels, run, complete=complete)
        assert isinstance(source, TrecSource)
        expected = ctxeval.load_trec(qrels, run, complete=complete)
        assert list(source) == expected
        assert [s.id for s in source] == [s.id for s in expected]
        assert source[3] == expected[3]
        assert source[-1] == expected[-1]
        chunk = source.ranked(2, 9)
        assert list(chunk.samples) == expected[2:9]
        assert chunk.ids == [s.id for s in expected[2:9]]


@pytest.mark.parametrize("deep", [False, True])
@pytest.mark.parametrize("seed", range(3))
def test_columnar_rows_are_the_sample_paths_rows(
    tmp_path: Path, seed: int, deep: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    qrels, run = write_files(tmp_path, seed, deep=deep)
    calls = columnar_calls(monkeypatch)
    for complete in (False, True):
        chosen = metrics()
        fast = rows_of(open_trec(qrels, run, complete=complete), chosen)
        assert calls, "the run did not take the columnar path"
        calls.clear()
        slow = rows_of(ctxeval.load_trec(qrels, run, complete=complete), chosen)
        assert not calls
        assert fast == slow


def test_a_metric_without_the_hook_sends_the_run_through_samples(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    qrels, run = write_files(tmp_path, 1)
    calls = columnar_calls(monkeypatch)
    chosen = [ctxeval.get_metric("id_average_precision"), ctxeval.get_metric("id_bpref")]
    fast = rows_of(open_trec(qrels, run), chosen)
    assert not calls
    assert fast == rows_of(ctxeval.load_trec(qrels, run), chosen)


def test_a_failing_call_scores_its_chunk_through_samples(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    qrels, run = write_files(tmp_path, 2)
    chosen = metrics()
    expected = rows_of(ctxeval.load_trec(qrels, run), chosen)
    seen: list[int] = []

    def broken(self: Any, columns: RankedColumns) -> Any:
        seen.append(len(columns.ids))
        raise RuntimeError("broken")

    monkeypatch.setattr(
        "ctxeval._pipeline.deterministic.DeterministicPipelineMetric.score_ranked_columns", broken
    )
    assert rows_of(open_trec(qrels, run), chosen) == expected
    assert seen


def test_the_command_line_writes_the_same_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    qrels, run = write_files(tmp_path, 3)
    names = ["-m", "nDCG@10", "-m", "AP", "-m", "P@5", "-m", "RR", "-m", "R@100"]
    common = ["evaluate", "--qrels", str(qrels), "--run", str(run), "--complete", *names, "-q"]
    calls = columnar_calls(monkeypatch)
    assert main([*common, "--out", str(tmp_path / "columns")]) == 0
    assert calls
    monkeypatch.setattr("ctxeval._run.local.ranked_scorers", lambda run, samples: None)
    assert main([*common, "--out", str(tmp_path / "samples")]) == 0
    for name in ("results.jsonl", "summary.json"):
        ours = (tmp_path / "columns" / name).read_bytes()
        theirs = (tmp_path / "samples" / name).read_bytes()
        if name == "summary.json":  # (the folders' own paths aside)
            ours, theirs = (json.loads(ours)["metrics"], json.loads(theirs)["metrics"])
        assert ours == theirs


def test_files_the_bulk_reader_leaves_are_read_line_by_line(tmp_path: Path) -> None:
    (tmp_path / "qrels.txt").write_text("q1 0 d1 1\nq1 0 d1 0\n")
    (tmp_path / "run.txt").write_text("q1 Q0 d1 1 1.0 r\n")
    with pytest.raises(ctxeval.DataError, match=r"qrels.txt:2: document 'd1' is judged twice"):
        open_trec(tmp_path / "qrels.txt", tmp_path / "run.txt")
    (tmp_path / "qrels.txt").write_bytes(b"q1 0 d1 1\rq1 0 d2 0\n")  # a lone carriage return
    read = open_trec(tmp_path / "qrels.txt", tmp_path / "run.txt")
    assert type(read) is list
    assert read == ctxeval.load_trec(tmp_path / "qrels.txt", tmp_path / "run.txt")
    assert read[0].reference_context_ids.grades == (1, 0)  # type: ignore[union-attr]


ranked = st.lists(st.integers(-1, 3), min_size=1, max_size=45)
judged = st.lists(st.integers(0, 3), min_size=1, max_size=12)


@FAST
@given(queries=st.lists(st.tuples(ranked, judged), min_size=1, max_size=6), k=st.integers(1, 12))
def test_the_vectorised_values_are_the_formulas_floats(
    queries: list[tuple[list[int], list[int]]], k: int
) -> None:
    """Each plain query's score is the float the formula gives, bit for bit (AP through its
    exact integers, deep ranks through the formula itself)."""
    gains = np.array([g for run, _ in queries for g in run], dtype=np.int64)
    grades = np.array([g for _, ref in queries for g in ref], dtype=np.int64)
    offsets = np.cumsum([0] + [len(run) for run, _ in queries]).astype(np.int64)
    ref_offsets = np.cumsum([0] + [len(ref) for _, ref in queries]).astype(np.int64)
    columns = RankedColumns([str(i) for i in range(len(queries))], offsets, gains, ref_offsets,
                            grades, [])  # fmt: skip
    formulas: list[policy.Formula] = [
        policy.NDCGAtK(k=k), policy.RankedAveragePrecision(), policy.PrecisionAtK(k=k),
        policy.RecallAtK(k=k), policy.HitRateAtK(k=k), policy.ReciprocalRank(),
        policy.Precision(), policy.Recall(),
    ]  # fmt: skip
    for formula in formulas:
        for level in (1, 2):
            got = ranked_scores(formula, level, columns)
            for i, (run, ref) in enumerate(queries):
                graded = isinstance(formula, policy.NDCGAtK)
                relevant = sum(g >= (1 if graded else level) for g in ref)
                if not relevant:
                    assert math.isnan(got[i])
                    continue
                if graded:
                    want = formula.graded_value(run, [g for g in ref if g >= 1])
                else:
                    want = formula.value([g >= level for g in run], relevant)
                assert got[i] == want, (formula, level, run, ref)


def test_deep_average_precision_is_exact() -> None:
    """Relevant documents at ranks whose common multiple is no exact double: the formula's
    own exact value."""
    run = [1 if rank in (37, 41, 43, 47) else -1 for rank in range(1, 49)]
    columns = RankedColumns(["q"], np.array([0, len(run)]), np.array(run), np.array([0, 5]),
                            np.array([1, 1, 1, 1, 1]), [])  # fmt: skip
    got = ranked_scores(policy.RankedAveragePrecision(), 1, columns)[0]
    exact = sum(Fraction(i, r) for i, r in enumerate((37, 41, 43, 47), start=1)) / 5
    assert got == float(exact)
