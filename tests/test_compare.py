"""ctxeval compare: many runs against a baseline, paired tests, Holm, missing metrics named."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from ctxeval._results.stats import holm, randomization_test
from ctxeval.cli import main


def run_folder(tmp_path: Path, name: str, scores: dict[str, list[float]]) -> str:
    """A run folder whose results.jsonl holds ``scores[metric][i]`` for sample ``s{i}``."""
    folder = tmp_path / name
    folder.mkdir()
    lines = []
    for metric, values in scores.items():
        for i, score in enumerate(values):
            lines.append(json.dumps({"sample_id": f"s{i}", "metric": metric, "status": "ok",
                                     "score": score, "reason": None, "details": {}}))  # fmt: skip
    (folder / "results.jsonl").write_text("\n".join(lines) + "\n")
    return str(folder)


def test_many_runs_against_the_baseline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rng = random.Random(3)
    base = [0.1 + rng.random() * 0.5 for _ in range(40)]
    a = run_folder(tmp_path, "A", {"AP": base, "RR": base})
    same = run_folder(tmp_path, "same", {"AP": [s + rng.uniform(-0.05, 0.05) for s in base]})
    better = run_folder(tmp_path, "better", {"AP": [s + 0.3 for s in base], "RR": base})
    assert main(["compare", a, same, better, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["baseline"] == a
    assert report["missing"] == {"RR": [same]}  # named, not dropped
    by = {(c["metric"], c["run"]): c for c in report["comparisons"]}
    assert set(by) == {("AP", same), ("AP", better), ("RR", better)}
    assert by["AP", better]["difference"] == pytest.approx(0.3)
    assert by["AP", better]["p_randomization"] < 0.001
    assert by["AP", same]["p_randomization"] > 0.05
    # Holm over the two AP comparisons: the smaller p doubled, the larger at least that
    ps = [by["AP", same]["p_randomization"], by["AP", better]["p_randomization"]]
    assert [by["AP", same]["p_holm"], by["AP", better]["p_holm"]] == holm(ps)
    assert by["RR", better]["p_holm"] == 1.0  # identical scores, a family of one
    assert main(["compare", a, same, better, "--markdown"]) == 0
    markdown = capsys.readouterr().out
    assert "| `AP` | B2 | 40 |" in markdown
    assert "`RR` is missing from: " in markdown
    assert main(["compare", a, same, better]) == 0
    text = capsys.readouterr().out
    assert "B1 = " in text
    assert "RR is missing from" in text


def test_compare_needs_two_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = run_folder(tmp_path, "A", {"AP": [0.5]})
    with pytest.raises(SystemExit):
        main(["compare", a])
    assert "compare needs two run folders or more" in capsys.readouterr().err


def test_randomization_test_is_exact_for_small_samples() -> None:
    # differences (0, 0, 1): means of the 8 sign flips are ±1/3; all 8 reach |1/3|
    assert randomization_test([0, 0, 0], [0, 0, 1]) == 1.0
    # differences (1, 1, 1, 1): only the all-plus and all-minus flips reach 1 -> 2/16
    assert randomization_test([0.0] * 4, [1.0] * 4) == 2 / 16
    assert randomization_test([0.2, 0.4], [0.2, 0.4]) == 1.0
    assert randomization_test([], []) is None
    big = randomization_test([0.0] * 30, [0.1] * 30, permutations=999)
    assert big == pytest.approx(1 / 1000, abs=1e-9)  # no random flip reaches an all-plus mean


def test_holm_is_the_step_down_correction() -> None:
    assert holm([0.01, 0.04, 0.03]) == [0.03, 0.06, 0.06]
    assert holm([0.5, None, 0.01]) == [0.5, None, 0.02]
    assert holm([0.6, 0.6]) == [1.0, 1.0]


def test_a_metric_under_another_of_its_names_is_compared(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run named ``context_precision`` (an alias) and one named by its registered name, an
    IR name in two spellings: compared, under the baseline's names."""
    base = [0.2, 0.4, 0.6, 0.8] * 5
    a = run_folder(tmp_path, "A", {"context_precision": base, "nDCG@10": base})
    b = run_folder(
        tmp_path,
        "B",
        {"llm_context_precision_with_reference": [s + 0.1 for s in base], "id_ndcg_at_10": base},
    )
    assert main(["compare", a, b, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["missing"] == {}
    by = {c["metric"]: c for c in report["comparisons"]}
    assert set(by) == {"context_precision", "nDCG@10"}
    assert by["context_precision"]["difference"] == pytest.approx(0.1)
    assert by["context_precision"]["n"] == len(base)
