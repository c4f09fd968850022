"""An example third-party ctxeval runner: the parts of the input scored in threads.

Written against the public runner SPI alone (:mod:`ctxeval.runners`, and an error class of
:mod:`ctxeval.plugin`), as any package outside ctxeval would write it:

* it cuts the input into parts of ``part_size`` samples, numbered from 0 in input order;
* it scores up to ``workers`` parts at once, each in a worker thread that runs an event loop
  of its own, with :func:`ctxeval.runners.score_part` (the local runner's scoring);
* it hands each part's rows to :meth:`RowSink.put <ctxeval.runners.RowSink.put>` as soon as
  the part is done, in whatever order the parts finish: the sink journals them at once and
  passes them on to the reader in input order;
* when a part fails (a malformed sample in a strict run, an unusable LLM) or the sink refuses
  a part (two samples with one id, the cost cap), it starts no new part, hands over the rows
  of the parts already being scored, and raises the failure of the earliest part.

Registered in the entry-point group ``ctxeval.runners`` (see this package's
``pyproject.toml``); its options are its constructor's keyword arguments::

    ctxeval.evaluate(samples, ["@ids"], runner="threads")            # entry point
    ctxeval.evaluate(samples, ["@ids"], runner=ThreadsRunner(workers=8))
    # ctxeval evaluate data.jsonl -m @ids --runner threads --workers 8
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import AsyncIterator, Iterable
from typing import Any, ClassVar

import anyio
import anyio.to_thread

from ctxeval.plugin import ConfigError
from ctxeval.runners import RowSink, RunPlan, score_part

__all__ = ["ThreadsRunner"]


class ThreadsRunner:
    """Scores a run in ``workers`` threads of this process (the runner ``threads``).

    Args:
        workers: parts scored at once, each in a thread of its own.
        part_size: samples per part.

    Raises:
        ConfigError: ``workers`` or ``part_size`` is not a whole number of at least 1.
    """

    name: ClassVar[str] = "threads"

    def __init__(self, workers: int = 4, part_size: int = 500) -> None:
        for label, value in (("workers", workers), ("part_size", part_size)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(
                    f"runner 'threads': {label} must be a whole number of at least 1, got {value!r}"
                )
        self.workers = workers
        self.part_size = part_size

    def __repr__(self) -> str:
        return f"ThreadsRunner(workers={self.workers}, part_size={self.part_size})"

    async def run(self, plan: RunPlan, samples: Iterable[Any] | Any, sink: RowSink) -> None:
        """Score ``samples`` with ``plan`` in worker threads and hand the rows to ``sink``."""
        # The sink holds at most ``samples_in_flight`` parts that arrive before an earlier
        # one; with no more parts than that in flight, put() never waits on a part that is
        # not being scored.
        in_flight = anyio.Semaphore(max(1, min(self.workers, plan.settings.samples_in_flight)))
        threads = anyio.CapacityLimiter(self.workers)
        failures: list[tuple[int, Exception]] = []

        async def score(part: int, first: int, chunk: list[Any]) -> None:
            try:
                # a thread of its own, running an event loop of its own, scores the part
                scored = await anyio.to_thread.run_sync(
                    lambda: anyio.run(
                        functools.partial(score_part, plan, chunk, first_index=first)
                    ),
                    limiter=threads,
                )
                # in any order: the sink journals the rows now and orders them itself; a part
                # that failed hands over the rows scored before the failure, then raises it
                await scored.put_into(sink, part)
            except Exception as exc:  # raised once the other parts' rows are handed over
                failures.append((part, exc))
            finally:
                in_flight.release()

        async with anyio.create_task_group() as group:
            async for part, first, chunk in _parts(samples, self.part_size):
                await in_flight.acquire()
                if failures:  # start no new part after a failure
                    in_flight.release()
                    break
                group.start_soon(score, part, first, chunk)
        if failures:
            raise min(failures, key=lambda failure: failure[0])[1]


async def _parts(samples: Any, size: int) -> AsyncIterator[tuple[int, int, list[Any]]]:
    """The input in parts of ``size`` samples: each part's number, the position of its first
    sample in the whole input (a sample without an id is named by its position), and its
    samples."""
    first = 0
    if hasattr(samples, "__aiter__"):  # an async source (an async generator of dicts...)
        chunk: list[Any] = []
        async for item in samples:
            chunk.append(item)
            if len(chunk) == size:
                yield first // size, first, chunk
                first += len(chunk)
                chunk = []
        if chunk:
            yield first // size, first, chunk
        return
    items = iter(samples)
    for part in itertools.count():
        chunk = list(itertools.islice(items, size))
        if not chunk:
            return
        yield part, first, chunk
        first += len(chunk)
