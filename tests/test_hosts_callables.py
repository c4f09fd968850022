"""The callable family (issue #51) against the real hosts, offline: LangSmith's evaluator call
shape (through its own ``run_evaluator`` on the Run/Example objects it builds), an autoevals
``Scorer`` called as Braintrust calls it, a Phoenix evaluator in ``evaluate_dataframe``, and a
promptfoo ``get_assert`` (directly, and through ``npx promptfoo eval`` where Node can get it).

Each gives the scores ``ctxeval.evaluate`` gives on the same rows; an undefined row is the host's
"not scored" (never 0), a missing field that row's clear error. Nothing calls home: a guard
refuses every connection that is not to this machine.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

import ctxeval

for _variable in ("LANGSMITH_TRACING", "LANGCHAIN_TRACING_V2", "LANGSMITH_TRACING_V2"):
    os.environ[_variable] = "false"
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ["PHOENIX_TELEMETRY_ENABLED"] = "false"

pytest.importorskip("langsmith", reason="pip install 'ctxeval[langsmith]'")
pytest.importorskip("autoevals", reason="pip install 'ctxeval[autoevals]'")
pytest.importorskip("phoenix.evals", reason="pip install 'ctxeval[phoenix]'")

from autoevals.score import Score as AutoevalsScore  # noqa: E402
from langsmith.evaluation.evaluator import run_evaluator  # noqa: E402
from langsmith.schemas import Example, Run  # noqa: E402

from ctxeval_hosts import braintrust, langsmith, phoenix, promptfoo  # noqa: E402
from ctxeval_llm import LLMConfig  # noqa: E402
from fakes.openai_server import FakeOpenAI  # noqa: E402
from hosts_offline import refuse_network  # noqa: E402
from llm_judge import Judge  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PROMPTFOO = "promptfoo@0.120.8"
"""The promptfoo release the npx test runs (the last one whose package accepts Node 20)."""

ID_ROWS: list[dict[str, Any]] = [
    {"retrieved_context_ids": ["d1", "d2", "d3"], "reference_context_ids": ["d2", "d9"]},
    {"retrieved_context_ids": [1, 2], "reference_context_ids": [1, 2]},
    {"retrieved_context_ids": ["d1"], "reference_context_ids": []},  # undefined: nothing to recall
    {
        "retrieved_context_ids": [],
        "reference_context_ids": ["d4"],
    },  # recall 0.0, precision undefined
]
TEXT_ROWS: list[dict[str, Any]] = [
    {
        "retrieved_contexts": ["Paris is the capital of France.", "Berlin is in Germany."],
        "reference_contexts": ["Paris is the capital of France."],
    },
    {"retrieved_contexts": ["nothing relevant here"], "reference_contexts": ["Rome is old."]},
    {"retrieved_contexts": ["a"], "reference_contexts": []},
]
ID_METRICS = ["id_based_context_recall", "id_based_context_precision"]


@pytest.fixture(autouse=True)
def no_calls_home(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every connection (and name lookup) outside the loopback is refused and recorded: the
    test fails if the host tried one (telemetry, tracing, an update check, a download)."""
    tried = refuse_network(monkeypatch)
    yield
    assert tried == [], f"{tried}: the hosts must stay offline"


def expected(rows: list[dict[str, Any]], metric: str, **options: Any) -> list[float | None]:
    """What ``ctxeval.evaluate`` gives on the rows (None for a row that is not ok)."""
    ev = ctxeval.evaluate(rows, [metric], **options)
    return [r.score if r.status is ctxeval.Status.OK else None for r in ev.results]


# --- LangSmith ------------------------------------------------------------------------------


def _run_and_example(
    row: dict[str, Any],
    outputs: dict[str, Any] | None = None,
    reference_outputs: dict[str, Any] | None = None,
) -> tuple[Run, Example]:
    now = datetime.now(timezone.utc)
    run_id = uuid.uuid4()
    run = Run(
        id=run_id,
        name="rag",
        start_time=now,
        run_type="chain",
        inputs={"user_input": "q"},
        outputs=outputs or {k: v for k, v in row.items() if k.startswith("retrieved")},
        trace_id=run_id,
    )
    example = Example(
        id=uuid.uuid4(),
        dataset_id=uuid.uuid4(),
        inputs={"user_input": "q"},
        outputs=reference_outputs or {k: v for k, v in row.items() if k.startswith("reference")},
        created_at=now,
    )
    return run, example


