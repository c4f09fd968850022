"""TREC qrels and run files, read as trec_eval reads them, scored as trec_eval scores them
(through pytrec_eval, trec_eval's own C code, on the same dicts)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

import ctxeval
from ctxeval.cli import main

pytrec_eval = pytest.importorskip("pytrec_eval")

MEASURES = {
    "AP": "map",
    "Rprec": "Rprec",
    "RR": "recip_rank",
    "P@5": "P_5",
    "R@10": "recall_10",
    "nDCG@10": "ndcg_cut_10",
    "AP@5": "map_cut_5",
    "Success@5": "success_5",
    "Bpref": "bpref",
}


def random_trec(seed: int) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, float]]]:
    """Graded qrels (with judged non-relevant documents) and a run with tied scores; some
    queries are only in the run, some only in the qrels, one has nothing relevant."""
    rng = random.Random(seed)
    pool = [f"DOC-{i:03d}#{i % 7}" for i in range(60)]  # '#' inside an id is data
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for q in range(120):
        qid = f"{300 + q}"
        if q % 17 != 0:  # in the qrels
            judged = rng.sample(pool, rng.randint(3, 15))
            qrels[qid] = {doc: rng.choice([0, 0, 1, 2, 3]) for doc in judged}
            if q % 23 == 1:
                qrels[qid] = dict.fromkeys(judged, 0)  # nothing relevant
        if q % 13 != 0:  # in the run
            run[qid] = {doc: round(rng.uniform(0, 3), 1) for doc in rng.sample(pool, 20)}
    return qrels, run


def write_trec(folder: Path, qrels: dict, run: dict) -> tuple[Path, Path]:
    qrels_path, run_path = folder / "qrels.txt", folder / "run.txt"
    lines = ["# judged by the assessors\n"]
    for qid, judged in qrels.items():
        lines += [f"{qid} 0 {doc} {grade}\n" for doc, grade in judged.items()]
        lines.append(f"{qid} 0 UNJUDGED-{qid} -1\n")  # in the pool, not judged: left out
    qrels_path.write_text("".join(lines))
    lines = []
    for qid, scored in run.items():
        docs = list(scored)
        random.Random(qid).shuffle(docs)  # the rank column and the line order do not count
        for rank, doc in enumerate(docs):
            lines.append(f"{qid}\tQ0\t{doc}\t{rank}\t  {scored[doc]}\tmyrun extra junk\n")
        lines.append("\n")
    run_path.write_text("".join(lines))
    return qrels_path, run_path


@pytest.fixture(scope="module")
def trec(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict, dict]:
    qrels, run = random_trec(seed=11)
    qrels_path, run_path = write_trec(tmp_path_factory.mktemp("trec"), qrels, run)
    return qrels_path, run_path, qrels, run


def trec_eval_of(qrels: dict, run: dict) -> dict[str, dict[str, float]]:
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, set(MEASURES.values()))
    return evaluator.evaluate(run)


def test_files_load_as_trec_eval_pairs_them(trec: tuple) -> None:
    qrels_path, run_path, qrels, run = trec
    samples = ctxeval.load_trec(qrels_path, run_path)
    assert [s.id for s in samples] == [q for q in run if q in qrels]
    first = samples[0]
    scored = run[first.id]
    assert list(first.retrieved_context_ids) == sorted(
        scored, key=lambda d: (scored[d], d), reverse=True
    )  # score descending, ties by doc id descending
    assert first.reference_context_ids.grades == tuple(qrels[first.id].values())  # type: ignore[union-attr]
    assert not any("UNJUDGED" in doc for s in samples for doc in s.reference_context_ids)  # type: ignore[union-attr]
    complete = ctxeval.load_trec(qrels_path, run_path, complete=True)
    assert {s.id for s in complete} == set(qrels)
    assert all(s.retrieved_context_ids == () for s in complete if s.id not in run)


@pytest.mark.parametrize(("ours", "theirs"), sorted(MEASURES.items()))
def test_every_query_equals_trec_eval(ours: str, theirs: str, trec: tuple) -> None:
    qrels_path, run_path, qrels, run = trec
    expected = trec_eval_of(qrels, run)
    samples = ctxeval.load_trec(qrels_path, run_path)
    for averaging in (False, True):
        metric = ctxeval.get_metric(ours, trec_eval_averaging=averaging)
        for row in ctxeval.evaluate(samples, [metric]).results:
            want = expected[row.sample_id][theirs]
            if not any(g > 0 for g in qrels[row.sample_id].values()) and not averaging:
                assert row.status is ctxeval.Status.UNDEFINED  # our policy: nothing to recall
                assert want == 0.0
                continue
            assert row.score == pytest.approx(want, rel=1e-12, abs=1e-12), row.sample_id


def test_complete_and_trec_eval_averaging_reproduce_trec_eval_c(trec: tuple) -> None:
    """trec_eval -c: the qrels' queries missing from the run count, as 0."""
    qrels_path, run_path, qrels, run = trec
    expected = trec_eval_of(qrels, run)
    samples = ctxeval.load_trec(qrels_path, run_path, complete=True)
    metrics = [ctxeval.get_metric(name, trec_eval_averaging=True) for name in MEASURES]
    summary = ctxeval.evaluate(samples, metrics).summary()
    for ours, theirs in MEASURES.items():
        trec_c_mean = sum(expected[q][theirs] for q in expected) / len(qrels)
        assert summary[ours].mean == pytest.approx(trec_c_mean, rel=1e-12)
        assert summary[ours].n_ok == len(qrels)


