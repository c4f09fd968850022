"""People's grades (0-3) against a grading judge (``context_relevance``): the labels, the
weighted kappas and the confusion matrix per grade, and where they are shown.

The kappas are checked against scikit-learn's ``cohen_kappa_score(people, judge, weights=...,
labels=[0, 1, 2, 3])`` (values recorded from scikit-learn 1.9.1, and live when it is
installed), against a textbook computation by hand, and against an independent exact
implementation (Cohen's agreement-weight form, in fractions) on random lists.
"""

from __future__ import annotations

import html
import json
import math
import random
from collections.abc import Iterator, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

import ctxeval
from ctxeval import Labels, RetryPolicy
from ctxeval._errors import DataError
from ctxeval._judge.graded import GRADED_ROWS, NOT_GRADED, GradedAgreement, weighted_kappa
from ctxeval._judge.sheet import label_sheet
from ctxeval._output.trust_section import trust_section
from ctxeval_llm import LLMConfig
from fakes.openai_server import FakeOpenAI
from llm_judge import Judge

FAST = RetryPolicy(initial_backoff=0.001, max_backoff=0.02, jitter=0.0)
WEIGHTS = ("none", "linear", "quadratic")


def matrix(people: Sequence[int], judge: Sequence[int], size: int = 4) -> list[list[int]]:
    out = [[0] * size for _ in range(size)]
    for p, j in zip(people, judge, strict=True):
        out[p][j] += 1
    return out


# --- the kappas against references ---------------------------------------------------------


def g(digits: str) -> list[int]:
    """Grades written as a string of digits."""
    return [int(d) for d in digits]


# (people, judge) -> scikit-learn 1.9.1's cohen_kappa_score(people, judge, weights=w,
# labels=[0, 1, 2, 3]) for w = None, "linear", "quadratic" (nan: undefined, None here)
SKLEARN = {
    "textbook": (
        [0, 0, 1, 1, 2, 2, 3, 3, 0, 1, 2, 3, 3, 2],
        [0, 1, 1, 2, 2, 3, 3, 3, 0, 0, 2, 3, 2, 2],
        (0.5172413793103449, 0.7083333333333333, 0.8535564853556485),
    ),
    "all one grade, both": ([2] * 6, [2] * 6, (math.nan, math.nan, math.nan)),
    "the people give one grade": ([2] * 6, [0, 1, 2, 3, 2, 2], (0.0, 0.0, 0.0)),
    "the judge never gives 3": (
        [0, 1, 2, 3, 3, 1, 0, 2],
        [0, 1, 2, 2, 2, 1, 0, 1],
        (0.5, 0.6666666666666667, 0.8125),
    ),
    "nobody gives 1": (
        [0, 3, 2, 0, 3],
        [0, 3, 3, 2, 0],
        (0.0625, 0.16666666666666674, 0.23913043478260876),
    ),
    "opposite ends": ([0, 3], [3, 0], (-1.0, -1.0, -1.0)),
    "perfect": ([0, 1, 2, 3], [0, 1, 2, 3], (1.0, 1.0, 1.0)),
    "one item": ([0], [0], (math.nan, math.nan, math.nan)),
    "random a": (
        [1, 1, 2, 1, 3],
        [0, 2, 0, 0, 3],
        (0.13043478260869557, 0.2857142857142857, 0.46153846153846156),
    ),
    "random b": (
        g("203201031213020001303002113231200"),
        g("202200031213020000301012013130100"),
        (0.6206896551724137, 0.759825327510917, 0.8627858627858628),
    ),
    "random c": (
        g("02233121133211221103000123133023"),
        g("02213110233221200101001033132023"),
        (0.5019455252918288, 0.6226415094339622, 0.7333333333333334),
    ),
    "random d": (
        [1, 1, 3, 0, 3, 0, 0, 3, 2, 0, 0, 1, 2],
        [0, 2, 1, 0, 2, 1, 0, 3, 0, 0, 0, 0, 1],
        (0.11864406779661019, 0.3689320388349515, 0.5806451612903226),
    ),
    "random e": (
        g("001001222102000100133013211203102"),
        g("001101122100000000133003200003002"),
        (0.6008064516129032, 0.708433734939759, 0.8022373152217339),
    ),
}


