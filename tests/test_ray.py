"""ctxeval on a local Ray cluster (the runner ``ray``): one budget for every worker, the rows of
one process, a journaled run that resumes, no row lost when a worker dies, a run that goes on
when the budget actor dies. Runs where the ``ray`` extra is installed (CI installs it)."""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("ray", reason="the ray extra is not installed")

import ctxeval
from conftest import RayCluster
from ctxeval import Limits
from ctxeval.runners import get_runner
from ctxeval_llm import LLMConfig
from ctxeval_ray import RayRunner, SharedBudget, evaluate_on_ray, score_dataset
from ctxeval_ray.budget import ACTOR_NAME_PREFIX
from fakes.openai_server import FakeOpenAI
from llm_judge import Judge

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray")]


@pytest.fixture
def cluster(ray_cluster: RayCluster) -> None:
    """The local Ray cluster of the group's tests (``conftest.py``'s ``ray_cluster``)."""


def llm_samples(n: int) -> list[dict[str, Any]]:
    return [
        {
            "id": f"s{i}",
            "user_input": f"question {i}",
            "reference": f"answer {i}",
            "retrieved_contexts": [f"context {i}"],
            "retrieved_context_ids": [f"d{i}", f"d{i + 1}"],
            "reference_context_ids": [f"d{i + 1}"],
        }
        for i in range(n)
    ]


def judge() -> Judge:
    return Judge(verdicts={f"context {i}": int(i % 3 == 0) for i in range(1000)})


def llm_for(server: FakeOpenAI) -> LLMConfig:
    return LLMConfig(model="openai/judge", api_base=server.url, api_key="sk-ray")


def rate_per_minute(arrivals: list[float]) -> float:
    """The steady rate of ``arrivals``: the least-squares slope of the request count over time
    (requests a minute). Unlike ``(n - 1) / span`` it does not read a first request that
    arrived late (a worker still starting) as a faster rate."""
    times = sorted(arrivals)
    n = len(times)
    mean_t = sum(times) / n
    mean_i = (n - 1) / 2
    covariance = sum((t - mean_t) * (i - mean_i) for i, t in enumerate(times))
    variance = sum((t - mean_t) ** 2 for t in times)
    return covariance / variance * 60


def test_the_rate_is_read_from_the_slope() -> None:
    assert rate_per_minute([i / 10 for i in range(80)]) == pytest.approx(600)
    late_first = [0.0] + [0.5 + i / 10 for i in range(79)]  # (n - 1) / span says 632
    assert rate_per_minute(late_first) == pytest.approx(600, rel=0.02)


CAP = 4
RPM = 600  # 10 requests a second


@pytest.mark.parametrize("workers", [2, 4])
def test_workers_share_one_budget(cluster: None, workers: int) -> None:
    with FakeOpenAI(
        judge(), latency=0.05, max_in_flight=CAP, requests_per_minute=RPM, retry_after=1
    ) as server:
        evaluation = evaluate_on_ray(
            llm_samples(80),
            ["context_precision"],
            llm=llm_for(server),
            workers=workers,
            batch_size=10,
            limits=Limits(max_concurrency=CAP, requests_per_minute=RPM),
        )
        problems = [(r.sample_id, r.reason) for r in evaluation.results if r.status.value != "ok"]
        assert not problems, problems
        assert server.peak_in_flight <= CAP
        assert 429 not in server.statuses
        assert len(server.arrivals) == 80
        # the budget holds the workers together to the provider's rate: well under what two
        # workers each at that rate would send (2 x RPM); no 429 above says the same by count.
        # No lower bound: a busy machine slows the run (it did, to 0.48 x RPM, with two suites
        # and a busy loop on two cores), and a test must not fail for the machine's load
        rate = rate_per_minute(server.arrivals)
        assert rate <= RPM * 1.25, rate


def test_the_cost_cap_stops_every_worker(cluster: None) -> None:
    """The cluster's one cost cap: once the workers together have spent it, no worker sends
    another request (those already in flight finish: at most ``max_concurrency`` of them)."""
    model = "openai/gpt-4o-mini"  # priced from litellm's local cost map
    with FakeOpenAI(judge(), latency=0.05) as server:
        llm = LLMConfig(model=model, api_base=server.url, api_key="sk-ray")
        one = ctxeval.evaluate(llm_samples(1), ["context_precision"], llm=llm)
        per_request = one.usage.cost_usd
        assert per_request > 0
        before = server.count
        cap = 10.5 * per_request
        with pytest.raises(ctxeval.BudgetExceededError) as stopped:
            evaluate_on_ray(
                llm_samples(80),
                ["context_precision"],
                llm=llm,
                workers=2,
                batch_size=10,
                limits=Limits(max_concurrency=2),
                max_cost_usd=cap,
            )
        sent = server.count - before
        assert 11 <= sent <= 11 + 2  # the cap, and at most the calls in flight when it was hit
        # (prompts differ by a token or two between samples: costs by a few percent)
        assert cap <= stopped.value.spent <= sent * per_request * 1.05