def test_the_dict_forms_of_pytrec_eval_ranx_and_ir_measures(trec: tuple) -> None:
    qrels_path, run_path, qrels, run = trec
    from_files = ctxeval.load_trec(qrels_path, run_path)
    from_dicts = ctxeval._data.trec.samples_from_dicts(qrels, run)
    assert from_files == from_dicts


def test_the_command_line_reads_trec_files(trec: tuple, tmp_path: Path) -> None:
    qrels_path, run_path, qrels, run = trec
    code = main(
        ["evaluate", "--qrels", str(qrels_path), "--run", str(run_path), "-m", "nDCG@10",
         "-m", "AP", "--complete", "--trec-eval-averaging", "--out", str(tmp_path / "r"), "-q"]
    )  # fmt: skip
    assert code == 0
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())["metrics"]
    expected = trec_eval_of(qrels, run)
    assert summary["nDCG@10"]["mean"] == pytest.approx(
        sum(expected[q]["ndcg_cut_10"] for q in expected) / len(qrels), rel=1e-12
    )
    assert summary["AP"]["n_ok"] == len(qrels)


@pytest.mark.parametrize(
    ("qrels", "run", "message"),
    [
        ("1 0 d1 1\n1 0 d1 0\n", "1 Q0 d1 1 1.0 r\n", "qrels.txt:2: document 'd1' is judged twice"),
        ("1 0 d1\n", "1 Q0 d1 1 1.0 r\n", "qrels.txt:1: expected 4 columns"),
        ("1 0 d1 high\n", "1 Q0 d1 1 1.0 r\n", "qrels.txt:1: relevance 'high' is not an integer"),
        ("1 0 d1 1\n", "1 Q0 d1 1 1.0\n", "run.txt:1: expected 6 columns"),
        ("1 0 d1 1\n", "1 Q0 d1 1 x r\n", "run.txt:1: score 'x' is not a finite number"),
        ("1 0 d1 1\n", "# c\n1 Q0 d1 1 1 r\n1 Q0 d1 2 0.5 r\n",
         "run.txt:3: document 'd1' is listed twice"),
    ],
)  # fmt: skip
def test_malformed_files_name_the_file_and_line(
    tmp_path: Path, qrels: str, run: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "qrels.txt").write_text(qrels)
    (tmp_path / "run.txt").write_text(run)
    with pytest.raises(ctxeval.DataError, match=message):
        ctxeval.load_trec(tmp_path / "qrels.txt", tmp_path / "run.txt")
    with pytest.raises(SystemExit) as exit_:
        main(["evaluate", "--qrels", str(tmp_path / "qrels.txt"), "--run",
              str(tmp_path / "run.txt"), "-m", "AP"])  # fmt: skip
    assert exit_.value.code == 2
    assert message.split(": ", 1)[1] in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--qrels", "q.txt", "-m", "AP"], "give both --qrels QRELS and --run RUN"),
        (["data.jsonl", "--qrels", "q", "--run", "r", "-m", "AP"], "either DATA or --qrels"),
        (["data.jsonl", "--complete", "-m", "AP"], "--complete goes with --qrels/--run"),
    ],
)
def test_trec_options_are_checked(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["evaluate", *args])
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


def test_trec_eval_averaging_only_for_the_id_metrics(
    trec: tuple, capsys: pytest.CaptureFixture[str]
) -> None:
    qrels_path, run_path, _, _ = trec
    with pytest.raises(SystemExit):
        main(["evaluate", "--qrels", str(qrels_path), "--run", str(run_path),
              "-m", "non_llm_context_recall", "--trec-eval-averaging"])  # fmt: skip
    assert "only the ID metrics and context_relevance do" in capsys.readouterr().err
