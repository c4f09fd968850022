"""The fast path of deterministic runs: chunks, ``score_batch``, lazy evidence, fast builders.

Every shortcut must give exactly what the plain path gives: the same samples, the same
scores to the last bit, the same evidence, the same rows in the same order.
"""

from __future__ import annotations

import gc
import json
import logging
import pickle
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ctxeval
from ctxeval import MetricResult, Sample, Status, policy
from ctxeval._data.sample import MAX_ID_LENGTH, _prebuilt
from ctxeval._pipeline.batch import BatchJudgement
from ctxeval._plugins.base import BaseDeterministicMetric
from ctxeval._results.columns import RowBlock
from ctxeval._results.results import LazyDetails
from ctxeval._run import fastpath
from ctxeval._run.bridge import run_sync
from ctxeval.builtin.similarity import (
    MEASURES,
    SimilarityMatcher,
    pair_matches,
    pair_similarity,
    similarity_matrix,
)
from ctxeval.plugin import Items, compose
from ctxeval_ids.matcher import IDMatcher
from test_properties import metric_lists, samples

FAST = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

graded_samples = st.fixed_dictionaries(
    {
        "retrieved_context_ids": st.lists(st.sampled_from("abcdefg"), max_size=8),
        "reference_context_ids": st.dictionaries(st.sampled_from("abcdef"), st.integers(0, 3)),
    }
)
"""Samples whose reference IDs carry grades (0 judged not relevant)."""


@FAST
@given(batch=st.lists(samples, min_size=1, max_size=6), metrics=metric_lists())
def test_score_batch_gives_what_score_gives(batch: list[dict[str, Any]], metrics: list) -> None:
    built = [Sample.from_dict({**row, "id": str(i)}) for i, row in enumerate(batch)]
    for metric in metrics:
        ready = [s for s in built if not s.missing(metric.requires)]
        if not ready:
            continue
        fast = metric.score_batch(ready)
        assert len(fast) == len(ready)
        for sample, row in zip(ready, fast, strict=True):
            plain = metric.score(sample)
            assert (row.status, row.score, row.reason) == (plain.status, plain.score, plain.reason)
            assert row.details == plain.details
            assert row.to_dict()["details"] == plain.to_dict()["details"]


@FAST
@given(
    references=st.lists(st.text(max_size=40), min_size=1, max_size=4),
    retrieved=st.lists(st.text(max_size=40), min_size=1, max_size=4),
    measure=st.sampled_from(MEASURES),
)
def test_pair_similarity_is_the_matrix_entry(
    references: list[str], retrieved: list[str], measure: str
) -> None:
    matrix = similarity_matrix(references, retrieved, measure=measure)
    similarity = pair_similarity(measure)
    for i, reference in enumerate(references):
        for j, chunk in enumerate(retrieved):
            assert similarity(reference, chunk) == matrix[i, j]


sample_dicts = st.fixed_dictionaries(
    {},
    optional={
        "id": st.one_of(st.text(max_size=3), st.integers(0, 9), st.none()),
        "user_input": st.one_of(st.text(max_size=5), st.none()),
        "reference": st.one_of(st.text(max_size=5), st.none()),
        "retrieved_contexts": st.one_of(st.none(), st.lists(st.text(max_size=5), max_size=3)),
        "retrieved_context_ids": st.one_of(
            st.none(), st.lists(st.one_of(st.text(max_size=3), st.integers(0, 9)), max_size=3)
        ),
        "reference_context_ids": st.one_of(st.none(), st.lists(st.text(max_size=3), max_size=3)),
    },
)


@FAST
@given(data=sample_dicts)
def test_fast_sample_equals_the_checked_one(data: dict[str, Any]) -> None:
    fast = _prebuilt(dict(data))
    checked = Sample(**data)
    assert Sample.from_dict(data) == checked
    if fast is not None:
        assert fast == checked
        assert fast.metadata == {}
        assert {type(v) for v in attrs.astuple(fast, recurse=False)[:-1]} <= {
            str,
            tuple,
            type(None),
        }