@pytest.mark.parametrize("case", list(SKLEARN))
def test_kappas_equal_scikit_learns(case: str) -> None:
    people, judge, expected = SKLEARN[case]
    for weights, want in zip(WEIGHTS, expected, strict=True):
        got = weighted_kappa(matrix(people, judge), weights)  # type: ignore[arg-type]
        if math.isnan(want):
            assert got is None, (case, weights)
        else:
            assert got is not None
            assert abs(got - want) < 1e-12, (case, weights, got, want)


@pytest.mark.filterwarnings("ignore::UserWarning")  # sklearn's, where kappa is undefined
def test_kappas_equal_scikit_learns_live_on_random_lists() -> None:
    sklearn_metrics = pytest.importorskip("sklearn.metrics")
    rng = random.Random(32)
    for _ in range(300):
        n = rng.randint(1, 60)
        people = [rng.randint(0, 3) for _ in range(n)]
        judge = [min(3, max(0, g + rng.choice([-2, -1, 0, 0, 1]))) for g in people]
        for weights in WEIGHTS:
            want = sklearn_metrics.cohen_kappa_score(
                people, judge, weights=None if weights == "none" else weights, labels=[0, 1, 2, 3]
            )
            got = weighted_kappa(matrix(people, judge), weights)  # type: ignore[arg-type]
            if math.isnan(want):
                assert got is None
            else:
                assert got is not None
                assert abs(got - want) < 1e-12


def test_the_textbook_example_by_hand() -> None:
    """14 chunks; people's grades per row, the judge's per column:

    ======  ==  ==  ==  ==  ===
    p \\ j   0   1   2   3   all
    0        2   1   0   0   3
    1        1   1   1   0   3
    2        0   0   3   1   4
    3        0   0   1   3   4
    all      3   2   5   4   14
    ======  ==  ==  ==  ==  ===

    Every disagreement is by one grade (5 of them), so the observed weighted disagreement is
    5 whatever the weights. The expected one, sum of w(i, j) * rows[i] * columns[j] / n:
    linear 240 / 14, quadratic 478 / 14. Kappa = 1 - observed / expected:
    linear 1 - 70/240 = 17/24, quadratic 1 - 70/478 = 204/239; unweighted
    (p_o - p_e) / (1 - p_e) with p_o = 9/14, p_e = (9 + 6 + 20 + 16) / 196: 15/29.
    """
    people, judge, _ = SKLEARN["textbook"]
    table = matrix(people, judge)
    assert table == [[2, 1, 0, 0], [1, 1, 1, 0], [0, 0, 3, 1], [0, 0, 1, 3]]
    assert weighted_kappa(table, "linear") == 17 / 24
    assert weighted_kappa(table, "quadratic") == 204 / 239
    assert weighted_kappa(table, "none") == 15 / 29


def agreement_form(table: list[list[int]], weights: str) -> Fraction | None:
    """Cohen's weighted kappa in its agreement-weight form, exact: (p_o - p_e) / (1 - p_e)
    with agreement weights 1 - |i - j| / 3 or 1 - (i - j)^2 / 9 (0 to 1)."""
    size = len(table)
    n = sum(map(sum, table))
    rows = [sum(r) for r in table]
    columns = [sum(table[i][j] for i in range(size)) for j in range(size)]

    def agree(i: int, j: int) -> Fraction:
        if weights == "linear":
            return 1 - Fraction(abs(i - j), size - 1)
        if weights == "quadratic":
            return 1 - Fraction((i - j) ** 2, (size - 1) ** 2)
        return Fraction(int(i == j))

    cells = [(i, j) for i in range(size) for j in range(size)]
    observed = sum((agree(i, j) * table[i][j] for i, j in cells), Fraction(0)) / n
    expected = sum((agree(i, j) * rows[i] * columns[j] for i, j in cells), Fraction(0)) / n**2
    return None if expected == 1 else (observed - expected) / (1 - expected)


def test_kappas_equal_an_exact_implementation_on_random_lists() -> None:
    rng = random.Random(7)
    for _ in range(500):
        n = rng.randint(1, 30)
        spread = rng.choice([(0, 3), (1, 2), (0, 1), (2, 3), (3, 3)])  # some grades unused
        people = [rng.randint(*spread) for _ in range(n)]
        judge = [rng.randint(0, 3) if rng.random() < 0.4 else g for g in people]
        table = matrix(people, judge)
        for weights in WEIGHTS:
            want = agreement_form(table, weights)
            got = weighted_kappa(table, weights)  # type: ignore[arg-type]
            if want is None:
                assert got is None
            else:
                assert got == float(want)  # both exact rationals, correctly rounded


