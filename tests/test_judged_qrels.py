"""Judging retrieval without a reference: ``Judged@k`` (the share of the top k that the qrels
judge) and ``--write-qrels`` (a run's graded judgements written as TREC qrels, to read back
with ``--qrels``).

``Judged@k`` is ir_measures' measure (trec_eval has none): judged documents in the top k /
documents in the top k, i.e. ``min(k, retrieved)``. A document is judged when the qrels grade
it 0 or more (0: judged not relevant); a negative grade is "in the pool, not judged", as
trec_eval reads qrels and ctxeval's reader leaves it out. Against trec_eval (pytrec_eval) it is
``P_k`` with every judged document relevant (grades shifted up by one), times ``k / min(k, n)``.
"""

from __future__ import annotations

import json
import random
import stat
import tracemalloc
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest

import ctxeval
from ctxeval import MetricResult, Sample, Status
from ctxeval._data.trec import read_qrels, samples_from_dicts
from ctxeval._output.qrels import QrelsFile, write_qrels
from ctxeval._plugins.base import BaseMetric, options_of
from ctxeval.cli import main

KS = (1, 3, 5, 10, 20)


# --- Judged@k ----------------------------------------------------------------------------------


def scores(samples: Sequence[Any], metric: str | Any) -> dict[str, MetricResult]:
    return {row.sample_id or "": row for row in ctxeval.evaluate(samples, [metric]).results}


def test_judged_at_k_by_hand() -> None:
    """Grade 0 is judged, a negative grade is not, a short run divides by what it has."""
    samples = [
        {"id": "q1", "retrieved_context_ids": ["d1", "d2", "d9", "d4", "d3"],
         "reference_context_ids": {"d1": 2, "d2": 0, "d3": 1, "d4": -1}},
        {"id": "q2", "retrieved_context_ids": ["a", "b"], "reference_context_ids": {"a": 0}},
        {"id": "q3", "retrieved_context_ids": ["a", "b", "a", "c"],  # a repeat: first rank
         "reference_context_ids": ["b", "x"]},  # a plain list: the listed IDs are judged
    ]  # fmt: skip
    expected = {
        ("q1", 1): 1.0, ("q1", 3): 2 / 3, ("q1", 10): 3 / 5,  # d1, d2 (grade 0), d3; not d4, d9
        ("q2", 1): 1.0, ("q2", 3): 1 / 2, ("q2", 10): 1 / 2,
        ("q3", 1): 0.0, ("q3", 3): 1 / 3, ("q3", 10): 1 / 3,
    }  # fmt: skip
    for k in (1, 3, 10):
        rows = scores(samples, f"Judged@{k}")
        for query in ("q1", "q2", "q3"):
            assert rows[query].status is Status.OK
            assert rows[query].score == expected[query, k], (query, k)
    q1 = scores(samples, "Judged@3")["q1"]
    assert q1.details["top_k"] == ["d1", "d2", "d9"]
    assert q1.details["judged_ranks"] == [1, 2]


def test_judged_at_k_edge_cases() -> None:
    samples = [
        {"id": "nothing-retrieved", "retrieved_context_ids": [], "reference_context_ids": ["a"]},
        {"id": "no-qrels", "retrieved_context_ids": ["a"], "reference_context_ids": []},
        {"id": "pool-only", "retrieved_context_ids": ["a"], "reference_context_ids": {"a": -1}},
        {"id": "all-non-relevant", "retrieved_context_ids": ["a", "b"],
         "reference_context_ids": {"a": 0, "b": 0}},
    ]  # fmt: skip
    rows = scores(samples, "Judged@5")
    assert rows["nothing-retrieved"].status is Status.UNDEFINED
    assert "nothing retrieved" in (rows["nothing-retrieved"].reason or "")
    assert rows["no-qrels"].status is Status.UNDEFINED
    assert (rows["no-qrels"].reason or "").startswith("no judgements")
    assert "negative grade" in (rows["pool-only"].reason or "")
    # judged not relevant is judged: not "nothing to recall", as for the other ID metrics
    assert rows["all-non-relevant"].score == 1.0
    averaged = scores(samples, ctxeval.get_metric("Judged@5", trec_eval_averaging=True))
    assert {q: r.score for q, r in averaged.items()} == {
        "nothing-retrieved": 0.0, "no-qrels": 0.0, "pool-only": 0.0, "all-non-relevant": 1.0
    }  # fmt: skip


