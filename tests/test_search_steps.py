"""Multi-step search (#55): the sample field ``retrieval_steps`` and the ``search_*`` metrics,
with the worked example of docs/metrics/search.md computed by hand."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import ctxeval
from ctxeval import RetrievalStep, Sample

SEARCH_METRICS = [
    "search_evidence_recall",
    "search_first_hit_step",
    "search_calls_to_full_recall",
    "search_redundancy",
    "search_step_precision",
]

# the worked example of docs/metrics/search.md
EXAMPLE: dict[str, Any] = {
    "id": "q1",
    "reference_context_ids": {"d1": 2, "d2": 1, "d9": 0},  # d9: judged not relevant
    "retrieval_steps": [
        {"query": "dune author", "retrieved_context_ids": ["d5", "d6"]},
        {"query": "frank herbert novel", "retrieved_context_ids": ["d1", "d5", "d7"]},
        {"query": "herbert sequels", "retrieved_context_ids": ["d2", "d1", "d9", "d2"]},
    ],
}


def scores(sample: dict[str, Any], **options: Any) -> dict[str, float | None]:
    metrics = [ctxeval.get_metric(name, **options) for name in SEARCH_METRICS]
    rows = ctxeval.evaluate([sample], metrics).results
    return {row.metric: row.score for row in rows}


def test_the_worked_example_by_hand() -> None:
    # relevant (grade >= 1): d1, d2. Step 1 finds none, step 2 finds d1, step 3 finds d2.
    assert scores(EXAMPLE) == {
        "search_evidence_recall": 1.0,  # {d1, d2} both found: 2/2
        "search_first_hit_step": 0.5,  # step 2: 1/2
        "search_calls_to_full_recall": pytest.approx(1 / 3),  # d2 in step 3: 1/3
        # 2 + 3 + 3 items (d2 counted once in step 3); again: d5 (step 2), d1 (step 3): 2/8
        "search_redundancy": 0.25,
        # steps: 0/2, 1/3, 2/3 (d2, d1 of d2, d1, d9): mean 1/3
        "search_step_precision": pytest.approx(1 / 3),
    }


def test_the_worked_example_at_relevance_level_2() -> None:
    metrics = [
        ctxeval.get_metric(name, relevance_level=2)
        for name in SEARCH_METRICS
        if name != "search_redundancy"  # (no reference: not an option of it)
    ]
    rows = ctxeval.evaluate([EXAMPLE], metrics).results
    assert {row.metric: row.score for row in rows} == {
        "search_evidence_recall": 1.0,  # only d1 (grade 2) is relevant
        "search_first_hit_step": 0.5,
        "search_calls_to_full_recall": 0.5,  # d1 in step 2
        "search_step_precision": pytest.approx(2 / 9),  # 0, 1/3, 1/3
    }


def test_the_details_say_where_each_relevant_id_was_found() -> None:
    rows = ctxeval.evaluate([EXAMPLE], SEARCH_METRICS).results
    by = {row.metric: dict(row.details) for row in rows}
    assert by["search_evidence_recall"] == {
        "steps": 3, "found_at_step": {"d1": 2, "d2": 3}, "missing": [],
    }  # fmt: skip
    assert by["search_first_hit_step"]["first_hit_step"] == 2
    assert by["search_calls_to_full_recall"]["calls"] == 3
    assert by["search_step_precision"]["step_precision"] == [0.0, 1 / 3, 2 / 3]
    assert by["search_redundancy"] == {
        "steps": 3, "returned_per_step": [2, 3, 3], "seen_before": [[], ["d5"], ["d1"]],
    }  # fmt: skip


def row(sample: dict[str, Any], metric: str) -> ctxeval.MetricResult:
    return ctxeval.evaluate([sample], [metric]).results[0]


def test_undefined_and_zero_follow_the_score_policy() -> None:
    missed = {
        "reference_context_ids": ["d1", "d2"],
        "retrieval_steps": [{"retrieved_context_ids": ["d7"]}, {"retrieved_context_ids": []}],
    }
    assert row(missed, "search_evidence_recall").score == 0.0
    first = row(missed, "search_first_hit_step")
    assert first.status.value == "undefined"
    assert "none of 2 step(s) returned a relevant ID" in (first.reason or "")
    assert row(missed, "search_step_precision").score == 0.0  # the empty step is left out
    partial = {**missed, "retrieval_steps": [{"retrieved_context_ids": ["d1"]}]}
    full = row(partial, "search_calls_to_full_recall")
    assert full.status.value == "undefined"
    assert "1 of 2 relevant ID(s) returned in 1 step(s)" in (full.reason or "")
    none = {"reference_context_ids": ["d1"], "retrieval_steps": []}
    assert row(none, "search_evidence_recall").score == 0.0  # nothing retrieved: recall 0
    for metric in ("search_step_precision", "search_redundancy", "search_first_hit_step"):
        assert row(none, metric).status.value == "undefined", metric
    empty_reference = {
        "reference_context_ids": [],
        "retrieval_steps": [{"retrieved_context_ids": ["d1"]}],
    }
    assert "there are no reference context IDs" in (
        row(empty_reference, "search_evidence_recall").reason or ""
    )
    judged_out = {**empty_reference, "reference_context_ids": {"d1": 0}}
    reason = row(judged_out, "search_first_hit_step").reason or ""
    assert "judges every document not relevant" in reason


def test_a_step_without_ids_is_an_error_row_for_the_id_metrics_and_redundancy_reads_texts() -> None:
    sample = {
        "reference_context_ids": ["d1"],
        "retrieval_steps": [
            {"retrieved_contexts": ["Dune is a novel.", "Herbert wrote it."]},
            {"retrieved_contexts": ["Herbert wrote it."]},
        ],
    }
    bad = row(sample, "search_evidence_recall")
    assert bad.status.value == "error"
    assert "retrieval_steps[0] has no retrieved_context_ids" in (bad.reason or "")
    assert row(sample, "search_redundancy").score == pytest.approx(1 / 3)
    lacking = row({"reference_context_ids": ["d1"]}, "search_evidence_recall")
    assert lacking.status.value == "error"
    assert "retrieval_steps" in (lacking.reason or "")


def naive(sample: Sample) -> dict[str, float | None]:
    """The definitions, written the plain way."""
    relevant = set(sample.reference_context_ids or ())
    steps = [
        list(dict.fromkeys(s.retrieved_context_ids or ())) for s in sample.retrieval_steps or ()
    ]
    union: set[str] = set().union(*steps) if steps else set()
    first = next((n for n, s in enumerate(steps, 1) if relevant & set(s)), None)
    full = next((n for n in range(1, len(steps) + 1) if relevant <= set().union(*steps[:n])), None)
    total = sum(map(len, steps))
    again = sum(len(set(s) & set().union(*steps[:n])) for n, s in enumerate(steps))
    precisions = [len(relevant & set(s)) / len(s) for s in steps if s]
    return {
        "search_evidence_recall": len(relevant & union) / len(relevant),
        "search_first_hit_step": None if first is None else 1 / first,
        "search_calls_to_full_recall": None if full is None else 1 / full,
        "search_redundancy": again / total if total else None,
        "search_step_precision": sum(precisions) / len(precisions) if precisions else None,
    }


def test_the_batch_scores_equal_the_definitions_on_random_searches() -> None:
    rng = random.Random(55)
    samples = []
    for n in range(300):
        steps = [
            {"retrieved_context_ids": [f"d{rng.randrange(12)}" for _ in range(rng.randrange(5))]}
            for _ in range(rng.randrange(5))
        ]
        reference = [f"d{rng.randrange(12)}" for _ in range(1 + rng.randrange(3))]
        samples.append(
            Sample.from_dict(
                {"id": str(n), "reference_context_ids": reference, "retrieval_steps": steps}
            )
        )
    rows = ctxeval.evaluate(samples, SEARCH_METRICS).results
    for i, sample in enumerate(samples):
        expected = naive(sample)
        for r in rows[i * len(SEARCH_METRICS) : (i + 1) * len(SEARCH_METRICS)]:
            assert r.score == pytest.approx(expected[r.metric]), (sample, r)


def test_a_step_is_checked_naming_the_sample_the_step_and_the_field() -> None:
    with pytest.raises(ctxeval.DataError) as caught:
        Sample(
            id="q7",
            retrieval_steps=[
                {"retrieved_context_ids": ["d1"]},
                {"query": 3, "retrieved_context_ids": []},
            ],
        )
    assert caught.value.sample_id == "q7"
    assert caught.value.field == "retrieval_steps[1].query"
    with pytest.raises(ctxeval.DataError, match=r"retrieval_steps\[0\].span.*a step's fields are"):
        Sample.from_dict(
            {"id": "q7", "retrieval_steps": [{"span": "x", "retrieved_context_ids": []}]}
        )
    with pytest.raises(ctxeval.DataError, match="expected a list of steps, got str"):
        Sample.from_dict({"retrieval_steps": "d1"})  # (the fast path of plain rows too)
    with pytest.raises(ctxeval.DataError, match="2 retrieved_context_ids but 1 retrieved_contexts"):
        RetrievalStep(retrieved_context_ids=["a", "b"], retrieved_contexts=["x"])
    with pytest.raises(ctxeval.DataError, match="holds none of"):
        RetrievalStep(query="q")


def test_steps_round_trip_and_load_from_files_frames_and_a_column_map(tmp_path: Path) -> None:
    sample = Sample.from_dict(EXAMPLE)
    assert Sample.from_dict(sample.to_dict()) == sample
    assert sample.retrieval_steps is not None
    assert sample.retrieval_steps[0] == RetrievalStep(
        query="dune author", retrieved_context_ids=["d5", "d6"]
    )
    lines = tmp_path / "s.jsonl"
    renamed = {**EXAMPLE, "searches": EXAMPLE["retrieval_steps"]}
    del renamed["retrieval_steps"]
    lines.write_text(json.dumps(renamed) + "\n")
    assert list(ctxeval.load_samples(lines, column_map={"retrieval_steps": "searches"})) == [sample]
    frame = pd.DataFrame([EXAMPLE])
    from_frame = ctxeval.evaluate(frame, ["search_first_hit_step"]).results[0]
    assert from_frame.score == 0.5
    assert from_frame.sample_id == "q1"
    frame.to_parquet(tmp_path / "s.parquet")  # (list<struct> cells, a step's missing key null)
    assert list(ctxeval.load_samples(tmp_path / "s.parquet")) == [sample]
    table = tmp_path / "s.csv"
    frame_csv = pd.DataFrame(
        [{k: json.dumps(v) if not isinstance(v, str) else v for k, v in EXAMPLE.items()}]
    )
    frame_csv.to_csv(table, index=False)
    assert list(ctxeval.load_samples(table)) == [sample]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        json.dumps({"id": "q2", "retrieval_steps": [{"retrieved_context_ids": [1.5]}]}) + "\n"
    )
    with pytest.raises(
        ctxeval.DataError, match=r"bad.jsonl:1: sample 'q2': field 'retrieval_steps\[0\]"
    ):
        list(ctxeval.load_samples(bad))


def test_the_union_of_the_steps_keeps_each_item_once_in_the_order_first_returned() -> None:
    sample = Sample(
        retrieval_steps=[
            {"retrieved_context_ids": ["a", "b"], "retrieved_contexts": ["A", "B"]},
            {"retrieved_context_ids": ["b", "c"], "retrieved_contexts": ["B", "C"]},
        ]
    )
    union = sample.with_steps_as_context()
    assert union.retrieved_context_ids == ("a", "b", "c")
    assert union.retrieved_contexts == ("A", "B", "C")
    texts_only = Sample(
        retrieval_steps=[{"retrieved_contexts": ["A", "B"]}, {"retrieved_contexts": ["B"]}]
    )
    assert texts_only.with_steps_as_context().retrieved_contexts == ("A", "B")
    assert texts_only.with_steps_as_context().retrieved_context_ids is None
    assert Sample(user_input="q").with_steps_as_context() == Sample(user_input="q")


def test_the_command_line_reads_steps_from_another_column(tmp_path: Path) -> None:
    from ctxeval.cli import main

    renamed = {k: v for k, v in EXAMPLE.items() if k != "retrieval_steps"}
    path = tmp_path / "agent.jsonl"
    path.write_text(json.dumps({**renamed, "searches": EXAMPLE["retrieval_steps"]}) + "\n")
    out = tmp_path / "run"
    argv = ["evaluate", str(path), "-m", "search_first_hit_step", "--map",
            "retrieval_steps=searches", "--out", str(out), "-q"]  # fmt: skip
    assert main(argv) == 0
    rows = [json.loads(line) for line in (out / "results.jsonl").open()]
    assert [(r["sample_id"], r["score"], r["details"]["first_hit_step"]) for r in rows] == [
        ("q1", 0.5, 2)
    ]


def test_a_single_step_is_not_a_list_of_steps() -> None:
    step = RetrievalStep(retrieved_context_ids=["d1"])
    with pytest.raises(ctxeval.DataError, match=r"got a single step \(wrap it in a list"):
        Sample(retrieval_steps=step)  # type: ignore[arg-type]
    assert Sample(retrieval_steps=[step]).retrieval_steps == (step,)
