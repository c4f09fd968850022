"""Property tests: no input ever yields a score outside [0, 1], an error row or a crash."""

from __future__ import annotations

import math

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import ctxeval
from ctxeval import Status
from ctxeval.builtin.similarity import MEASURES

ids = st.one_of(st.text(max_size=3), st.integers(-5, 5))
id_lists = st.one_of(st.none(), st.lists(ids, max_size=12))
texts = st.text(max_size=60)
text_lists = st.one_of(st.none(), st.lists(texts, max_size=6))

samples = st.fixed_dictionaries(
    {},
    optional={
        "retrieved_context_ids": id_lists,
        "reference_context_ids": id_lists,
        "retrieved_contexts": text_lists,
        "reference_contexts": text_lists,
    },
)

ID_METRICS = [
    "id_based_context_precision",
    "id_based_context_recall",
    "id_mrr",
    "id_average_precision",
]


@st.composite
def metric_lists(draw: st.DrawFn) -> list[ctxeval.Metric]:
    k = draw(st.integers(1, 15))
    measure = draw(st.sampled_from(MEASURES))
    threshold = draw(st.floats(0, 1))
    normalize = draw(st.booleans())
    options = {"measure": measure, "threshold": threshold, "normalize": normalize}
    return [
        *(ctxeval.get_metric(name) for name in ID_METRICS),
        *(
            ctxeval.get_metric(name, k=k)
            for name in ("id_precision_at_k", "id_recall_at_k", "id_hit_rate_at_k", "id_ndcg_at_k")
        ),
        ctxeval.get_metric("non_llm_context_precision_with_reference", **options),
        ctxeval.get_metric("non_llm_context_recall", **options),
    ]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=st.lists(samples, min_size=1, max_size=5), metrics=metric_lists())
def test_scores_stay_in_0_1_and_nothing_crashes(
    batch: list[dict[str, object]], metrics: list[ctxeval.Metric]
) -> None:
    evaluation = ctxeval.evaluate(batch, metrics=metrics)
    assert len(evaluation.results) == len(batch) * len(metrics)
    for row, (position, metric) in zip(
        evaluation.results, [(i, m) for i in range(len(batch)) for m in metrics], strict=False
    ):
        assert row.sample_id == str(position)
        assert row.metric == metric.name
        if row.status is Status.OK:
            assert row.score is not None
            assert 0.0 <= row.score <= 1.0
            assert not math.isnan(row.score)
        else:
            assert row.score is None
            assert row.reason
        if row.status is Status.ERROR:  # only a missing field may give an error row
            assert "which" in (row.reason or "")
            assert "requires" in (row.reason or "")


_COUNT = st.integers(min_value=0, max_value=10**12)
_COST = st.one_of(st.none(), st.floats(min_value=0.0, max_value=1e308, allow_nan=False))


@settings(max_examples=200, deadline=None)
@example([(0, 0, 0, 0, 1e308, 0), (0, 0, 0, 0, 1e308, 0)])  # a sum that is no finite cost
@given(st.lists(st.tuples(_COUNT, _COUNT, _COUNT, _COUNT, _COST, _COUNT), min_size=2, max_size=2))
def test_a_sum_of_usages_is_the_usage_of_the_sums(
    parts: list[tuple[int, int, int, int, float | None, int]],
) -> None:
    """``+`` builds its sum without the checks (two checked usages make a valid one): it must
    equal, hash and pickle as the checked usage of the sums, and a sum too big to be a cost
    is refused as any cost that is not finite."""
    import pickle

    import pytest

    from ctxeval import Usage

    names = ("requests", "retries", "prompt_tokens", "completion_tokens", "cost_usd", "cache_hits")
    a, b = (Usage(**dict(zip(names, values, strict=True))) for values in parts)
    totals = {
        name: None if name == "cost_usd" and None in (x, y) else x + y  # type: ignore[operator]
        for name, x, y in zip(names, parts[0], parts[1], strict=True)
    }
    if totals["cost_usd"] is not None and not math.isfinite(totals["cost_usd"]):
        with pytest.raises(ValueError, match="cost_usd"):
            a + b
        return
    total = a + b
    expected = Usage(**totals)
    assert total == expected
    assert hash(total) == hash(expected)
    assert type(total) is Usage
    assert total.to_dict() == expected.to_dict()
    assert pickle.loads(pickle.dumps(total)) == expected
