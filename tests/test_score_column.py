"""The ``ScoresColumn`` hook (#55): a deterministic metric that scores a chunk as a column of
numbers on the fast path. Its rows must be exactly those ``score`` gives, and what a
``score_column`` gets wrong stays with its sample (or falls back for its chunk)."""

from __future__ import annotations

import logging
import random
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import attrs
import pytest

import ctxeval
from ctxeval import MetricResult, Sample, Status
from ctxeval.plugin import BaseDeterministicMetric, LazyDetails
from ctxeval.plugin.hooks import ScoresColumn
from test_search_steps import SEARCH_METRICS


def random_searches(count: int, seed: int) -> list[dict[str, Any]]:
    """Searches with every edge the metrics have: empty steps, no steps, repeated IDs, a
    step with texts only, graded references (0: judged not relevant), plain lists."""
    rng = random.Random(seed)
    out = []
    for n in range(count):
        steps: list[dict[str, Any]] = []
        for _ in range(rng.randrange(5)):
            ids = [f"d{rng.randrange(10)}" for _ in range(rng.randrange(5))]
            if rng.random() < 0.05:
                steps.append({"retrieved_contexts": [f"text {i}" for i in ids]})
            else:
                steps.append({"query": f"q{n}", "retrieved_context_ids": ids})
        reference: Any = [f"d{rng.randrange(10)}" for _ in range(rng.randrange(4))]
        if rng.random() < 0.3:
            reference = {i: rng.randrange(3) for i in reference}
        out.append({"id": f"s{n}", "reference_context_ids": reference, "retrieval_steps": steps})
    return out


def row_view(row: MetricResult) -> tuple[Any, ...]:
    return (row.sample_id, row.metric, row.status, row.score, row.reason, row.to_dict()["details"])


@pytest.mark.parametrize("level", [1, 2])
def test_the_search_metrics_rows_on_the_fast_path_are_those_of_score(level: int) -> None:
    data = random_searches(400, seed=level)
    metrics = [ctxeval.get_metric(name) for name in SEARCH_METRICS[:3]]
    metrics += [ctxeval.get_metric("search_step_precision", relevance_level=level)]
    metrics += [ctxeval.get_metric("search_redundancy")]
    assert all(isinstance(m, ScoresColumn) for m in metrics)
    rows = ctxeval.evaluate(data, metrics).results
    assert len(rows) == len(data) * len(metrics)
    statuses = set()
    for i, item in enumerate(data):
        sample = Sample.from_dict(item)
        for metric, row in zip(metrics, rows[i * len(metrics) :], strict=False):
            plain = metric.score(sample).labelled(item["id"], metric.name)
            assert row_view(row) == row_view(plain), (item, metric.name)
            statuses.add(row.status)
    assert statuses == {Status.OK, Status.UNDEFINED, Status.ERROR}  # every kind was met


def test_score_batch_and_score_column_give_the_rows_of_score() -> None:
    samples = [Sample.from_dict(item) for item in random_searches(300, seed=7)]
    for name in SEARCH_METRICS:
        metric = ctxeval.get_metric(name)
        ready = [s for s in samples if not s.missing(metric.requires)]
        batch = metric.score_batch(ready)
        column = metric.score_column(ready)
        for sample, row, value in zip(ready, batch, column, strict=True):
            plain = metric.score(sample)
            assert row_view(row) == row_view(plain)
            if plain.status is Status.OK:
                assert type(value) is float
                assert value == plain.score
                assert dict(metric.column_details(sample)) == dict(plain.details)
            else:
                assert row_view(value) == row_view(plain)


@attrs.frozen(kw_only=True)
class ColumnOf(BaseDeterministicMetric):
    """A third party's metric on the hook: ``score_column`` gives ``values[sample.id]``
    (what a test wants to see handled), ``score`` a row of the score 0.25."""

    registry_name: ClassVar[str] = "column_of"
    requires: ClassVar[tuple[str, ...]] = ("user_input",)
    values: Mapping[str, Any] = attrs.field(factory=dict)
    fail: bool = False

    def score(self, sample: Sample) -> MetricResult:
        return MetricResult.ok(0.25, details={"by": "score"})

    def score_batch(self, samples: Sequence[Sample]) -> list[MetricResult]:
        return [MetricResult.ok(0.5, details={"by": "score_batch"}) for _ in samples]

    def score_column(self, samples: Sequence[Sample]) -> list[Any]:
        if self.fail:
            raise RuntimeError("broken")
        return [self.values.get(s.id, 1.0) for s in samples]

    def column_details(self, sample: Sample) -> Mapping[str, Any]:
        return {"by": "column", "question": sample.user_input}


def run_rows(metric: ColumnOf, count: int = 4) -> list[MetricResult]:
    data = [{"id": f"s{i}", "user_input": f"question {i}"} for i in range(count)]
    data.append({"id": "lacking"})  # no user_input: the run's error row, not the metric's
    return list(ctxeval.evaluate(data, [metric]).results)