def test_a_grade_nobody_gave_changes_nothing() -> None:
    """The weights are those of the grades themselves (|i - j|, (i - j)^2), so dropping grade
    1, which nobody gave, from the matrix gives the same kappas as long as the grades keep
    their values: 0, 2 and 3 are not 0, 1 and 2."""
    people, judge, _ = SKLEARN["nobody gives 1"]
    full = weighted_kappa(matrix(people, judge), "quadratic")
    assert full == 11 / 46
    # a 5-grade matrix (a 4 nobody gave either) is the same too
    assert weighted_kappa(matrix(people, judge, size=5), "quadratic") == full
    assert weighted_kappa(matrix(people, judge, size=5), "linear") == 1 / 6


def test_no_item_and_one_grade_throughout() -> None:
    assert weighted_kappa([[0] * 4 for _ in range(4)], "quadratic") is None
    one = GradedAgreement.of([[(2, 2), (2, 2)], [(2, 2)]])
    assert one.exact == 1.0
    assert one.within_one == 1.0
    assert one.mean_difference == 0.0
    assert (one.kappa, one.kappa_linear, one.kappa_quadratic) == (None, None, None)
    assert one.kappa_quadratic_ci95 is None  # no resample has a kappa
    assert one.confusion == ((0, 0, 0, 0), (0, 0, 0, 0), (0, 0, 3, 0), (0, 0, 0, 0))


# --- GradedAgreement -------------------------------------------------------------------------


def test_the_figures_of_a_graded_agreement() -> None:
    people, judge, _ = SKLEARN["textbook"]
    pairs = list(zip(people, judge, strict=True))
    agreement = GradedAgreement.of([pairs[:5], pairs[5:9], pairs[9:]])
    assert agreement.n_items == 14
    assert agreement.n_samples == 3
    assert agreement.grades == (0, 1, 2, 3)
    assert agreement.confusion == ((2, 1, 0, 0), (1, 1, 1, 0), (0, 0, 3, 1), (0, 0, 1, 3))
    assert agreement.exact == 9 / 14
    assert agreement.within_one == 1.0
    assert agreement.mean_difference == (sum(judge) - sum(people)) / 14
    assert (agreement.kappa, agreement.kappa_linear) == (15 / 29, 17 / 24)
    assert agreement.kappa_quadratic == 204 / 239
    for ci in (agreement.kappa_linear_ci95, agreement.kappa_quadratic_ci95):
        assert ci is not None
        assert -1.0 <= ci[0] <= ci[1] <= 1.0
    assert GradedAgreement.of([pairs[:5], pairs[5:9], pairs[9:]]) == agreement  # seeded
    out = agreement.to_dict()
    assert out["confusion"] == [[2, 1, 0, 0], [1, 1, 1, 0], [0, 0, 3, 1], [0, 0, 1, 3]]
    assert out["people_counts"] == [3, 3, 4, 4]
    assert out["judge_counts"] == [3, 2, 5, 4]
    assert json.loads(json.dumps(out)) == out
    assert GradedAgreement.of([pairs]).kappa_quadratic_ci95 is None  # one sample: no interval