def test_per_worker_limits_exceed_the_providers(cluster: None) -> None:
    """The counter-example: each of 4 workers holding the limits on its own."""
    with FakeOpenAI(
        judge(), latency=0.05, max_in_flight=CAP, requests_per_minute=RPM, retry_after=1
    ) as server:
        evaluate_on_ray(
            llm_samples(80),
            ["context_precision"],
            llm=llm_for(server),
            workers=4,
            batch_size=10,
            limits=Limits(max_concurrency=CAP, requests_per_minute=RPM),
            shared=False,
        )
        refused = server.statuses.count(429)
        assert refused > 0 or server.peak_in_flight > CAP


def test_rows_equal_a_single_process_run(cluster: None) -> None:
    metrics = ["context_precision", "id_mrr", "id_based_context_recall"]
    with FakeOpenAI(judge()) as server:
        alone = ctxeval.evaluate(llm_samples(60), metrics, llm=llm_for(server))
        spread = evaluate_on_ray(
            llm_samples(60), metrics, llm=llm_for(server), workers=3, batch_size=7
        )
    assert [r.to_dict() for r in spread.results] == [r.to_dict() for r in alone.results]
    assert spread.summary() == alone.summary()


def test_a_dataset_in_rows_out(cluster: None) -> None:
    import ray.data

    dataset = ray.data.from_items(llm_samples(20))
    rows = score_dataset(dataset, ["id_mrr"], workers=2, batch_size=5).take_all()
    assert [r["sample_id"] for r in rows] == [f"s{i}" for i in range(20)]
    assert {r["status"] for r in rows} == {"ok"}


def write_jsonl(path: Path, samples: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(s) + "\n" for s in samples))
    return path


def test_the_runner_is_found_by_name() -> None:
    runner = get_runner("ray", workers=2, address=None)
    assert isinstance(runner, RayRunner)
    assert (runner.name, runner.workers, runner.address) == ("ray", 2, None)
    for bad in ({"workers": 0}, {"batch_size": "8"}, {"cpus_per_worker": 0}, {"shared": "no"}):
        with pytest.raises(ctxeval.ConfigError, match=next(iter(bad))):
            get_runner("ray", **bad)


def test_runner_ray_gives_the_rows_of_runner_local(cluster: None, tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "data.jsonl", llm_samples(45))
    metrics = ["context_precision", "id_mrr", "id_based_context_recall"]
    with FakeOpenAI(judge()) as server:
        local = ctxeval.evaluate(ctxeval.load_samples(data), metrics, llm=llm_for(server))
        on_ray = ctxeval.evaluate(
            ctxeval.load_samples(data),
            metrics,
            llm=llm_for(server),
            runner=RayRunner(workers=2, batch_size=8),
        )
        by_name = ctxeval.evaluate(ctxeval.load_samples(data), ["id_mrr"], runner="ray")
    assert [r.to_dict() for r in on_ray.results] == [r.to_dict() for r in local.results]
    assert on_ray.summary() == local.summary()
    assert [r.sample_id for r in by_name.results] == [f"s{i}" for i in range(45)]


def test_on_ray_every_sample_needs_an_id(cluster: None) -> None:
    samples = llm_samples(6)
    del samples[4]["id"]
    with pytest.raises(ctxeval.DataError, match="needs an 'id'"):
        ctxeval.evaluate(samples, ["id_mrr"], runner=RayRunner(batch_size=2))


def test_two_samples_with_one_id_are_refused(cluster: None) -> None:
    samples = llm_samples(12)
    samples[9]["id"] = "s1"  # in another batch than s1
    with pytest.raises(ctxeval.DataError, match="two samples have the id 's1'"):
        ctxeval.evaluate(samples, ["id_mrr"], runner=RayRunner(batch_size=4))


