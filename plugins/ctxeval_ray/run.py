"""An evaluation on a Ray cluster: :func:`score_dataset` and :func:`evaluate_on_ray`.

Each worker is a Ray Data actor that runs ctxeval's own runner (``ctxeval.evaluate``) on a
batch of samples, with the run's metrics, options and settings, and with the cluster's one
:class:`~ctxeval_ray.SharedBudget`. So a row on Ray is the row ``evaluate`` gives in one
process. Rows come back as a Ray Dataset (:func:`score_dataset`), or gathered into an
:class:`~ctxeval.Evaluation` with a journal and the usual run folder (:func:`evaluate_on_ray`).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import attrs
import orjson

import ctxeval
from ctxeval._data.sample import Sample
from ctxeval._errors import BudgetExceededError, DataError
from ctxeval._plugins.protocols import Metric
from ctxeval._plugins.registry import default_registry
from ctxeval._results.results import MetricResult
from ctxeval._run.bridge import run_to_completion
from ctxeval._run.journal import Journal, Previous, sample_digest
from ctxeval._run.resolve import resolve_metrics
from ctxeval._run.settings import RunSettings

from .budget import SharedBudget

__all__ = ["evaluate_on_ray", "ray_init", "read_dataset", "score_dataset"]

logger = logging.getLogger(__name__)
progress = logging.getLogger("ctxeval.progress")

CPUS_PER_WORKER = 0.25
"""Ray CPUs a worker asks for: its work is mostly waiting (for the LLM, for its batch); a
whole CPU per worker on a 2-core machine leaves none to the stage that reads the data."""


def ray_init(address: str | None = None, **options: Any) -> None:
    """Connect to the Ray cluster at ``address`` (``"auto"``: the one this machine is part
    of), or start a local one (None); nothing when Ray is already initialised."""
    import ray

    if ray.is_initialized():
        return
    started = time.perf_counter()
    options.setdefault("include_dashboard", False)
    options.setdefault("log_to_driver", True)
    options.setdefault("runtime_env", {"env_vars": {"LITELLM_LOCAL_MODEL_COST_MAP": "True"}})
    ray.init(address=address, **options)
    logger.info("ray ready in %.1f s (%s)", time.perf_counter() - started, address or "local")


def read_dataset(data: Any) -> Any:
    """``data`` as a Ray Dataset: a Dataset as it is, a ``.jsonl``/``.json`` or ``.parquet``
    file (or folder) read by Ray, any other file through :func:`ctxeval.load_samples`, or an
    iterable of samples or dicts."""
    import ray.data

    if isinstance(data, ray.data.Dataset):
        return data
    if isinstance(data, (str, os.PathLike)):
        path = Path(data)
        suffixes = "".join(path.suffixes[-1:]).lower()
        if suffixes in (".jsonl", ".json", ".ndjson"):
            return ray.data.read_json(str(path), lines=True)
        if suffixes == ".parquet" or (path.is_dir() and any(path.glob("*.parquet"))):
            return ray.data.read_parquet(str(path))
        data = ctxeval.load_samples(path)
    return ray.data.from_items([_as_dict(item) for item in data])


def _as_dict(item: Any) -> dict[str, Any]:
    return item.to_dict() if isinstance(item, Sample) else dict(item)


@attrs.frozen
class _Job:
    """What every worker needs: pickled once, sent to each."""

    metrics: list[Metric]
    llm: Any
    settings: RunSettings
    cache_path: str | None


class Scorer:
    """A Ray Data worker: ``ctxeval.evaluate`` on each batch, rows out as columns."""

    def __init__(self, job: _Job) -> None:
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        self.job = job
        self.cache = None
        if job.cache_path is not None:
            from ctxeval._calls.cache import SQLiteCache

            self.cache = SQLiteCache(job.cache_path)  # one file for the workers of a machine

    def __call__(self, batch: Any) -> dict[str, list[Any]]:
        samples = [_sample(row) for row in batch.to_pylist()]
        settings = attrs.evolve(self.job.settings, cache=self.cache)
        rows: list[MetricResult] = []
        stopped: list[float] = []

        async def run() -> None:
            async with ctxeval.stream(
                samples, self.job.metrics, llm=self.job.llm, settings=settings
            ) as scored:
                try:
                    async for row in scored:
                        rows.append(row)
                except BudgetExceededError as exc:  # the rows so far go out; the rest resumes
                    stopped.append(exc.spent)

        run_to_completion(run)
        digests = {s.id: sample_digest(s) for s in samples}
        return {
            "budget_spent": [stopped[0] if stopped else None] * len(rows),
            "sample_id": [r.sample_id for r in rows],
            "metric": [r.metric for r in rows],
            "status": [r.status.value for r in rows],
            "score": [r.score for r in rows],
            "reason": [r.reason for r in rows],
            "digest": [digests.get(r.sample_id, "") for r in rows],
            "row": [r.to_json() for r in rows],
        }


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
    settings: RunSettings | None = None,
    budget: SharedBudget | None = None,
    workers: int = 2,
    batch_size: int = 256,
    cpus_per_worker: float = CPUS_PER_WORKER,
    cache_path: str | os.PathLike[str] | None = None,
    shared: bool = True,
    **overrides: Any,
) -> Any:
    """The rows of ``metrics`` on ``data``, as a lazy Ray Dataset in input order.

    Columns: ``sample_id``, ``metric``, ``status``, ``score``, ``reason``, ``digest`` (of the
    sample), ``row`` (the row as JSON, :meth:`MetricResult.to_dict`) and ``budget_spent``
    (set when the shared cost cap stopped the batch: its samples not scored have no row).
    ``budget`` is the cluster's one budget (made from ``settings`` when not given);
    ``cache_path`` a SQLite LLM cache every worker of a machine shares (a completed call is not
    paid twice when a worker dies and its batch runs again). ``shared=False`` lets each worker
    apply the limits on its own, as Ray's per-worker limits do (N workers: up to N times the
    limits; for comparison).
    """
    import ray.data

    run_settings = RunSettings.build(settings, **overrides)
    resolved = resolve_metrics(list(metrics), default_registry())
    if budget is None and shared:
        budget = _start_budget(run_settings)
    worker_settings = attrs.evolve(
        run_settings,
        journal=None,
        resume=False,
        on_progress=None,
        cache=None,
        shared_limits=budget,
        # the shared budget holds the cap for every worker
        max_cost_usd=None if budget is not None else run_settings.max_cost_usd,
    )
    job = _Job(resolved, llm, worker_settings, None if cache_path is None else str(cache_path))
    dataset = read_dataset(data)
    if isinstance(data, (str, os.PathLike)):
        dataset = _in_batches(dataset, batch_size)
    dataset.context.execution_options.preserve_order = True
    return dataset.map_batches(
        Scorer,
        fn_constructor_args=(job,),
        batch_size=batch_size,
        batch_format="pyarrow",
        compute=ray.data.ActorPoolStrategy(size=workers),
        num_cpus=cpus_per_worker,
    )


BATCHES_PER_BLOCK = 4
"""A worker's task holds this many batches: blocks small enough that every worker gets some,
large enough that Ray's cost per task (a tenth of a second between two batches of a worker,
measured here) is paid once per few batches."""


def _in_batches(dataset: Any, batch_size: int) -> Any:
    """``dataset`` in blocks of at most :data:`BATCHES_PER_BLOCK` batches (a streaming
    repartition, in order), so that every worker gets some: Ray reads a Parquet or JSONL
    file of a million rows as one block, and a block goes to one worker. (Only for files
    read here: a Dataset given keeps its own blocks, samples in memory are spread already.)"""
    try:
        return dataset.repartition(target_num_rows_per_block=batch_size * BATCHES_PER_BLOCK)
    except TypeError:  # a Ray before streaming repartition: the blocks as they are
        logger.debug("this Ray cannot repartition as it streams; blocks left as read")
        return dataset


def _start_budget(settings: RunSettings) -> SharedBudget:
    """The cluster's one budget for ``settings``' limits and cost cap. A request holds its
    lease at most its attempt's timeout (an attempt never holds its slot longer), plus a
    margin."""
    return SharedBudget.start(
        settings.resource_limits,
        max_cost_usd=settings.max_cost_usd,
        lease_seconds=(settings.timeout or 3600.0) + 5.0,
    )


def evaluate_on_ray(
    data: Any,
    metrics: Sequence[str | Metric],
    *,
    llm: Any = None,
    settings: RunSettings | None = None,
    workers: int = 2,
    batch_size: int = 256,
    address: str | None = None,
    cpus_per_worker: float = CPUS_PER_WORKER,
    cache_path: str | os.PathLike[str] | None = None,
    shared: bool = True,
    **overrides: Any,
) -> ctxeval.Evaluation:
    """Score ``data`` on a Ray cluster as :func:`ctxeval.evaluate` does in one process: the
    same metrics, options and rows.

    ``data``: a Ray Dataset, a JSONL or Parquet file Ray reads, any other file ctxeval reads,
    or samples. ``workers`` actors each score ``batch_size`` samples at a time with one shared
    budget (see :mod:`ctxeval_ray.budget`). With ``journal=`` (and ``resume=True``), finished
    rows are journaled as they arrive and a resumed run scores only the samples lacking a row
    (or whose content changed). ``address``: the cluster (None: start a local one).
    """
    ray_init(address)
    run_settings = RunSettings.build(settings, **overrides)
    resolved = resolve_metrics(list(metrics), default_registry())
    names = [m.name for m in resolved]
    journal: Journal | None = None
    previous: Previous = {}
    if run_settings.journal is not None:
        journal, previous = Journal.open(
            run_settings.journal, resolved, resume=run_settings.resume, llm=llm
        )
    dataset = read_dataset(data)
    if isinstance(data, (str, os.PathLike)):
        dataset = _in_batches(dataset, batch_size)
    if previous:
        dataset = dataset.filter(_NotDone(previous, names))
    budget = _start_budget(run_settings) if shared else None
    rows_ds = score_dataset(
        dataset,
        resolved,
        llm=llm,
        settings=attrs.evolve(run_settings, journal=None, resume=False),
        budget=budget,
        workers=workers,
        batch_size=batch_size,
        cpus_per_worker=cpus_per_worker,
        cache_path=cache_path,
        shared=shared,
    )
    rows: list[MetricResult] = [row for row, _ in previous.values()]
    seen = set(previous)
    budget_hit: float | None = None
    started = time.perf_counter()
    last = started
    try:
        for batch in rows_ds.iter_batches(batch_format="pyarrow", batch_size=None):
            new = [MetricResult.from_dict(orjson.loads(line)) for line in batch["row"].to_pylist()]
            for row in new:
                key = (row.sample_id or "", row.metric or "")
                if key in seen:
                    raise DataError(
                        f"two samples have the id {row.sample_id!r}; give each sample its own id"
                    )
                seen.add(key)
            if journal is not None:
                journal.write_many(new, batch["digest"].to_pylist())
            rows.extend(new)
            spent = [s for s in batch["budget_spent"].to_pylist() if s is not None]
            budget_hit = max([*spent, budget_hit or 0.0]) if spent else budget_hit
            now = time.perf_counter()
            if now - last >= 5:
                last = now
                progress.info(
                    "scored %d rows on ray (%.0f/s)", len(rows), len(rows) / (now - started)
                )
    finally:
        if journal is not None:
            journal.close()
    if budget is not None:
        logger.debug("budget: %s", budget.stats())
    if budget_hit is not None and run_settings.max_cost_usd is not None:
        raise BudgetExceededError(budget_hit, run_settings.max_cost_usd)
    return ctxeval.Evaluation(rows, names)


class _NotDone:
    """A dataset filter: the samples a resumed run must still score (a metric's row is
    missing, or the sample changed since its rows were written)."""

    def __init__(self, previous: Previous, names: Iterable[str]) -> None:
        self.names = list(names)
        self.digests: dict[str, set[str]] = {}
        for (sample_id, metric), (_, digest) in previous.items():
            self.digests.setdefault(sample_id, set()).add(f"{metric}\0{digest}")

    def __call__(self, row: dict[str, Any]) -> bool:
        sample_id = row.get("id")
        done = self.digests.get(str(sample_id)) if sample_id is not None else None
        if not done:
            return True
        digest = sample_digest(_sample(row))
        return any(f"{name}\0{digest}" not in done for name in self.names)