@pytest.mark.parametrize("metric", ID_METRICS)
def test_langsmith_run_evaluator_gives_evaluate_s_scores(metric: str) -> None:
    with langsmith.evaluator(metric) as function:
        wrapped = run_evaluator(function)  # what langsmith.evaluate does with a function
        got = []
        for row in ID_ROWS:
            result = wrapped.evaluate_run(*_run_and_example(row))
            assert result.key == metric
            got.append(result.score)
    assert got == expected(ID_ROWS, metric)
    assert None in got  # an undefined row is not scored, not 0


def test_langsmith_undefined_and_error_rows() -> None:
    with langsmith.evaluator("id_based_context_recall") as function:
        undefined = function({}, {"retrieved_context_ids": ["a"]}, {"reference_context_ids": []})
        error = function({}, {"retrieved_context_ids": ["a"]}, {"gold": ["a"]})
    assert undefined["score"] is None
    assert "not scored" in undefined["comment"]
    assert "nothing to recall" in undefined["comment"]
    assert undefined["metadata"]["ctxeval.status"] == "undefined"
    assert "extra" not in undefined
    assert error["score"] is None
    assert error["extra"] == {"error": True}
    assert "reference_outputs has no key 'reference_context_ids'" in error["comment"]
    assert "'gold'" in error["comment"]  # the keys that were there


def test_langsmith_several_metrics_and_a_field_mapping() -> None:
    function = langsmith.evaluator(
        ID_METRICS,
        fields={
            "retrieved_context_ids": "outputs.documents",
            "reference_context_ids": "reference_outputs.gold",
        },
    )
    documents = [{"id": "d1", "page_content": "x"}, {"metadata": {"id": "d2"}, "content": "y"}]
    run, example = _run_and_example({}, {"documents": documents}, {"gold": ["d2"]})
    result = run_evaluator(function).evaluate_run(run, example)
    scores = {r.key: r.score for r in result["results"]}
    assert scores == {"id_based_context_recall": 1.0, "id_based_context_precision": 0.5}
    function.close()


# --- Braintrust autoevals -------------------------------------------------------------------


def test_autoevals_scorer_called_as_braintrust_calls_it() -> None:
    with braintrust.scorer("id_based_context_recall") as scorer:
        got = []
        for row in ID_ROWS:
            score = scorer(
                input="q",
                output={"retrieved_context_ids": row["retrieved_context_ids"]},
                expected={"reference_context_ids": row["reference_context_ids"]},
                metadata={},
            )
            assert isinstance(score, AutoevalsScore)
            assert score.name == "id_based_context_recall"
            got.append(score.score)
    assert got == expected(ID_ROWS, "id_based_context_recall")
    assert got[2] is None  # undefined: autoevals' "skipped", never 0


@pytest.mark.anyio
async def test_autoevals_eval_async_in_the_callers_loop() -> None:
    scorer = braintrust.scorer(
        "non_llm_context_recall",
        fields={"retrieved_contexts": "context", "reference_contexts": "expected"},
    )
    got = [
        (
            await scorer.eval_async(
                None, row["reference_contexts"], context=row["retrieved_contexts"]
            )
        ).score
        for row in TEXT_ROWS
    ]
    scorer.close()
    assert got == expected(TEXT_ROWS, "non_llm_context_recall")


def test_autoevals_error_row_raises_a_ctxeval_error() -> None:
    with (
        braintrust.scorer("id_based_context_recall") as scorer,
        pytest.raises(ctxeval.CtxevalError, match=r"expected\.reference_context_ids"),
    ):
        scorer(output={"retrieved_context_ids": ["a"]}, expected="a text, not a dict")


# --- Phoenix evals --------------------------------------------------------------------------


def test_phoenix_evaluate_dataframe() -> None:
    import numpy as np
    import pandas as pd
    from phoenix.evals import evaluate_dataframe

    frame = pd.DataFrame(
        {
            "docs": [np.array(r["retrieved_context_ids"], dtype=object) for r in ID_ROWS],
            "reference_context_ids": [r["reference_context_ids"] for r in ID_ROWS],
        }
    )
    evaluator = phoenix.evaluator(
        "id_based_context_recall", fields={"retrieved_context_ids": "docs"}
    )
    out = evaluate_dataframe(dataframe=frame, evaluators=[evaluator], hide_tqdm_bar=True)
    scores = list(out["id_based_context_recall_score"])
    scores = [json.loads(cell) if isinstance(cell, str) else cell for cell in scores]
    # (Phoenix writes a Score without its None fields: no "score" is not scored)
    assert [s.get("score") for s in scores] == expected(ID_ROWS, "id_based_context_recall")
    assert "score" not in scores[2]
    assert scores[2]["label"] == "undefined"
    assert "nothing to recall" in scores[2]["explanation"]
    assert "label" not in scores[0]
    assert scores[0]["metadata"]["ctxeval.details"]["missing"] == ["d9"]
    evaluator.ctxeval_session.close()