@pytest.mark.parametrize(
    ("written", "k", "row_name"),
    [("Judged@10", 10, "Judged@10"), ("judged@5", 5, "judged@5"), ("judged_5", 5, "judged_5"),
     ("id_judged_at_k", 10, "id_judged_at_10"), ("id_judged_at_3", 3, "id_judged_at_3")],
)  # fmt: skip
def test_judged_names(written: str, k: int, row_name: str) -> None:
    metric = ctxeval.get_metric(written)
    assert type(metric).__name__ == "IDJudgedAtK"
    assert metric.name == row_name
    assert metric.k == k  # type: ignore[attr-defined]


def test_judged_takes_a_cut_off_and_no_relevance_level() -> None:
    with pytest.raises(ctxeval.ConfigError, match="needs a cut-off"):
        ctxeval.get_metric("Judged")
    with pytest.raises(ctxeval.ConfigError, match="no option 'relevance_level'"):
        ctxeval.get_metric("Judged@5", relevance_level=2)
    factory = ctxeval.default_registry().factory("ctxeval.metrics", "id_judged_at_k")
    assert options_of(factory) == [
        "name",
        "unit",
        "doc_id_separator",
        "duplicates",
        "trec_eval_averaging",
        "k",
    ]
    from ctxeval._data.measure_names import ir_names_of

    assert ir_names_of("id_judged_at_k") == ["Judged@k"]


def random_judged(
    seed: int, *, negatives: bool = True, ties: bool = True
) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, float]]]:
    """Qrels graded -1 (pool only) to 3, and runs longer and shorter than the cut-offs."""
    rng = random.Random(seed)
    pool = [f"d{i:02d}" for i in range(40)]
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    grades = [-1, 0, 0, 1, 2, 3] if negatives else [0, 0, 1, 2, 3]
    for q in range(400):
        qrels[f"q{q}"] = {d: rng.choice(grades) for d in rng.sample(pool, rng.randint(1, 20))}
        docs = rng.sample(pool, rng.randint(1, 30))
        if ties:
            run[f"q{q}"] = {d: float(rng.randint(0, 8)) for d in docs}
        else:
            run[f"q{q}"] = {d: float(i) for i, d in enumerate(reversed(docs))}
    return qrels, run


def trec_ranked(scored: dict[str, float]) -> list[str]:
    return sorted(scored, key=lambda d: (scored[d], d), reverse=True)


@pytest.mark.parametrize("plain", [False, True], ids=["graded", "plain list"])
def test_judged_equals_trec_eval_p_k_over_the_judged(plain: bool) -> None:
    """trec_eval's P_k, every judged document made relevant (grade + 1), rescaled to the
    documents in the top k; graded qrels are scored one by one, plain lists on the fast path."""
    pytrec_eval = pytest.importorskip("pytrec_eval")
    qrels, run = random_judged(seed=2027)
    shifted = {q: {d: g + 1 for d, g in judged.items()} for q, judged in qrels.items()}
    evaluator = pytrec_eval.RelevanceEvaluator(shifted, {f"P_{k}" for k in KS})
    trec = evaluator.evaluate(run)
    if plain:  # judged = listed: the IDs graded 0 or more, as a plain list
        samples: list[Any] = [
            {"id": q, "retrieved_context_ids": trec_ranked(run[q]),
             "reference_context_ids": [d for d, g in qrels[q].items() if g >= 0]}
            for q in run
        ]  # fmt: skip
        samples = [s for s in samples if s["reference_context_ids"]]
    else:
        samples = samples_from_dicts(qrels, run)
    assert len(samples) > 300
    short = 0
    for k in KS:
        rows = scores(samples, f"Judged@{k}")
        for sample in samples:
            query = sample["id"] if isinstance(sample, dict) else sample.id
            if not any(g >= 0 for g in qrels[query].values()):
                assert rows[query].status is Status.UNDEFINED
                continue
            n = min(k, len(run[query]))
            short += n < k
            judged = round(trec[query][f"P_{k}"] * k)
            assert rows[query].score == judged / n, (query, k)
    assert short > 100  # runs shorter than the cut-off: divided by what they hold


