"""The ``spark`` runner and :func:`ctxeval_spark.evaluate_frame`, on pyspark in local mode
(``local[2]``; Java 17), and the engine-neutral :class:`ctxeval.runners.BatchScorer`.

A Spark run gives the rows of a local run, whatever the input; a killed Spark task costs no
row and no duplicate; the run's limits hold across the executors; a resumed run scores only
what is missing. Every test here shares one Spark session (it takes seconds to start), on one
test worker (``xdist_group("spark")``).
"""

from __future__ import annotations

import json
import os
import pickle
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import ctxeval
from ctxeval.runners import BatchScorer
from fakes.openai_server import FakeOpenAI
from llm_judge import Judge

pytest.importorskip("pyspark", reason="the spark extra: pip install 'ctxeval[spark]'")
pd = pytest.importorskip("pandas")
pa = pytest.importorskip("pyarrow")

pytestmark = [pytest.mark.xdist_group("spark"), pytest.mark.slow]

IDS = ["id_based_context_precision", "id_ndcg_at_k", "id_bpref"]
CONTEXTS = ["Paris is in France.", "Bananas are yellow.", "The Eiffel Tower is in Paris."]


def _id_sample(i: int, *, with_id: bool = True) -> dict[str, Any]:
    row: dict[str, Any] = {
        "retrieved_context_ids": [f"d{(i * 7 + k) % 13}" for k in range(5)],
        "reference_context_ids": [f"d{(i * 3 + k) % 11}" for k in range(3)],
    }
    if with_id:
        row["id"] = f"q{i}"
    return row


def _llm_samples(n: int) -> list[dict[str, Any]]:
    return [
        {
            "id": f"s{i}",
            "user_input": f"Where is the Eiffel Tower? ({i})",
            "reference": "The Eiffel Tower is in Paris.",
            "retrieved_contexts": CONTEXTS[i % 3 :] + CONTEXTS[: i % 3],
        }
        for i in range(n)
    ]


def _rows(evaluation: ctxeval.Evaluation) -> list[dict[str, Any]]:
    return [row.to_dict() for row in evaluation.results]


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    from ctxeval_spark import spark_session

    session = spark_session(workers=2)
    yield session
    session.stop()


@pytest.fixture(scope="module")
def runner(spark: Any) -> Any:
    from ctxeval_spark import SparkRunner

    return SparkRunner(workers=2, part_size=512)


def test_spark_rows_equal_local_rows_on_20000_id_samples(tmp_path: Path, runner: Any) -> None:
    path = tmp_path / "data.jsonl"
    with path.open("w", encoding="utf-8") as handle:
        for i in range(20_000):  # one sample in three named by its position
            handle.write(json.dumps(_id_sample(i, with_id=i % 3 != 0)) + "\n")
    local = ctxeval.evaluate(ctxeval.load_samples(path), IDS)
    on_spark = ctxeval.evaluate(ctxeval.load_samples(path), IDS, runner=runner)
    assert len(on_spark.results) == 60_000
    assert _rows(on_spark) == _rows(local)
    in_memory = [_id_sample(i) for i in range(3_000)]
    assert _rows(ctxeval.evaluate(in_memory, IDS, runner=runner)) == _rows(
        ctxeval.evaluate(in_memory, IDS)
    )


@pytest.mark.parametrize("shared", [False, True], ids=["divided", "shared"])
def test_llm_rows_are_the_same_on_spark_and_the_limit_holds_across_executors(
    spark: Any, shared: bool
) -> None:
    """2 000 LLM samples on local[2], --max-concurrency 8: never more than 8 requests in
    flight across the executors, whether the limit is divided among them (4 each) or held by
    the driver's budget service (each task's own gate then lets 8 through), 0 rows lost."""
    from ctxeval_llm import LLMConfig
    from ctxeval_spark import SparkRunner

    samples = _llm_samples(2_000)
    judge = Judge(verdicts={CONTEXTS[0]: 1, CONTEXTS[1]: 0, CONTEXTS[2]: 1})
    runner = SparkRunner(workers=2, part_size=250, shared=shared)
    with FakeOpenAI(judge, latency=0.005) as server:
        llm = LLMConfig(model="openai/fake-judge", api_base=server.url, api_key="sk-test")
        local = ctxeval.evaluate(samples[:300], ["context_precision"], llm=llm)
        sent_locally = server.count
        server.peak_in_flight = 0
        spread = ctxeval.evaluate(
            samples, ["context_precision"], llm=llm, max_concurrency=8, runner=runner
        )
        assert 4 < server.peak_in_flight <= 8
        assert server.count - sent_locally == sent_locally * 2_000 // 300  # each once
    assert [r.sample_id for r in spread.results] == [s["id"] for s in samples]
    assert all(r.status is ctxeval.Status.OK for r in spread.results)
    assert [(r.sample_id, r.score, r.details) for r in spread.results[:300]] == [
        (r.sample_id, r.score, r.details) for r in local.results
    ]