def test_a_column_keeps_floats_as_scores_with_lazy_details_and_whole_rows_whole() -> None:
    undefined = MetricResult.undefined("nothing to score")
    metric = ColumnOf(values={"s1": undefined, "s2": 1, "s3": float("nan")})
    rows = run_rows(metric)
    assert [r.sample_id for r in rows] == ["s0", "s1", "s2", "s3", "lacking"]
    first = rows[0]
    assert (first.status, first.score, first.metric) == (Status.OK, 1.0, "column_of")
    assert dict(first.details) == {"by": "column", "question": "question 0"}
    assert (rows[1].status, rows[1].reason) == (Status.UNDEFINED, "nothing to score")
    assert (rows[2].status, rows[2].score) == (Status.OK, 1.0)  # an int, converted as ok() does
    assert rows[2].details == {"by": "column", "question": "question 2"}
    assert rows[3].status is Status.ERROR  # NaN refused, that sample only
    assert "score_column() gave" in (rows[3].reason or "")
    assert "column_of" in (rows[3].reason or "")
    assert rows[4].status is Status.ERROR
    assert "user_input" in (rows[4].reason or "")


def test_a_failing_score_column_falls_back_to_score_batch_for_its_chunk(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.DEBUG, logger="ctxeval"):
        rows = run_rows(ColumnOf(fail=True))
    assert [r.score for r in rows[:4]] == [0.5] * 4
    assert all(r.details == {"by": "score_batch"} for r in rows[:4])
    assert "score_column() failed" in caplog.text


def test_a_score_column_of_the_wrong_length_falls_back() -> None:
    @attrs.frozen(kw_only=True)
    class Short(ColumnOf):
        def score_column(self, samples: Sequence[Sample]) -> list[Any]:
            return [1.0] * (len(samples) - 1)

    rows = run_rows(Short())
    assert [r.score for r in rows[:4]] == [0.5] * 4


def test_a_score_column_that_takes_the_wrong_arguments_is_refused_when_built() -> None:
    class Wrong(BaseDeterministicMetric):
        registry_name: ClassVar[str] = "wrong_column"
        requires: ClassVar[tuple[str, ...]] = ("user_input",)

        def score(self, sample: Sample) -> MetricResult:
            return MetricResult.ok(1.0)

        def score_column(self, samples: Sequence[Sample], extra: int) -> list[Any]:
            return [1.0] * len(samples)

        def column_details(self, sample: Sample) -> Mapping[str, Any]:
            return {}

    registry = ctxeval.Registry()
    registry.register_metric("wrong_column", Wrong)
    with pytest.raises(ctxeval.PluginError, match=r"score_column\(\)"):
        registry.get_metric("wrong_column")


def test_lazy_details_of_a_column_row_are_computed_once_when_read() -> None:
    calls: list[str | None] = []

    @attrs.frozen(kw_only=True)
    class Counting(ColumnOf):
        def column_details(self, sample: Sample) -> Mapping[str, Any]:
            calls.append(sample.id)
            return {"id": sample.id}

    rows = run_rows(Counting())
    assert calls == []  # nothing read yet
    assert isinstance(rows[0].details, LazyDetails | dict)
    assert rows[0].details["id"] == "s0"
    assert rows[0].details["id"] == "s0"
    assert calls == ["s0"]


@attrs.frozen(kw_only=True)
class Together(ColumnOf):
    """Metrics scored together: one ``score_columns`` call per chunk for the group, each
    metric's column ``offset`` plus 0.1 per call seen so far (so a test sees the calls)."""

    registry_name: ClassVar[str] = "together"
    offset: float = 0.0
    calls: list[int] = attrs.field(factory=list, eq=False)
    group: str = "g"

    def column_group(self) -> str:
        return self.group

    def score_column(self, samples: Sequence[Sample]) -> list[Any]:
        return self.score_columns([self], samples)[0]

    def score_columns(self, metrics: Sequence[Any], samples: Sequence[Sample]) -> list[list[Any]]:
        self.calls.append(len(metrics))
        if self.fail:
            raise RuntimeError("broken")
        return [[m.offset for _ in samples] for m in metrics]


def test_metrics_of_one_column_group_are_scored_in_one_call_per_chunk() -> None:
    calls: list[int] = []
    first = Together(name="first", offset=0.25, calls=calls)
    second = Together(name="second", offset=0.75, calls=calls)
    apart = Together(name="apart", offset=0.5, calls=calls, group="other")
    data = [{"id": f"s{i}", "user_input": "q"} for i in range(3)]
    rows = ctxeval.evaluate(data, [first, second, apart]).results
    assert sorted(calls) == [1, 2]  # the group of two in one call, the other alone
    assert [(r.metric, r.score) for r in rows[:3]] == [
        ("first", 0.25),
        ("second", 0.75),
        ("apart", 0.5),
    ]
    assert rows[1].details == {"by": "column", "question": "q"}


def test_a_failing_column_group_falls_back_to_each_metrics_score_batch() -> None:
    first = Together(name="first", fail=True)
    second = Together(name="second", fail=True)
    rows = ctxeval.evaluate([{"id": "s", "user_input": "q"}], [first, second]).results
    assert [(r.metric, r.score, r.details) for r in rows] == [
        ("first", 0.5, {"by": "score_batch"}),
        ("second", 0.5, {"by": "score_batch"}),
    ]
