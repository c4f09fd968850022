"""The runner ``spark``: a run's parts scored by Spark tasks, rows back in input order.

The driving process cuts the input into parts as the ``processes`` runner does (a JSONL file
by lines, unparsed; anything else by samples). One Spark job of ``workers`` long-running tasks
scores them: each task asks the driver for the next part, scores it with ctxeval's own local
runner and sends the rows back (:func:`ctxeval.runners.run_on_executor` over a
:class:`SparkExecutor`; :mod:`ctxeval_spark.work`). At most two parts per worker wait at a
time, so the input is read as the work goes, in constant memory. A task that dies (a lost
executor) gives its part back to the next task, and Spark starts a task in its place; the
part's rows come back once.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import CancelledError, Executor, Future
from typing import Any, ClassVar, TypeVar

import attrs

from ctxeval.plugin import ConfigError, Dependency, MissingExtraError
from ctxeval.runners import (
    RowSink,
    RunPlan,
    WorkerLostError,
    check_runner_options,
    run_on_executor,
)

from .budget import BudgetService
from .work import WorkServer, pull

__all__ = ["SparkExecutor", "SparkRunner", "spark_session"]

logger = logging.getLogger(__name__)

INSTALL = "pip install 'ctxeval[spark]'"
T = TypeVar("T")

TASK_ATTEMPTS = 4
"""How often Spark runs a failed task before the run stops (its default on a cluster; in
local mode ctxeval asks for it with ``local[N,4]``, where Spark's own default is once)."""


def spark_session(master: str | None = None, *, workers: int = 2) -> Any:
    """The active ``SparkSession``, or a new one: on ``master`` (a URL such as
    ``spark://host:7077``, ``yarn``, ``local[4]``), by default ``local[workers]`` with failed
    tasks tried again. Its Python workers run this interpreter (``sys.executable``)."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None and master is None:
        return active
    started = time.perf_counter()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master(master or f"local[{workers},{TASK_ATTEMPTS}]")
        .appName("ctxeval")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.task.maxFailures", str(TASK_ATTEMPTS))
        .config("spark.pyspark.python", os.environ["PYSPARK_PYTHON"])
        .config("spark.executorEnv.LITELLM_LOCAL_MODEL_COST_MAP", "True")
    )
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    logger.info(
        "spark ready in %.1f s (%s)", time.perf_counter() - started, session.sparkContext.master
    )
    return session


class SparkRunner:
    """Scores a run with Spark tasks (the runner ``spark``: ``evaluate(..., runner="spark")``,
    ``ctxeval evaluate --runner spark --workers N``; extra ``spark``).

    Args:
        workers: tasks scoring parts at the same time; the run's limits of outside calls and
            its cost cap are divided among them. Default: 2, or the given session's default
            parallelism.
        master: where Spark runs: None (the active session, or ``local[workers]``), or a
            master URL (``spark://HOST:7077``, ``yarn``, ``local[8]``).
        session: a ``SparkSession`` to use as it is (it is not stopped after the run).
        part_size: samples one task scores.
        shared: False (the default): the run's limits of outside calls and its cost cap are
            divided among the workers. True: the driver holds them, one budget for every task
            whatever their number (:class:`~ctxeval_spark.budget.BudgetService`).

    A session the runner starts stays active for the next run of this process (Spark takes
    seconds to start); ``spark_session().stop()`` stops it.
    """

    name: ClassVar[str] = "spark"
    dependencies: ClassVar[tuple[Dependency, ...]] = (Dependency("pyspark", INSTALL),)

    def __init__(
        self,
        workers: int | None = None,
        master: str | None = None,
        session: Any = None,
        part_size: int = 16384,
        shared: bool = False,
    ) -> None:
        whole = {"workers": workers, "part_size": part_size}
        check_runner_options("spark", whole={k: v for k, v in whole.items() if v is not None})
        if master is not None and (not isinstance(master, str) or not master.strip()):
            raise ConfigError(
                f"runner 'spark': master must be None (local mode) or a master URL such as "
                f"'spark://host:7077' or 'local[4]', got {master!r}"
            )
        check_runner_options("spark", flags={"shared": shared})
        if importlib.util.find_spec("pyspark") is None:
            raise MissingExtraError("the runner 'spark' needs pyspark", install=INSTALL)
        self.workers = workers
        self.master = master
        self.session = session
        self.part_size = part_size
        self.shared = shared

    def __repr__(self) -> str:
        return (
            f"SparkRunner(workers={self.workers}, master={self.master!r}, "
            f"part_size={self.part_size}, shared={self.shared})"
        )

    async def run(self, plan: RunPlan, samples: Iterable[Any] | Any, sink: RowSink) -> None:
        """Score ``samples`` with Spark tasks and hand the rows to ``sink`` in input order."""
        session = self.session
        if session is None:
            session = spark_session(self.master, workers=self.workers or 2)
        context = session.sparkContext
        workers = self.workers or max(1, int(context.defaultParallelism))
        executor = SparkExecutor(context, workers=workers)
        budget = _budget(plan, context) if self.shared else None
        if budget is not None:  # the driver holds the limits and the cap for every task
            settings = attrs.evolve(plan.settings, shared_limits=budget.limits(), max_cost_usd=None)
            plan = attrs.evolve(plan, settings=settings)
        try:
            await run_on_executor(
                plan,
                samples,
                sink,
                executor,
                workers=workers,
                part_size=self.part_size,
                runner="spark",
            )
        finally:
            executor.shutdown(wait=False, cancel_futures=True)
            if budget is not None:
                logger.debug("budget: %s", budget.stats())
                budget.close()


def _budget(plan: RunPlan, context: Any) -> BudgetService:
    """The run's one budget, served on the driver where the tasks reach it."""
    settings = plan.settings
    return BudgetService(
        settings.resource_limits,
        max_cost_usd=settings.max_cost_usd,
        lease_seconds=(settings.timeout or 3600.0) + 5.0,
        host=driver_host(context),
    )


def driver_host(context: Any) -> str:
    """The address Spark tasks reach the driver at: ``127.0.0.1`` in local mode, else
    ``spark.driver.host``."""
    if str(context.master).startswith("local"):
        return "127.0.0.1"
    return str(context.getConf().get("spark.driver.host") or "127.0.0.1")


class SparkExecutor(Executor):
    """A :class:`concurrent.futures.Executor` whose calls run in Spark tasks: ``submit(fn,
    *args)`` queues ``fn(*args)`` on the driver, and the first of ``workers`` long-running
    tasks (one Spark job, started with the first call) that is free runs it and sends back its
    result (:mod:`ctxeval_spark.work`). ``fn`` and its arguments are pickled. A task that
    dies holding a call gives it back to the next one (Spark starts a task in its place);
    shutting down with ``cancel_futures=True`` cancels the job in Spark too.

    Args:
        context: the ``SparkContext``.
        workers: tasks running calls at the same time.
        host: the address the tasks reach the driver at (default: ``127.0.0.1`` in local
            mode, else ``spark.driver.host``).
    """

    def __init__(self, context: Any, *, workers: int = 2, host: str | None = None) -> None:
        check_runner_options("spark", whole={"workers": workers})
        self._context = context
        self._workers = workers
        self._server = WorkServer(host or driver_host(context))
        self._group = f"ctxeval-{os.getpid()}-{id(self)}"
        self._lock = threading.Lock()
        self._job: threading.Thread | None = None
        self._shut = False

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        with self._lock:
            if self._shut:
                raise RuntimeError("cannot submit to a SparkExecutor after shutdown")
            if self._job is None:
                self._job = threading.Thread(
                    target=self._run_job, name="ctxeval-spark-job", daemon=True
                )
                self._job.start()
        future: Future[T] = Future()
        self._server.put(future, functools.partial(fn, *args, **kwargs))
        return future

    def _run_job(self) -> None:
        """The one Spark job of ``workers`` tasks that run the calls, until shutdown."""
        context = self._context
        context.setJobGroup(self._group, "ctxeval: scoring parts", interruptOnCancel=True)
        tasks = functools.partial(pull, self._server.address, self._server.authkey)
        try:
            context.parallelize(range(self._workers), self._workers).mapPartitions(tasks).collect()
        except Exception as exc:
            if not self._shut:
                logger.debug("the Spark job of the run failed", exc_info=True)
            self._server.fail(
                WorkerLostError(
                    f"the Spark job scoring the run failed ({type(exc).__name__}: "
                    f"{str(exc).splitlines()[0] if str(exc) else ''}); the rows finished "
                    "before it are kept (an LLM metric's rows in the journal): see the Spark "
                    "log, then run again with --resume"
                )
            )
        finally:
            self._server.close()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            self._shut = True
            job = self._job
        if cancel_futures and self._server.unfinished():
            self._server.fail(CancelledError())
            self._context.cancelJobGroup(self._group)
        self._server.finish()
        if job is None:
            self._server.close()
        elif wait:
            job.join()