def _python_workers() -> list[int]:
    """The process ids of this test process's pyspark Python workers (descendants of this
    process, through Spark's JVM, whose command line names ``pyspark.daemon``): never another
    program's Spark."""
    parents: dict[int, int] = {}
    commands: dict[int, list[bytes]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            commands[int(entry.name)] = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])

    def mine(pid: int) -> bool:
        while pid > 1:
            pid = parents.get(pid, 0)
            if pid == os.getpid():
                return True
        return False

    return [pid for pid, command in commands.items() if b"pyspark.daemon" in command and mine(pid)]


def test_a_killed_task_costs_no_row_and_no_duplicate(tmp_path: Path, runner: Any) -> None:
    """Spark's Python workers are killed while they score: the tasks run again, and the run
    gives every row once (the LLM cache answers the calls a killed task had made)."""
    from ctxeval_llm import LLMConfig

    samples = _llm_samples(300)
    judge = Judge(verdicts={CONTEXTS[0]: 1, CONTEXTS[1]: 0, CONTEXTS[2]: 1})
    killed: list[int] = []

    def kill_when_busy(server: FakeOpenAI) -> None:
        deadline = time.monotonic() + 60
        while server.count < 100 and time.monotonic() < deadline:
            time.sleep(0.01)
        for pid in _python_workers():
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except ProcessLookupError:
                pass

    with FakeOpenAI(judge, latency=0.02) as server:
        llm = LLMConfig(model="openai/fake-judge", api_base=server.url, api_key="sk-test")
        killer = threading.Thread(target=kill_when_busy, args=(server,))
        killer.start()
        spread = ctxeval.evaluate(
            samples,
            ["context_precision"],
            llm=llm,
            max_concurrency=8,
            runner=runner,
            cache=ctxeval.SQLiteCache(tmp_path / "cache.sqlite"),
        )
        killer.join()
    assert killed, "no pyspark worker was found to kill"
    assert [r.sample_id for r in spread.results] == [s["id"] for s in samples]
    assert all(r.status is ctxeval.Status.OK for r in spread.results)


def test_a_resumed_spark_run_scores_only_what_is_missing(tmp_path: Path, runner: Any) -> None:
    from ctxeval_llm import LLMConfig

    samples = _llm_samples(60)
    journal = tmp_path / "run" / "journal.jsonl"
    judge = Judge(verdicts={CONTEXTS[0]: 1, CONTEXTS[1]: 0, CONTEXTS[2]: 1})
    with FakeOpenAI(judge) as server:
        llm = LLMConfig(model="openai/fake-judge", api_base=server.url, api_key="sk-test")
        whole = ctxeval.evaluate(samples, ["context_precision"], llm=llm)
        per_sample = server.count // len(samples)
        ctxeval.evaluate(samples[:25], ["context_precision"], llm=llm, journal=journal,
                         runner=runner)  # fmt: skip  # an interrupted run: 25 samples done
        before = server.count
        resumed = ctxeval.evaluate(
            samples, ["context_precision"], llm=llm, journal=journal, resume=True, runner=runner
        )
        assert server.count - before == per_sample * 35  # the 35 missing ones only
    assert [(r.sample_id, r.score) for r in resumed.results] == [
        (r.sample_id, r.score) for r in whole.results
    ]


def test_evaluate_frame_scores_in_spark_and_writes_parquet(tmp_path: Path, spark: Any) -> None:
    from ctxeval_spark import evaluate_frame

    samples = [_id_sample(i) for i in range(2_000)]
    frame = spark.createDataFrame(pd.DataFrame(samples)).repartition(4)
    rows = evaluate_frame(frame, IDS, output=tmp_path / "rows.parquet")
    got = {(r.sample_id, r.metric): r.score for r in rows.collect()}
    expected = {(r.sample_id, r.metric): r.score for r in ctxeval.evaluate(samples, IDS).results}
    assert got == expected
    assert list(rows.columns) == list(ctxeval.runners.ROW_COLUMNS)
    assert any(tmp_path.joinpath("rows.parquet").glob("part-*.parquet"))
    with pytest.raises(ctxeval.DataError, match="needs an 'id' column"):
        evaluate_frame(frame.drop("id"), IDS)


