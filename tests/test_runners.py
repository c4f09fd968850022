"""The run plan, the runner SPI and the runners that ship: ``local`` and ``processes``.

Every runner's rows must be the rows of a ``local`` run, whatever the input (a JSONL file
the ``processes`` runner cuts by bytes, samples in memory, positional ids, blank lines, a BOM,
Unicode white space), and core keeps the journal, the order and the duplicate-id check
whatever runs the run.
"""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import anyio
import attrs
import pytest

import ctxeval
from ctxeval import MetricResult
from ctxeval._plugins.base import BaseMetric
from ctxeval.runners import (
    LocalRunner,
    ProcessesRunner,
    RowSink,
    Runner,
    RunPlan,
    get_runner,
    score_part,
)
from fakes.openai_server import FakeOpenAI
from llm_judge import Judge

IDS = ["id_based_context_precision", "id_ndcg_at_k", "id_bpref"]
TEXTS = ["non_llm_context_recall", "non_llm_context_precision_with_reference"]
RANKED = ["id_based_context_precision", "id_ndcg_at_k", "id_based_context_recall", "id_mrr"]
"""Metrics that all score ranked columns (a file of plain ID samples is read as columns)."""
SMALL = 2  # part_size: parts of 2 x 256 bytes, so a few hundred samples make many parts


def _sample(i: int, *, with_id: bool) -> dict[str, Any]:
    row: dict[str, Any] = {
        "retrieved_context_ids": [f"d{(i * 7 + k) % 13}" for k in range(5)],
        "reference_context_ids": [f"d{(i * 3 + k) % 11}" for k in range(3)],
        "retrieved_contexts": [f"text {i % 5} about {k}" for k in range(3)],
        "reference_contexts": [f"text {i % 3} about {k}" for k in range(2)],
    }
    if with_id:
        row["id"] = f"q{i}"
    return row


def _write(path: Path, lines: Iterable[str]) -> Path:
    path.write_text("".join(lines), encoding="utf-8")
    return path


def _jsonl(path: Path, n: int = 300) -> Path:
    """A JSONL file with and without ids, blank lines, a Unicode-blank line and a BOM."""
    lines = []
    for i in range(n):
        lines.append(json.dumps(_sample(i, with_id=i % 3 != 0), ensure_ascii=False) + "\n")
        if i % 50 == 7:
            lines.append("\n")
        if i % 70 == 11:
            lines.append("   \u3000 \r\n")  # blank as the reader decides it: no row, no position
        if i % 90 == 13:
            lines[-1] = "  " + lines[-1]  # an indented line is a row
    lines[0] = "\ufeff" + lines[0]
    return _write(path, lines)


def _rows(evaluation: ctxeval.Evaluation) -> list[dict[str, Any]]:
    return [row.to_dict() for row in evaluation.results]


@pytest.fixture(scope="module")
def processes() -> ProcessesRunner:
    return ProcessesRunner(workers=2, part_size=SMALL)


# --- the processes runner gives the local runner's rows -------------------------------------


def test_processes_rows_equal_local_rows_on_a_jsonl_file(
    tmp_path: Path, processes: ProcessesRunner
) -> None:
    path = _jsonl(tmp_path / "data.jsonl")
    local = ctxeval.evaluate(ctxeval.load_samples(path), IDS + TEXTS)
    spread = ctxeval.evaluate(ctxeval.load_samples(path), IDS + TEXTS, runner=processes)
    assert len(local.results) == 300 * 5
    assert _rows(spread) == _rows(local)
    assert {r.sample_id for r in local.results} >= {"0", "q1", "297"}  # positions count rows
    assert spread.summary() == local.summary()


def test_processes_rows_equal_local_rows_on_samples_in_memory(
    processes: ProcessesRunner,
) -> None:
    samples = [_sample(i, with_id=i % 2 == 0) for i in range(200)]
    local = ctxeval.evaluate(samples, IDS)
    assert _rows(ctxeval.evaluate(samples, IDS, runner=processes)) == _rows(local)
    assert _rows(ctxeval.evaluate(samples, IDS, runner="processes")) == _rows(local)


