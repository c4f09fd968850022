"""Journal and resume: an interrupted run, resumed, ends with the rows of an uninterrupted one."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import anyio
import attrs
import pytest

import ctxeval
from ctxeval import MetricResult, Sample, Status
from ctxeval._plugins.base import BaseMetric

pytestmark = pytest.mark.anyio


@attrs.frozen(kw_only=True)
class Counting(BaseMetric):
    """An async metric that counts its calls (a stand-in for an LLM judge)."""

    registry_name = "counting"
    requires = ("reference",)
    calls: list[str] = attrs.field(factory=list, eq=False, repr=False)
    fail_on: frozenset[str] = attrs.field(default=frozenset(), eq=False, repr=False)
    on_call: Any = attrs.field(default=None, eq=False, repr=False)

    async def ascore(self, sample: Sample, ctx: ctxeval.RunContext) -> MetricResult:
        self.calls.append(sample.id or "")
        if self.on_call is not None:
            self.on_call(len(self.calls))
        await anyio.sleep(0.001 * (hash(sample.id) % 5))
        if sample.id in self.fail_on:
            raise RuntimeError("flaky judge")
        return MetricResult.ok(int(sample.reference or 0) / 100)


SAMPLES = [
    {
        "id": f"s{i}",
        "reference": str(i),
        "retrieved_context_ids": ["a", str(i % 3)],
        "reference_context_ids": ["0"],
    }
    for i in range(60)
]


def metrics(counting: Counting) -> list[ctxeval.Metric | str]:
    return [counting, "id_mrr", ctxeval.get_metric("id_recall_at_k", k=2)]


async def interrupted_run(journal: Path, stop_after: int) -> None:
    """Cancel the run (as Ctrl-C or a crash would) at the ``stop_after``-th judge call."""
    with anyio.CancelScope() as scope:

        def on_call(calls: int) -> None:
            if calls >= stop_after:
                scope.cancel()

        counting = Counting(on_call=on_call)
        async with ctxeval.stream(
            SAMPLES, metrics(counting), journal=journal, samples_in_flight=8
        ) as rows:
            async for _ in rows:
                await anyio.sleep(0)
    assert scope.cancelled_caught


@pytest.mark.parametrize("stop_after", [1, 9, 23, 47, 59])
async def test_resume_after_interruption_equals_an_uninterrupted_run(
    tmp_path: Path, stop_after: int
) -> None:
    expected = await ctxeval.aevaluate(SAMPLES, metrics(Counting()))
    journal = tmp_path / "journal.jsonl"
    await interrupted_run(journal, stop_after)
    lines = journal.read_text().splitlines()[1:]
    # the journal keeps the judge's rows only: the deterministic ones are scored again
    assert len(lines) < len(SAMPLES)
    assert all(json.loads(line)["metric"] == "counting" for line in lines)
    judged_before = {json.loads(line)["sample_id"] for line in lines}

    counting = Counting()
    resumed = await ctxeval.aevaluate(SAMPLES, metrics(counting), journal=journal, resume=True)
    assert resumed.results == expected.results
    # the judge ran again only for the samples whose row had not been journaled
    assert sorted(counting.calls) == sorted({s["id"] for s in SAMPLES} - judged_before)
    assert len(journal.read_text().splitlines()) - 1 == len(SAMPLES)


async def test_error_rows_are_retried_on_resume(tmp_path: Path) -> None:
    journal = tmp_path / "journal.jsonl"
    first = await ctxeval.aevaluate(
        SAMPLES[:5], [Counting(fail_on=frozenset({"s1", "s3"}))], journal=journal
    )
    assert [r.status for r in first.results].count(Status.ERROR) == 2
    counting = Counting()
    second = await ctxeval.aevaluate(SAMPLES[:5], [counting], journal=journal, resume=True)
    assert second.ok
    assert sorted(counting.calls) == ["s1", "s3"]


async def test_changed_options_are_recomputed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    journal = tmp_path / "journal.jsonl"
    metric = ctxeval.get_metric("id_recall_at_k", k=2, name="recall")
    await ctxeval.aevaluate(SAMPLES[:3], [metric], journal=journal)
    changed = ctxeval.get_metric("id_recall_at_k", k=1, name="recall")
    again = await ctxeval.aevaluate(SAMPLES[:3], [changed], journal=journal, resume=True)
    assert all(r.details["k"] == 1 for r in again.results)
    assert "the setup of recall changed" in caplog.text


async def test_a_torn_last_line_is_ignored(tmp_path: Path) -> None:
    journal = tmp_path / "journal.jsonl"
    await ctxeval.aevaluate(SAMPLES[:4], [Counting()], journal=journal)
    text = journal.read_text()
    journal.write_text(text[: len(text) - 20])  # the process died mid-line
    counting = Counting()
    counting_rows = await ctxeval.aevaluate(SAMPLES[:4], [counting], journal=journal, resume=True)
    assert len(counting_rows.results) == 4
    assert counting_rows.ok
    assert len(counting.calls) == 1  # the torn row only


async def test_deterministic_rows_are_not_journaled(tmp_path: Path) -> None:
    """The journal keeps what is costly to redo: a deterministic metric's rows are scored
    again on resume (the same rows), never written twice."""
    journal = tmp_path / "journal.jsonl"
    first = await ctxeval.aevaluate(SAMPLES, ["id_mrr", "id_based_context_recall"], journal=journal)
    assert len(journal.read_text().splitlines()) == 1  # the header
    again = await ctxeval.aevaluate(
        SAMPLES, ["id_mrr", "id_based_context_recall"], journal=journal, resume=True
    )
    assert again.results == first.results


def test_journal_is_private_and_not_a_journal_is_refused(tmp_path: Path) -> None:
    journal = tmp_path / "run" / "journal.jsonl"
    ctxeval.evaluate(SAMPLES[:2], ["id_mrr"], journal=journal)
    assert stat.S_IMODE(os.stat(journal).st_mode) == 0o600
    header = json.loads(journal.read_text().splitlines()[0])
    assert header["ctxeval_journal"] == 2
    assert set(header["metrics"]) == {"id_mrr"}
    other = tmp_path / "other.jsonl"
    other.write_text('{"hello": 1}\n')
    with pytest.raises(ctxeval.DataError, match="not a ctxeval journal"):
        ctxeval.evaluate(SAMPLES[:2], ["id_mrr"], journal=other, resume=True)
    with pytest.raises(ctxeval.ConfigError, match="resume=True needs journal="):
        ctxeval.evaluate(SAMPLES[:2], ["id_mrr"], resume=True)


async def test_the_interruption_says_how_to_resume(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    await interrupted_run(tmp_path / "journal.jsonl", stop_after=5)
    assert "run again with resume=True" in caplog.text


async def test_progress_events() -> None:
    events: list[ctxeval.Progress] = []
    await ctxeval.aevaluate(SAMPLES, metrics(Counting()), on_progress=events.append)
    last = events[-1]
    assert last.finished
    assert last.done == last.total == 180
    assert last.errors == 0
    assert last.rate > 0
    assert last.eta == 0.0


async def test_rows_stream_before_the_run_ends() -> None:
    """The first rows arrive while later samples are still being scored: the last sample is
    held until the reader has the nine rows before it (a run that gave no row before its end
    would hold it forever: the bound below fails that run, it is never reached otherwise)."""
    release = anyio.Event()

    @attrs.frozen(kw_only=True)
    class HeldLast(BaseMetric):
        registry_name = "held_last"
        release: anyio.Event = attrs.field(eq=False)

        async def ascore(self, sample: Sample, ctx: ctxeval.RunContext) -> MetricResult:
            if sample.id == "s9":
                await self.release.wait()
            return MetricResult.ok(1.0)

    seen = []
    metric = HeldLast(release=release)
    with anyio.fail_after(120):
        async with ctxeval.stream([{"id": f"s{i}"} for i in range(10)], [metric]) as rows:
            async for row in rows:
                seen.append(row.sample_id)
                if len(seen) == 9:
                    assert seen == [f"s{i}" for i in range(9)]  # while s9 is still scored
                    release.set()
    assert seen == [f"s{i}" for i in range(10)]


async def test_memory_stays_bounded_behind_a_slow_reader() -> None:
    """Samples are read from the input only as fast as rows leave: at most about
    ``samples_in_flight`` samples (plus one batch of rows) are held at any time."""
    read = 0

    def source():  # a large input read lazily
        nonlocal read
        for i in range(20_000):
            read += 1
            yield {"id": str(i), "reference": "1"}

    consumed = 0
    ahead = 0
    async with ctxeval.stream(source(), [Counting()], samples_in_flight=32) as rows:
        async for _ in rows:
            consumed += 1
            ahead = max(ahead, read - consumed)
            if consumed % 100 == 0:
                await anyio.sleep(0.001)  # a slow reader
            if consumed == 3000:
                break
    assert ahead <= 32 * 2 + 256, ahead
    assert read < 3000 + 32 * 2 + 256


async def test_a_sample_changed_under_its_id_is_scored_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    journal = tmp_path / "journal.jsonl"
    first = await ctxeval.aevaluate(SAMPLES[:4], [Counting(), "id_mrr"], journal=journal)
    edited = [dict(s) for s in SAMPLES[:4]]
    edited[1]["retrieved_context_ids"] = list(reversed(edited[1]["retrieved_context_ids"]))
    edited[2]["metadata"] = {"note": "edited"}  # any field counts
    counting = Counting()
    again = await ctxeval.aevaluate(edited, [counting, "id_mrr"], journal=journal, resume=True)
    fresh = await ctxeval.aevaluate(edited, [Counting(), "id_mrr"])
    assert sorted(counting.calls) == ["s1", "s2"]
    assert [r.score for r in again.results] == [r.score for r in fresh.results]
    assert [r.usage for r in again.results] == [r.usage for r in fresh.results]
    assert "2 row(s) of the journal were scored again" in caplog.text
    assert first.results[0] == again.results[0]


def test_the_judge_and_the_prompt_versions_are_in_the_fingerprint() -> None:
    from ctxeval._run.journal import fingerprint
    from ctxeval_llm import LLMConfig

    metric = ctxeval.get_metric("context_precision")
    judge_a = LLMConfig(model="openai/judge-a", api_base="http://a/v1")
    judge_b = LLMConfig(model="openai/judge-b", api_base="http://a/v1")
    other_endpoint = LLMConfig(model="openai/judge-a", api_base="http://b/v1")
    prints = {fingerprint(metric, llm) for llm in (judge_a, judge_b, other_endpoint)}
    assert len(prints) == 3
    assert fingerprint(metric, judge_a) == fingerprint(metric, LLMConfig(
        model="openai/judge-a", api_base="http://a/v1", api_key="sk-never-in-it"))  # fmt: skip
    batched = ctxeval.get_metric("context_precision", batch=True)  # another prompt
    assert fingerprint(batched, judge_a) != fingerprint(metric, judge_a)
    own = ctxeval.get_metric("context_precision", llm="openai/judge-c")
    assert fingerprint(own, judge_a) == fingerprint(own, judge_b)  # its own judge counts
    ids = ctxeval.get_metric("id_mrr")
    assert fingerprint(ids, judge_a) == fingerprint(ids, judge_b)  # no judge at all
