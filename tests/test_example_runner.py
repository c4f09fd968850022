"""The third-party example runner (examples/ctxeval-example-runner), written against the public
runner SPI alone, installed as a real distribution: its rows are a local run's rows, and core
keeps the journal, the resume, people's labels and the duplicate-id check whatever runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import attrs
import pytest

import ctxeval
from ctxeval import DataError, Labels, MetricResult, Sample
from ctxeval.plugin import BaseMetric
from examples_site import install_example
from fakes.openai_server import FakeOpenAI
from llm_judge import Judge

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "ctxeval-example-runner"
METRICS = ["id_based_context_recall", "id_mrr", "non_llm_context_recall"]
N = 2000


def samples(n: int = N, *, ids: bool = True) -> list[dict[str, Any]]:
    made = []
    for i in range(n):
        sample: dict[str, Any] = {
            "reference": f"Paris is the capital of France, said report {i % 13}.",
            "retrieved_contexts": [f"report {i % 7} on France", f"Paris, {i % 5}"],
            "retrieved_context_ids": [str(i % 5), "x", str(i % 11)],
            "reference_context_ids": [str(i % 3), str(i % 4)],
        }
        if ids:
            sample["id"] = f"q{i}"
        made.append(sample)
    return made


def dicts(ev: ctxeval.Evaluation | list[MetricResult]) -> list[dict[str, Any]]:
    rows = ev.results if isinstance(ev, ctxeval.Evaluation) else ev
    return [row.to_dict() for row in rows]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """pip-install the example into a private target folder (the test environment is untouched),
    importable by this process while the module's tests run."""
    target = install_example(EXAMPLE, tmp_path_factory.mktemp("example-runner-site"))
    sys.path.insert(0, str(target))
    try:
        yield target
    finally:
        sys.path.remove(str(target))
        sys.modules.pop("ctxeval_example_runner", None)


@pytest.fixture
def threads(installed: Path) -> Any:
    from ctxeval_example_runner import ThreadsRunner

    return ThreadsRunner