def test_fast_sample_refuses_what_needs_converting_or_checking() -> None:
    assert _prebuilt({"retrieved_context_ids": [1, "a"]}) is None  # ints become strings
    assert _prebuilt({"id": 3}) is None
    assert _prebuilt({"retrieved_contexts": "one string"}) is None  # an error, with its message
    assert _prebuilt({"user_input": ["a"]}) is None
    assert (
        _prebuilt({"id": "x", "retrieved_contexts": ["ok", "\ud800"]}) is None
    )  # a lone surrogate
    assert _prebuilt({"reference": "\ud800", "id": "x"}) is None
    assert _prebuilt({"reference_context_ids": ["d" * (MAX_ID_LENGTH + 1)]}) is None
    assert _prebuilt({"id": "d" * (MAX_ID_LENGTH + 1)}) is None
    for order in (["id", "reference"], ["reference", "id"]):  # one builder per key order
        built = _prebuilt({key: "é" if key == "reference" else "x" for key in order})
        assert built is None  # (not ASCII: the converters look at it)
        built = _prebuilt({key: "e" if key == "reference" else "x" for key in order})
        assert built == Sample(id="x", reference="e")
    with pytest.raises(ctxeval.DataError, match="retrieved_contexts"):
        Sample.from_dict({"retrieved_contexts": "one string"})


def test_lazy_details_compute_once_and_act_as_their_dict() -> None:
    calls = []

    def compute(a: int, b: int) -> dict[str, int]:
        calls.append((a, b))
        return {"sum": a + b}

    lazy = LazyDetails(compute, 1, 2)
    assert calls == []
    assert lazy == {"sum": 3}
    assert dict.__eq__({"sum": 3}, lazy) is NotImplemented  # so Python asks the lazy side
    assert lazy["sum"] == 3
    assert list(lazy) == ["sum"]
    assert len(lazy) == 1
    assert "sum" in lazy
    assert calls == [(1, 2)]
    assert repr(lazy) == "{'sum': 3}"
    assert pickle.loads(pickle.dumps(lazy)) == {"sum": 3}
    row = MetricResult.ok(0.5, details=LazyDetails(compute, 2, 2))
    assert row.to_dict()["details"] == {"sum": 4}
    assert MetricResult.from_dict(row.to_dict()) == row


def test_average_precision_stays_exact() -> None:
    from fractions import Fraction

    verdicts = [True, False, True, False, False, True, True]
    hits, total = 0, Fraction(0)
    for rank, relevant in enumerate(verdicts, start=1):
        if relevant:
            hits += 1
            total += Fraction(hits, rank)
    assert policy.average_precision_value(verdicts) == total / hits
    assert policy.average_precision_value([False, False]) == 0


@attrs.frozen(kw_only=True)
class Fragile(BaseDeterministicMetric):
    """Scores 1.0, but fails on samples whose id starts with 'bad'; its batch may misbehave."""

    registry_name = "fragile"
    requires = ("retrieved_context_ids",)
    batch: str = "raise"

    def score(self, sample: Sample) -> MetricResult:
        if (sample.id or "").startswith("bad"):
            raise ValueError(f"cannot score {sample.id}")
        return MetricResult.ok(1.0)

    def score_batch(self, samples: list[Sample]) -> list[MetricResult]:
        if self.batch == "raise":
            raise ValueError("the batch fails")
        return [MetricResult.ok(1.0)] * (len(samples) - 1)  # one short


@pytest.mark.parametrize("batch", ["raise", "short"])
def test_a_failing_batch_is_scored_sample_by_sample(
    batch: str, caplog: pytest.LogCaptureFixture
) -> None:
    rows = [{"id": f"s{i}", "retrieved_context_ids": ["a"]} for i in range(5)]
    rows[2]["id"] = "bad2"
    rows[3] = {"id": "s3"}  # lacks the field
    with caplog.at_level(logging.DEBUG, logger="ctxeval"):
        ev = ctxeval.evaluate(rows, [Fragile(batch=batch)])
    assert [r.sample_id for r in ev.results] == ["s0", "s1", "bad2", "s3", "s4"]
    assert [r.status for r in ev.results] == [
        Status.OK, Status.OK, Status.ERROR, Status.ERROR, Status.OK
    ]  # fmt: skip
    assert "cannot score bad2" in (ev.results[2].reason or "")
    assert "retrieved_context_ids" in (ev.results[3].reason or "")
    assert "one by one" in caplog.text


