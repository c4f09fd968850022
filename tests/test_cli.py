"""The command line: every command, every exit code, run files, dry runs, cost limits, resume."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from ctxeval.cli import main
from fakes.openai_server import FakeOpenAI
from llm_judge import Judge

ROWS = [
    {"id": "a", "retrieved_context_ids": ["d1", "d2"], "reference_context_ids": ["d1"]},
    {"id": "b", "retrieved_context_ids": ["d3"], "reference_context_ids": ["d1", "d3"]},
    {"id": "c", "retrieved_context_ids": ["d9"], "reference_context_ids": ["d9"]},
]


def default_ctrl_c() -> None:
    """In a child: SIGINT at its default, whatever this process inherited (a shell runs a
    background job with SIGINT ignored, and Python then installs no Ctrl-C handler)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def ctxeval_cli(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ctxeval", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=timeout,
    )


def test_evaluate_writes_results_summary_and_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = write_jsonl(tmp_path / "d.jsonl", ROWS)
    out = tmp_path / "run"
    code = main(
        [
            "evaluate",
            str(data),
            "-m",
            "id_based_context_precision",
            "-m",
            "id_ndcg_at_k:k=2",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [(r["sample_id"], r["metric"]) for r in rows] == [
        (s, m) for s in "abc" for m in ("id_based_context_precision", "id_ndcg_at_2")
    ]
    assert list(rows[0]) == ["sample_id", "metric", "status", "score", "reason", "details", "usage"]
    summary = json.loads((out / "summary.json").read_text())
    precision = summary["metrics"]["id_based_context_precision"]
    assert precision["mean"] == pytest.approx((0.5 + 1 + 1) / 3)
    assert (precision["n_ok"], precision["n_undefined"], precision["n_error"]) == (3, 0, 0)
    assert len(precision["ci95"]) == 2
    report = (out / "report.html").read_text()
    assert "<svg" in report
    assert "id_ndcg_at_2" in report
    # self-contained: inline scripts and styles only, nothing fetched
    assert re.search(r"<script[^>]*\bsrc=|<link\b|https?://", report) is None
    printed = capsys.readouterr().out
    assert "summary" in printed
    assert str(out / "report.html") in printed


def test_exit_1_when_a_row_is_an_error(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "d.jsonl", [*ROWS, {"id": "no-ids"}])
    assert main(["evaluate", str(data), "-m", "id_mrr", "-q"]) == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["evaluate", "missing.jsonl", "-m", "id_mrr"], "missing.jsonl: no such file"),
        (
            ["evaluate", "{data}", "-m", "id_mrrr"],
            "unknown metric 'id_mrrr'; did you mean 'id_mrr'?",
        ),
        (
            ["evaluate", "{bad}", "-m", "id_mrr"],
            "bad.jsonl:2: field 'retrieved_context_ids': expected a list of IDs, got a single str",
        ),
        (["evaluate", "{data}"], "give at least one metric"),
        (
            ["evaluate", "{data}", "-m", "id_precision_at_k:k=0"],
            "k must be a whole number >= 1, got 0",
        ),
        (
            ["evaluate", "{data}", "-m", "id_precision_at_k:kk=3"],
            "no option 'kk' (did you mean 'k'?)",
        ),
        (["evaluate", "{data}", "-m", "context_recall"], "these metrics need an LLM: add --model"),
        (["evaluate", "{data}", "-m", "id_mrr", "--resume"], "--resume needs --out DIR"),
        (["compare", "{tmp}/nope", "{tmp}/nope"], "no results here"),
    ],
)
def test_exit_2_on_bad_usage_or_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    data = write_jsonl(tmp_path / "d.jsonl", ROWS)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(ROWS[0]) + "\n" + json.dumps({"retrieved_context_ids": "d1"}) + "\n")
    args = [a.format(data=data, bad=bad, tmp=tmp_path) for a in args]
    if args[1] == "missing.jsonl":
        args[1] = str(tmp_path / "missing.jsonl")
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    assert exit_info.value.code == 2
    assert message in " ".join(capsys.readouterr().err.split())


def test_a_missing_extra_names_its_install_command(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "fancy_metric.py").write_text(
        "import attrs\nfrom ctxeval.plugin import BaseDeterministicMetric, Dependency\n"
        "@attrs.frozen(kw_only=True)\nclass Fancy(BaseDeterministicMetric):\n"
        "    registry_name = 'fancy'\n"
        "    dependencies = (Dependency('surely_absent_module', \"pip install 'fancy[all]'\"),)\n"
    )
    dist = site / "fancy-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: fancy\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[ctxeval.metrics]\nfancy = fancy_metric:Fancy\n")
    data = write_jsonl(tmp_path / "d.jsonl", ROWS)
    done = ctxeval_cli("evaluate", str(data), "-m", "fancy", env={"PYTHONPATH": str(site)})
    assert done.returncode == 2
    assert "pip install 'fancy[all]'" in done.stderr
    listed = json.loads(ctxeval_cli("metrics", "--json", env={"PYTHONPATH": str(site)}).stdout)
    assert {"name": "fancy", "status": "unavailable"}.items() <= next(
        m for m in listed if m["name"] == "fancy"
    ).items()