def test_judged_equals_ir_measures() -> None:
    """ir_measures' own Judged@k, where the two read the same qrels (no negative grade:
    ir_measures counts one as judged) and rank the same (no tie: ir_measures breaks ties by
    doc id ascending, trec_eval and ctxeval descending)."""
    ir_measures = pytest.importorskip("ir_measures")
    qrels, run = random_judged(seed=5, negatives=False, ties=False)
    samples = samples_from_dicts(qrels, run)
    measures = [ir_measures.Judged @ k for k in KS]
    theirs = {
        (m.query_id, str(m.measure)): m.value for m in ir_measures.iter_calc(measures, qrels, run)
    }
    for k in KS:
        for query, row in scores(samples, f"Judged@{k}").items():
            assert row.score == theirs[query, f"Judged@{k}"], (query, k)


def test_the_fast_path_gives_what_one_sample_gives(tmp_path: Path) -> None:
    """Plain lists are scored a block at a time and their details written from columns: the
    same rows as :meth:`score` one by one."""
    rng = random.Random(3)

    def ids(n: int) -> list[str]:
        return [f"d{rng.randint(0, 9)}" for _ in range(n)]

    samples = [
        {"id": f"s{i}", "retrieved_context_ids": ids(rng.randint(0, 8)),
         "reference_context_ids": ids(rng.randint(0, 3))}
        for i in range(400)
    ]  # fmt: skip
    metric = ctxeval.get_metric("Judged@5")
    ctxeval.evaluate(samples, [metric, "nDCG@5", "Bpref"]).to_jsonl(tmp_path / "r.jsonl")
    written = [json.loads(line) for line in (tmp_path / "r.jsonl").open()]
    for row, sample in zip([r for r in written if r["metric"] == "Judged@5"], samples, strict=True):
        one = metric.score(Sample.from_dict(sample))
        assert (row["status"], row["score"]) == (one.status.value, one.score)
        assert row["details"] == dict(one.details or {})


def test_judged_from_trec_files_on_the_command_line(tmp_path: Path) -> None:
    (tmp_path / "qrels.txt").write_text("q1 0 d1 2\nq1 0 d2 0\nq1 0 d3 -1\nq2 0 x 1\n")
    (tmp_path / "run.txt").write_text(
        "q1 Q0 d1 1 9 r\nq1 Q0 d3 2 8 r\nq1 Q0 d2 3 7 r\nq1 Q0 d4 4 6 r\nq2 Q0 y 1 1 r\n"
    )
    code = main(["evaluate", "--qrels", str(tmp_path / "qrels.txt"), "--run",
                 str(tmp_path / "run.txt"), "-m", "Judged@2", "-m", "Judged@10",
                 "--out", str(tmp_path / "out"), "-q"])  # fmt: skip
    assert code == 0
    rows = [json.loads(line) for line in (tmp_path / "out" / "results.jsonl").open()]
    got = {(r["sample_id"], r["metric"]): r["score"] for r in rows}
    assert got == {("q1", "Judged@2"): 0.5, ("q1", "Judged@10"): 0.5,
                   ("q2", "Judged@2"): 0.0, ("q2", "Judged@10"): 0.0}  # fmt: skip


# --- write_qrels -------------------------------------------------------------------------------

JUDGE = {"model": "test/grader", "endpoint": "http://127.0.0.1:1/v1", "prompts": ["grade@1"]}


def graded_row(sample: str, metric: str, qrels: Any, judge: dict[str, Any] = JUDGE) -> MetricResult:
    details = {"qrels": qrels, "provenance": {"ctxeval": ctxeval.__version__, "judges": [judge]}}
    return MetricResult.ok(0.5, details=details).labelled(sample, metric)