def test_a_jsonl_file_and_a_resume(cluster: None, tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "data.jsonl", llm_samples(30))
    journal = tmp_path / "run" / "journal.jsonl"
    first = evaluate_on_ray(data, ["id_mrr"], workers=2, batch_size=8, journal=journal)
    assert len(first.results) == 30
    assert len(journal.read_text().splitlines()) == 1  # deterministic rows: not journaled
    resumed = evaluate_on_ray(
        data, ["id_mrr"], workers=2, batch_size=8, journal=journal, resume=True
    )
    # in input order, scored again
    assert [r.to_dict() for r in resumed.results] == [r.to_dict() for r in first.results]
    assert len(journal.read_text().splitlines()) == 1


def test_half_a_file_then_the_whole_file_resumes(cluster: None, tmp_path: Path) -> None:
    samples = llm_samples(40)
    half = write_jsonl(tmp_path / "half.jsonl", samples[:20])
    whole = write_jsonl(tmp_path / "whole.jsonl", samples)
    journal = tmp_path / "journal.jsonl"
    metrics = ["context_precision", "id_mrr"]
    with FakeOpenAI(judge()) as server:
        alone = ctxeval.evaluate(samples, metrics, llm=llm_for(server))
        ctxeval.evaluate(
            ctxeval.load_samples(half), metrics, llm=llm_for(server), runner="ray", journal=journal
        )
        before = server.count
        resumed = ctxeval.evaluate(
            ctxeval.load_samples(whole),
            metrics,
            llm=llm_for(server),
            runner=RayRunner(workers=2, batch_size=6),
            journal=journal,
            resume=True,
        )
        assert server.count - before == 20  # only the second half was judged
    assert [r.to_dict() for r in resumed.results] == [r.to_dict() for r in alone.results]
    assert len(journal.read_text().splitlines()) == 1 + 40  # the judged rows only


def test_a_run_stopped_by_the_cost_cap_resumes(cluster: None, tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "data.jsonl", llm_samples(60))
    journal = tmp_path / "journal.jsonl"
    metrics = ["context_precision", "id_mrr"]
    with FakeOpenAI(judge(), latency=0.02) as server:
        llm = LLMConfig(model="openai/gpt-4o-mini", api_base=server.url, api_key="sk-ray")
        alone = ctxeval.evaluate(llm_samples(60), metrics, llm=llm)
        per_request = alone.usage.cost_usd / 60
        with pytest.raises(ctxeval.BudgetExceededError):
            ctxeval.evaluate(
                ctxeval.load_samples(data),
                metrics,
                llm=llm,
                runner=RayRunner(workers=2, batch_size=10),
                journal=journal,
                max_concurrency=2,
                max_cost_usd=25.5 * per_request,
            )
        kept = len(journal.read_text().splitlines()) - 1
        assert 0 < kept < 2 * 60
        resumed = ctxeval.evaluate(
            ctxeval.load_samples(data),
            metrics,
            llm=llm,
            runner=RayRunner(workers=2, batch_size=10),
            journal=journal,
            resume=True,
        )
    assert [r.to_dict() for r in resumed.results] == [r.to_dict() for r in alone.results]


def _parent_of(pid: int) -> int:
    """The parent process of ``pid`` (0 when it is gone)."""
    try:
        stat = (Path("/proc") / str(pid) / "stat").read_text()
    except OSError:
        return 0
    return int(stat.rsplit(")", 1)[1].split()[1])  # (the name may hold spaces and parentheses)


def _map_workers() -> list[int]:
    """The processes of Ray Data's map workers of this process's own Ray cluster: those whose
    ancestors include this process (its raylet started them). Another test run on the same
    machine has map workers too, which are not this test's to kill."""
    me = os.getpid()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                title = (entry / "cmdline").read_bytes().split(b"\0")[0]
            except OSError:
                continue
            if not title.startswith(b"ray::MapWorker"):
                continue
            ancestor = int(entry.name)
            for _ in range(8):  # map worker -> raylet -> this process
                ancestor = _parent_of(ancestor)
                if ancestor in (0, 1, me):
                    break
            if ancestor == me:
                found.append(int(entry.name))
    return found


@pytest.mark.skipif(not Path("/proc").exists(), reason="finds the workers through /proc")
def test_a_worker_killed_mid_run_loses_no_row(cluster: None, tmp_path: Path) -> None:
    n = 60
    with FakeOpenAI(judge(), latency=0.1) as server:
        outcome: dict[str, Any] = {}

        def run() -> None:
            outcome["evaluation"] = evaluate_on_ray(
                llm_samples(n),
                ["context_precision"],
                llm=llm_for(server),
                workers=2,
                batch_size=10,
                max_concurrency=CAP,
                cache_path=tmp_path / "llm.sqlite",
                timeout=10,
            )

        thread = threading.Thread(target=run)
        thread.start()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and len(server.requests) < 15:
            time.sleep(0.01)
        victims = _map_workers()
        assert victims, "no map worker found"
        os.kill(victims[0], signal.SIGKILL)
        thread.join(timeout=240)
        assert not thread.is_alive()
        evaluation = outcome["evaluation"]
    assert sorted(r.sample_id for r in evaluation.results) == sorted(f"s{i}" for i in range(n))
    assert all(r.status.value == "ok" for r in evaluation.results)
    assert len(server.requests) <= n + CAP  # only the calls in flight at the kill again


