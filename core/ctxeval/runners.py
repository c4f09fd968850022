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

from ctxeval._calls.cache import SQLiteCache
from ctxeval._calls.ledger import BudgetLedger
from ctxeval._calls.limits import SharedLimits, TokenBucket
from ctxeval._errors import RunnerError
from ctxeval._plugins.metric_names import MetricNames
from ctxeval._public import rehome_all
from ctxeval._run.batch_scorer import ROW_COLUMNS, BatchScorer, ScoredPart, score_part
from ctxeval._run.checks import check_runner_options
from ctxeval._run.execute import get_runner
from ctxeval._run.local import LocalRunner
from ctxeval._run.plan import RunPlan
from ctxeval._run.processes import ProcessesRunner, WorkerLostError, run_on_executor
from ctxeval._run.sink import RowSink

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


rehome_all(globals(), __all__, __name__)  # each name shows its public module (ctxeval._public)