def test_rows_keep_input_order_across_chunks_and_metrics(tmp_path: Path) -> None:
    n = 5000  # several chunks
    rows = [
        {"retrieved_context_ids": [str(i % 7), "x"], "reference_context_ids": [str(i % 5)]}
        for i in range(n)
    ]
    rows[4321] = {"retrieved_context_ids": ["1"]}  # no reference: error rows mid-chunk
    metrics = ["id_based_context_recall", "id_mrr", "id_based_context_precision"]
    ev = ctxeval.evaluate(rows, metrics, journal=tmp_path / "run.journal")
    assert len(ev.results) == 3 * n
    assert [r.sample_id for r in ev.results[:6]] == ["0", "0", "0", "1", "1", "1"]
    assert [r.metric for r in ev.results[-3:]] == metrics
    assert {r.status for r in ev.results[3 * 4321 : 3 * 4322]} == {Status.ERROR}
    for row in ev.results[:30]:
        plain = ctxeval.get_metric(row.metric).score(Sample.from_dict(rows[int(row.sample_id)]))
        assert (row.score, row.details) == (plain.score, plain.details)
    journal = (tmp_path / "run.journal").read_text().splitlines()
    assert len(journal) == 1  # the header: deterministic rows are scored again on resume
    again = ctxeval.evaluate(rows, metrics, journal=tmp_path / "run.journal", resume=True)
    assert again.results == ev.results


def test_the_cycle_collector_is_left_as_it_was() -> None:
    rows = [{"retrieved_context_ids": ["a"], "reference_context_ids": ["a"]}] * 10
    assert gc.isenabled()
    ctxeval.evaluate(rows, ["id_mrr"])
    assert gc.isenabled()
    gc.disable()
    try:
        ctxeval.evaluate(rows, ["id_mrr"])
        assert not gc.isenabled()
    finally:
        gc.enable()


@pytest.mark.anyio
async def test_a_bad_line_mid_chunk_raises_after_the_rows_before_it(tmp_path: Path) -> None:
    data = tmp_path / "data.jsonl"
    good = json.dumps({"retrieved_context_ids": ["a"], "reference_context_ids": ["a"]})
    data.write_text("\n".join([good] * 10 + ["{not json"] + [good] * 5) + "\n")
    seen: list[MetricResult] = []

    async def read() -> None:
        async with ctxeval.stream(ctxeval.load_samples(data), ["id_mrr"]) as rows:
            async for row in rows:
                seen.append(row)

    with pytest.raises(ctxeval.DataError, match=r"data\.jsonl:11: not valid JSON"):
        await read()
    assert len(seen) == 10


def _id_rows(n: int) -> list[dict[str, Any]]:
    return [
        {
            "id": f"q{i}",
            "retrieved_context_ids": [f"d{(i * 7 + k) % 13}" for k in range(5)],
            "reference_context_ids": [f"d{(i + k) % 13}" for k in range(1 + i % 3)],
        }
        for i in range(n)
    ]


def _live_samples() -> int:
    gc.collect()
    return sum(type(o) is Sample for o in gc.get_objects())