def test_a_bad_line_stops_both_runners_alike(tmp_path: Path, processes: ProcessesRunner) -> None:
    lines = [json.dumps(_sample(i, with_id=True)) + "\n" for i in range(120)]
    lines[90] = '{"id": "broken", "retrieved_context_ids": [1, \n'
    path = _write(tmp_path / "bad.jsonl", lines)

    def rows_then_error(runner: Any) -> tuple[list[dict[str, Any]], str]:
        got: list[dict[str, Any]] = []

        async def main() -> None:
            async with ctxeval.stream(ctxeval.load_samples(path), IDS, runner=runner) as rows:
                async for row in rows:
                    got.append(row.to_dict())

        with pytest.raises(ctxeval.DataError) as caught:
            anyio.run(main)
        return got, str(caught.value)

    local_rows, local_error = rows_then_error(None)
    spread_rows, spread_error = rows_then_error(processes)
    assert "bad.jsonl:91:" in local_error
    assert spread_error == local_error
    assert spread_rows == local_rows
    assert len(local_rows) == 90 * len(IDS)


def test_a_duplicate_id_in_two_parts_is_a_data_error(
    tmp_path: Path, processes: ProcessesRunner
) -> None:
    lines = [json.dumps(_sample(i, with_id=True)) + "\n" for i in range(100)]
    lines[80] = json.dumps({**_sample(80, with_id=False), "id": "q3"}) + "\n"
    path = _write(tmp_path / "twice.jsonl", lines)
    with pytest.raises(ctxeval.DataError, match="two samples have the id 'q3'"):
        ctxeval.evaluate(ctxeval.load_samples(path), IDS, runner=processes)


def test_a_journaled_processes_run_resumes_a_local_one(
    tmp_path: Path, processes: ProcessesRunner
) -> None:
    path = _jsonl(tmp_path / "data.jsonl", n=200)
    journal = tmp_path / "run" / "journal.jsonl"
    whole = ctxeval.evaluate(ctxeval.load_samples(path), IDS)
    half = list(ctxeval.load_samples(path))[:120]
    ctxeval.evaluate(half, IDS, journal=journal)  # an interrupted run: 120 samples done
    resumed = ctxeval.evaluate(
        ctxeval.load_samples(path), IDS, journal=journal, resume=True, runner=processes
    )
    assert _rows(resumed) == _rows(whole)
    lines = journal.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 1  # the header: deterministic rows are scored again, not journaled
    again = ctxeval.evaluate(
        ctxeval.load_samples(path), IDS, journal=journal, resume=True, runner=processes
    )
    assert _rows(again) == _rows(whole)


def test_llm_rows_are_the_same_on_processes(processes: ProcessesRunner) -> None:
    from ctxeval_llm import LLMConfig

    contexts = ["Paris is in France.", "Bananas are yellow.", "The Eiffel Tower is in Paris."]
    samples = [
        {
            "id": f"s{i}",
            "user_input": "Where is the Eiffel Tower?",
            "reference": "The Eiffel Tower is in Paris.",
            "retrieved_contexts": contexts[i % 3 :] + contexts[: i % 3],
        }
        for i in range(12)
    ]
    judge = Judge(verdicts={contexts[0]: 1, contexts[1]: 0, contexts[2]: 1})
    with FakeOpenAI(judge) as server:
        llm = LLMConfig(model="openai/fake-judge", api_base=server.url, api_key="sk-test")
        local = ctxeval.evaluate(samples, ["context_precision"], llm=llm, max_concurrency=4)
        spread = ctxeval.evaluate(
            samples, ["context_precision"], llm=llm, max_concurrency=4, runner=processes
        )
    assert [r.score for r in spread.results] == [r.score for r in local.results]
    assert all(r.status is ctxeval.Status.OK for r in spread.results)
    assert [r.details for r in spread.results] == [r.details for r in local.results]


# --- the plan -----------------------------------------------------------------------------


def test_a_plan_resolves_once_and_pickles_for_workers(tmp_path: Path) -> None:
    plan = RunPlan.build(["@ids"], journal=tmp_path / "j.jsonl", max_concurrency=3)
    assert "nDCG@10" in plan.names
    assert len(plan.metrics) > 5
    sent = pickle.loads(pickle.dumps(plan.for_workers()))
    assert sent.names == plan.names
    assert sent.settings.journal is None
    assert sent.settings.on_progress is None
    assert sent.settings.max_concurrency == 3