def test_evaluate_frame_on_ranked_columns_gives_the_local_rows(tmp_path: Path, spark: Any) -> None:
    """Ranked ID metrics on a frame of just ``id`` and the ID columns: the executors score
    from the columns (no sample per row), odd rows too (empty and null sides, repeated and
    non-ASCII IDs); every column of every row is the local runner's, the usage flattened."""
    from ctxeval._results.table import USAGE_COLUMNS
    from ctxeval_spark import evaluate_frame

    metrics = ["id_based_context_precision", "id_ndcg_at_k"]
    samples = [_id_sample(i) for i in range(2_000)]
    samples[3]["retrieved_context_ids"] = []
    samples[4]["reference_context_ids"] = None
    samples[5]["retrieved_context_ids"] = ["d1", "d2", "d1", "d1"]
    samples[1_500]["retrieved_context_ids"] = ["é1", "d1"]  # (its batch: through samples)
    schema = "id string, retrieved_context_ids array<string>, reference_context_ids array<string>"
    frame = spark.createDataFrame(
        [(s["id"], s["retrieved_context_ids"], s["reference_context_ids"]) for s in samples],
        schema,
    ).repartition(3)
    out = evaluate_frame(frame, metrics, output=tmp_path / "rows.parquet")
    assert list(out.columns) == list(ctxeval.runners.ROW_COLUMNS)
    got = {}
    for row in out.collect():
        record = row.asDict()
        record["details"] = json.loads(record["details"])
        record["usage"] = {name: record.pop(name) for name in USAGE_COLUMNS}
        got[record["sample_id"], record["metric"]] = record
    present = [{k: v for k, v in s.items() if v is not None} for s in samples]
    expected = [row.to_dict() for row in ctxeval.evaluate(present, metrics).results]
    assert {row["status"] for row in expected} == {"ok", "undefined", "error"}
    assert [got[row["sample_id"], row["metric"]] for row in expected] == expected


def test_the_batch_scorer_takes_pandas_and_arrow_and_pickles() -> None:
    samples = [_id_sample(i) for i in range(50)]
    scorer = pickle.loads(pickle.dumps(BatchScorer.build(IDS)))
    expected = [r.to_dict() for r in ctxeval.evaluate(samples, IDS).results]
    frame = scorer(pd.DataFrame(samples))
    assert isinstance(frame, pd.DataFrame)
    assert list(frame.columns) == list(ctxeval.runners.ROW_COLUMNS)
    assert frame["score"].tolist() == [row["score"] for row in expected]
    table = scorer(pa.Table.from_pylist(samples))
    assert isinstance(table, pa.Table)
    assert [json.loads(d) for d in table.column("details").to_pylist()] == [
        row["details"] for row in expected
    ]
    scorer.close()
    lean = BatchScorer.build(IDS, details=False)(pa.Table.from_pylist(samples))
    assert lean.column("score").to_pylist() == [row["score"] for row in expected]
    assert lean.column("details").null_count == len(expected)
    with pytest.raises(ctxeval.DataError, match="needs an 'id'"):
        scorer(pd.DataFrame([_id_sample(1, with_id=False)]))
    with pytest.raises(ctxeval.DataError, match="pandas DataFrame or a pyarrow Table"):
        scorer([samples[0]])


def test_the_command_line_runs_on_spark(tmp_path: Path, spark: Any) -> None:
    import subprocess
    import sys

    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(_id_sample(i)) + "\n" for i in range(500)), "utf-8")
    out = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-m", "ctxeval", "evaluate", str(data), "-m", "id_mrr",
         "--runner", "spark", "--workers", "2", "--out", str(out)],
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    written = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    local = ctxeval.evaluate([_id_sample(i) for i in range(500)], ["id_mrr"])
    assert [(r["sample_id"], r["score"]) for r in written] == [
        (r.sample_id, r.score) for r in local.results
    ]
    alone = subprocess.run(
        [sys.executable, "-m", "ctxeval", "evaluate", str(data), "-m", "id_mrr",
         "--out", str(tmp_path / "local")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert alone.returncode == 0, alone.stderr
    assert (out / "results.jsonl").read_bytes() == (tmp_path / "local/results.jsonl").read_bytes()
    wrong = subprocess.run(
        [sys.executable, "-m", "ctxeval", "evaluate", str(data), "-m", "id_mrr",
         "--runner", "processes", "--master", "local[2]"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert wrong.returncode == 2
    assert "--master goes with --runner spark" in wrong.stderr