def plain_row(sample: str, metric: str = "id_mrr") -> MetricResult:
    return MetricResult.ok(1.0, details={"relevant": ["a"]}).labelled(sample, metric)


def body(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if not line.startswith("#")]


def header(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if line.startswith("#")]


def test_write_qrels_writes_one_line_per_graded_document(tmp_path: Path) -> None:
    rows = [
        graded_row("q1", "context_relevance", [["d1", 2], ["d2", 0], ["d3", 1]]),
        plain_row("q1"),
        # the same chunks graded again by another metric: one line each; a different grade
        # keeps the first
        graded_row("q1", "context_relevance_b", [["d1", 2], ["d2", 3], ["d4", 0]],
                   judge={"model": "test/other"}),
        graded_row("q2", "context_relevance", [["sha1:0a1b", 1]]),
        plain_row("q3"),
        graded_row("q4", "context_relevance", []),
    ]  # fmt: skip
    target = tmp_path / "judged.qrels"
    qrels = write_qrels(rows, target, {"data": "traces.jsonl"})
    assert body(target) == ["q1 0 d1 2", "q1 0 d2 0", "q1 0 d3 1", "q1 0 d4 0", "q2 0 sha1:0a1b 1"]
    assert (qrels.lines, qrels.queries, qrels.conflicts, qrels.skipped) == (5, 2, 1, 0)
    assert read_qrels(target) == {
        "q1": {"d1": 2, "d2": 0, "d3": 1, "d4": 0}, "q2": {"sha1:0a1b": 1}
    }  # fmt: skip
    [note] = qrels.notes
    assert "1 documents were graded differently" in note
    assert "'d2': 0 by context_relevance, 3 by context_relevance_b" in note
    top = "\n".join(header(target))
    assert f"ctxeval {ctxeval.__version__}" in top
    assert "context_relevance, context_relevance_b" in top
    assert '"model":"test/grader"' in top
    assert '"model":"test/other"' in top
    assert '# data: "traces.jsonl"' in top
    assert "5 judgements of 2 queries" in top
    # trec_eval has no comments and reads a four-word line as a judgement: none has four
    assert all(len(line.split()) != 4 for line in header(target))
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["judged.qrels"]  # no temporary left


def test_what_cannot_be_a_trec_line_is_left_out_and_named(tmp_path: Path) -> None:
    rows = [
        graded_row("what is rag?", "g", [["d1", 1]]),  # a space in the query id
        graded_row("#q", "g", [["d1", 1]]),  # would read as a comment
        graded_row("q1", "g", [["d 1", 1], ["", 1], ["d2", "high"], ["d3", True], ["d4"],
                               ["d5", 200], [7, 1], ["ok", 2]]),
        graded_row("q2", "g", "not a list"),
    ]  # fmt: skip
    qrels = write_qrels(rows, tmp_path / "q.qrels")
    assert body(tmp_path / "q.qrels") == ["q1 0 7 1", "q1 0 ok 2"]  # an int id is its string
    assert qrels.skipped == 9
    [note] = qrels.notes
    assert "9 grades left out" in note
    assert "holds white space" in note


def test_no_graded_row_gives_a_header_and_a_note(tmp_path: Path) -> None:
    qrels = write_qrels([plain_row("q1"), plain_row("q2")], tmp_path / "q.qrels")
    assert body(tmp_path / "q.qrels") == []
    assert read_qrels(tmp_path / "q.qrels") == {}
    assert "no row held graded judgements" in qrels.notes[0]
    assert any("judge: not recorded" in line for line in header(tmp_path / "q.qrels"))


def test_an_evaluation_and_its_parts(tmp_path: Path) -> None:
    """An Evaluation is read part by part; a deterministic block is passed over unread."""
    samples = [{"id": f"s{i}", "retrieved_context_ids": ["a", "b"],
                "reference_context_ids": ["a"]} for i in range(300)]  # fmt: skip
    ev = ctxeval.evaluate(samples, ["id_mrr", "nDCG@10"])
    assert any(type(p).__name__ == "RowBlock" for p in ev._parts)
    qrels = write_qrels(ev, tmp_path / "q.qrels")
    assert qrels.lines == 0
    graded = ctxeval.Evaluation(
        [graded_row("s1", "g", [["a", 1]]), plain_row("s1")], ["g", "id_mrr"]
    )
    assert body(write_qrels(graded, tmp_path / "g.qrels").path) == ["s1 0 a 1"]