def test_a_worker_sends_lines_back_not_the_samples_it_parsed(tmp_path: Path) -> None:
    """The samples a worker parsed stay in the worker: unpickling them cost the driving
    process more than a whole local run (about 50x the block's lines and scores)."""
    from ctxeval._results.columns import Lines, RowBlock
    from ctxeval._run.processes import _score_part

    path = _jsonl(tmp_path / "data.jsonl", n=40)
    blob = path.read_bytes()
    plan = RunPlan.build(IDS).for_workers()
    parts, _, error = _score_part(plan, 0, ("lines", (str(path), 1, blob)), False)
    assert error is None
    assert parts
    assert all(isinstance(rows, RowBlock) for rows in parts)
    for rows in parts:
        assert rows.parsed is None
        assert isinstance(rows.sources, Lines)
    back = pickle.loads(pickle.dumps(parts))
    local = ctxeval.evaluate(ctxeval.load_samples(path), IDS)
    assert [r.to_dict() for rows in back for r in rows] == _rows(local)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"metrics": ["id_mrr", "id_mrr"]}, "more than once"),
        ({"metrics": ["id_mrr"], "max_concurrency": 0}, "max_concurrency"),
        ({"metrics": ["no_such_metric"]}, "no_such_metric"),
        ({"metrics": ["id_mrr"], "resume": True}, "journal"),
    ],
)
def test_a_bad_plan_fails_before_any_row(arguments: dict[str, Any], message: str) -> None:
    with pytest.raises(ctxeval.ConfigError, match=message):
        RunPlan.build(**arguments)


# --- the SPI: a runner of the test's own, and the sink --------------------------------------


class Backwards:
    """A runner that scores its parts and hands them to the sink last part first."""

    name = "backwards"

    def __init__(self, part_size: int = 7) -> None:
        self.part_size = part_size

    async def run(self, plan: RunPlan, samples: Iterable[Any], sink: RowSink) -> None:
        items = list(samples)
        parts = []
        for first in range(0, len(items), self.part_size):
            chunk = items[first : first + self.part_size]
            parts.append(await score_part(plan, chunk, first_index=first))
        for number in reversed(range(len(parts))):
            await parts[number].put_into(sink, number)


@attrs.frozen(kw_only=True)
class Judged(BaseMetric):
    """An async metric (as an LLM judge is): its rows are journaled."""

    registry_name = "judged"
    requires = ("retrieved_context_ids", "reference_context_ids")

    async def ascore(self, sample: ctxeval.Sample, ctx: ctxeval.RunContext) -> MetricResult:
        return ctxeval.get_metric("id_mrr").score(sample)


JOURNALED = [*IDS, Judged()]


@pytest.mark.anyio
async def test_the_sink_puts_parts_back_in_order(tmp_path: Path) -> None:
    samples = [_sample(i, with_id=i % 4 != 0) for i in range(60)]
    local = await ctxeval.aevaluate(samples, JOURNALED)
    journal = tmp_path / "j.jsonl"
    backwards = await ctxeval.aevaluate(samples, JOURNALED, runner=Backwards(), journal=journal)
    assert isinstance(Backwards(), Runner)
    assert _rows(backwards) == _rows(local)
    written = journal.read_text(encoding="utf-8").splitlines()[1:]
    assert len(written) == 60  # the judged rows (deterministic ones are scored again)
    assert {json.loads(line)["metric"] for line in written} == {"judged"}
    assert all(json.loads(line)["sample_digest"] for line in written)  # resumable rows


class BadInTheMiddle(Backwards):
    """Scores three parts; the middle one holds a malformed sample. Hands part 2 first."""

    name = "bad-in-the-middle"

    async def run(self, plan: RunPlan, samples: Iterable[Any], sink: RowSink) -> None:
        items = list(samples)
        parts = [
            await score_part(plan, items[first : first + 10], first_index=first)
            for first in (0, 10, 20)
        ]
        assert parts[1].error is not None
        assert len(parts[1].rows) == 4 * len(plan.metrics)  # the samples before the bad one
        await parts[2].put_into(sink, 2)
        await parts[0].put_into(sink, 0)
        await parts[1].put_into(sink, 1)  # the last part passed on; raises its error


@pytest.mark.anyio
async def test_rows_after_a_failed_part_are_journaled_not_passed_on(tmp_path: Path) -> None:
    samples: list[Any] = [_sample(i, with_id=True) for i in range(30)]
    samples[14] = "not a sample"
    journal = tmp_path / "j.jsonl"
    read: list[str | None] = []

    async def run() -> None:
        async with ctxeval.stream(
            samples, JOURNALED, runner=BadInTheMiddle(), journal=journal
        ) as rows:
            async for row in rows:
                read.append(row.sample_id)

    with pytest.raises(ctxeval.DataError, match="sample"):
        await run()
    assert read[:: len(JOURNALED)] == [f"q{i}" for i in range(14)]  # as a local run gives them
    journaled = {json.loads(line)["sample_id"] for line in journal.read_text().splitlines()[1:]}
    assert journaled == {f"q{i}" for i in [*range(14), *range(20, 30)]}  # a resume reuses them


