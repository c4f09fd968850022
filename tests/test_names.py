"""One name per metric: rows carry the name written; every name of a metric finds it later
(gates, assert_metric, labels); unknown names get the close ones, IR names too."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import ctxeval
from ctxeval import ConfigError, Labels
from ctxeval._judge.resolve import resolve_label_metrics
from ctxeval._plugins.metric_names import resolve_metric_name
from ctxeval.testing import assert_metric

ROWS = [
    {"id": f"s{i}", "retrieved_context_ids": ["d1", "d2", f"x{i}"],
     "reference_context_ids": ["d1"] if i % 3 else ["d2"]}
    for i in range(6)
]  # fmt: skip


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ctxeval", *args], capture_output=True, text=True, timeout=300
    )


@pytest.mark.parametrize(
    ("written", "row_name"),
    [
        ("context_precision", "context_precision"),  # an alias stays the alias
        ("llm_context_precision_with_reference", "llm_context_precision_with_reference"),
        ("context_utilization", "context_utilization"),
        ("context_recall", "context_recall"),
        ("Context_Recall", "context_recall"),  # another case: the registered spelling
        ("nDCG@10", "nDCG@10"),  # an IR name keeps its spelling
        ("ndcg_cut_5", "ndcg_cut_5"),
        ("id_ndcg_at_10", "id_ndcg_at_10"),  # a row name is a name -m takes
        ("ID_MRR", "id_mrr"),
    ],
)
def test_rows_carry_the_name_as_written(written: str, row_name: str) -> None:
    assert ctxeval.get_metric(written).name == row_name


def test_a_name_option_overrides_the_written_name() -> None:
    assert ctxeval.get_metric("context_precision", name="judge A").name == "judge A"
    assert ctxeval.get_metric("id_ndcg_at_k", k=5).name == "id_ndcg_at_5"


def test_the_same_metric_under_another_name_is_one_metric() -> None:
    one = ctxeval.get_metric("id_ndcg_at_k", k=10)
    for name in ("nDCG@10", "ndcg@10", "NDCG_CUT_10", "id_ndcg_at_10", "ndcg_cut_10"):
        assert resolve_metric_name(name, [one.name], metrics=[one]) == "id_ndcg_at_10"
    with pytest.raises(ConfigError, match="no metric of this run is named 'nDCG@5'"):
        resolve_metric_name("nDCG@5", [one.name], metrics=[one])  # another k: another metric
    precision = ctxeval.get_metric("context_precision")
    for name in ("llm_context_precision_with_reference", "CONTEXT_PRECISION"):
        assert resolve_metric_name(name, ["context_precision"], metrics=[precision]) == (
            "context_precision"
        )
    # without the built metrics, the row names are built to find what they are
    assert resolve_metric_name("context_recall", ["llm_context_recall", "id_mrr"]) == (
        "llm_context_recall"
    )
    assert resolve_metric_name("RR", ["nDCG@10", "MRR"]) == "MRR"


def test_a_name_that_fits_two_metrics_of_the_run_is_refused() -> None:
    with pytest.raises(ConfigError, match="is each of the run's metrics nDCG@10, ndcg_cut_10"):
        resolve_metric_name("id_ndcg_at_10", ["nDCG@10", "ndcg_cut_10"])


@pytest.mark.parametrize(
    ("name", "suggestion"),
    [
        ("ndgc@10", "'nDCG@10'"),
        ("recal@100", "'recall@100'"),
        ("rprek", "'Rprec'"),
        ("id_ndgc_at_10", "'id_ndcg_at_10'"),
        ("contxt_recall", "'context_recall'"),
        ("id_context_precision", "'id_based_context_precision'"),
    ],
)
def test_an_unknown_name_gets_the_close_ones(name: str, suggestion: str) -> None:
    with pytest.raises(ctxeval.UnknownNameError) as raised:
        ctxeval.get_metric(name)
    assert "did you mean" in str(raised.value)
    assert suggestion in str(raised.value)


def test_assert_metric_takes_any_name_of_the_metric() -> None:
    ev = ctxeval.evaluate(ROWS, ["id_mrr", "id_ndcg_at_k"])
    assert ev.metrics == ("id_mrr", "id_ndcg_at_10")
    assert_metric(ev, "MRR", at_least=0.5)
    assert_metric(ev, "ndcg@10", at_least=0.5)
    with pytest.raises(AssertionError, match="gate failed: id_ndcg_at_10 mean"):
        assert_metric(ev, "nDCG@10", at_least=1.0)


def test_a_labels_file_may_name_the_metric_any_way() -> None:
    labels = Labels.from_records(
        [
            {"sample_id": "a", "metric": "llm_context_precision_with_reference", "labels": [1]},
            {"sample_id": "b", "metric": "LLM_Context_Recall", "labels": [0]},
        ]
    )
    renamed = resolve_label_metrics(labels, ["context_precision", "context_recall"])
    assert set(renamed.metrics) == {"context_precision", "context_recall"}


def test_fail_under_takes_every_name_that_m_takes(tmp_path: Path) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    done = cli(
        "evaluate", str(data), "-q", "-m", "id_ndcg_at_k:k=10", "-m", "MRR",
        "--fail-under", "nDCG@10=0.1", "--fail-under", "ndcg_cut_10=0.1",
        "--fail-under", "recip_rank=0.1", "--fail-under", "mrr=0.1",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("gate pass id_ndcg_at_10 mean") == 2
    assert done.stdout.count("gate pass MRR mean") == 2
    done = cli("evaluate", str(data), "-m", "ndgc@10")
    assert done.returncode == 2
    assert "unknown metric 'ndgc@10'; did you mean 'nDCG@10'?" in done.stderr
    done = cli("evaluate", str(data), "-m", "MRR", "--fail-under", "nDCG@10=0.5")
    assert done.returncode == 2
    assert "--fail-under nDCG@10: no metric of this run is named 'nDCG@10'" in done.stderr
