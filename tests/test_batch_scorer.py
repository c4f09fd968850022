"""The batch scorer gives, column for column, the rows ``evaluate`` gives (``results.jsonl``'s
values), whether a block's rows are plain, kept whole (undefined, an error) or strings."""

from __future__ import annotations

import json
from typing import Any

import pytest

import ctxeval
from ctxeval._results.table import USAGE_COLUMNS
from ctxeval.runners import ROW_COLUMNS, BatchScorer

pd = pytest.importorskip("pandas")
pa = pytest.importorskip("pyarrow")

METRICS = [
    "id_based_context_precision",
    "id_ndcg_at_k",
    "id_based_context_recall",
    "non_llm_context_precision_with_reference",
]


def _samples() -> list[dict[str, Any]]:
    samples: list[dict[str, Any]] = []
    for i in range(40):
        sample: dict[str, Any] = {
            "id": f"q{i}",
            "retrieved_context_ids": [f"d{(i + k) % 7}" for k in range(4)],
            "reference_context_ids": [f"d{(2 * i) % 7}", f"d{(3 * i + 1) % 7}"],
            "retrieved_contexts": [f"text {i % 3}", "the Eiffel tower is in Paris"],
            "reference_contexts": ["the Eiffel tower is in Paris"],
        }
        if i % 9 == 4:  # nothing relevant to find: an undefined row kept whole
            sample["reference_context_ids"] = []
        samples.append(sample)
    return samples


def _expected() -> list[dict[str, Any]]:
    return [row.to_dict() for row in ctxeval.evaluate(_samples(), METRICS).results]


def _as_dicts(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for row in rows:
        row["details"] = json.loads(row["details"])
        row["usage"] = {name: row.pop(name) for name in USAGE_COLUMNS}  # (flattened)
    return rows


def test_arrow_rows_equal_the_rows_of_evaluate() -> None:
    table = BatchScorer.build(METRICS)(pa.Table.from_pylist(_samples()))
    assert table.column_names == list(ROW_COLUMNS)
    expected = _expected()
    assert {row["status"] for row in expected} == {"ok", "undefined"}
    assert _as_dicts(table.to_pylist()) == expected


def test_pandas_rows_equal_the_rows_of_evaluate_and_details_can_be_left_out() -> None:
    frame = BatchScorer.build(METRICS)(pd.DataFrame(_samples()))
    got = _as_dicts(frame.astype(object).where(frame.notna(), None).to_dict("records"))
    assert got == _expected()
    lean = BatchScorer.build(METRICS, details=False)(pa.Table.from_pylist(_samples()))
    assert lean.column("details").null_count == lean.num_rows
    assert lean.column("score").to_pylist() == [row["score"] for row in _expected()]


def test_score_part_gives_what_score_part_gives_on_the_scorers_own_loop() -> None:
    """``BatchScorer.score_part`` (what the ``ray`` runner's workers call) is
    :func:`ctxeval.runners.score_part` on the scorer's event loop: the same rows and digests,
    a part's failure handed back with the rows before it, and the loop kept across parts."""
    import functools

    import anyio

    from ctxeval.runners import RunPlan, score_part

    plan = RunPlan.build(METRICS[:2])
    scorer = BatchScorer(plan)
    samples = _samples()[:6]
    try:
        scored = scorer.score_part(samples, first_index=3)
        alone = anyio.run(functools.partial(score_part, plan, samples, first_index=3))
        assert [r.to_dict() for r in scored.rows] == [r.to_dict() for r in alone.rows]
        assert scored.digests == alone.digests
        assert scored.error is None
        loop = scorer._loop
        broken = scorer.score_part([*samples[:2], {"id": "bad", "retrieved_context_ids": 3}])
        assert scorer._loop is loop  # one loop for every part
        assert isinstance(broken.error, ctxeval.DataError)
        assert [r.sample_id for r in broken.rows] == ["q0", "q0", "q1", "q1"]
    finally:
        scorer.close()


def test_llm_rows_carry_their_usage_in_the_columns_of_to_arrow() -> None:
    """The batch scorer's rows have the one Arrow row schema of ctxeval's tables of rows
    (``results.parquet``, ``Evaluation.to_arrow``): the usage flattened into six columns, an
    LLM row's requests, tokens and cost in them (#53); pandas the same columns."""
    from ctxeval_llm import LLMConfig
    from fakes.openai_server import FakeOpenAI
    from llm_judge import Judge

    contexts = ["Paris is in France.", "Bananas are yellow."]
    samples = [
        {
            "id": f"s{i}",
            "user_input": f"Where is Paris? ({i})",
            "reference": "Paris is in France.",
            "retrieved_contexts": contexts[i % 2 :] + contexts[: i % 2],
        }
        for i in range(6)
    ]
    with FakeOpenAI(Judge(verdicts={contexts[0]: 1, contexts[1]: 0})) as server:
        llm = LLMConfig(model="openai/fake-judge", api_base=server.url, api_key="sk-test")
        evaluation = ctxeval.evaluate(samples, ["context_precision"], llm=llm)
        scorer = BatchScorer.build(["context_precision"], llm=llm)
        table = scorer(pa.Table.from_pylist(samples))
        frame = scorer(pd.DataFrame(samples))
        scorer.close()
    expected = [row.to_dict() for row in evaluation.results]
    assert all(row["usage"]["requests"] >= 1 for row in expected)
    assert table.schema == evaluation.to_arrow().schema
    got = _as_dicts(table.to_pylist())
    assert got == expected
    assert list(frame.columns) == list(ROW_COLUMNS) == table.column_names
    assert frame["prompt_tokens"].tolist() == table.column("prompt_tokens").to_pylist()
    assert str(frame["requests"].dtype) == "int64"
