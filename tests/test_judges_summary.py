"""Who judged a run is said where people look: ``summary.json`` lists each metric's judges (from
its rows' provenance), the report's header names them, and a run judged by ``ctxeval
serve-judge`` is marked NOT A REAL JUDGE (tests/test_serve_judge.py runs that end to end)."""

from __future__ import annotations

import json
from pathlib import Path

import ctxeval
from ctxeval._output.summary import summary_dict
from ctxeval._output.totals import RunTotals
from ctxeval._results.judges import MAX_JUDGES, JudgeLog, is_scripted
from ctxeval_llm import LLMConfig
from fakes.openai_server import FakeOpenAI, scripted_judge

SAMPLES = [
    {
        "id": f"q{i}",
        "user_input": "Where is the Eiffel Tower?",
        "reference": "The Eiffel Tower is in Paris.",
        "retrieved_contexts": ["The Eiffel Tower is in Paris.", "Bananas are yellow."],
        "reference_context_ids": ["a"],
        "retrieved_context_ids": ["a", "b"],
    }
    for i in range(4)
]


def _row(metric: str, judges: object) -> ctxeval.MetricResult:
    return ctxeval.MetricResult.ok(1.0, details={"provenance": {"judges": judges}}).labelled(
        "s", metric
    )


def test_a_judged_run_names_its_judge_and_is_not_marked_scripted(tmp_path: Path) -> None:
    with FakeOpenAI(scripted_judge) as server:
        llm = LLMConfig(model="openai/judge-x", api_base=server.url, api_key="sk-test")
        ev = ctxeval.evaluate(SAMPLES, ["context_precision", "id_based_context_precision"], llm=llm)
        ev.write(tmp_path / "run")
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    [judge] = summary["metrics"]["context_precision"]["judges"]
    assert judge["model"] == "openai/judge-x"
    assert judge["endpoint"] == server.url
    assert "judges" not in summary["metrics"]["id_based_context_precision"]  # no judge
    assert "scripted_judge" not in summary
    header = (tmp_path / "run" / "report.html").read_text().split("</header>")[0]
    assert "judged by <code>openai/judge-x</code>" in header
    assert "NOT A REAL JUDGE" not in header
    # the streamed totals of the command line say the same as the rows held in memory
    totals = RunTotals(ev.metrics)
    totals.add(list(ev.results))
    assert summary_dict(totals)["metrics"] == summary_dict(ev)["metrics"]


def test_the_scripted_judge_is_known_by_the_model_asked_or_the_one_that_answered() -> None:
    assert is_scripted({"model": "openai/scripted-judge"})
    assert is_scripted({"model": "openai/anything", "served_model": "scripted-judge"})
    assert not is_scripted({"model": "openai/gpt-4o-mini"})
    assert not is_scripted({"model": "openai/scripted-judge-v2"})


def test_judges_are_kept_in_constant_memory_and_odd_provenance_is_ignored() -> None:
    log = JudgeLog()
    for i in range(50):
        log.add(_row("m", [{"model": f"openai/j{i}"}]))
        log.add(_row("m", [{"model": f"openai/j{i}"}]))  # the same again: one entry
    log.add(_row("m", "not a list"))
    log.add(_row("m", [42]))
    log.add(ctxeval.MetricResult.ok(0.5).labelled("s", "m"))
    assert len(log.to_dict()["m"]) == MAX_JUDGES
    assert log.more == {"m": 50 - MAX_JUDGES}
    assert not log.scripted
    log.add(_row("other", [{"model": "x", "served_model": "scripted-judge"}]))
    assert log.scripted