def test_the_intervals_are_a_bootstrap_over_samples() -> None:
    """Redone by hand: 2000 resamples of the samples (seed 0, drawn 200 at a time), each
    resample's matrices summed and its kappa computed; the 2.5th and 97.5th percentiles."""
    import numpy as np

    rng = random.Random(5)
    samples = [
        [(g, min(3, max(0, g + rng.choice([-1, 0, 0, 1])))) for g in rng.choices(range(4), k=4)]
        for _ in range(12)
    ]
    agreement = GradedAgreement.of(samples)
    tables = [matrix([p for p, _ in s], [j for _, j in s]) for s in samples]
    for weights, got in (
        ("linear", agreement.kappa_linear_ci95),
        ("quadratic", agreement.kappa_quadratic_ci95),
    ):
        draws = np.random.default_rng(0)
        values = []
        for _ in range(2000 // 200):
            for picked in draws.integers(0, len(tables), size=(200, len(tables))):
                total = [[sum(tables[k][i][j] for k in picked) for j in range(4)] for i in range(4)]
                kappa = weighted_kappa(total, weights)  # type: ignore[arg-type]
                if kappa is not None:
                    values.append(kappa)
        low, high = np.percentile(values, [2.5, 97.5])
        assert got is not None
        assert abs(got[0] - low) < 1e-12, weights
        assert abs(got[1] - high) < 1e-12, weights


def test_a_judge_grading_above_the_scale_widens_the_matrix() -> None:
    agreement = GradedAgreement.of([[(3, 4), (0, 0), (2, 2)]])
    assert agreement.grades == (0, 1, 2, 3, 4)
    assert agreement.confusion[3][4] == 1


# --- the labels file -------------------------------------------------------------------------


def test_grades_read_from_jsonl_and_csv(tmp_path: Path) -> None:
    jsonl = tmp_path / "grades.jsonl"
    jsonl.write_text(
        '{"sample_id": "q1", "metric": "context_relevance", "index": 0, "grade": 3}\n'
        '{"sample_id": "q1", "metric": "context_relevance", "index": 2, "grade": "1"}\n'
        '{"sample_id": "q2", "metric": "context_relevance", "grades": [0, null, 2]}\n'
        '{"sample_id": "q2", "metric": "context_precision", "labels": [1, 0]}\n'
    )
    labels = Labels.load(jsonl)
    assert labels.items[("context_relevance", "q1")] == {0: 3, 2: 1}
    assert labels.items[("context_relevance", "q2")] == {0: 0, 2: 2}  # null: not graded yet
    assert labels.graded == {"context_relevance"}
    assert len(labels) == 6
    csv = tmp_path / "grades.csv"
    csv.write_text(
        "sample_id,metric,index,grade\nq1,context_relevance,0,3\nq1,context_relevance,1,0\n"
    )
    from_csv = Labels.load(csv)
    assert from_csv.items == {("context_relevance", "q1"): {0: 3, 1: 0}}
    assert from_csv.graded == {"context_relevance"}
    renamed = labels.renamed({"context_relevance": "context_relevance_ndcg_at_5"})
    assert renamed.graded == {"context_relevance_ndcg_at_5"}


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"sample_id": "q", "metric": "m", "index": 0, "grade": 4}', "a whole number from 0 to 3"),
        ('{"sample_id": "q", "metric": "m", "index": 0, "grade": 2.5}', "got 2.5"),
        ('{"sample_id": "q", "metric": "m", "index": 0, "grade": true}', "got True"),
        ('{"sample_id": "q", "metric": "m", "grades": [3, -1]}', "got -1"),
        ('{"sample_id": "q", "metric": "m", "grades": 3}', "grades is a list of grades"),
        ('{"sample_id": "q", "metric": "m", "grade": 3}', "index and grade"),
        ('{"sample_id": "q", "metric": "m", "index": 0, "grade": 1, "label": 1}', "not both"),
    ],
)
def test_a_bad_grade_is_named_with_its_line_and_field(
    tmp_path: Path, line: str, message: str
) -> None:
    path = tmp_path / "grades.jsonl"
    path.write_text('{"sample_id": "q", "metric": "m", "index": 1, "grade": 0}\n' + line + "\n")
    with pytest.raises(DataError, match=message) as error:
        Labels.load(path)
    assert f"{path}:2" in str(error.value) or "line 2" in str(error.value)


def test_one_metric_is_labelled_one_way(tmp_path: Path) -> None:
    path = tmp_path / "mixed.jsonl"
    path.write_text(
        '{"sample_id": "q1", "metric": "context_relevance", "index": 0, "grade": 3}\n'
        '{"sample_id": "q2", "metric": "context_relevance", "index": 0, "label": 1}\n'
    )
    with pytest.raises(DataError, match="grades on line 1 and 0/1 labels here"):
        Labels.load(path)
    with pytest.raises(DataError, match="goes in 'grades' instead"):  # grades as 0/1 labels
        Labels.from_records([{"sample_id": "q1", "metric": "context_relevance", "labels": [3]}])
    with pytest.raises(DataError, match="labelled 3 on line 1 and 2 here"):
        Labels.from_records(
            [
                {"sample_id": "q1", "metric": "m", "index": 0, "grade": 3},
                {"sample_id": "q1", "metric": "m", "grades": [2]},
            ]
        )