def test_lenient_makes_bad_rows_error_rows_and_reports_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps(ROWS[0]) + "\nnot json\n" + json.dumps(ROWS[1]) + "\n")
    out = tmp_path / "run"
    assert main(["evaluate", str(data), "-m", "id_mrr", "--lenient", "--out", str(out)]) == 1
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [r["status"] for r in rows] == ["ok", "error", "ok"]
    assert rows[1]["reason"] == (
        f"the sample could not be read: {data}:2: not valid JSON: Expecting value at column 1"
    )
    assert "1 error row(s)" in capsys.readouterr().out


def test_run_file(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "d.jsonl", ROWS)
    run = tmp_path / "run.toml"
    run.write_text(
        f'data = "{data}"\nout = "{tmp_path / "out"}"\n\n'
        '[[metrics]]\nname = "id_recall_at_k"\nk = 1\n\n[[metrics]]\nname = "id_mrr"\n'
    )
    assert main(["evaluate", "--config", str(run), "-q"]) == 0
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert set(summary["metrics"]) == {"id_recall_at_1", "id_mrr"}


def test_metrics_and_plugins_listings(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["metrics", "--json"]) == 0
    metrics = {m["name"]: m for m in json.loads(capsys.readouterr().out)}
    assert metrics["context_precision"]["alias_of"] == "llm_context_precision_with_reference"
    assert metrics["id_ndcg_at_k"]["options"] == [
        "unit",
        "doc_id_separator",
        "duplicates",
        "relevance_level",
        "trec_eval_averaging",
        "k",
    ]
    assert metrics["id_ndcg_at_k"]["ir_names"] == ["nDCG@k"]
    assert metrics["non_llm_context_recall"]["requires"] == [
        "retrieved_contexts",
        "reference_contexts",
    ]
    assert main(["plugins", "--json"]) == 0
    plugins = json.loads(capsys.readouterr().out)
    assert {"group": "ctxeval.extractors", "name": "spacy"}.items() <= next(
        p for p in plugins if p["name"] == "spacy"
    ).items()
    assert main(["metrics"]) == 0
    assert "id_based_context_precision" in capsys.readouterr().out


def test_compare_two_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    better = [{**r, "retrieved_context_ids": list(r["reference_context_ids"])} for r in ROWS]
    main(
        [
            "evaluate",
            str(write_jsonl(tmp_path / "a.jsonl", ROWS)),
            "-m",
            "id_based_context_recall",
            "--out",
            str(tmp_path / "A"),
            "-q",
        ]
    )
    main(
        [
            "evaluate",
            str(write_jsonl(tmp_path / "b.jsonl", better)),
            "-m",
            "id_based_context_recall",
            "--out",
            str(tmp_path / "B"),
            "-q",
        ]
    )
    capsys.readouterr()
    assert main(["compare", str(tmp_path / "A"), str(tmp_path / "B"), "--json"]) == 0
    [result] = json.loads(capsys.readouterr().out)["comparisons"]
    assert result["metric"] == "id_based_context_recall"
    assert result["n"] == 3
    assert result["difference"] == pytest.approx(1 - (1 + 0.5 + 1) / 3)
    assert 0.0 <= result["p_bootstrap"] <= 1.0
    # one sample improved by 0.5, two unchanged: every one of the 8 sign flips gives |mean|
    # 1/6, so nothing can be concluded from these three samples
    assert result["p_randomization"] == 1.0
    assert result["p_holm"] == 1.0  # one comparison: nothing to correct
    assert main(["compare", str(tmp_path / "A"), str(tmp_path / "B")]) == 0
    assert "paired comparison over the samples both runs scored" in capsys.readouterr().out


def test_demo(tmp_path: Path) -> None:
    done = ctxeval_cli("demo", "--out", str(tmp_path / "demo"))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "demo" / "report.html").exists()
    assert "report:" in done.stdout
    summary = json.loads((tmp_path / "demo" / "summary.json").read_text())
    assert "context_entity_recall" in summary["metrics"]  # spaCy is in the dev install
    assert "scored 210/210 rows" in done.stderr  # plain progress lines when not a terminal