class Twice(Backwards):
    name = "twice"

    async def run(self, plan: RunPlan, samples: Iterable[Any], sink: RowSink) -> None:
        scored = await score_part(plan, list(samples))
        await sink.put(0, scored.rows, scored.digests)
        await sink.put(0, scored.rows, scored.digests)


class Mismatched(Backwards):
    name = "mismatched"

    async def run(self, plan: RunPlan, samples: Iterable[Any], sink: RowSink) -> None:
        scored = await score_part(plan, list(samples))
        await sink.put(0, scored.rows, ["x"])


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("runner", "error", "message"),
    [
        (Twice(), ctxeval.RunnerError, "part 0 of the rows twice"),
        (Mismatched(), ctxeval.ConfigError, "digest"),
    ],
)
async def test_the_sink_refuses_what_breaks_its_contract(
    runner: Any, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        await ctxeval.aevaluate([_sample(i, with_id=True) for i in range(5)], IDS, runner=runner)


# --- naming a runner -----------------------------------------------------------------------


def test_runners_are_plugins_of_their_own_group() -> None:
    infos = {(p.group, p.name): p for p in ctxeval.plugins()}
    for name in ("local", "processes", "ray"):
        assert ("ctxeval.runners", name) in infos
    assert infos["ctxeval.runners", "processes"].status == "ok"
    assert isinstance(get_runner("local"), LocalRunner)
    assert get_runner("processes", workers=3).workers == 3  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: get_runner("procesess"), ctxeval.UnknownNameError, "processes"),
        (lambda: get_runner("processes", workers=0), ctxeval.ConfigError, "workers"),
        (lambda: get_runner("processes", cores=2), ctxeval.ConfigError, "workers"),
        (lambda: get_runner(42), ctxeval.ConfigError, "runner must be"),  # type: ignore[arg-type]
        (lambda: ProcessesRunner(part_size=True), ctxeval.ConfigError, "part_size"),
    ],
)
def test_a_wrong_runner_is_a_clear_error(call: Any, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        call()


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ctxeval", *args], capture_output=True, text=True, timeout=300
    )


def test_the_command_line_runs_on_processes(tmp_path: Path) -> None:
    path = _jsonl(tmp_path / "data.jsonl", n=150)
    common = ["evaluate", str(path), "-m", "@ids", "-q"]
    local = _cli(*common, "--out", str(tmp_path / "local"))
    spread = _cli(*common, "--out", str(tmp_path / "spread"), "--runner", "processes",
                  "--workers", "2")  # fmt: skip
    assert local.returncode == 0, local.stderr
    assert spread.returncode == 0, spread.stderr
    results = [(tmp_path / d / "results.jsonl").read_bytes() for d in ("local", "spread")]
    assert results[0] == results[1]
    summaries = [
        json.loads((tmp_path / d / "summary.json").read_text()) for d in ("local", "spread")
    ]
    assert summaries[0]["metrics"] == summaries[1]["metrics"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--workers", "2"], "--workers goes with --runner"),
        (["--runner", "procesess"], "processes"),
        (["--runner", "processes", "--workers", "0"], "--workers"),
    ],
)
def test_the_command_line_refuses_a_wrong_runner(
    tmp_path: Path, args: Sequence[str], message: str
) -> None:
    path = _jsonl(tmp_path / "data.jsonl", n=5)
    done = _cli("evaluate", str(path), "-m", "id_mrr", "-q", *args)
    assert done.returncode == 2
    assert message in done.stderr


def test_error_rows_are_read_from_columns_without_building_the_others() -> None:
    samples = [_sample(i, with_id=True) for i in range(3000)]
    for i in (5, 2500):
        del samples[i]["reference_context_ids"]  # lacks a field: an error row per ID metric
    first = ctxeval.evaluate(samples, IDS + TEXTS)
    errors = first.errors()  # before any row is built
    assert [(r.sample_id, r.metric) for r in errors] == [
        (f"q{i}", m) for i in (5, 2500) for m in [first.metrics[0], *first.metrics[1:3]]
    ]
    assert errors == [
        r for r in ctxeval.evaluate(samples, IDS + TEXTS).results if r.status.value == "error"
    ]
    assert first.judged_rows(first.metrics[0]) == []  # no judge made a fast-path row


