"""ctxeval on a Ray cluster: the runner ``ray`` (:class:`RayRunner`), and the shortcuts
:func:`evaluate_on_ray` and :func:`score_dataset`.

Core builds the run's plan (metrics, settings, labels, the rows a resume reuses) and keeps the
journal, the order of the rows, the duplicate-id check, the progress and the cost cap (its
:class:`~ctxeval.runners.RowSink`); this runner only scores. The samples become a Ray Dataset
(a JSONL or Parquet file is read by Ray itself), each Ray Data actor scores a batch of it with
the engine-neutral :class:`ctxeval.runners.BatchScorer` (its
:meth:`~ctxeval.runners.BatchScorer.score_part`, as the local runner scores), with the run's
plan and the cluster's one :class:`~ctxeval_ray.SharedBudget`, and the rows come back to the
sink in input order. So a row on Ray is the row ``evaluate`` gives in one process.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import pickle
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

import anyio
import anyio.to_thread
import orjson

import ctxeval
from ctxeval.plugin import (
    BudgetExceededError,
    ConfigError,
    DataError,
    Dependency,
    Metric,
    MetricResult,
    MissingExtraError,
    Sample,
)
from ctxeval.runners import BatchScorer, RowSink, RunPlan, SQLiteCache, check_runner_options

from .budget import SharedBudget

__all__ = ["RayRunner", "evaluate_on_ray", "ray_init", "read_dataset", "score_dataset"]

logger = logging.getLogger(__name__)

CPUS_PER_WORKER = 0.25
"""Ray CPUs a worker asks for: its work is mostly waiting (for the LLM, for its batch); a
whole CPU per worker on a 2-core machine leaves none to the stage that reads the data."""

BATCHES_PER_BLOCK = 4
"""A worker's task holds this many batches: blocks small enough that every worker gets some,
large enough that Ray's cost per task (a tenth of a second between two batches of a worker,
measured here) is paid once per few batches."""

_INSTALL = "pip install 'ctxeval[ray]'"


def ray_init(address: str | None = None, **options: Any) -> None:
    """Connect to the Ray cluster at ``address`` (``"auto"``: the one this machine is part
    of), or start a local one (None or ``"local"``); nothing when Ray is already
    initialised."""
    import ray

    if ray.is_initialized():
        return
    started = time.perf_counter()
    options.setdefault("include_dashboard", False)
    options.setdefault("log_to_driver", True)
    options.setdefault("runtime_env", {"env_vars": {"LITELLM_LOCAL_MODEL_COST_MAP": "True"}})
    ray.init(address=None if address == "local" else address, **options)
    logger.info("ray ready in %.1f s (%s)", time.perf_counter() - started, address or "local")


class RayRunner:
    """Scores a run on a Ray cluster (the runner ``ray``: ``evaluate(..., runner="ray")``,
    ``ctxeval evaluate --runner ray``; extra ``ray``).

    Every sample needs an ``id`` (positions are not known across workers): a sample without
    one stops the run with :class:`~ctxeval.DataError`.

    Args:
        workers: Ray Data actors scoring batches at the same time.
        address: the cluster: None or ``"local"`` starts a local one, ``"auto"`` joins the one
            this machine is part of, ``"ray://HEAD:10001"`` connects through Ray Client (a Ray
            already initialised in this process is used as it is).
        batch_size: samples an actor scores at a time (a part of the run's rows).
        cpus_per_worker: Ray CPUs each actor asks for (its work is mostly waiting).
        shared: one :class:`~ctxeval_ray.SharedBudget` actor holds the run's limits and cost
            cap for every worker (True), or each worker holds them on its own (False: N
            workers may send up to N times the limits). A budget actor that dies is restarted
            by Ray and the workers give it back their spend and requests in flight; one gone
            for good leaves each worker its own limits, with a warning (the run goes on).

    A resumed run (``journal=..., resume=True``) sends every sample to the workers, which
    reuse the journaled rows of the samples that did not change (no call is made for them
    and their rows do not travel back): the rows stay in input order. When the cost cap
    stops a batch, the rows that batch had finished are not kept (a resume scores them again;
    the LLM cache, ``cache=SQLiteCache(path)``, answers the calls it had made).
    """

    name: ClassVar[str] = "ray"
    dependencies: ClassVar[tuple[Dependency, ...]] = (Dependency("ray", _INSTALL),)
    """Ray, so that ``ctxeval plugins`` lists the runner as unavailable without it."""

    def __init__(
        self,
        workers: int = 2,
        address: str | None = None,
        batch_size: int = 256,
        cpus_per_worker: float = CPUS_PER_WORKER,
        shared: bool = True,
    ) -> None:
        check_runner_options("ray", whole={"workers": workers, "batch_size": batch_size})
        if (
            isinstance(cpus_per_worker, bool)
            or not isinstance(cpus_per_worker, (int, float))
            or not 0 < cpus_per_worker < float("inf")
        ):
            raise ConfigError(
                f"runner 'ray': cpus_per_worker must be a number above 0 (a fraction of a CPU "
                f"for workers that mostly wait, e.g. 0.25), got {cpus_per_worker!r}"
            )
        if address is not None and (not isinstance(address, str) or not address.strip()):
            raise ConfigError(
                f"runner 'ray': address must be None or 'local' (start a local cluster), "
                f"'auto' (the cluster of this machine) or a cluster address, got {address!r}"
            )
        check_runner_options("ray", flags={"shared": shared})
        if importlib.util.find_spec("ray") is None:
            raise MissingExtraError("the runner 'ray' needs Ray", install=_INSTALL)
        self.workers = workers
        self.address = address
        self.batch_size = batch_size
        self.cpus_per_worker = float(cpus_per_worker)
        self.shared = shared

    def __repr__(self) -> str:
        return (
            f"RayRunner(workers={self.workers}, address={self.address!r}, "
            f"batch_size={self.batch_size}, cpus_per_worker={self.cpus_per_worker}, "
            f"shared={self.shared})"
        )

    async def run(self, plan: RunPlan, samples: Iterable[Any] | Any, sink: RowSink) -> None:
        """Score ``samples`` on the cluster and hand the rows to ``sink`` in input order."""
        if hasattr(samples, "__aiter__"):
            raise ConfigError(
                "runner 'ray' reads samples from a file, a Ray Dataset or an iterable, not an "
                "async iterable; use the local runner for an async source"
            )
        ray_init(self.address)
        dataset = _dataset_of(samples, self.batch_size)
        budget = _start_budget(plan) if self.shared else None
        try:
            worker_plan = plan.for_workers(
                shared_limits=budget,
                # the shared budget holds the cap for every worker
                max_cost_usd=None if budget is not None else plan.settings.max_cost_usd,
            )
            rows = _map(
                dataset,
                _Job(worker_plan, _cache_path(plan), rows_reused=False),
                workers=self.workers,
                batch_size=self.batch_size,
                cpus_per_worker=self.cpus_per_worker,
            )
            await _deliver(rows, plan, sink, budget)
        finally:
            if budget is not None:
                _report_budget(budget.stats())
                budget.close()


async def _deliver(rows: Any, plan: RunPlan, sink: RowSink, budget: SharedBudget | None) -> None:
    """The rows of the Ray Dataset ``rows`` to ``sink``, part by part in input order; then
    what stopped a worker, raised."""
    batches = iter(rows.iter_batches(batch_format="pyarrow", batch_size=None))
    parts = _Parts(plan, sink.journaled)
    part = 0
    try:
        while True:
            batch = await anyio.to_thread.run_sync(next, batches, None, abandon_on_cancel=True)
            if batch is None:
                break
            for rows_of_part, digests in parts.add(batch):
                await sink.put(part, rows_of_part, digests)
                part += 1
            if parts.stopped is not None:
                break
        for rows_of_part, digests in parts.flush():
            await sink.put(part, rows_of_part, digests)
            part += 1
    finally:
        close = getattr(batches, "close", None)
        if close is not None:
            try:
                close()  # stops the workers when the run ends early
            except ValueError:  # still in the thread the run was cancelled in: it ends there
                logger.debug("the rows of the cancelled run end with their iterator")
    if parts.stopped is not None:
        raise parts.stopped
    if parts.budget_spent is not None:
        cap = plan.settings.max_cost_usd
        spent = parts.budget_spent
        if budget is not None:
            spent = max(spent, float(budget.stats().get("spent_usd", 0.0)))
        raise BudgetExceededError(spent, cap if cap is not None else 0.0)


def _report_budget(stats: dict[str, Any]) -> None:
    """Log what the budget actor saw; warn when it was restarted during the run, or could not
    be reached at its end (see docs/scaling-out.md, "When the budget actor dies")."""
    logger.debug("budget: %s", stats)
    if "unavailable" in stats:
        logger.warning(
            "the budget actor could not be reached at the end of the run (%s): the workers "
            "that lost it held the limits on their own (per-worker limits)",
            stats["unavailable"],
        )
    elif stats.get("restarts"):
        logger.warning(
            "the budget actor was restarted during the run (%d restart(s) seen): the workers "
            "gave it back their spend (%.6f USD in all) and %d requests in flight; it forgot "
            "the Retry-After pauses and the spend of workers that died before the restart",
            stats["restarts"],
            stats.get("spent_usd", 0.0),
            stats.get("adopted_leases", 0),
        )


class _Parts:
    """Turns the workers' batches of rows back into rows, in parts of whole samples.

    Ray may cut a worker's output into several blocks; the rows of the last sample of a batch
    are held until the next batch shows whether more of them follow.
    """

    def __init__(self, plan: RunPlan, digests: bool) -> None:
        self.plan = plan
        self.width = len(plan.metrics)
        self.digests = digests
        self.held: list[MetricResult] = []
        self.held_digests: list[str] = []
        self.stopped: BaseException | None = None
        """What stopped a worker (a malformed sample, an unusable LLM...)."""
        self.budget_spent: float | None = None
        """What the cluster had spent when the cost cap stopped a worker."""

    def add(self, batch: Any) -> Iterator[tuple[list[MetricResult], list[str] | None]]:
        columns = batch.to_pydict()
        rows: list[MetricResult] = []
        digests: list[str] = []
        for sample_id, metric, digest, row, reused, spent, failure in zip(
            columns["sample_id"],
            columns["metric"],
            columns["digest"],
            columns["row"],
            columns["reused"],
            columns["budget_spent"],
            columns["failure"],
            strict=True,
        ):
            if metric is None:  # a batch a worker could not score
                if failure is not None:
                    self.stopped = pickle.loads(failure)  # (from this run's own workers)
                elif spent is not None:
                    self.budget_spent = max(spent, self.budget_spent or 0.0)
                break
            if reused:
                earlier = self.plan.previous[(sample_id, metric)][0]
                rows.append(earlier)  # the very row: the sink does not journal it again
            else:
                rows.append(MetricResult.from_dict(orjson.loads(row)))
            digests.append(digest)
        yield from self._cut(rows, digests, last=self.stopped is not None)
        if self.stopped is not None or self.budget_spent is not None:
            yield from self.flush()

    def flush(self) -> Iterator[tuple[list[MetricResult], list[str] | None]]:
        if self.held:
            yield from self._cut([], [], last=True)

    def _cut(
        self, rows: list[MetricResult], digests: list[str], *, last: bool
    ) -> Iterator[tuple[list[MetricResult], list[str] | None]]:
        rows = self.held + rows
        digests = self.held_digests + digests
        keep = len(rows)
        if not last and rows:
            tail = rows[-1].sample_id
            while keep > 0 and rows[keep - 1].sample_id == tail:
                keep -= 1
            if len(rows) - keep > self.width:
                raise DataError(f"two samples have the id {tail!r}; give each sample its own id")
        self.held, self.held_digests = rows[keep:], digests[keep:]
        if keep:
            yield rows[:keep], (digests[:keep] if self.digests else None)


def _cache_path(plan: RunPlan) -> str | None:
    """The file of the run's LLM cache, which each worker opens (None: no file cache)."""
    path = getattr(plan.settings.cache, "path", None)
    return None if path is None else str(path)


def _start_budget(plan: RunPlan) -> SharedBudget:
    """The cluster's one budget for the plan's limits and cost cap. A request holds its
    lease at most its attempt's timeout (an attempt never holds its slot longer), plus a
    margin."""
    settings = plan.settings
    return SharedBudget.start(
        settings.resource_limits,
        max_cost_usd=settings.max_cost_usd,
        lease_seconds=(settings.timeout or 3600.0) + 5.0,
    )


def read_dataset(data: Any) -> Any:
    """``data`` as a Ray Dataset: a Dataset as it is, a ``.jsonl``/``.json`` or ``.parquet``
    file (or folder of Parquet files) read by Ray, a strict :func:`ctxeval.load_samples`
    stream of a JSONL or Parquet file not yet read (Ray reads its file), any other file
    through :func:`ctxeval.load_samples`, or an iterable of samples or dicts."""
    import ray.data

    if isinstance(data, ray.data.Dataset):
        return data
    if _file_ray_reads(data):
        data.close()  # Ray reads the file itself
        data = data.path
    if isinstance(data, (str, os.PathLike)):
        path = Path(data)
        suffix = path.suffix.lower()
        if suffix in (".jsonl", ".json", ".ndjson"):
            return ray.data.read_json(str(path), lines=True)
        if suffix == ".parquet" or (path.is_dir() and any(path.glob("*.parquet"))):
            return ray.data.read_parquet(str(path))
        data = ctxeval.load_samples(path)
    return ray.data.from_items([_as_dict(item) for item in data])


def _dataset_of(samples: Any, batch_size: int) -> Any:
    """The run's samples as a Ray Dataset; a file Ray reads is cut in blocks every worker gets
    some of (a Dataset given keeps its own blocks, samples in memory are spread already)."""
    from_file = isinstance(samples, (str, os.PathLike)) or _file_ray_reads(samples)
    dataset = read_dataset(samples)
    return _in_batches(dataset, batch_size) if from_file else dataset


def _file_ray_reads(samples: Any) -> bool:
    """Whether ``samples`` is a :func:`ctxeval.load_samples` stream of a file Ray reads itself
    (JSONL or Parquet, strict, read as it is: no column map, not yet read)."""
    return (
        isinstance(samples, ctxeval.SampleStream)
        and samples.strict
        and samples.as_read  # (a column map renames the fields of each row it reads)
        and samples.rows_read == 0
        and samples.format in ("jsonl", "parquet")
    )


def _as_dict(item: Any) -> dict[str, Any]:
    return item.to_dict() if isinstance(item, Sample) else dict(item)


def _in_batches(dataset: Any, batch_size: int) -> Any:
    """``dataset`` in blocks of at most :data:`BATCHES_PER_BLOCK` batches (a streaming
    repartition, in order), so that every worker gets some: Ray reads a Parquet or JSONL
    file of a million rows as one block, and a block goes to one worker. (Not for a Dataset
    given: it keeps its own blocks.)"""
    try:
        return dataset.repartition(target_num_rows_per_block=batch_size * BATCHES_PER_BLOCK)
    except TypeError:  # a Ray before streaming repartition: the blocks as they are
        logger.debug("this Ray cannot repartition as it streams; blocks left as read")
        return dataset


class _Job:
    """What every worker needs (pickled once, sent to each): the worker plan, the file of the
    LLM cache, and whether reused rows go back whole (``score_dataset``) or as a mark the
    driver replaces with its own row (the runner)."""

    def __init__(self, plan: RunPlan, cache_path: str | None, *, rows_reused: bool) -> None:
        self.plan = plan
        self.cache_path = cache_path
        self.rows_reused = rows_reused


def _map(dataset: Any, job: _Job, *, workers: int, batch_size: int, cpus_per_worker: float) -> Any:
    """The rows of ``dataset`` scored by ``workers`` actors, as a lazy Dataset in order."""
    import ray.data

    dataset.context.execution_options.preserve_order = True
    return dataset.map_batches(
        Scorer,
        fn_constructor_args=(job,),
        batch_size=batch_size,
        batch_format="pyarrow",
        compute=ray.data.ActorPoolStrategy(size=workers),
        num_cpus=cpus_per_worker,
    )


class Scorer:
    """A Ray Data worker: each batch scored by the engine-neutral
    :class:`ctxeval.runners.BatchScorer` (:meth:`~ctxeval.runners.BatchScorer.score_part`:
    one event loop and one handle on the LLM cache per worker, across its batches), rows out
    as columns."""

    def __init__(self, job: _Job) -> None:
        self.scorer = BatchScorer(job.plan, cache_path=job.cache_path)
        self.rows_reused = job.rows_reused

    def __call__(self, batch: Any) -> dict[str, list[Any]]:
        try:
            samples = [_sample(row) for row in batch.to_pylist()]
        except Exception as exc:  # raised by the driver once the rows before it are in
            return _stopped(failure=_pickled(exc))
        scored = self.scorer.score_part(samples)
        rows = scored.rows
        previous = self.scorer.plan.previous
        reused = [
            bool(previous)
            and (earlier := previous.get((r.sample_id or "", r.metric or ""))) is not None
            and earlier[0] is r
            for r in rows
        ]
        columns: dict[str, list[Any]] = {
            "sample_id": [r.sample_id for r in rows],
            "metric": [r.metric for r in rows],
            "status": [r.status.value for r in rows],
            "score": [r.score for r in rows],
            "reason": [r.reason for r in rows],
            "digest": list(scored.digests),
            "row": [
                None if was and not self.rows_reused else r.to_json()
                for r, was in zip(rows, reused, strict=True)
            ],
            "reused": reused,
            "budget_spent": [None] * len(rows),
            "failure": [None] * len(rows),
        }
        error = scored.error
        if error is not None:  # the rows before it go out; then why the batch stopped
            stop = (
                _stopped(budget_spent=error.spent)
                if isinstance(error, BudgetExceededError)  # a resume scores the rest
                else _stopped(failure=_pickled(error))
            )
            for name, values in stop.items():
                columns[name] = columns[name] + values
        return columns


def _stopped(*, budget_spent: float | None = None, failure: bytes | None = None) -> dict[str, Any]:
    """The one row of a batch a worker could not score: why (no ``metric``)."""
    return {
        "sample_id": [None],
        "metric": [None],
        "status": [None],
        "score": [None],
        "reason": [None],
        "digest": [None],
        "row": [None],
        "reused": [False],
        "budget_spent": [budget_spent],
        "failure": [failure],
    }


def _pickled(exc: BaseException) -> bytes:
    try:
        return pickle.dumps(exc)
    except Exception:  # an exception that does not pickle: its type and message
        return pickle.dumps(DataError(f"a Ray worker failed: {type(exc).__name__}: {exc}"))


def _sample(row: dict[str, Any]) -> Sample:
    """A sample from a dataset row (a column a row lacks comes as None: left out)."""
    present = {key: value for key, value in row.items() if value is not None}
    if "id" not in present:
        raise DataError(
            "on Ray every sample needs an 'id' (positions are not known across workers); "
            f"this one has none: {sorted(present)}"
        )
    return Sample.from_dict(present)


def score_dataset(
    data: Any,
    metrics: Sequence[str | Metric],
    *,
    llm: Any = None,
    settings: ctxeval.RunSettings | None = None,
    budget: SharedBudget | None = None,
    workers: int = 2,
    batch_size: int = 256,
    cpus_per_worker: float = CPUS_PER_WORKER,
    cache_path: str | os.PathLike[str] | None = None,
    shared: bool = True,
    **overrides: Any,
) -> Any:
    """The rows of ``metrics`` on ``data``, as a lazy Ray Dataset in input order (no journal:
    use :func:`evaluate_on_ray` or ``evaluate(..., runner="ray")`` for a resumable run).

    Columns: ``sample_id``, ``metric``, ``status``, ``score``, ``reason``, ``digest`` (of the
    sample), ``row`` (the row as JSON, :meth:`MetricResult.to_dict`), ``reused`` (False),
    ``budget_spent`` and ``failure``. A batch the shared cost cap stopped gives one row without
    ``metric`` whose ``budget_spent`` is what the cluster had spent (its samples have no row);
    a batch that failed (a sample without ``id``...) one whose ``failure`` is the pickled
    exception. ``budget`` is the cluster's one budget (made from ``settings`` when not given
    and ``shared``); ``cache_path`` a SQLite LLM cache every worker of a machine shares (a
    completed call is not paid twice when a worker dies and its batch runs again).
    ``shared=False`` lets each worker apply the limits on its own (N workers: up to N times
    the limits; for comparison).
    """
    RayRunner(workers=workers, batch_size=batch_size, cpus_per_worker=cpus_per_worker)
    plan = RunPlan.build(list(metrics), llm=llm, settings=settings, **overrides)
    if budget is None and shared:
        budget = _start_budget(plan)
    worker_plan = plan.for_workers(
        shared_limits=budget,
        max_cost_usd=None if budget is not None else plan.settings.max_cost_usd,
    )
    if cache_path is None:
        cache_path = _cache_path(plan)
    job = _Job(worker_plan, None if cache_path is None else str(cache_path), rows_reused=True)
    dataset = _dataset_of(data, batch_size)
    return _map(
        dataset, job, workers=workers, batch_size=batch_size, cpus_per_worker=cpus_per_worker
    )


def evaluate_on_ray(
    data: Any,
    metrics: Sequence[str | Metric],
    *,
    llm: Any = None,
    settings: ctxeval.RunSettings | None = None,
    workers: int = 2,
    batch_size: int = 256,
    address: str | None = None,
    cpus_per_worker: float = CPUS_PER_WORKER,
    cache_path: str | os.PathLike[str] | None = None,
    shared: bool = True,
    **overrides: Any,
) -> ctxeval.Evaluation:
    """Score ``data`` on a Ray cluster as :func:`ctxeval.evaluate` does in one process: the
    same metrics, options and rows. A shortcut for ``ctxeval.evaluate(data, metrics,
    runner=RayRunner(workers=..., address=...), ...)``.

    ``data``: a Ray Dataset, a JSONL or Parquet file (or folder of Parquet files) Ray reads,
    any other file ctxeval reads (:func:`ctxeval.load_samples`), or samples. ``cache_path``: a
    SQLite LLM cache the workers of a machine share (the same as ``cache=SQLiteCache(path)``).
    The other arguments are
    :class:`RayRunner`'s options and :func:`ctxeval.evaluate`'s (``journal=``, ``resume=``,
    ``max_cost_usd=``...).
    """
    runner = RayRunner(
        workers=workers,
        address=address,
        batch_size=batch_size,
        cpus_per_worker=cpus_per_worker,
        shared=shared,
    )
    if cache_path is not None:
        overrides["cache"] = SQLiteCache(cache_path)
    if isinstance(data, (str, os.PathLike)):
        path = Path(data)
        if path.is_dir():
            ray_init(address)
            data = read_dataset(path)
        else:
            data = ctxeval.load_samples(path)
    return ctxeval.evaluate(data, metrics, llm=llm, settings=settings, runner=runner, **overrides)