def test_failure_leaves_the_file_as_it_was(tmp_path: Path) -> None:
    target = tmp_path / "judged.qrels"
    target.write_text("old 0 d 1\n")

    def rows() -> Iterator[MetricResult]:
        yield graded_row("q1", "g", [["d1", 1]])
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_qrels(rows(), target)
    assert target.read_text() == "old 0 d 1\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["judged.qrels"]
    with QrelsFile(target) as qrels:
        qrels.add([graded_row("q1", "g", [["d1", 1]])])
        qrels.abort()
    with pytest.raises(ValueError, match="finished or aborted"):
        qrels.add([])
    assert target.read_text() == "old 0 d 1\n"


def test_a_link_at_the_name_is_replaced_not_followed(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    (tmp_path / "judged.qrels").symlink_to(victim)
    write_qrels([graded_row("q1", "g", [["d1", 1]])], tmp_path / "judged.qrels")
    assert victim.read_text() == "keep me\n"
    assert not (tmp_path / "judged.qrels").is_symlink()


def test_written_in_constant_memory(tmp_path: Path) -> None:
    """Lines go to disk as the rows come: 40 000 samples of 10 grades hold no more memory
    than a few of them."""

    def rows(n: int) -> Iterator[MetricResult]:
        for i in range(n):
            yield graded_row(f"q{i}", "g", [[f"doc-{i}-{j}", j % 4] for j in range(10)])

    tracemalloc.start()
    try:
        qrels = write_qrels(rows(40_000), tmp_path / "big.qrels")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert qrels.lines == 400_000
    assert (tmp_path / "big.qrels").stat().st_size > 8_000_000
    assert peak < 2_000_000, peak


# --- the command line --------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class Grader(BaseMetric):
    """A metric that grades each retrieved chunk as context_relevance does: 2 when the
    reference lists it, else 0, in ``details["qrels"]`` (no LLM: a stand-in judge)."""

    registry_name = "test_grader"
    requires = ("retrieved_context_ids", "reference_context_ids")

    async def ascore(self, sample: Sample, ctx: Any) -> MetricResult:
        relevant = set(sample.reference_context_ids or ())
        graded = [[doc, 2 if doc in relevant else 0] for doc in sample.retrieved_context_ids or ()]
        details = {"qrels": graded,
                   "provenance": {"ctxeval": ctxeval.__version__, "judges": [JUDGE]}}  # fmt: skip
        return MetricResult.ok(sum(g > 0 for _, g in graded) / max(len(graded), 1), details=details)


@pytest.fixture
def with_grader(monkeypatch: pytest.MonkeyPatch) -> None:
    registry = ctxeval.default_registry().copy()
    registry.register_metric("test_grader", Grader)
    monkeypatch.setattr(ctxeval, "default_registry", lambda: registry)


DATA = [
    {"id": "q1", "retrieved_context_ids": ["a", "b", "c"], "reference_context_ids": ["a", "c"]},
    {"id": "q2", "retrieved_context_ids": ["d", "e"], "reference_context_ids": ["x"]},
    {"id": "q3", "retrieved_context_ids": ["f"], "reference_context_ids": ["f"]},
]


def test_write_qrels_then_read_them_back(tmp_path: Path, with_grader: None) -> None:
    data = tmp_path / "traces.jsonl"
    data.write_text("".join(json.dumps(s) + "\n" for s in DATA))
    judged = tmp_path / "judged.qrels"
    code = main(["evaluate", str(data), "-m", "test_grader", "-m", "id_mrr",
                 "--write-qrels", str(judged), "--out", str(tmp_path / "run1"), "-q"])  # fmt: skip
    assert code == 0
    assert body(judged) == ["q1 0 a 2", "q1 0 b 0", "q1 0 c 2", "q2 0 d 0", "q2 0 e 0", "q3 0 f 2"]
    assert any(str(data) in line for line in header(judged))
    assert stat.S_IMODE(judged.stat().st_mode) == 0o600
    # another retriever's run, scored with the judge's grades
    (tmp_path / "run.txt").write_text(
        "q1 Q0 c 1 3 r\nq1 Q0 z 2 2 r\nq1 Q0 a 3 1 r\nq2 Q0 d 1 1 r\nq3 Q0 f 1 1 r\n"
    )
    run = tmp_path / "run.txt"
    code = main(["evaluate", "--qrels", str(judged), "--run", str(run), "-m", "Judged@10",
                 "-m", "P@3", "--out", str(tmp_path / "run2"), "-q"])  # fmt: skip
    assert code == 0
    rows = [json.loads(line) for line in (tmp_path / "run2" / "results.jsonl").open()]
    got = {(r["sample_id"], r["metric"]): (r["status"], r["score"]) for r in rows}
    assert got[("q1", "Judged@10")] == ("ok", 2 / 3)  # z was never judged
    assert got[("q1", "P@3")] == ("ok", 2 / 3)
    assert got[("q2", "Judged@10")] == ("ok", 1.0)
    assert got[("q2", "P@3")][0] == "undefined"  # graded 0 only: nothing relevant


def test_write_qrels_without_out_and_its_checks(
    tmp_path: Path, with_grader: None, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "traces.jsonl"
    data.write_text("".join(json.dumps(s) + "\n" for s in DATA))
    judged = tmp_path / "judged.qrels"
    assert main(["evaluate", str(data), "-m", "test_grader", "--write-qrels", str(judged)]) == 0
    assert f"qrels:    {judged}" in capsys.readouterr().out.replace("\n", "")
    assert len(body(judged)) == 6
    with pytest.raises(SystemExit) as exit_:  # never replaced silently
        main(["evaluate", str(data), "-m", "test_grader", "--write-qrels", str(judged), "-q"])
    assert exit_.value.code == 2
    assert "the file exists; add --overwrite" in capsys.readouterr().err
    judged.write_text("old\n")
    assert main(["evaluate", str(data), "-m", "test_grader", "--write-qrels", str(judged),
                 "--overwrite", "-q"]) == 0  # fmt: skip
    assert len(body(judged)) == 6
    with pytest.raises(SystemExit):
        main(["evaluate", str(data), "-m", "test_grader", "--write-qrels", str(tmp_path)])
    assert "a folder is there" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["evaluate", str(data), "-m", "test_grader",
              "--write-qrels", str(tmp_path / "no" / "such" / "x.qrels")])  # fmt: skip
    assert "cannot write in" in capsys.readouterr().err
    # a run whose metrics grade nothing still writes the file, and says so
    plain = tmp_path / "plain.qrels"
    assert main(["evaluate", str(data), "-m", "id_mrr", "--write-qrels", str(plain), "-q"]) == 0
    assert body(plain) == []
    assert "no row held graded judgements" in capsys.readouterr().err


def test_a_qrels_file_that_cannot_be_written_fails_the_run_not_the_folder(
    tmp_path: Path, with_grader: None, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "traces.jsonl"
    data.write_text("".join(json.dumps(s) + "\n" for s in DATA))
    locked = tmp_path / "full-disk"
    locked.mkdir()
    judged = locked / "judged.qrels"
    import ctxeval._output.qrels as module

    real_open = module.new_temporary

    def refuse(path: Path, *args: Any) -> Any:
        if path.parent == locked:
            raise OSError(28, "No space left on device", str(path))
        return real_open(path, *args)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(module, "new_temporary", refuse)
        code = main(["evaluate", str(data), "-m", "test_grader", "--write-qrels", str(judged),
                     "--out", str(tmp_path / "run"), "-q"])  # fmt: skip
    assert code == 1
    assert "could not write --write-qrels" in capsys.readouterr().err
    assert (tmp_path / "run" / "results.jsonl").exists()  # the run folder is whole
    assert list(locked.iterdir()) == []