def test_phoenix_async_evaluate_dataframe() -> None:
    """Phoenix's async path runs the evaluator in its thread pool, its rows through one
    session (the rows in order, the same scores)."""
    import asyncio

    import pandas as pd
    from phoenix.evals import async_evaluate_dataframe

    frame = pd.DataFrame(ID_ROWS * 5)
    evaluator = phoenix.evaluator("id_based_context_recall")
    out = asyncio.run(
        async_evaluate_dataframe(
            dataframe=frame, evaluators=[evaluator], concurrency=4, hide_tqdm_bar=True
        )
    )
    scores = [cell.get("score") for cell in out["id_based_context_recall_score"]]
    assert scores == expected(ID_ROWS, "id_based_context_recall") * 5
    assert len(evaluator.ctxeval_session.evaluation().results) == len(frame)
    evaluator.ctxeval_session.close()


def test_phoenix_missing_column_is_that_row_s_error() -> None:
    import pandas as pd
    from phoenix.evals import evaluate_dataframe

    frame = pd.DataFrame(
        {"retrieved_context_ids": [["a"], ["b"]], "reference_context_ids": [["a"], None]}
    )
    evaluator = phoenix.evaluator("id_based_context_recall")
    out = evaluate_dataframe(dataframe=frame, evaluators=[evaluator], hide_tqdm_bar=True)
    cells = [
        json.loads(c) if isinstance(c, str) else c for c in out["id_based_context_recall_score"]
    ]
    assert cells[0]["score"] == 1.0
    assert "score" not in cells[1]
    assert cells[1]["label"] == "error"
    assert (
        "reference_context_ids (read from reference_context_ids) is missing"
        in cells[1]["explanation"]
    )
    assert "fields={'reference_context_ids': 'COLUMN'}" in cells[1]["explanation"]


# --- promptfoo ------------------------------------------------------------------------------


def _context(row: dict[str, Any], **config: Any) -> dict[str, Any]:
    return {"vars": dict(row), "test": {"vars": dict(row)}, "prompt": "p", "config": config}


def test_promptfoo_get_assert_without_a_threshold_passes_only_scored_rows() -> None:
    with promptfoo.assertion(ID_METRICS) as get_assert:
        results = [get_assert("answer", _context(row)) for row in ID_ROWS]
    recall = expected(ID_ROWS, "id_based_context_recall")
    assert [r["namedScores"].get("id_based_context_recall") for r in results] == recall
    assert [r["pass"] for r in results] == [True, True, False, False]
    undefined = results[2]
    assert undefined["namedScores"] == {}  # not scored: no named score at all, never a 0
    assert undefined["reason"].startswith("not scored")
    assert all(c["metadata"]["not_scored"] for c in undefined["componentResults"])


def test_promptfoo_threshold_is_the_users_and_applies_to_every_metric() -> None:
    get_assert = promptfoo.assertion(ID_METRICS, threshold=0.6)
    result = get_assert("answer", _context(ID_ROWS[0]))  # recall 0.5, precision 1/3
    assert result["pass"] is False
    assert [c["pass"] for c in result["componentResults"]] == [False, False]
    assert "< threshold 0.6" in result["componentResults"][0]["reason"]
    assert get_assert("answer", _context(ID_ROWS[1]))["pass"] is True
    get_assert.close()
    with pytest.raises(ctxeval.ConfigError, match="threshold"):
        promptfoo.assertion(ID_METRICS, threshold=5)


def test_promptfoo_yaml_config_form_and_its_errors() -> None:
    context = _context(
        {"context": ["a", "b"], "gold": ["b"]},
        metrics=["non_llm_context_recall"],
        fields={"retrieved_contexts": "vars.context", "reference_contexts": "vars.gold"},
    )
    result = promptfoo.get_assert("answer", context)
    assert result["pass"] is True
    assert result["score"] == 1.0
    with pytest.raises(ctxeval.ConfigError, match="needs 'metrics'"):
        promptfoo.get_assert("answer", _context({}))
    with pytest.raises(ctxeval.ConfigError, match="unknown keys"):
        promptfoo.get_assert("answer", _context({}, metrics=["id_mrr"], treshold=0.5))