def _budget_actors() -> set[str]:
    import ray.util

    return {n for n in ray.util.list_named_actors() if n.startswith(ACTOR_NAME_PREFIX)}


def _kill_budget_actor_after(
    server: FakeOpenAI, requests: int, *, restart: bool
) -> tuple[threading.Thread, dict[str, Any]]:
    """A thread that kills the budget actor of the run about to start (the one that did not
    exist before) once ``server`` has had ``requests`` requests; ``restart``: Ray restarts it,
    else it is dead for good."""
    import ray

    before = _budget_actors()
    done: dict[str, Any] = {}

    def kill() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and len(server.requests) < requests:
            time.sleep(0.01)
        new = _budget_actors() - before
        if len(new) == 1:
            done["at"] = len(server.requests)
            ray.kill(ray.get_actor(new.pop()), no_restart=not restart)

    thread = threading.Thread(target=kill)
    thread.start()
    return thread, done


@pytest.mark.parametrize("restart", [True, False], ids=["restarted", "killed-for-good"])
def test_the_budget_actor_killed_mid_run_does_not_stop_it(
    cluster: None, caplog: pytest.LogCaptureFixture, restart: bool
) -> None:
    """Restarted by Ray, the budget actor gets back the workers' spend and their requests in
    flight; killed for good, each worker holds the limits on its own. Either way every row is
    scored, each request sent once, and the run warns."""
    n = 60
    with FakeOpenAI(judge(), latency=0.1) as server, caplog.at_level(logging.WARNING):
        killer, killed = _kill_budget_actor_after(server, 15, restart=restart)
        evaluation = evaluate_on_ray(
            llm_samples(n),
            ["context_precision"],
            llm=llm_for(server),
            workers=2,
            batch_size=10,
            max_concurrency=CAP,
        )
        killer.join(timeout=120)
        assert killed, "the budget actor was not found"
        assert killed["at"] < n  # killed mid-run
        assert [r.sample_id for r in evaluation.results] == [f"s{i}" for i in range(n)]
        assert all(r.status.value == "ok" for r in evaluation.results)
        assert len(server.requests) == n
        # restarted: the requests in flight at the restart count from each worker's next
        # call; gone: per-worker limits, each of the 2 workers up to CAP
        assert server.peak_in_flight <= 2 * CAP
        if restart:
            assert "budget actor was restarted" in caplog.text
        else:
            assert "budget actor could not be reached" in caplog.text


def test_the_cost_cap_holds_across_a_restart_of_the_budget_actor(
    cluster: None, caplog: pytest.LogCaptureFixture
) -> None:
    """The restarted actor learns what the workers spent before the restart: the cluster
    still stops at its cap."""
    model = "openai/gpt-4o-mini"  # priced from litellm's local cost map
    with FakeOpenAI(judge(), latency=0.1) as server, caplog.at_level(logging.WARNING):
        llm = LLMConfig(model=model, api_base=server.url, api_key="sk-ray")
        one = ctxeval.evaluate(llm_samples(1), ["context_precision"], llm=llm)
        per_request = one.usage.cost_usd
        before = server.count
        cap = 30.5 * per_request
        killer, killed = _kill_budget_actor_after(server, before + 10, restart=True)
        with pytest.raises(ctxeval.BudgetExceededError) as stopped:
            evaluate_on_ray(
                llm_samples(80),
                ["context_precision"],
                llm=llm,
                workers=2,
                batch_size=10,
                limits=Limits(max_concurrency=2),
                max_cost_usd=cap,
            )
        killer.join(timeout=120)
        sent = server.count - before
    assert killed, "the budget actor was not found"
    assert killed["at"] - before < 31  # killed before the cap
    assert "budget actor was restarted" in caplog.text
    # the cap, and at most the calls in flight when it was hit, and those of the restart
    assert 31 <= sent <= 31 + 2 * 2
    assert cap <= stopped.value.spent <= sent * per_request * 1.05


