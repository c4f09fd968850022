"""One index of a run's metric names (``MetricNames``), built with its plan and carried by its
Evaluation: labels, gates, ``assert_metric``, compare and trust look a name up there. Followed
from ``evaluate``'s ``metrics`` argument, the registry is entered at most twice per name and no
name is resolved twice; a metric renamed with ``name=`` is found by its registered name on
every path; an alias is built once."""

from __future__ import annotations

import pickle
from collections import Counter
from typing import Any

import pytest

import ctxeval
from ctxeval import ConfigError, Labels
from ctxeval._plugins.groups import METRICS
from ctxeval._plugins.registry import Registry
from ctxeval.runners import MetricNames
from ctxeval.testing import assert_metric

SAMPLES = [
    {"id": "a", "retrieved_context_ids": ["1", "2"], "reference_context_ids": ["1"]},
    {"id": "b", "retrieved_context_ids": ["3", "1"], "reference_context_ids": ["1", "4"]},
]


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> tuple[Counter[str], Counter[str]]:
    """(how often each name was resolved by ``get_metric``, how often each was built)."""
    resolved: Counter[str] = Counter()
    built: Counter[str] = Counter()
    get_metric, create = Registry.get_metric, Registry.create

    def counting_get_metric(self: Registry, name: str, /, **options: Any) -> Any:
        resolved[name] += 1
        return get_metric(self, name, **options)

    def counting_create(self: Registry, group: str, name: str, /, **options: Any) -> Any:
        if group == METRICS:
            built[name] += 1
        return create(self, group, name, **options)

    monkeypatch.setattr(Registry, "get_metric", counting_get_metric)
    monkeypatch.setattr(Registry, "create", counting_create)
    return resolved, built


def test_following_the_metrics_argument_no_name_is_resolved_twice(
    counted: tuple[Counter[str], Counter[str]],
) -> None:
    resolved, built = counted
    renamed = ctxeval.get_metric("id_recall_at_k", k=5, name="recall_top5")
    resolved.clear()
    built.clear()
    ev = ctxeval.evaluate(SAMPLES, metrics=["nDCG@10", "ID_MRR", renamed])
    assert ev.metrics == ("nDCG@10", "id_mrr", "recall_top5")
    # the names a user writes later: another case, the registered name of a renamed row,
    # a registered name with its parameter, each looked up more than once
    for _ in range(2):
        assert_metric(ev, "NDCG@10", at_least=0.0)
        assert_metric(ev, "id_recall_at_5", at_least=0.0)
        assert ev.metric_names.resolve("id_ndcg_at_k") == "nDCG@10"
    labels = Labels.from_records([{"sample_id": "a", "metric": "MRR", "index": 0, "label": 1}])
    assert ev.with_labels(labels).labels.metrics == ["id_mrr"]  # type: ignore[union-attr]
    ev.with_labels(labels).trust()
    assert max(resolved.values()) == 1, resolved
    assert max(built.values()) <= 2, built
    # the run's own names were built once each, when the plan resolved them: never again
    assert resolved["nDCG@10"] == 1
    assert resolved["ID_MRR"] == 1
    assert "recall_top5" not in resolved


def test_an_alias_is_built_once(counted: tuple[Counter[str], Counter[str]]) -> None:
    _, built = counted
    metric = ctxeval.get_metric("context_precision")  # an alias of the LLM metric
    assert metric.name == "context_precision"
    assert sum(built.values()) == 1, built
    again = ctxeval.get_metric("llm_context_precision_with_reference", name="context_precision")
    assert metric == again  # the same metric as built with name=
    assert repr(metric) == repr(again)


def test_a_renamed_metric_is_found_by_its_registered_name_on_every_path() -> None:
    renamed = ctxeval.get_metric("id_recall_at_k", k=5, name="recall_top5")
    ev = ctxeval.evaluate(SAMPLES, metrics=[renamed])
    assert ev.metric_names.resolve("id_recall_at_5") == "recall_top5"  # gates, assert_metric
    labels = Labels.from_records(
        [{"sample_id": "a", "metric": "id_recall_at_5", "index": 0, "label": 1}]
    )
    assert ev.with_labels(labels).labels.metrics == ["recall_top5"]  # type: ignore[union-attr]
    assert "recall_top5" in ev.with_labels(labels).trust()  # the trust path finds it too


def test_a_name_of_no_metric_of_the_run_says_the_run_s_names() -> None:
    names = MetricNames(["nDCG@10", "id_mrr"])
    with pytest.raises(ConfigError, match=r"no metric of this run is named 'ndgc@10'.*nDCG@10"):
        names.resolve("ndgc@10")
    with pytest.raises(ConfigError, match="no metric of this run is named 'P@5'"):
        names.resolve("P@5")


def test_the_index_pickles_by_its_public_name_without_its_registry() -> None:
    names = MetricNames.of([ctxeval.get_metric("nDCG@10")], ctxeval.default_registry())
    data = pickle.dumps(names)
    assert b"ctxeval._" not in data
    back = pickle.loads(data)
    assert back.names == ("nDCG@10",)
    assert back.resolve("id_ndcg_at_k") == "nDCG@10"
