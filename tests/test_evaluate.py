"""evaluate / aevaluate: order, error rows, summaries, files; asyncio and trio."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import anyio
import attrs
import pytest

import ctxeval
from ctxeval import ConfigError, DataError, MetricResult, Sample, Status
from ctxeval._calls.scheduler import Scheduler
from ctxeval._plugins.base import BaseMetric
from seed_data import SEED_ID_PRECISION, SEED_ID_RECALL

pytestmark = pytest.mark.anyio


@attrs.frozen(kw_only=True)
class SlowEcho(BaseMetric):
    """An async metric whose answers arrive out of order; it records how many run at once."""

    registry_name = "slow_echo"
    requires = ("reference",)
    log: list[str] = attrs.field(factory=list, eq=False)
    running: list[int] = attrs.field(factory=lambda: [0, 0], eq=False)

    async def ascore(self, sample: Sample, ctx: ctxeval.RunContext) -> MetricResult:
        async def work() -> MetricResult:
            self.running[0] += 1
            self.running[1] = max(self.running[1], self.running[0])
            await anyio.sleep(0.02 if int(sample.reference or 0) % 2 else 0.001)
            self.running[0] -= 1
            self.log.append(sample.reference or "")
            return MetricResult.ok(1 / (1 + int(sample.reference or 0)))

        return await ctx.call(work, resource="echo")


@attrs.frozen(kw_only=True)
class Raises(BaseMetric):
    registry_name = "raises"

    async def ascore(self, sample: Sample, ctx: ctxeval.RunContext) -> MetricResult:
        raise ZeroDivisionError("division by zero in the plugin")


@attrs.frozen(kw_only=True)
class ReturnsJunk(BaseMetric):
    registry_name = "returns_junk"

    async def ascore(self, sample: Sample, ctx: ctxeval.RunContext) -> MetricResult:
        return 0.5  # type: ignore[return-value]


@attrs.frozen(kw_only=True)
class OutOfRange(BaseMetric):
    registry_name = "out_of_range"

    async def ascore(self, sample: Sample, ctx: ctxeval.RunContext) -> MetricResult:
        return MetricResult.ok(1.5)


async def test_rows_come_in_input_order_across_async_metrics() -> None:
    echo = SlowEcho()
    samples = [{"reference": str(i)} for i in range(40)]
    evaluation = await ctxeval.aevaluate(
        samples, metrics=[echo, "id_mrr"], max_concurrency=4, samples_in_flight=16
    )
    assert [r.sample_id for r in evaluation.results] == [str(i) for i in range(40) for _ in (0, 1)]
    assert [r.metric for r in evaluation.results][:4] == ["slow_echo", "id_mrr"] * 2
    assert evaluation.scores("slow_echo") == [1 / (1 + i) for i in range(40)]
    assert echo.log != sorted(echo.log, key=int)  # they really finished out of order
    assert echo.running[1] == 4  # the shared limit was reached and never passed


async def test_failures_become_error_rows_and_the_run_goes_on() -> None:
    samples = [{"id": "s1", "reference": "3"}, {"id": "s2"}]
    evaluation = await ctxeval.aevaluate(
        samples, metrics=[Raises(), ReturnsJunk(), OutOfRange(), SlowEcho()]
    )
    rows = {(r.sample_id, r.metric): r for r in evaluation.results}
    assert len(rows) == 8
    assert rows["s1", "raises"].reason == (
        "ZeroDivisionError in metric 'raises': division by zero in the plugin"
    )
    assert (
        rows["s1", "returns_junk"].reason
        == "metric 'returns_junk' returned float, not a MetricResult"
    )
    assert rows["s1", "out_of_range"].reason == (
        "InvalidResultError: score 1.5 is outside [0, 1]; a metric must never produce such a score"
    )
    assert rows["s2", "slow_echo"].status is Status.ERROR
    assert (
        rows["s2", "slow_echo"].reason == "the sample has no 'reference', which slow_echo requires"
    )
    assert rows["s1", "slow_echo"].status is Status.OK
    assert not evaluation.ok
    summary = evaluation.summary()
    assert (summary["slow_echo"].n_ok, summary["slow_echo"].n_error) == (1, 1)


def test_a_typo_in_a_field_name_is_pointed_out() -> None:
    evaluation = ctxeval.evaluate(
        [{"retreived_context_ids": ["a"], "reference_context_ids": ["a"]}],
        metrics=["id_mrr"],
    )
    reason = evaluation.results[0].reason or ""
    assert "has no 'retrieved_context_ids'" in reason
    assert "'retreived_context_ids' (did you mean 'retrieved_context_ids'?)" in reason


def test_duplicate_sample_ids_are_refused() -> None:
    with pytest.raises(DataError, match="sample 'x': two samples have this id"):
        ctxeval.evaluate([{"id": "x"}, {"id": "x"}], metrics=["id_mrr"])


def test_a_bad_sample_dict_names_its_position() -> None:
    with pytest.raises(DataError, match="sample '1': field 'reference'"):
        ctxeval.evaluate([{}, {"reference": 3}], metrics=["id_mrr"])


def test_metric_configuration_errors() -> None:
    with pytest.raises(ConfigError, match="given more than once"):
        ctxeval.evaluate([{}], metrics=["id_mrr", "id_mrr"])
    two = [
        ctxeval.get_metric("non_llm_context_recall"),
        ctxeval.get_metric(
            "non_llm_context_recall", name="recall_containment", measure="containment"
        ),
    ]
    assert ctxeval.evaluate([{}], metrics=two).metrics == (
        "non_llm_context_recall",
        "recall_containment",
    )
    with pytest.raises(ConfigError, match="no metric given"):
        ctxeval.evaluate([{}], metrics=[])
    with pytest.raises(ConfigError, match="list of metric names"):
        ctxeval.evaluate([{}], metrics="id_mrr")
    with pytest.raises(ConfigError, match="neither a metric name nor a Metric"):
        ctxeval.evaluate([{}], metrics=[42])  # type: ignore[list-item]


def test_evaluate_inside_a_running_asyncio_loop() -> None:
    samples = [SEED_ID_PRECISION, SEED_ID_RECALL]
    plain = ctxeval.evaluate(samples, metrics=["id_based_context_precision"])

    async def handler() -> ctxeval.Evaluation:  # e.g. a FastAPI endpoint or a notebook cell
        return ctxeval.evaluate(samples, metrics=["id_based_context_precision"])

    inside = asyncio.run(handler())
    assert inside.results == plain.results
    assert [r.score for r in inside.results] == [0.5, 1 / 3]


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_evaluate_inside_a_running_loop_without_sniffio(
    backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """anyio 4 no longer installs sniffio: a plain install has none. The running loop is
    still found (it was taken as "no loop", and anyio.run crashed inside the host's loop)."""
    import anyio

    samples = [SEED_ID_PRECISION, SEED_ID_RECALL]

    async def handler() -> ctxeval.Evaluation:
        monkeypatch.setitem(sys.modules, "sniffio", None)  # `import sniffio` now fails
        return ctxeval.evaluate(samples, metrics=["id_based_context_precision"])

    inside = anyio.run(handler, backend=backend)
    assert [r.score for r in inside.results] == [0.5, 1 / 3]


def test_evaluate_on_trio() -> None:
    evaluation = ctxeval.evaluate([{"reference": "1"}], metrics=[SlowEcho()], backend="trio")
    assert evaluation.results[0].score == 0.5


async def test_the_run_context_runs_blocking_work_in_threads() -> None:
    ctx = Scheduler(ctxeval.default_registry(), cpu_workers=1).context()
    assert await ctx.run_cpu(sum, [1, 2, 3]) == 6
    assert isinstance(ctx, ctxeval.RunContext)


def test_summary_and_files(tmp_path: Path) -> None:
    samples = [
        SEED_ID_PRECISION,
        SEED_ID_RECALL,
        {"retrieved_context_ids": ["a"], "reference_context_ids": []},
    ]
    evaluation = ctxeval.evaluate(
        samples, metrics=["id_based_context_precision", "id_based_context_recall"]
    )
    summary = evaluation.summary()["id_based_context_precision"]
    assert (summary.n_ok, summary.n_undefined, summary.n_error) == (2, 1, 0)
    assert summary.mean == pytest.approx((0.5 + 1 / 3) / 2)
    assert summary.ci95 is not None
    assert 0.0 <= summary.ci95[0] <= summary.mean <= summary.ci95[1] <= 1.0
    assert summary.to_dict()["ci95"] == list(summary.ci95)

    path = evaluation.to_jsonl(tmp_path / "results.jsonl")
    lines = path.read_text().splitlines()
    assert len(lines) == 6
    first = json.loads(lines[0])
    assert list(first) == ["sample_id", "metric", "status", "score", "reason", "details", "usage"]
    assert first["score"] == 0.5
    assert first["status"] == "ok"
    assert ctxeval.Evaluation.from_jsonl(path).results == evaluation.results


def test_to_pandas() -> None:
    pytest.importorskip("pandas")
    evaluation = ctxeval.evaluate(
        [SEED_ID_PRECISION], metrics=["id_based_context_precision", "id_mrr"]
    )
    frame = evaluation.to_pandas()
    assert list(frame["metric"]) == ["id_based_context_precision", "id_mrr"]
    assert list(frame["score"]) == [0.5, 1.0]
    assert {"requests", "cost_usd", "cache_hits"} <= set(frame.columns)


def test_rows_and_scores_of_an_unknown_metric() -> None:
    evaluation = ctxeval.evaluate([SEED_ID_PRECISION], metrics=["id_mrr"])
    with pytest.raises(ConfigError, match="no metric 'nope' in this evaluation; it has: id_mrr"):
        evaluation.scores("nope")


def test_a_result_changed_after_it_was_built_is_an_error_row() -> None:
    """Frozen attrs can still be written with object.__setattr__: the runner checks again."""
    from ctxeval._results.results import MetricResult

    class Sneaky:
        name = "sneaky"
        requires = ()

        def score(self, sample: object) -> MetricResult:
            row = MetricResult.ok(0.5)
            object.__setattr__(row, "score", 7.0)
            return row

        async def ascore(self, sample: object, ctx: object) -> MetricResult:
            return self.score(sample)

    [row] = ctxeval.evaluate([{"user_input": "q"}], [Sneaky()]).results
    assert row.status is ctxeval.Status.ERROR
    assert "changed after it was built" in (row.reason or "")