def test_a_run_of_a_jsonl_file_keeps_lines_not_samples(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rows of a JSONL file keep the lines their evidence is read from again, not the
    samples: the same rows and evidence as a run of the same samples, with no sample alive.
    (The file is read line by line here: once another test has imported numpy, a file of
    plain ID samples this size is read as columns, tests/test_jsonl_columns.py.)"""
    monkeypatch.setattr("ctxeval._run.local.ranked_file", lambda run, samples: None)
    data = _id_rows(5000)  # more than one chunk
    path = tmp_path / "data.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in data))
    metrics = ["id_based_context_precision", "id_based_context_recall", "id_ndcg_at_k"]
    before = _live_samples()
    from_file = ctxeval.evaluate(ctxeval.load_samples(path), metrics)
    assert _live_samples() - before <= 1  # the first line's (read with json, kept as it is)
    blocks = [p for p in from_file._parts if isinstance(p, RowBlock)]
    # every sample kept as its line (the first one too, written back as the line it reads from)
    assert sum(type(s) is bytes for b in blocks for s in b.sources) == len(data)
    assert blocks[0].samples[:3] == [Sample.from_dict(row) for row in data[:3]]
    from_list = ctxeval.evaluate([Sample.from_dict(row) for row in data], metrics)
    assert from_file.summary() == from_list.summary()
    assert [r.to_dict() for r in from_file.results] == [r.to_dict() for r in from_list.results]


@pytest.mark.anyio
async def test_a_lenient_jsonl_run_skips_whole_chunks_of_bad_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A chunk whose lines are all bad gives no rows and the run goes on to the next."""
    monkeypatch.setattr(fastpath, "CHUNK", 4)
    good = [json.dumps(row) for row in _id_rows(3)]
    path = tmp_path / "data.jsonl"
    path.write_text("\n".join([good[0], *["[1]"] * 9, good[1], "{bad", good[2]]) + "\n")
    samples = ctxeval.load_samples(path, strict=False)
    async with ctxeval.stream(samples, ["id_mrr"]) as rows:
        seen = [row.sample_id async for row in rows]
    assert seen == ["q0", "q1", "q2"]
    assert samples.rows_read == 13
    assert [e.line for e in samples.errors] == [*range(2, 11), 12]


def test_rows_serialise_to_one_json_line_whatever_their_details() -> None:
    row = MetricResult.ok(
        0.25,
        details={"big": 2**70, "nan": float("nan"), "tuple": (1, "é"), 3: Status.OK},
    ).labelled("s1", "m")
    line = row.to_json()
    assert "\n" not in line
    assert json.loads(line) == row.to_dict()
    assert json.loads(line)["details"] == {"big": 2**70, "nan": None, "tuple": [1, "é"], "3": "ok"}
    plain = MetricResult.ok(1.0, details={"ids": ["a"]}).labelled("s2", "m")
    assert json.loads(plain.to_json()) == plain.to_dict()


@FAST
@given(
    batch=st.lists(st.one_of(samples, graded_samples), min_size=1, max_size=7),
    metrics=metric_lists(),
    k=st.integers(1, 4),
)
def test_a_run_gives_every_row_as_score_gives_it(
    batch: list[dict[str, Any]], metrics: list, k: int
) -> None:
    """The fast path judges a chunk once per group of metrics that judge alike and keeps
    their rows as columns: each row read from the run equals the row ``score`` gives."""
    metrics = [
        *metrics,
        ctxeval.get_metric("id_precision_at_k", k=k, name="p_again"),  # a group of its own k
        ctxeval.get_metric("id_r_precision"),
        ctxeval.get_metric("id_bpref"),
        ctxeval.get_metric("id_ndcg_at_k", k=k, relevance_level=2, name="ndcg_level_2"),
        ctxeval.get_metric("id_based_context_recall", trec_eval_averaging=True, name="r_trec"),
    ]
    evaluation = ctxeval.evaluate(batch, metrics)
    built = [Sample.from_dict(row) for row in batch]
    expected = []
    for i, sample in enumerate(built):
        for metric in metrics:
            missing = sample.missing(metric.requires)
            if missing:
                expected.append(None)
                continue
            expected.append(metric.score(sample).labelled(str(i), metric.name))
    assert len(evaluation) == len(expected)
    for row, plain in zip(evaluation.results, expected, strict=True):
        if plain is None:
            assert row.status is Status.ERROR
            assert "requires" in (row.reason or "")
            continue
        assert (row.sample_id, row.metric, row.status, row.reason) == (
            plain.sample_id, plain.metric, plain.status, plain.reason,
        )  # fmt: skip
        assert row.score == plain.score  # to the last bit: the same formula on the same flags
        assert row.to_dict()["details"] == plain.to_dict()["details"]


@FAST
@given(batch=st.lists(samples, min_size=0, max_size=7), metrics=metric_lists())
def test_what_is_read_from_the_columns_equals_what_the_rows_say(
    batch: list[dict[str, Any]], metrics: list
) -> None:
    """Summary, scores, length and ``ok`` of a run read its columns without building rows;
    they equal what the built rows give."""
    fast = ctxeval.evaluate(batch, metrics)
    rows = ctxeval.Evaluation(fast.results, fast.metrics)  # the same rows, built
    assert len(fast) == len(rows)
    assert fast.summary() == rows.summary()
    assert fast.ok == rows.ok
    assert fast.usage == rows.usage
    for name in fast.metrics:
        assert fast.scores(name) == rows.scores(name)


def test_a_row_block_reads_as_the_list_of_its_rows() -> None:
    metrics = [ctxeval.get_metric("id_mrr"), ctxeval.get_metric("id_based_context_precision")]
    data = [
        {"retrieved_context_ids": ["a", "b"], "reference_context_ids": ["b"]},
        {"retrieved_context_ids": [], "reference_context_ids": ["b"]},
        {"reference_context_ids": ["b"]},
    ]

    async def parts() -> list[Any]:
        async with ctxeval.stream(data, metrics) as rows:
            return [part async for part in rows.parts()]

    (block,) = run_sync(parts)
    assert isinstance(block, RowBlock)
    built = list(block)
    assert len(block) == 6
    assert [block[i] for i in range(6)] == built
    assert block[-1] == built[-1]
    assert block[1:5] == built[1:5]
    assert [r.score for r in built[:2]] == [0.5, 0.5]
    assert built[2].status is Status.OK  # nothing retrieved: MRR is 0
    assert built[3].status is Status.UNDEFINED
    assert built[4].status is Status.ERROR
    with pytest.raises(IndexError):
        block[6]
    assert block.tally().errors == 2
    assert pickle.loads(pickle.dumps(built)) == built


class _Flaky(IDMatcher):
    """An ID matcher whose batch form fails: the run falls back to sample by sample."""

    membership = False  # (else the fast path finds the flags itself and never calls it)

    def match_batch(self, pairs: Any) -> list[list[bool]]:
        raise RuntimeError("no batches today")


def test_a_group_whose_shared_batch_fails_is_scored_sample_by_sample() -> None:
    parts = {
        "reference": Items(field="reference_context_ids", what="reference IDs"),
        "retrieved": Items(field="retrieved_context_ids", what="retrieved IDs"),
        "matcher": _Flaky(),
        "formula": policy.Precision(),
    }
    metrics = [compose("p1", **parts), compose("p2", **parts)]
    assert metrics[0].judging_key() == metrics[1].judging_key()
    data = [{"retrieved_context_ids": ["a", "b"], "reference_context_ids": ["b"]}] * 3
    data = [{**row, "id": str(i)} for i, row in enumerate(data)]
    evaluation = ctxeval.evaluate(data, metrics)
    assert [r.score for r in evaluation.results] == [0.5] * 6


@attrs.frozen(kw_only=True)
class _ShareOfTopTwo(policy.Formula):
    """A formula that reads every flag it is given (it does not cut them itself)."""

    undefined_when_nothing_retrieved = True

    @property
    def depth(self) -> int | None:
        return 2

    def value(self, flags: Any, n_reference: int) -> float:
        return sum(flags) / len(flags)


def test_metrics_that_cut_at_other_depths_share_one_judgement_of_every_item() -> None:
    """The ID matcher is itemwise: P@2-like and MRR-like metrics are judged once, over every
    retrieved item, and each formula gets the flags down to its own depth."""
    parts = {
        "reference": Items(field="reference_context_ids", what="reference IDs", dedupe=True),
        "retrieved": Items(field="retrieved_context_ids", what="retrieved IDs", dedupe=True),
        "matcher": IDMatcher(),
    }
    top_two = compose("top_two", formula=_ShareOfTopTwo(), **parts)
    mrr = compose("rr", formula=policy.ReciprocalRank(), **parts)
    assert top_two.judging_key() == mrr.judging_key()
    data = [
        {"id": "a", "retrieved_context_ids": ["x", "y", "z", "w"], "reference_context_ids": ["x"]},
        {"id": "b", "retrieved_context_ids": ["z", "x"], "reference_context_ids": ["x", "z"]},
    ]
    evaluation = ctxeval.evaluate(data, [mrr, top_two])
    assert evaluation.scores("top_two") == [0.5, 1.0]
    assert evaluation.scores("rr") == [1.0, 1.0]
    assert [top_two.score(Sample.from_dict(row)).score for row in data] == [0.5, 1.0]


@FAST
@given(
    reference=st.text(alphabet="abcde ", max_size=30),
    chunk=st.text(alphabet="abcde ", max_size=30),
    other=st.text(alphabet="abcde ", max_size=30),
    measure=st.sampled_from(MEASURES),
    threshold=st.floats(0, 1),
)
def test_the_cut_off_never_changes_a_verdict(
    reference: str, chunk: str, other: str, measure: str, threshold: float
) -> None:
    """``pair_matches`` rules pairs out with rapidfuzz's ``score_cutoff`` before computing
    them: its verdict is the threshold rule on the exact similarity, also for a threshold
    that is exactly some pair's similarity."""
    similarity = pair_similarity(measure)
    for cut in (threshold, similarity(reference, other), similarity(other, chunk)):
        matches = pair_matches(measure, cut)
        assert matches(reference, chunk) == policy.is_match(similarity(reference, chunk), cut)


class _OneSide(IDMatcher):
    """The ID matcher judged one side at a time through its ``match_batch``."""

    membership = False


id_or_graded = st.one_of(
    st.lists(st.sampled_from("abcdefg"), max_size=8),
    st.dictionaries(st.sampled_from("abcdef"), st.integers(0, 3)),
    st.none(),
)


@FAST
@given(
    rows=st.lists(
        st.fixed_dictionaries(
            {
                "retrieved_context_ids": st.lists(st.sampled_from("abcdefg"), max_size=8),
                "reference_context_ids": id_or_graded,
            }
        ),
        max_size=12,
    ),
    dedupe_reference=st.booleans(),
    dedupe_retrieved=st.booleans(),
)
def test_a_membership_matcher_judges_both_sides_as_its_match_batch_does(
    rows: list[dict[str, Any]], dedupe_reference: bool, dedupe_retrieved: bool
) -> None:
    """One pass of set lookups for both sides gives, side by side, the flags, the judged
    samples and the reference counts of judging each side through ``match_batch``."""
    samples = [Sample.from_dict(row) for row in rows]

    def parts(matcher: Any) -> dict[str, Any]:
        return {
            "reference": Items(
                field="reference_context_ids", what="reference IDs", dedupe=dedupe_reference
            ),
            "retrieved": Items(
                field="retrieved_context_ids", what="retrieved IDs", dedupe=dedupe_retrieved
            ),
            "matcher": matcher,
        }

    both = compose("both", formula=policy.Precision(), **parts(IDMatcher()))
    judged = both.judge_batch(samples, sides={"retrieved", "reference"})
    precision = compose("p", formula=policy.Precision(), **parts(_OneSide()))
    recall = compose("r", formula=policy.Recall(), **parts(_OneSide()))
    by_retrieved = precision.judge_batch(samples, whole=True)
    by_reference = recall.judge_batch(samples)
    assert judged is not None
    assert by_retrieved is not None
    assert by_reference is not None
    assert judged.where == by_retrieved.where == by_reference.where
    assert judged.sizes == by_retrieved.sizes == by_reference.sizes
    assert judged.flags("retrieved") == by_retrieved.flags("retrieved")
    assert judged.flags("reference") == by_reference.flags("reference")
    only = both.judge_batch(samples)  # the formula's side only
    assert only is not None
    assert only.reference is None
    assert only.flags("retrieved") == by_retrieved.flags("retrieved")
    with pytest.raises(ValueError, match="not judged"):
        only.flags("reference")


def test_id_precision_and_recall_are_judged_in_one_pass() -> None:
    names = ["id_based_context_precision", "id_based_context_recall", "id_mrr"]
    keys = {ctxeval.get_metric(name).judging_key() for name in names}
    assert len(keys) == 1
    with pytest.raises(ValueError, match="one side per batch"):
        compose(
            "p",
            formula=policy.Precision(),
            reference=Items(field="reference_context_ids", what="reference IDs"),
            retrieved=Items(field="retrieved_context_ids", what="retrieved IDs"),
            matcher=_OneSide(),
        ).judge_batch([], sides={"retrieved", "reference"})


@FAST
@given(
    flags=st.lists(st.lists(st.booleans(), max_size=4), max_size=30),
    sizes=st.data(),
)
def test_classes_of_a_judgement_give_back_each_samples_flags(
    flags: list[list[bool]], sizes: st.DataObject
) -> None:
    counts = sizes.draw(st.lists(st.integers(1, 3), min_size=len(flags), max_size=len(flags)))
    judged = BatchJudgement(list(range(len(flags))), counts, retrieved=flags)
    classes, kinds = judged.classes("retrieved")
    assert [kinds[c] for c in classes] == list(zip(flags, counts, strict=True))
    assert len(kinds) == len({(n, *f) for f, n in zip(flags, counts, strict=True)})
    assert judged.classes("retrieved") is judged.classes("retrieved")  # computed once


def test_reading_every_row_leaves_the_cycle_collector_as_it_was() -> None:
    rows = [{"retrieved_context_ids": ["a"], "reference_context_ids": ["a"]}] * 10
    evaluation = ctxeval.evaluate(rows, ["id_mrr", "id_based_context_recall"])
    assert gc.isenabled()
    assert [r.score for r in evaluation.results] == [1.0] * 20
    assert gc.isenabled()


@FAST
@given(
    references=st.lists(st.text(alphabet="abcde .", max_size=20), max_size=4),
    chunks=st.lists(st.text(alphabet="abcde .", max_size=20), max_size=4),
    measure=st.sampled_from(MEASURES),
    threshold=st.floats(0, 1),
    normalize=st.booleans(),
)
def test_similarity_judges_both_sides_as_it_judges_each(
    references: list[str], chunks: list[str], measure: str, threshold: float, normalize: bool
) -> None:
    options = {"measure": measure, "threshold": threshold, "normalize": normalize}
    recall = SimilarityMatcher(reference="items", **options)
    precision = SimilarityMatcher(reference="candidates", **options)
    assert recall.both_sides_key() == precision.both_sides_key()
    ((of_references, of_chunks),) = recall.match_both_batch([(references, chunks)])
    assert of_references == recall.match_batch([(references, chunks)])[0]
    assert of_chunks == precision.match_batch([(chunks, references)])[0]


def test_string_precision_and_recall_share_a_judgement_only_with_equal_options() -> None:
    def key(name: str, **options: Any) -> object:
        return ctxeval.get_metric(name, **options).judging_key()

    precision, recall = "non_llm_context_precision_with_reference", "non_llm_context_recall"
    assert key(precision) == key(recall)
    assert key(precision, threshold=0.7) == key(recall, threshold=0.7)
    assert key(precision, threshold=0.7) != key(recall)
    assert key(precision, measure="containment") != key(recall, measure="indel")


class _Lopsided(SimilarityMatcher):
    """A similarity matcher whose two-sided batch gives one flag too few."""

    def match_both_batch(self, pairs: Any) -> list[tuple[list[bool], list[bool]]]:
        return [(flags[:-1], other) for flags, other in super().match_both_batch(pairs)]


def test_a_two_sided_batch_of_the_wrong_size_falls_back_to_each_side(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sides = {
        "reference": Items(field="reference_contexts", what="reference contexts"),
        "retrieved": Items(field="retrieved_contexts", what="retrieved contexts"),
    }
    metrics = [
        compose("p", formula=policy.Precision(), matcher=_Lopsided(reference="items"), **sides),
        compose("r", formula=policy.Recall(), matcher=_Lopsided(), **sides),
    ]
    assert metrics[0].judging_key() == metrics[1].judging_key()
    data = [
        {"id": "a", "retrieved_contexts": ["paris", "rome"], "reference_contexts": ["paris"]},
        {"id": "b", "retrieved_contexts": ["oslo"], "reference_contexts": ["oslo", "bern"]},
    ]
    evaluation = ctxeval.evaluate(data, metrics)
    assert evaluation.scores("p") == [0.5, 1.0]
    assert evaluation.scores("r") == [1.0, 0.5]