@pytest.mark.slow
def test_promptfoo_eval_through_npx(tmp_path: Path) -> None:
    """promptfoo itself runs the assertion (its echo provider: no model, no network beyond the
    npm registry for the package). Skipped without Node, or when npm cannot fetch it."""
    npx = shutil.which("npx")
    if npx is None:
        pytest.skip("Node.js (npx) is not installed")
    try:
        subprocess.run(
            [npx, "-y", PROMPTFOO, "--version"],
            check=True,
            capture_output=True,
            timeout=300,
            cwd=tmp_path,
        )
    except (subprocess.SubprocessError, OSError) as exc:
        pytest.skip(f"{PROMPTFOO} could not be installed through npx: {exc}")
    (tmp_path / "ctx_assert.py").write_text(
        "from ctxeval_hosts.promptfoo import assertion\n"
        "get_assert = assertion(['id_based_context_recall'], threshold=0.5)\n"
    )
    tests = [{"vars": {k: json.dumps(v) for k, v in row.items()}} for row in ID_ROWS[:3]]
    config = {
        "prompts": ["{{retrieved_context_ids}}"],
        "providers": ["echo"],
        "defaultTest": {
            "assert": [{"type": "python", "value": "file://ctx_assert.py:get_assert"}],
            "options": {},
        },
        "tests": tests,
    }
    (tmp_path / "promptfooconfig.json").write_text(json.dumps(config))
    env = {
        **os.environ,
        "PROMPTFOO_DISABLE_TELEMETRY": "1",
        "PROMPTFOO_DISABLE_UPDATE": "1",
        "PROMPTFOO_PYTHON": sys.executable,
        "PYTHONPATH": os.pathsep.join(
            [str(ROOT / "plugins"), str(ROOT / "core"), os.environ.get("PYTHONPATH", "")]
        ),
        "PROMPTFOO_CONFIG_DIR": str(tmp_path / ".promptfoo"),
    }
    run = subprocess.run(
        [
            npx,
            "-y",
            PROMPTFOO,
            "eval",
            "-c",
            "promptfooconfig.json",
            "-o",
            "out.json",
            "--no-cache",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env=env,
    )
    assert (tmp_path / "out.json").exists(), run.stdout[-2000:] + run.stderr[-2000:]
    rows = json.loads((tmp_path / "out.json").read_text())["results"]["results"]
    grading = [row["gradingResult"] for row in rows]
    by_case = {json.dumps(r["vars"], sort_keys=True): r["gradingResult"] for r in rows}
    assert len(grading) == 3
    passes = sorted(g["pass"] for g in by_case.values())
    assert passes == [False, True, True]  # 0.5 and 1.0 pass at 0.5; the undefined row does not


# --- one rule set, one session, the LLM metrics ----------------------------------------------


def test_the_field_map_refuses_an_unknown_field() -> None:
    with pytest.raises(ctxeval.ConfigError, match="retrieved_docs"):
        langsmith.evaluator("id_mrr", fields={"retrieved_docs": "outputs.docs"})


def test_the_one_score_callables_refuse_several_metrics_naming_them() -> None:
    """One factory rule (``Adapter.for_host``): an object that gives one score refuses a list
    of metrics, saying which it was given."""
    two = ["id_mrr", "id_based_context_recall"]
    for make, host in ((braintrust.scorer, "autoevals"), (phoenix.evaluator, "Phoenix")):
        with pytest.raises(ctxeval.ConfigError, match=f"{host}.*give one metric, not .*id_mrr"):
            make(two)  # type: ignore[arg-type]
    assert len(langsmith.evaluator(two).adapter.names) == 2  # an evaluator gives several


def test_a_shared_session_serves_several_adapters() -> None:
    with ctxeval.Session(ID_METRICS) as session:
        ls = langsmith.evaluator("id_based_context_recall", session=session)
        bt = braintrust.scorer("id_based_context_precision", session=session)
        row = ID_ROWS[0]
        assert ls({}, row, row)["score"] == 0.5
        assert bt(output=row, expected=row).score == pytest.approx(1 / 3)
        ls.close()  # a shared session is its owner's: still open
        assert bt(output=row, expected=row).score == pytest.approx(1 / 3)
        with pytest.raises(ctxeval.ConfigError, match="not \\['id_mrr'\\]"):
            langsmith.evaluator("id_mrr", session=session)


def test_a_shared_session_scores_each_row_once_for_all_its_adapters(judge: FakeOpenAI) -> None:
    from ctxeval_hosts import SharedSession

    llm = LLMConfig(model="openai/fake-judge", api_base=judge.url, api_key="sk-test")
    row = {
        "user_input": "What is the capital of France?",
        "reference": "Paris.",
        "retrieved_contexts": ["Berlin.", "Paris is the capital."],
        "retrieved_context_ids": ["b", "p"],
        "reference_context_ids": ["p"],
    }
    shared = SharedSession.build(["context_precision", "id_based_context_recall"], llm=llm)
    ls = langsmith.evaluator("context_precision", session=shared)
    # (a row is one sample for both: each adapter reads every field the session's metrics need)
    bt = braintrust.scorer(
        "id_based_context_recall", session=shared, fields={"reference": "expected.reference"}
    )
    assert ls({"user_input": row["user_input"]}, row, row)["score"] == 0.5
    assert bt(input=row["user_input"], output=row, expected=row).score == 1.0
    assert len(judge.requests) == 2  # one row, judged once: its two chunks
    assert len(shared.evaluation().results) == 2  # one sample, two metrics
    shared.close()


@pytest.fixture
def judge() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(Judge(verdicts={"Paris is the capital.": 1, "Berlin.": 0})) as fake:
        yield fake


def test_an_llm_metric_through_each_callable_matches_evaluate(judge: FakeOpenAI) -> None:
    llm = LLMConfig(model="openai/fake-judge", api_base=judge.url, api_key="sk-test")
    row = {
        "user_input": "What is the capital of France?",
        "reference": "Paris.",
        "retrieved_contexts": ["Berlin.", "Paris is the capital."],
    }
    [want] = expected([row], "context_precision", llm=llm)
    assert want == 0.5
    metric = "context_precision"
    with langsmith.evaluator("context_precision", llm=llm) as ls:
        got_ls = ls({"user_input": row["user_input"]}, row, row)
    with braintrust.scorer(
        "context_precision", llm=llm, fields={"retrieved_contexts": "output.retrieved_contexts"}
    ) as bt:
        got_bt = bt(input=row["user_input"], output=row, expected=row["reference"])
    with promptfoo.assertion("context_precision", llm=llm, threshold=0.5) as pf:
        got_pf = pf("answer", _context(row))
    assert got_ls["key"] == metric
    assert got_ls["score"] == want
    assert got_bt.score == want
    assert got_pf["namedScores"] == {metric: want}
    assert got_ls["metadata"]["ctxeval.usage"]["requests"] >= 1


PARITY_ROWS: list[dict[str, Any]] = [
    {
        "user_input": "What is the capital of France?",
        "reference": "Paris.",
        "retrieved_contexts": ["Berlin.", "Paris is the capital."],
        "reference_contexts": ["Paris is the capital of France."],
        "retrieved_context_ids": ["b", "p"],
        "reference_context_ids": ["p", "x"],
    },
    {
        "user_input": "Where is the Eiffel Tower?",
        "reference": "In Paris.",
        "retrieved_contexts": ["Rome.", "Berlin.", "Paris is the capital."],
        "reference_contexts": [],
        "retrieved_context_ids": ["r"],
        "reference_context_ids": [],
    },
]


@pytest.mark.parametrize(
    "metric", ["id_based_context_precision", "non_llm_context_recall", "context_precision"]
)
def test_every_callable_gives_evaluate_s_score_for_each_metric_kind(
    metric: str, judge: FakeOpenAI
) -> None:
    """ID, string-similarity and LLM metrics: the same rows through the four callables and
    through ``ctxeval.evaluate`` give the same scores (None: not scored)."""
    import pandas as pd
    from phoenix.evals import evaluate_dataframe

    llm = LLMConfig(model="openai/fake-judge", api_base=judge.url, api_key="sk-test")
    want = expected(PARITY_ROWS, metric, llm=llm)
    out = {"retrieved_contexts", "retrieved_context_ids"}
    ref = {"reference", "reference_contexts", "reference_context_ids"}

    def split(row: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        return (
            {"user_input": row["user_input"]},
            {k: v for k, v in row.items() if k in out},
            {k: v for k, v in row.items() if k in ref},
        )

    with langsmith.evaluator(metric, llm=llm) as ls:
        got_ls = [ls(*split(row))["score"] for row in PARITY_ROWS]
    with braintrust.scorer(metric, llm=llm, fields={"reference": "expected.reference"}) as bt:
        got_bt = [
            bt(input=i["user_input"], output=o, expected=r).score
            for i, o, r in map(split, PARITY_ROWS)
        ]
    with promptfoo.assertion(metric, llm=llm) as pf:
        got_pf = [pf("answer", _context(row))["namedScores"].get(metric) for row in PARITY_ROWS]
    ph = phoenix.evaluator(metric, llm=llm)
    cells = evaluate_dataframe(
        dataframe=pd.DataFrame(PARITY_ROWS), evaluators=[ph], hide_tqdm_bar=True
    )[f"{metric}_score"]
    got_ph = [cell.get("score") for cell in cells]
    ph.ctxeval_session.close()
    assert got_ls == got_bt == got_pf == got_ph == want