# --- against the judge, end to end (the fake OpenAI server) ---------------------------------

CHUNKS = {"c0": 3, "c1": 0, "c2": 2, "c3": 1, "c4": 2, "c5": 3}
"""What the judge grades each chunk."""
SAMPLES: list[dict[str, Any]] = [
    {"id": "q1", "user_input": "question one?", "retrieved_contexts": ["c0", "c1", "c2"]},
    {"id": "q2", "user_input": "question two?", "retrieved_contexts": ["c3", "c4", "c5"]},
    {"id": "q3", "user_input": "question three?", "retrieved_contexts": ["c0", "c3"]},
    {"id": "q4", "user_input": "question four?", "retrieved_contexts": []},  # undefined
]
PEOPLE: list[dict[str, Any]] = [  # judge:  3  0  2 | 1  2  3 | 3  1
    {"sample_id": "q1", "metric": "context_relevance", "grades": [3, 1, 2]},
    {"sample_id": "q2", "metric": "context_relevance", "grades": [0, 3, None]},  # one left out
    {"sample_id": "q3", "metric": "context_relevance", "index": 0, "grade": 2},
    {"sample_id": "q3", "metric": "context_relevance", "index": 1, "grade": 1},
    {"sample_id": "q3", "metric": "context_relevance", "index": 5, "grade": 1},  # beyond
    {"sample_id": "q4", "metric": "context_relevance", "index": 0, "grade": 0},  # undefined row
    {"sample_id": "q9", "metric": "context_relevance", "index": 0, "grade": 0},  # not in the run
]
# (people, judge): (3,3) (1,0) (2,2) | (0,1) (3,2) | (2,3) (1,1)
PAIRS = [(3, 3), (1, 0), (2, 2), (0, 1), (3, 2), (2, 3), (1, 1)]


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(Judge(grades=CHUNKS)) as fake:
        yield fake


def judge_of(server: FakeOpenAI) -> LLMConfig:
    return LLMConfig(model="openai/fake-judge", api_base=server.url, api_key="sk-test-0123456789")


def graded_run(server: FakeOpenAI, **options: Any) -> ctxeval.Evaluation:
    metrics: list[str | ctxeval.Metric] = [
        "context_relevance",
        ctxeval.get_metric("context_relevance", measure="ndcg", k=2),
    ]
    return ctxeval.evaluate(SAMPLES, metrics, llm=judge_of(server), retry=FAST, **options)


def test_people_grades_against_the_judge(server: FakeOpenAI) -> None:
    ev = graded_run(server, labels=Labels.from_records(PEOPLE))
    trust = ev.trust()
    assert set(trust) == {"context_relevance"}  # the labels name that row only
    relevance = trust["context_relevance"]
    assert relevance.agreement is None
    assert relevance.corrected is None
    graded = relevance.graded
    assert graded is not None
    assert graded.n_items == 7
    assert graded.n_samples == 3
    assert graded.confusion == ((0, 1, 0, 0), (1, 1, 0, 0), (0, 0, 1, 1), (0, 0, 1, 1))
    assert graded == GradedAgreement.of([PAIRS[:3], PAIRS[3:5], PAIRS[5:]])
    people, judge = zip(*PAIRS, strict=True)
    table = matrix(people, judge)
    assert graded.kappa_quadratic == weighted_kappa(table, "quadratic")
    assert graded.kappa_quadratic == float(agreement_form(table, "quadratic"))  # type: ignore[arg-type]
    assert graded.exact == 3 / 7
    assert dict(relevance.skipped) == {
        "sample not in the run": 1,
        "index beyond the judged items": 1,
        "row undefined, nothing judged": 1,
    }