def test_entity_recall_with_spacy_needs_no_model(tmp_path: Path) -> None:
    """Only metrics whose parts call an LLM ask for --model (the spaCy extractor does not)."""
    data = write_jsonl(
        tmp_path / "d.jsonl",
        [{"id": "e", "reference": "Gustave Eiffel designed the tower in Paris in 1889.",
          "retrieved_contexts": ["The tower in Paris was completed in 1889."]}],
    )  # fmt: skip
    done = ctxeval_cli(
        "evaluate", str(data), "-m", "context_entity_recall:extractor=spacy", "-q",
        "--out", str(tmp_path / "run"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    row = json.loads((tmp_path / "run" / "results.jsonl").read_text())
    assert (row["score"], row["details"]["missing"]) == (2 / 3, ["Gustave Eiffel"])
    needs = ctxeval_cli("evaluate", str(data), "-m", "context_entity_recall")  # the llm extractor
    assert needs.returncode == 2
    assert "these metrics need an LLM: add --model" in needs.stderr


def test_an_unknown_provider_is_named(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "d.jsonl", ROWS)
    done = ctxeval_cli(
        "evaluate", str(data), "-m", "context_precision", "--model", "m", "--provider", "acme"
    )
    assert done.returncode == 2
    assert "unknown LLM provider 'acme'" in done.stderr


# --- with an LLM: dry run, cost limit, interruption and resume ---------------------------------

LLM_ROWS = [
    {
        "id": f"s{i}",
        "user_input": "q",
        "reference": f"reference {i}",
        "retrieved_contexts": ["useful", "useless"],
        "retrieved_context_ids": ["x", str(i)],
        "reference_context_ids": [str(i)],
    }
    for i in range(40)
]


@pytest.fixture
def server() -> Any:
    with FakeOpenAI(Judge(verdicts={"useful": 1})) as fake:
        yield fake


def test_dry_run_counts_calls_and_sends_nothing(
    tmp_path: Path, server: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    data = write_jsonl(tmp_path / "d.jsonl", LLM_ROWS)
    args = [
        "evaluate",
        str(data),
        "-m",
        "context_precision",
        "-m",
        "context_recall",
        "-m",
        "id_mrr",
        "--model",
        "openai/gpt-4o-mini",
        "--api-base",
        server.url,
        "--dry-run",
    ]
    assert main(args) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert "120 LLM calls" in printed  # 40 x 2 chunks + 40 x 1
    assert "estimated cost: $" in printed
    assert server.count == 0


def test_max_cost_stops_cleanly(
    tmp_path: Path, server: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    data = write_jsonl(tmp_path / "d.jsonl", LLM_ROWS)
    out = tmp_path / "run"
    args = [
        "evaluate",
        str(data),
        "-m",
        "context_precision",
        "--model",
        "openai/gpt-4o-mini",
        "--api-base",
        server.url,
        "--out",
        str(out),
        "--max-cost",
        "0.0003",
        "--no-cache",
        "--max-concurrency",
        "1",
        "-q",
    ]
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    assert exit_info.value.code == 1
    assert "reached its cost limit" in " ".join(capsys.readouterr().err.split())
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    finished = [r for r in rows if r["status"] == "ok"]
    assert 0 < len(finished) < 40
    assert all("BudgetExceededError" in r["reason"] for r in rows if r["status"] == "error")
    assert server.count < 10  # nothing more was sent once the limit was reached


def test_interrupted_run_resumes_to_the_same_results(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "d.jsonl", LLM_ROWS)
    judge = Judge(verdicts={"useful": 1})
    out = tmp_path / "run"
    journal = out / "journal.jsonl"
    hold = threading.Event()  # set for the interrupted run only

    def journaled() -> int:  # a header line, then the LLM rows (id_mrr's are not journaled)
        return journal.read_text().count("\n") - 1 if journal.exists() else 0

    def holding(request: dict[str, Any]) -> Any:
        """Once the journal holds 13 rows, the requests of the interrupted run wait for its
        Ctrl-C: it cannot end before it, however busy the machine (and the rows waited for
        never wait behind a held request)."""
        deadline = time.monotonic() + 120
        while hold.is_set() and journaled() >= 13 and time.monotonic() < deadline:
            time.sleep(0.01)
        return judge(request)

    with FakeOpenAI(holding, latency=0.05) as server:
        base = [
            "evaluate",
            str(data),
            "-m",
            "context_precision",
            "-m",
            "id_mrr",
            "--model",
            "openai/judge",
            "--api-base",
            server.url,
            "--no-cache",
            "--max-concurrency",
            "2",
        ]
        env = {"OPENAI_API_KEY": "sk-test"}
        expected = ctxeval_cli(*base, "--out", str(tmp_path / "full"), env=env)
        assert expected.returncode == 0, expected.stderr
        hold.set()
        process = subprocess.Popen(
            [sys.executable, "-m", "ctxeval", *base, "--out", str(out)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **env},
            preexec_fn=default_ctrl_c,
        )
        deadline = time.monotonic() + 120  # (a bound for a broken run, never reached else)
        while time.monotonic() < deadline and journaled() < 13:
            time.sleep(0.02)  # wait for some LLM rows
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=120)
        hold.clear()
        assert process.returncode == 130, err
        assert "--resume" in err
        assert "rows saved in" in err
        sent_before = server.count
        resumed = ctxeval_cli(*base, "--out", str(out), "--resume", env=env)
        assert resumed.returncode == 0, resumed.stderr
        assert server.count - sent_before < 40 * 2  # only what was not finished was asked again

    def scores(folder: Path) -> list[tuple[str, str, Any]]:
        lines = (folder / "results.jsonl").read_text().splitlines()
        return [(r["sample_id"], r["metric"], r["score"]) for r in map(json.loads, lines)]

    assert scores(out) == scores(tmp_path / "full")
