"""Running a plan: the one place an evaluation is run, whatever asked for it and whatever
runner scores it.

:func:`execute` opens the run's journal, makes the run's :class:`~ctxeval.runners.RowSink`,
starts the runner on the plan and gives the rows back as a :class:`~ctxeval.RowStream`, in
input order. :func:`get_runner` turns what a user names (``"local"``, ``"processes"``,
``"ray"``, a third party's name, or a runner object) into a runner.
"""

from __future__ import annotations

import logging
import math
from collections.abc import AsyncIterator, Iterable, Sequence, Sized
from contextlib import asynccontextmanager
from typing import Any

import anyio

from ctxeval._errors import ConfigError, DataError, MissingExtraError, UnusableLLMError
from ctxeval._plugins.protocols import RunnerPlugin
from ctxeval._plugins.registry import Registry, default_registry
from ctxeval._results.results import MetricResult
from ctxeval._run.emission import BATCH_ROWS
from ctxeval._run.journal import Journal
from ctxeval._run.local import LocalRunner
from ctxeval._run.plan import RunPlan
from ctxeval._run.progress import ProgressTracker
from ctxeval._run.rowstream import RowStream
from ctxeval._run.sink import RowSink
from ctxeval._run.watchdog import EventLoopBlockedError

__all__ = ["execute", "get_runner"]

logger = logging.getLogger(__name__)


def get_runner(
    runner: str | RunnerPlugin | None,
    *,
    registry: Registry | None = None,
    **options: Any,
) -> RunnerPlugin:
    """The runner a run uses: ``runner`` itself when it is one, else the runner registered
    under that name (entry-point group ``ctxeval.runners``) built with ``options``
    (``workers=4``...). None is ``local``.

    Raises:
        UnknownNameError: no runner has that name (with the closest ones).
        ConfigError: an option the runner does not take, or a value that is not a runner.
        MissingExtraError: the runner needs an extra that is not installed (``ray``).
    """
    if runner is None or (runner == "local" and not options):
        return LocalRunner()
    if isinstance(runner, str):
        return (registry or default_registry()).get_runner(runner, **options)
    if options:
        raise ConfigError(
            f"runner options {sorted(options)} go with a runner name; {runner!r} is built "
            "already: give them to its constructor"
        )
    if not isinstance(runner, RunnerPlugin):
        raise ConfigError(
            f"runner must be a runner name (local, processes, ray, ...) or an object with a "
            f"name and an async run(plan, samples, sink) (ctxeval.runners.Runner), got {runner!r}"
        )
    return runner


@asynccontextmanager
async def execute(
    plan: RunPlan, samples: Iterable[Any] | Any, runner: RunnerPlugin
) -> AsyncIterator[RowStream]:
    """Run ``plan`` on ``samples`` with ``runner``; the rows come out of the stream this
    yields, in input order. Leaving the block early cancels the run.

    Core keeps here what every run needs whatever runs it: the journal (opened for the plan,
    with the rows a resume reuses), the progress, the order of the rows, the check that no
    sample id is scored twice and the cost cap (in the :class:`RowSink`). A failure of the
    runner is raised to the reader once the rows before it are out.
    """
    settings = plan.settings
    total = len(samples) * len(plan.metrics) if isinstance(samples, Sized) else None
    tracker = ProgressTracker(settings.on_progress, total)
    journal: Journal | None = None
    if settings.journal is not None:
        journal, _ = Journal.open(
            settings.journal,
            plan.metrics,
            resume=settings.resume,
            llm=plan.llm,
            kept=dict(plan.previous) if settings.resume else None,
        )
        if plan.previous:
            logger.info("%s: resuming; %d row(s) already done", journal.path, len(plan.previous))
    in_flight = settings.samples_in_flight
    send, receive = anyio.create_memory_object_stream[Sequence[MetricResult]](
        max_buffer_size=max(1, math.ceil(in_flight * len(plan.metrics) / BATCH_ROWS))
    )
    sink = RowSink(plan, send, tracker, journal, max_held=in_flight)
    sink.expect(samples, str(getattr(runner, "name", type(runner).__name__)))
    failure: list[BaseException] = []

    async def drive() -> None:
        async with send:
            try:
                await runner.run(plan, samples, sink)
                sink.finish()  # every part handed, none held, every sample's rows
            except Exception as exc:  # raised to the reader after the rows before it
                failure.append(exc)

    async def batches() -> AsyncIterator[Sequence[MetricResult]]:
        async with receive:
            async for batch in receive:
                yield batch
        if failure:
            raise failure[0]
        tracker.finish()

    error: Exception | None = None
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(drive)
            try:
                yield RowStream(batches(), plan.names, tracker)
            except Exception as exc:  # raised again below, not wrapped in an exception group
                error = exc
            finally:
                group.cancel_scope.cancel()
        if error is not None:
            raise error
    except BaseException as exc:
        if journal is not None and not isinstance(exc, (DataError, ConfigError)):
            # (after bad input, the error names the row to fix; resuming as it is cannot help)
            fixes = (UnusableLLMError, MissingExtraError, EventLoopBlockedError)
            said = isinstance(exc, fixes)  # says what to fix
            logger.log(
                logging.INFO if said else logging.WARNING,
                "run stopped with %d judged row(s) saved in %s (deterministic rows are "
                "scored again); run again with resume=True (ctxeval evaluate --resume) to "
                "finish it",
                len(plan.previous) + sink.journaled_rows, journal.path,
            )  # fmt: skip
        raise
    finally:
        if journal is not None:
            journal.close()
