"""The ``local`` runner: the whole run in this process, on its event loop (the default).

How the work is done:

* Deterministic metrics (those with a synchronous ``score``) are called in the run's worker
  thread, each call cut at ``metric_timeout`` (:mod:`ctxeval._run.worker`; with no timeout, in
  the run's own thread); when every metric of the run is deterministic, samples go in chunks
  (:mod:`ctxeval._run.fastpath`).
* The others run concurrently, each sample in its own task, within the emitter's window of
  samples in flight. Their outside calls pass through the run's
  :class:`~ctxeval._calls.scheduler.Scheduler` (limits, retries, timeouts, cost budget), each
  metric call with a :class:`~ctxeval._calls.context.RowContext` of its own, cut at
  ``metric_timeout``.
* A watchdog thread (:mod:`ctxeval._run.watchdog`) sees a plugin coroutine that holds the event
  loop (blocking code inside ``async def``): past ``metric_timeout`` it is cut and the run
  stops with :class:`~ctxeval._run.watchdog.EventLoopBlockedError` naming the plugin; at a
  Ctrl-C it is cut so that the run's cancellation can go on.
* Every finished row goes to the run's :class:`~ctxeval.runners.RowSink` (journal, progress);
  rows of an earlier, interrupted run are reused when resuming.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterable
from typing import Any, ClassVar

import anyio
from anyio.abc import TaskGroup

from ctxeval._calls.scheduler import Scheduler
from ctxeval._data.loading import SampleStream
from ctxeval._errors import BudgetExceededError, DataError
from ctxeval._run.columnar import ranked_file, ranked_scorers, score_ranked_in_chunks
from ctxeval._run.emission import Emitter
from ctxeval._run.fastpath import score_in_chunks
from ctxeval._run.plan import RunPlan
from ctxeval._run.rows import SampleInput, identify, unreadable
from ctxeval._run.sink import RowSink
from ctxeval._run.state import Run

__all__ = ["LocalRunner", "score_locally"]

logger = logging.getLogger(__name__)


class LocalRunner:
    """Runs the whole evaluation in this process (the default runner, ``local``)."""

    name: ClassVar[str] = "local"

    def __repr__(self) -> str:
        return "LocalRunner()"

    async def run(self, plan: RunPlan, samples: Iterable[Any] | Any, sink: RowSink) -> None:
        """Score ``samples`` with ``plan`` and hand the rows to ``sink`` in input order."""
        await score_locally(plan, samples, sink)


async def score_locally(
    plan: RunPlan, samples: Iterable[Any] | Any, sink: RowSink, *, first_index: int = 0
) -> None:
    """Score ``samples`` in this process: the local runner, also what each worker of the
    ``processes`` runner runs on its part of the input (``first_index``: the position of its
    first sample in the whole input, from which positional ids count).

    A cost limit lets the samples already started finish, then stops; an LLM no request can
    succeed with (:class:`~ctxeval.UnusableLLMError`) stops the run at once; any other failure
    (a malformed sample, two samples with one id) stops the run. The rows finished before the
    failure are handed to the sink first, then the failure is raised.
    """
    scheduler = Scheduler(plan.registry, plan.settings, llm=plan.llm)  # (None: read if asked)
    emitter = Emitter(sink.send_in_order, plan.settings.samples_in_flight)
    run = Run(plan, scheduler, sink, emitter, first_index=first_index)
    if not run.all_deterministic:  # plugin coroutines run in the loop: watch for one holding it
        run.watchdog.start()
    try:
        await _produce(run, samples)
    finally:
        run.watchdog.stop()
        run.worker.close()
        await scheduler.aclose()
    if run.stale:
        logger.warning(
            "%d row(s) of the journal were scored again: their sample changed since it was "
            "written (same id, other content)", run.stale,
        )  # fmt: skip
    if run.failure is not None:
        raise run.failure


async def _produce(run: Run, samples: Iterable[SampleInput] | Any) -> None:
    async with anyio.create_task_group() as group:
        run.stop_scope = group.cancel_scope
        try:
            await _read_samples(run, samples, group)
        except BudgetExceededError as exc:  # the samples already started finish, then stop
            run.failure = exc
        except Exception as exc:  # handed to the reader as it is (not in an exception group)
            run.failure = exc
            group.cancel_scope.cancel()
    if run.stopped is not None:
        run.failure = run.stopped
    if run.failure is None and run.budget_hit is not None:
        run.failure = run.budget_hit
    if run.failure is None or isinstance(run.failure, BudgetExceededError):
        await run.emitter.flush()


async def _read_samples(run: Run, samples: Any, group: TaskGroup) -> None:
    if run.all_deterministic and not run.previous and not hasattr(samples, "__aiter__"):
        source = ranked_file(run, samples)  # (a JSONL file of plain ID samples: columns)
        if source is not None:
            samples = source
        scorers = ranked_scorers(run, samples)
        if scorers is not None:  # columns the run's metrics all score: no sample per query
            await score_ranked_in_chunks(run, samples, scorers)
            return
        await score_in_chunks(run, samples)
        return
    seen_ids: set[str] = set()
    repeats: dict[str, int] = {}  # (lenient) the repeats of each id set aside so far
    index = 0
    first = run.first_index
    async for item in _iterate(samples, lenient=run.lenient):
        run.scheduler.check_budget()
        try:
            sample, sample_id = identify(item, first + index, seen_ids)
        except DataError as exc:
            if not run.lenient:
                raise
            await run.emitter.admit()
            bad = unreadable(exc, first + index, seen_ids, repeats, run.metrics)
            run.finish_rows_of_unreadable(bad)
            await run.emitter.done(index, bad, eager=False)
            index += 1
            continue
        await run.emitter.admit()
        rows, waiting = await run.score_now(sample, sample_id)
        if waiting:
            group.start_soon(
                run.score_later, index, sample, sample_id, rows, waiting, name="ctxeval: a sample"
            )
        else:
            await run.emitter.done(index, rows, eager=False)  # type: ignore[arg-type]
        index += 1


async def _iterate(samples: Any, *, lenient: bool) -> AsyncIterator[SampleInput | DataError]:
    """The samples (a lenient run reads a file's bad row as its :class:`DataError`)."""
    if hasattr(samples, "__aiter__"):
        async for item in samples:
            yield item
    else:
        if lenient and isinstance(samples, SampleStream):
            samples = samples._samples_and_errors()
        for item in samples:
            yield item
