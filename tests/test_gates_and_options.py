"""The team's loop: CI gates (--fail-under, assert_metric), run folders that are never
overwritten silently, options checked with their names, inputs as they come."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import ctxeval
from ctxeval.cli import main
from ctxeval.testing import assert_metric

ROWS = [
    {"id": f"s{i}", "retrieved_context_ids": ["d1", "d2", f"x{i}"],
     "reference_context_ids": ["d1"] if i % 3 else ["d9"]}
    for i in range(12)
]  # fmt: skip
# id_mrr: 1.0 for 8 samples, 0.0 for 4 -> mean 2/3


def write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def run_cli(*args: str) -> tuple[int, str, str]:
    done = subprocess.run(
        [sys.executable, "-m", "ctxeval", *args], capture_output=True, text=True, timeout=120
    )
    return done.returncode, done.stdout, done.stderr


def test_fail_under_passes_and_fails_with_exit_code_3(tmp_path: Path) -> None:
    data = write(tmp_path / "d.jsonl", ROWS)
    code, _, err = run_cli(
        "evaluate", str(data), "-m", "id_mrr", "-q", "--fail-under", "id_mrr=0.6"
    )
    assert code == 0, err
    code, out, err = run_cli(
        "evaluate", str(data), "-m", "id_mrr", "-m", "P@2", "--fail-under", "id_mrr=0.7",
        "--fail-under", "P@2=0.1", "--out", str(tmp_path / "run"),
    )  # fmt: skip
    assert code == 3
    assert "gate FAIL id_mrr mean 0.667 < 0.700" in err
    assert "gate pass P@2 mean" in out
    gates = json.loads((tmp_path / "run" / "summary.json").read_text())["gates"]
    assert [(g["metric"], g["passed"]) for g in gates] == [("id_mrr", False), ("P@2", True)]


def test_gates_on_the_ci_lower_bound_are_stricter(tmp_path: Path) -> None:
    data = write(tmp_path / "d.jsonl", ROWS)
    code, _, err = run_cli("evaluate", str(data), "-m", "id_mrr", "-q",
                           "--fail-under", "id_mrr=0.6", "--gate-on", "ci-low")  # fmt: skip
    assert code == 3  # the mean (0.667) passes, its 95% CI's lower bound does not
    assert "gate FAIL id_mrr ci-low 0.4" in err


def test_gates_from_a_run_file_and_bad_gates(tmp_path: Path) -> None:
    data = write(tmp_path / "d.jsonl", ROWS)
    config = tmp_path / "run.toml"
    config.write_text(
        f'data = "{data}"\nmetrics = [{{name = "id_mrr"}}]\n[fail_under]\nid_mrr = 0.9\n'
    )
    code, _, err = run_cli("evaluate", "--config", str(config), "-q")
    assert code == 3
    assert "id_mrr mean 0.667 < 0.900" in err
    for gate, message in [
        ("id_mrr", "write it as METRIC=VALUE"),
        ("id_mrr=high", "'high' is not a number"),
        ("id_mrr=1.5", "the value must be in [0, 1]"),
        ("nDCG@10=0.5", "no metric of this run is named 'nDCG@10' (the run's metrics: id_mrr)"),
    ]:
        code, _, err = run_cli("evaluate", str(data), "-m", "id_mrr", "--fail-under", gate)
        assert code == 2
        assert message in err


def test_assert_metric_reports_the_metric_and_its_worst_samples() -> None:
    ev = ctxeval.evaluate(ROWS, ["id_mrr"])
    assert_metric(ev, "id_mrr", at_least=0.6)
    with pytest.raises(AssertionError) as failed:
        assert_metric(ev, "id_mrr", at_least=0.6, on="ci-low")
    message = str(failed.value)
    assert message.startswith("ctxeval gate failed: id_mrr ci-low 0.4")
    assert "mean 0.667, 95% CI [0.4" in message
    assert "12 ok, 0 undefined, 0 error" in message
    assert "worst samples (5 of 12):\n    s0: 0.000  first_relevant_rank=None" in message
    with pytest.raises(ctxeval.ConfigError, match="no metric of this run is named 'AP'"):
        assert_metric(ev, "AP", at_least=0.5)
    assert_metric(ev, "MRR", at_least=0.6)  # any name of the metric
    assert_metric(ev, "recip_rank", at_least=0.6)


def test_the_pytest_plugin_offers_the_fixture(tmp_path: Path) -> None:
    test = tmp_path / "test_quality.py"
    test.write_text(
        textwrap.dedent(f"""
        import ctxeval

        def test_quality(ctxeval_assert):
            ev = ctxeval.evaluate({ROWS!r}, ["id_mrr"])
            ctxeval_assert(ev, "id_mrr", at_least=0.9)
    """)
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test)],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert done.returncode == 1
    assert "ctxeval gate failed: id_mrr mean 0.667 < 0.900" in done.stdout


def test_an_existing_run_folder_is_never_overwritten_silently(tmp_path: Path) -> None:
    data = write(tmp_path / "d.jsonl", ROWS)
    out = str(tmp_path / "run")
    assert main(["evaluate", str(data), "-m", "id_mrr", "--out", out, "-q"]) == 0
    before = (tmp_path / "run" / "results.jsonl").read_text()
    code, _, err = run_cli("evaluate", str(data), "-m", "P@2", "--out", out, "-q")
    assert code == 2
    assert "holds a run already (results.jsonl, journal.jsonl, summary.json)" in err
    assert "--resume to finish it, --overwrite to replace it" in err
    assert (tmp_path / "run" / "results.jsonl").read_text() == before
    code, _, err = run_cli("evaluate", str(data), "-m", "P@2", "--out", out, "--resume", "-q")
    assert code == 2
    assert "scored id_mrr; give the same metrics" in err
    assert run_cli("evaluate", str(data), "-m", "id_mrr", "--out", out, "--resume", "-q")[0] == 0
    assert run_cli("evaluate", str(data), "-m", "P@2", "--out", out, "--overwrite", "-q")[0] == 0
    assert "P@2" in (tmp_path / "run" / "results.jsonl").read_text()
    code, _, err = run_cli("evaluate", str(data), "-m", "id_mrr", "--out", str(tmp_path / "new"),
                           "--resume")  # fmt: skip
    assert code == 2
    assert "holds no run to resume" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--max-concurrency", "0"], "--max-concurrency: must be a whole number >= 1, got 0"),
        (["--max-concurrency", "-1"], "--max-concurrency: must be a whole number >= 1, got -1"),
        (["--max-cost", "nan"], "--max-cost: must be a number >= 0, got nan"),
        (["--max-cost", "-2"], "--max-cost: must be a number >= 0, got -2"),
        (["--metric-timeout", "0"], "--metric-timeout: must be None or a positive number"),
        (["--metric-timeout", "nan"], "--metric-timeout: must be None or a positive number"),
        (["--timeout", "-3"], "--timeout: must be None or a positive number, got -3.0"),
    ],
)
def test_options_are_checked_and_named(tmp_path: Path, args: list[str], message: str) -> None:
    data = write(tmp_path / "d.jsonl", ROWS)
    code, _, err = run_cli("evaluate", str(data), "-m", "id_mrr", *args)
    assert code == 2
    assert message in err


def test_llm_timeout_must_be_positive(tmp_path: Path) -> None:
    data = write(tmp_path / "d.jsonl", ROWS)
    code, _, err = run_cli("evaluate", str(data), "-m", "context_precision", "--model", "m",
                           "--timeout", "-5")  # fmt: skip
    assert code == 2
    assert "timeout must be None or a positive number, got -5.0" in err


def test_an_empty_input_is_an_error(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    code, _, err = run_cli("evaluate", str(empty), "-m", "id_mrr")
    assert code == 2
    assert "empty.jsonl: no samples to score (the input is empty)" in err


def test_unknown_run_file_keys_are_refused(tmp_path: Path) -> None:
    config = tmp_path / "run.toml"
    config.write_text('data = "d.jsonl"\nmetrics = [{name = "id_mrr"}]\nmax_concurency = 4\n')
    code, _, err = run_cli("evaluate", "--config", str(config))
    assert code == 2
    assert "unknown key 'max_concurency'; did you mean 'max_concurrency'?" in err


def test_input_errors_do_not_suggest_a_resume_that_cannot_help(tmp_path: Path) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps(ROWS[0]) + '\n{"id": "bad", "retrieved_context_ids": "d1"}\n')
    code, _, err = run_cli("evaluate", str(data), "-m", "id_mrr", "--out", str(tmp_path / "r"))
    assert code == 2
    assert "d.jsonl:2" in err
    assert "resume" not in err


def test_the_metrics_listing_reads_at_80_columns() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ctxeval", "metrics"], capture_output=True, text=True,
        env={**__import__("os").environ, "COLUMNS": "80"}, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0
    lines = done.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert "…" not in done.stdout
    text = done.stdout
    assert "id_ndcg_at_k (nDCG@k)\n  Normalised DCG at k" in text
    assert "llm_context_recall (context_recall)" in text
    assert "needs: user_input, reference, retrieved_contexts; an LLM (--model)" in text
    assert (
        "needs: retrieved_contexts, reference_contexts\n"
        "  options: unit, doc_id_separator, duplicates, measure" in text
    )
    assert "@deterministic:" in text


def test_presets_stand_for_their_metrics(tmp_path: Path) -> None:
    ev = ctxeval.evaluate(ROWS, ["@ranked"])
    assert ev.metrics == ("P@10", "R@10", "nDCG@10", "RR", "AP", "Rprec")
    with pytest.raises(ctxeval.ConfigError, match="unknown preset '@idz'; the presets are @ids"):
        ctxeval.evaluate(ROWS, ["@idz"])
    data = write(tmp_path / "d.jsonl", ROWS)
    code, out, _ = run_cli("evaluate", str(data), "-m", "@ids")
    assert code == 0
    assert "nDCG@10" in out


def test_error_rows_are_grouped_by_reason_under_the_summary(tmp_path: Path) -> None:
    rows = [*ROWS, *({"id": f"t{i}", "retrieved_context_ids": ["d1"]} for i in range(7))]
    data = write(tmp_path / "d.jsonl", rows)
    code, out, _ = run_cli("evaluate", str(data), "-m", "id_mrr", "-m", "P@2")
    assert code == 1
    assert "14 error row(s), by reason:" in out
    assert "      7  id_mrr: the sample has no 'reference_context_ids', which id_mrr" in out
    assert "      7  P@2: the sample has no" in out
    assert out.count("(e.g. sample t0)") == 2