def test_shown_in_summary_json_the_report_and_the_terminal(
    server: FakeOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ctxeval.cli import main

    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(s) + "\n" for s in SAMPLES))
    labels = tmp_path / "grades.jsonl"
    labels.write_text("".join(json.dumps(r) + "\n" for r in PEOPLE[:4]))
    argv = ["evaluate", str(data), "-m", "context_relevance", "--model", "openai/fake-judge",
            "--api-base", server.url, "--no-cache", "--labels", str(labels),
            "--out", str(tmp_path / "run")]  # fmt: skip
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OPENAI_API_KEY", "sk-test-0123456789")
        assert main(argv) == 0
    printed = capsys.readouterr().out
    expected = GradedAgreement.of([PAIRS[:3], PAIRS[3:5], PAIRS[5:]])
    assert "vs people's grades: 7 items of 3 samples" in printed
    assert f"weighted kappa: quadratic {expected.kappa_quadratic:.3f}" in printed
    assert "people ↓ judge →" in printed
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    judge = summary["metrics"]["context_relevance"]["judge"]
    assert judge["agreement"] is None
    assert judge["graded_agreement"] == json.loads(json.dumps(expected.to_dict()))
    report = (tmp_path / "run" / "report.html").read_text()
    assert "judge vs people&#x27;s grades" in report or "judge vs people's grades" in report
    assert f"<b>{expected.kappa_quadratic:.3f}</b>" in report
    assert "people ↓ judge →" in report
    section = trust_section(summary)
    assert section.count("<tr><th class='num'>") == 4  # a row per people's grade
    # the sheet to grade, from the run folder
    sheet = tmp_path / "sheet.jsonl"
    argv = ["label-sheet", str(tmp_path / "run"), "-m", "context_relevance", "--data", str(data),
            "-n", "2", "-o", str(sheet)]  # fmt: skip
    assert main(argv) == 0
    assert "fill in each grade with 0 to 3" in capsys.readouterr().out
    records = [json.loads(line) for line in sheet.read_text().splitlines()]
    assert {r["sample_id"] for r in records} < {"q1", "q2", "q3"}
    assert all(r["grade"] is None and "label" not in r for r in records)
    assert all(r["item"] in CHUNKS and r["question"] for r in records)


def test_labels_of_the_wrong_kind_are_counted_not_used(server: FakeOpenAI) -> None:
    yes_no = Labels.from_records([{"sample_id": "q1", "metric": "context_relevance",
                                   "labels": [1, 0, 1]}])  # fmt: skip
    trust = graded_run(server, labels=yes_no).trust()["context_relevance"]
    assert trust.agreement is None
    assert trust.graded is None
    assert dict(trust.skipped) == {GRADED_ROWS: 3}
    # grades for a judge that says yes or no
    precision = [{"id": "p1", "user_input": "q?", "reference": "r", "retrieved_contexts": ["a"]}]
    grades = Labels.from_records([{"sample_id": "p1", "metric": "context_precision",
                                   "grades": [2]}])  # fmt: skip
    server.responder = lambda request: json.dumps({"reason": "x", "verdict": 1})
    ev = ctxeval.evaluate(
        precision, ["context_precision"], llm=judge_of(server), retry=FAST, labels=grades
    )
    trust = ev.trust()["context_precision"]
    assert trust.graded is None
    assert dict(trust.skipped) == {NOT_GRADED: 1}


def test_a_grade_sheet_drawn_from_a_run_and_filled_in(server: FakeOpenAI, tmp_path: Path) -> None:
    ev = graded_run(server)
    kept = {s["id"]: ctxeval.Sample(**s) for s in SAMPLES}  # (the command line keeps them)
    sheet = label_sheet(ev, "context_relevance", samples=kept, n=10)
    assert [(r["sample_id"], r["index"]) for r in sorted(sheet, key=lambda r: r["sample_id"])] == [
        ("q1", 0), ("q1", 1), ("q1", 2), ("q2", 0), ("q2", 1), ("q2", 2), ("q3", 0), ("q3", 1)
    ]  # fmt: skip
    by_id = {s["id"]: s for s in SAMPLES}
    for record in sheet:
        assert record["grade"] is None
        assert "label" not in record
        assert record["item"] == by_id[record["sample_id"]]["retrieved_contexts"][record["index"]]
        record["grade"] = CHUNKS[record["item"]]  # people who agree with the judge throughout
    path = tmp_path / "sheet.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in sheet))
    graded = ev.with_labels(path).trust()["context_relevance"].graded
    assert graded is not None
    assert graded.n_items == 8
    assert (graded.exact, graded.kappa_linear, graded.kappa_quadratic) == (1.0, 1.0, 1.0)


def test_the_report_escapes_nothing_it_should_not() -> None:
    agreement = GradedAgreement.of([PAIRS])
    summary = {"metrics": {"m<x>": {"judge": {"graded_agreement": agreement.to_dict()}}}}
    section = trust_section(summary)
    assert html.escape("m<x>") in section
    assert "m<x>" not in section
