"""Where a run executes: the runner SPI.

Every run, from :func:`ctxeval.evaluate`, :func:`ctxeval.aevaluate`, :func:`ctxeval.stream`
or ``ctxeval evaluate``, is one :class:`RunPlan`, built by core, executed by a runner:

* :class:`RunPlan`: what to score and how, decided before any row (the metrics resolved, the
  settings validated, people's labels bound, the rows a resume reuses). A frozen value;
  :meth:`RunPlan.for_workers` gives the picklable plan to send to other processes.
* :class:`Runner`: what a runner is: a ``name`` and ``async run(plan, samples, sink)``.
* :class:`MetricNames`: the index of a run's metric names, built with the plan
  (:attr:`RunPlan.metric_names`) and carried by its :class:`~ctxeval.Evaluation`: which of
  the run's metrics any name of a metric (an alias, an IR name, another case) means.
* :func:`check_runner_options`: the checks every runner makes of its options (whole
  numbers of at least 1, flags), one message for all.
* :class:`RowSink`: where a runner hands the rows it scored. Core keeps the rest: the journal,
  the order of the rows, the check that no sample id is scored twice, the progress, the cost
  cap and the :class:`~ctxeval.Evaluation`.
* :func:`run_on_executor`: a run spread over any :class:`concurrent.futures.Executor` whose
  workers can import ctxeval (what the ``processes`` and ``spark`` runners are made of);
* :class:`BatchScorer`: the engine-neutral batch scorer, a picklable callable that takes a
  batch of samples (a pandas DataFrame or a pyarrow Table) and gives its rows as a table of
  the same kind (:data:`ROW_COLUMNS`): for Spark ``mapInPandas``, Ray Data ``map_batches``,
  Dask ``map_partitions`` and Daft;
* :class:`SQLiteCache`: the LLM answer cache, a file the workers of one machine can share
  (the driving process's cache object is not sent to workers; its ``path`` is).
* :class:`SharedLimits`: the interface through which the workers of a cluster share ONE budget
  of outside calls (calls in flight, requests and tokens per minute, ``Retry-After`` pauses,
  the cost cap): pass one as ``RunSettings(shared_limits=...)``; :class:`BudgetLedger` is the
  state such a budget keeps in one place (behind Ray's budget actor and Spark's budget
  service), and :class:`TokenBucket` the rate budget core's own limits are made of, for an
  implementation of your own.

Three runners ship, registered in the entry-point group ``ctxeval.runners`` like a third
party's: ``local`` (:class:`LocalRunner`, this process, the default), ``processes``
(:class:`ProcessesRunner`, every core of this machine) and ``ray`` (extra ``ray``). Pick one
with ``evaluate(..., runner="processes")`` or ``ctxeval evaluate --runner processes
--workers 2``; :func:`get_runner` builds one by name.

A runner of your own, in a few lines (see docs/runners.md for the whole guide)::

    from ctxeval.runners import RunPlan, RowSink, score_part

    class ThreadsRunner:
        name = "threads"

        async def run(self, plan: RunPlan, samples, sink: RowSink) -> None:
            part = 0
            for first, chunk in chunks(samples, 1000):      # your way of splitting the work
                scored = await score_part(plan, chunk, first_index=first)
                await scored.put_into(sink, part)           # the rows, then any failure
                part += 1
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol, runtime_checkable

import attrs

from ctxeval._calls.cache import SQLiteCache
from ctxeval._calls.ledger import BudgetLedger
from ctxeval._calls.limits import SharedLimits, TokenBucket
from ctxeval._errors import RunnerError
from ctxeval._plugins.metric_names import MetricNames
from ctxeval._public import rehome_all
from ctxeval._results.results import MetricResult
from ctxeval._run.batch_scorer import ROW_COLUMNS, BatchScorer
from ctxeval._run.checks import check_runner_options
from ctxeval._run.execute import get_runner
from ctxeval._run.local import LocalRunner, score_locally
from ctxeval._run.plan import RunPlan
from ctxeval._run.processes import ProcessesRunner, WorkerLostError, run_on_executor
from ctxeval._run.progress import ProgressTracker
from ctxeval._run.sink import GatheredParts, RowSink, SampleDigests

__all__ = [
    "ROW_COLUMNS",
    "BatchScorer",
    "BudgetLedger",
    "LocalRunner",
    "MetricNames",
    "ProcessesRunner",
    "RowSink",
    "RunPlan",
    "Runner",
    "RunnerError",
    "SQLiteCache",
    "ScoredPart",
    "SharedLimits",
    "TokenBucket",
    "WorkerLostError",
    "check_runner_options",
    "get_runner",
    "run_on_executor",
    "score_part",
]


@runtime_checkable
class Runner(Protocol):
    """Executes a :class:`RunPlan`: scores ``samples`` and hands the rows to ``sink``.

    A runner is registered in the entry-point group ``ctxeval.runners`` (its options, such as
    ``workers``, are its constructor's keyword arguments), or passed as an object:
    ``evaluate(..., runner=MyRunner())``.
    """

    @property
    def name(self) -> str:
        """The runner's name (``--runner NAME``)."""
        ...

    async def run(self, plan: RunPlan, samples: Iterable[Any] | Any, sink: RowSink) -> None:
        """Score every sample of ``samples`` with every metric of ``plan`` and give the rows to
        ``sink.put`` in parts numbered from 0 in input order (see :class:`RowSink`). Raise
        what stops the run (a malformed sample in a strict run, an unusable LLM) after
        handing over the rows scored before it."""
        ...


@attrs.frozen
class ScoredPart:
    """What :func:`score_part` gives: the rows of a part of the input, each row's sample
    digest, and the failure that stopped the part, if one did (the rows are those scored
    before it).

    Hand it to the sink with :meth:`put_into`, which raises the failure once the rows are in.
    """

    rows: list[MetricResult]
    digests: list[str]
    error: Exception | None = None

    async def put_into(self, sink: RowSink, part: int) -> None:
        """``sink.put(part, rows, digests)`` (as the last part passed on, when the part
        failed), then raise :attr:`error` if the part failed."""
        await sink.put(part, self.rows, self.digests, last=self.error is not None)
        if self.error is not None:
            raise self.error


async def score_part(plan: RunPlan, samples: Iterable[Any], *, first_index: int = 0) -> ScoredPart:
    """Score some samples of a run, in this process, as the local runner scores them: what a
    runner's worker calls on its share of the input.

    Args:
        plan: the run's plan (in another process: the one :meth:`RunPlan.for_workers` gave).
        samples: the samples (or dicts) of this part, in input order.
        first_index: the position of the first of them in the whole input (a sample without
            ``id`` is named by its position).

    Returns:
        A :class:`ScoredPart`: the rows, sample by sample and metric by metric, each row's
        sample digest, and what stopped the part (a malformed sample in a strict run, the
        cost cap, an unusable LLM), with the rows scored before it kept. Nothing is raised
        but cancellation.
    """
    gathered = GatheredParts()
    log = SampleDigests(plan.previous)
    sink = RowSink(plan, gathered, ProgressTracker(None, None), log)
    error: Exception | None = None
    try:
        await score_locally(plan, samples, sink, first_index=first_index)
    except Exception as exc:  # handed back with the rows scored before it
        error = exc
    rows = [row for part in gathered.parts for row in part]
    return ScoredPart(rows, log.per_row(rows), error)


rehome_all(globals(), __all__, __name__)  # each name shows its public module (ctxeval._public)