def test_a_restarted_budget_actor_gets_back_spend_and_leases(
    cluster: None, caplog: pytest.LogCaptureFixture
) -> None:
    import ray

    budget = SharedBudget.start({"default": Limits(max_concurrency=2)}, max_cost_usd=10.0)

    async def scenario() -> None:
        held = await budget.acquire("m", 0)
        budget.spend(4.0)
        first = budget.stats()["generation"]
        ray.kill(ray.get_actor(budget.name), no_restart=False)
        while budget.stats()["generation"] == first:  # (waits while Ray restarts it)
            await anyio.sleep(0.05)
        await budget.acquire("m", 0)  # hands the restarted actor its lease and spend
        stats = budget.stats()
        assert stats["spent_usd"] == 4.0
        assert stats["resources"]["m"]["in_flight"] == 2  # the lease from before counts
        assert (stats["restarts"], stats["adopted_leases"]) == (1, 1)
        async with anyio.create_task_group() as tasks:
            granted = anyio.Event()

            async def third() -> None:
                await budget.acquire("m", 0)
                granted.set()

            tasks.start_soon(third)
            await anyio.sleep(0.5)
            assert not granted.is_set()  # two in flight: the cap
            await budget.release("m", held)
            await granted.wait()
        budget.spend(6.0)
        with pytest.raises(ctxeval.BudgetExceededError):
            await budget.acquire("m", 0)

    try:
        with caplog.at_level(logging.WARNING):
            anyio.run(scenario)
        assert "budget actor was restarted" in caplog.text
    finally:
        budget.close()


def test_a_budget_actor_gone_for_good_leaves_per_worker_limits(
    cluster: None, caplog: pytest.LogCaptureFixture
) -> None:
    import ray

    budget = SharedBudget.start({"default": Limits(max_concurrency=2)}, max_cost_usd=3.0)

    async def scenario() -> None:
        await budget.acquire("m", 0)
        budget.spend(1.0)
        await budget.acquire("m", 0)  # (the spend above has reached the actor)
        ray.kill(ray.get_actor(budget.name))
        while "unavailable" not in budget.stats():
            await anyio.sleep(0.05)
        lease = await budget.acquire("m", 0)  # on its own, with one warning
        await budget.release("m", lease)
        await budget.acquire("m", 0)
        budget.spend(2.0)  # 3.0 in all: the cap
        with pytest.raises(ctxeval.BudgetExceededError):
            await budget.acquire("m", 0)

    with caplog.at_level(logging.WARNING):
        anyio.run(scenario)
    assert caplog.text.count("budget actor is gone") == 1
    budget.close()  # an actor already gone: nothing raised
    assert "unavailable" in budget.stats()


def test_the_command_line_runs_on_ray(ray_cluster: RayCluster, tmp_path: Path) -> None:
    """``--runner ray`` joins the cluster of ``RAY_ADDRESS`` (the group's: paths are absolute)
    and gives the rows of the local run."""
    import subprocess
    import sys

    usage = subprocess.run(
        [sys.executable, "-m", "ctxeval", "evaluate", "--help"], capture_output=True, text=True
    )
    if "--runner" not in usage.stdout:
        pytest.skip("this ctxeval evaluate has no --runner yet")
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(s) + "\n" for s in llm_samples(40)))

    def run(*extra: str) -> list[dict[str, Any]]:
        out = tmp_path / ("ray" if extra else "local")
        metrics = ["-m", "id_mrr", "-m", "id_ndcg_at_k"]
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "ctxeval",
                "evaluate",
                str(data),
                *metrics,
                "-q",
                "--out",
                str(out),
                *extra,
            ],
            capture_output=True,
            text=True,
            timeout=300,
            env=ray_cluster.joined(os.environ),
        )
        assert done.returncode == 0, done.stderr
        assert (out / "report.html").exists()
        return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]

    assert run("--runner", "ray", "--workers", "2") == run()


def test_a_stream_with_a_column_map_is_read_by_ctxeval_not_by_ray(tmp_path: Path) -> None:
    """Ray reads a file's rows as they are: a stream that renames its columns is read by
    ctxeval (a run of it once scored every row as an error: fields missing)."""
    from ctxeval_ray.run import _file_ray_reads

    path = tmp_path / "data.jsonl"
    path.write_text(json.dumps({"got": ["a", "b"], "want": ["b"]}) + "\n", encoding="utf-8")
    renamed = {"retrieved_context_ids": "got", "reference_context_ids": "want"}
    assert _file_ray_reads(ctxeval.load_samples(path))
    assert not _file_ray_reads(ctxeval.load_samples(path, column_map=renamed))