def test_a_runner_option_given_to_evaluate_says_where_it_goes() -> None:
    with pytest.raises(ctxeval.ConfigError, match=r"option of the runner.*get_runner"):
        ctxeval.evaluate([_sample(0, with_id=True)], IDS, runner="processes", workers=2)


# --- a part of plain ID lines is read as ranked columns in the worker (#58) -----------------


def _plain_lines(n: int, first: int = 0) -> list[bytes]:
    """Plain ID samples (ids and the two ID lists only), one in three without an id, a blank
    line now and then: what a worker reads as ranked columns."""
    lines = []
    for i in range(first, first + n):
        row: dict[str, Any] = {
            "retrieved_context_ids": [f"d{(i * 7 + k) % 23}" for k in range(8)],
            "reference_context_ids": [f"d{(i * 5 + k) % 19}" for k in range(i % 4)],
        }
        if i % 3:
            row["id"] = f"q{i}"
        lines.append(json.dumps(row).encode() + b"\n")
        if i % 500 == 7:
            lines.append(b"\n")
    return lines


def test_a_worker_reads_a_part_of_plain_id_lines_as_columns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its rows are the sample path's, row by row (positions of samples without an id
    counted from the part's first sample), and its blocks go back as lines."""
    from ctxeval._data import jsonl_columns
    from ctxeval._results.columns import Lines
    from ctxeval._run import processes as module

    lines = _plain_lines(4000, first=1000)
    blob = b"".join(lines)
    assert len(blob) >= module.COLUMNS_FROM // 8  # (large enough to be read as columns)
    plan = RunPlan.build(RANKED).for_workers()
    payload = ("lines", ("data.jsonl", 1201, blob))
    read: list[int] = []
    original = jsonl_columns.read_plain_lines

    def spied(*args: Any, **kwargs: Any) -> Any:
        source = original(*args, **kwargs)
        read.append(len(source) if source is not None else -1)
        return source

    monkeypatch.setattr(jsonl_columns, "read_plain_lines", spied)
    parts, _, error = module._score_part(plan, 1000, payload, False)
    assert error is None
    assert read == [4000]
    assert all(isinstance(rows.sources, Lines) for rows in parts)
    monkeypatch.setattr(module, "_plain_part", lambda *args: None)  # the sample path
    expected, _, _ = module._score_part(plan, 1000, payload, False)
    back = pickle.loads(pickle.dumps(parts))
    got = [r.to_dict() for rows in back for r in rows]
    assert got == [r.to_dict() for rows in expected for r in rows]
    assert {"1002", "q1001", "4998"} <= {row["sample_id"] for row in got}


def test_processes_rows_equal_local_rows_on_a_file_of_plain_ids(tmp_path: Path) -> None:
    path = tmp_path / "plain.jsonl"
    path.write_bytes(b"".join(_plain_lines(9000)))
    local = ctxeval.evaluate(ctxeval.load_samples(path), RANKED)
    spread = ctxeval.evaluate(ctxeval.load_samples(path), RANKED, runner=ProcessesRunner(workers=2))
    assert _rows(spread) == _rows(local)
    assert (
        spread.to_jsonl(tmp_path / "a.jsonl").read_bytes()
        == local.to_jsonl(tmp_path / "b.jsonl").read_bytes()
    )


def test_processes_read_a_file_with_a_column_map_as_mapped(
    tmp_path: Path, processes: ProcessesRunner
) -> None:
    """The workers read lines as they are: a stream that renames its columns goes to them as
    samples (its rows were once all errors: the fields missing)."""
    path = tmp_path / "renamed.jsonl"
    rows = ({"id": f"q{i}", "got": [f"d{i % 7}", "d1"], "want": ["d1"]} for i in range(400))
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    renamed = {"retrieved_context_ids": "got", "reference_context_ids": "want"}
    local = ctxeval.evaluate(ctxeval.load_samples(path, column_map=renamed), ["id_mrr"])
    spread = ctxeval.evaluate(
        ctxeval.load_samples(path, column_map=renamed), ["id_mrr"], runner=processes
    )
    assert {r.status.value for r in local.results} == {"ok"}
    assert _rows(spread) == _rows(local)