def _env(installed: Path) -> dict[str, str]:
    tests = Path(__file__).resolve().parent
    path = os.pathsep.join([str(installed), str(tests), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path, "COLUMNS": "200"}


DISCOVERY = r"""
import json, ctxeval
from ctxeval.runners import get_runner
info = [p for p in ctxeval.plugins() if p.group == "ctxeval.runners" and p.name == "threads"]
samples = [{"id": f"s{i}", "retrieved_context_ids": [str(i % 3), "b"],
            "reference_context_ids": ["1"]} for i in range(50)]
by_name = ctxeval.evaluate(samples, ["id_mrr"], runner="threads")
threads = ctxeval.evaluate(
    samples, ["id_mrr"], runner=get_runner("threads", part_size=7, workers=3))
local = ctxeval.evaluate(samples, ["id_mrr"])
try:
    get_runner("threads", workers=0)
    refused = None
except ctxeval.ConfigError as exc:
    refused = str(exc)
print(json.dumps({
    "info": [(p.status, p.distribution) for p in info],
    "same": [r.to_dict() for r in threads.results] == [r.to_dict() for r in local.results]
            == [r.to_dict() for r in by_name.results],
    "refused": refused,
}))
"""


def test_the_runner_is_discovered_by_its_entry_point_and_takes_options(installed: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", DISCOVERY],
        capture_output=True,
        text=True,
        env=_env(installed),
        check=True,
        timeout=120,
    )
    result = json.loads(out.stdout.splitlines()[-1])
    assert result["info"] == [["ok", "ctxeval-example-runner"]]
    assert result["same"] is True
    assert "workers must be a whole number of at least 1, got 0" in result["refused"]


def test_the_command_line_picks_the_runner_by_name(installed: Path, tmp_path: Path) -> None:
    env = _env(installed)
    helped = subprocess.run(
        [sys.executable, "-m", "ctxeval", "evaluate", "--help"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    if "--runner" not in helped.stdout:
        pytest.skip("ctxeval evaluate has no --runner option yet")
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(s) + "\n" for s in samples(300)))
    out = tmp_path / "out"
    base = [sys.executable, "-m", "ctxeval", "evaluate", str(data), "-q", "-m", "id_mrr"]
    for name, extra in (("local", []), ("threads", ["--runner", "threads", "--workers", "3"])):
        done = subprocess.run(
            [*base, *extra, "--out", str(out / name)],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
    local = (out / "local" / "results.jsonl").read_text()
    assert (out / "threads" / "results.jsonl").read_text() == local


@pytest.mark.parametrize("ids", [True, False], ids=["with-ids", "positional-ids"])
def test_rows_are_those_of_the_local_runner(threads: Any, ids: bool) -> None:
    data = samples(ids=ids)
    local = ctxeval.evaluate(data, METRICS)
    threaded = ctxeval.evaluate(data, METRICS, runner=threads(workers=4, part_size=137))
    assert len(threaded.results) == N * len(METRICS)
    assert dicts(threaded) == dicts(local)
    if not ids:  # positional ids count from the start of the whole input, not of the part
        assert threaded.results[-1].sample_id == local.results[-1].sample_id != "0"


def test_parts_are_handed_out_of_order_and_core_orders_them(threads: Any) -> None:
    """A runner's own sink stand-in sees every part once; the later parts of a slow first part
    arrive first, and core's sink passes the rows on in input order all the same. The first
    part is held (not slept: a busy machine could outlast a sleep) until the others are in."""
    from ctxeval.runners import RunPlan

    @attrs.frozen
    class SlowFirst(BaseMetric):
        registry_name = "slow_first"
        ready: Callable[[], bool] = attrs.field(eq=False)
        """q0 is held until this is true (checked from q0's thread: read-only)."""
        scored: list[int] = attrs.field(eq=False, factory=list)
        """The positions of the samples of the other parts scored (appended from their
        threads)."""

        async def ascore(self, sample: Sample, ctx: ctxeval.RunContext) -> MetricResult:
            position = int((sample.id or "q0")[1:])
            if position == 0:
                with anyio.fail_after(120):  # (the condition is never that late)
                    while not self.ready():
                        await anyio.sleep(0.005)
            elif position >= 10:
                self.scored.append(position)
            return MetricResult.ok(1.0)

    class Recorder:
        def __init__(self) -> None:
            self.parts: list[int] = []

        async def put(
            self, part: int, rows: Any, digests: Any = None, *, last: bool = False
        ) -> None:
            self.parts.append(part)

    recorder = Recorder()
    plan = RunPlan.build([SlowFirst(ready=lambda: len(recorder.parts) == 3)])
    anyio.run(threads(workers=4, part_size=10).run, plan, samples(40), recorder)
    assert sorted(recorder.parts) == [0, 1, 2, 3]
    assert recorder.parts[-1] == 0
    # core's own sink: q0 is held until the 30 samples of the other parts are scored
    scored: list[int] = []
    metric = SlowFirst(ready=lambda: len(scored) == 30, scored=scored)
    ev = ctxeval.evaluate(samples(40), [metric], runner=threads(workers=4, part_size=10))
    assert [row.sample_id for row in ev.results] == [f"q{i}" for i in range(40)]


@attrs.frozen(kw_only=True)
class Counting(BaseMetric):
    """A metric that counts the samples it scores (to see what a resume scores again)."""

    registry_name = "counting"
    calls: list[str] = attrs.field(factory=list, eq=False, repr=False)

    async def ascore(self, sample: Sample, ctx: ctxeval.RunContext) -> MetricResult:
        self.calls.append(sample.id or "")
        return MetricResult.ok(len(sample.reference or "") / 100)


@pytest.mark.anyio
async def test_a_run_cut_short_resumes_with_only_the_missing_samples(
    threads: Any, tmp_path: Path
) -> None:
    """A malformed sample in part 2 of a strict run stops it: the reader gets the rows of
    every sample before it (parts 0 and 1, and part 2 up to the bad sample, as a local run
    gives them), then the error; the journal holds every row handed over (those, and any
    later part already being scored). Resumed on the fixed input, the run scores only the
    samples not in the journal and ends with the rows of an uninterrupted local run."""
    journal = tmp_path / "journal.jsonl"
    good = samples()
    broken: list[Any] = list(good)
    broken[1234] = 42  # not a sample: a strict run stops on it
    runner = threads(workers=4, part_size=500)

    read: list[MetricResult] = []

    async def first_run() -> None:
        async with ctxeval.stream(
            broken, [*METRICS, Counting()], journal=journal, runner=runner
        ) as rows:
            async for row in rows:
                read.append(row)

    with pytest.raises(DataError, match="a sample must be an object"):
        await first_run()
    assert [r.sample_id for r in read[:: len(METRICS) + 1]] == [f"q{i}" for i in range(1234)]

    counting = Counting()
    events: list[ctxeval.Progress] = []
    resumed = await ctxeval.aevaluate(
        good,
        [*METRICS, counting],
        journal=journal,
        resume=True,
        runner=runner,
        on_progress=events.append,
    )
    expected = await ctxeval.aevaluate(good, [*METRICS, Counting()])
    assert dicts(resumed) == dicts(expected)
    assert events[-1].finished
    assert events[-1].done == N * (len(METRICS) + 1)
    kept = N - len(counting.calls)
    assert kept in (1234, 1734)  # up to the bad sample, and part 3 if it had started before
    rescored = set(range(1234, 1500)) | (set() if kept == 1734 else set(range(1500, 2000)))
    assert sorted(counting.calls) == sorted(f"q{i}" for i in rescored)  # nothing twice


@pytest.mark.anyio
async def test_a_run_stopped_in_its_first_part_resumes(threads: Any, tmp_path: Path) -> None:
    """A malformed sample in part 0: no row reaches the reader, the parts being scored with it
    are journaled, and the resumed run ends with a local run's rows."""
    journal = tmp_path / "journal.jsonl"
    broken: list[Any] = samples(1000)
    broken[10] = 42  # in part 0: nothing before it
    with pytest.raises(DataError):
        await ctxeval.aevaluate(
            broken, METRICS, journal=journal, runner=threads(workers=2, part_size=100)
        )
    resumed = await ctxeval.aevaluate(
        samples(1000), METRICS, journal=journal, resume=True, runner=threads(part_size=100)
    )
    assert dicts(resumed) == dicts(await ctxeval.aevaluate(samples(1000), METRICS))


def test_a_sample_id_given_twice_in_two_parts_is_a_data_error(threads: Any) -> None:
    data = samples(1200)
    data[900]["id"] = "q3"  # part 1 repeats an id of part 0
    with pytest.raises(DataError, match="two samples have the id 'q3'"):
        ctxeval.evaluate(data, METRICS, runner=threads(workers=3, part_size=500))


def truth(chunk: str) -> int:
    return int(chunk.endswith("R"))


def test_labels_attach_to_the_evaluation_as_with_the_local_runner(
    threads: Any, tmp_path: Path
) -> None:
    from ctxeval_llm import LLMConfig

    data = [
        {
            "id": f"s{i}",
            "user_input": f"question {i}",
            "reference": f"reference {i}",
            "retrieved_contexts": [f"chunk {i}.{k} " + "RN"[(i + k) % 3 == 0] for k in range(3)],
        }
        for i in range(60)
    ]
    chunks = {c: truth(c) for s in data for c in s["retrieved_contexts"]}
    judged = {c: v ^ (hash(c) % 5 == 0) for c, v in chunks.items()}  # a judge wrong sometimes
    path = tmp_path / "labels.jsonl"
    path.write_text(
        "".join(
            json.dumps(
                {
                    "sample_id": s["id"],
                    "metric": "context_precision",
                    "labels": [truth(c) for c in s["retrieved_contexts"]],
                }
            )
            + "\n"
            for s in data[:30]
        )
    )
    with FakeOpenAI(Judge(verdicts=judged)) as server:
        llm = LLMConfig(model="openai/judge", api_base=server.url, api_key="sk-test")
        local = ctxeval.evaluate(data, ["context_precision"], llm=llm, labels=path)
        threaded = ctxeval.evaluate(
            data,
            ["context_precision"],
            llm=llm,
            labels=path,
            runner=threads(workers=3, part_size=7),
        )
    assert dicts(threaded) == dicts(local)
    assert (
        threaded.labels
        == local.labels
        == Labels.load(path).renamed({"context_precision": local.metrics[0]})
    )
    (name,) = local.metrics
    mine, theirs = threaded.trust()[name], local.trust()[name]
    assert mine.agreement is not None
    assert mine.agreement.n_samples == 30
    assert mine.agreement == theirs.agreement
    assert mine.corrected == theirs.corrected
