"""The ``processes`` runner: a run spread over worker processes of this machine, no Ray
needed.

The driving process cuts the input into parts of :attr:`ProcessesRunner.part_size` samples
and hands each to a worker process, which scores it with the local runner
(:func:`~ctxeval._run.local.score_locally`) and sends its rows back; the parts go to the run's
:class:`~ctxeval.runners.RowSink` in input order, so the rows are the rows of a ``local`` run.

* A JSONL file read with :func:`ctxeval.load_samples` (strict, not yet read) is not parsed by
  the driving process: it reads lines, and each worker reads its lines as reading the whole
  file does (errors name the file and the real line). Anything else is read by the driving
  process and its samples are sent to the workers.
* Positional ids (a sample without ``id``) count from the start of the whole input.
* The limits of outside calls (calls in flight, requests and tokens per minute) and the cost
  cap are divided among the workers, so that together they never exceed them; give
  ``shared_limits=`` (e.g. ``ctxeval_ray.SharedBudget``) to share them instead.
* Workers are started with the ``spawn`` method: a script that runs an evaluation with this
  runner must guard it with ``if __name__ == "__main__":``, as every program using
  :mod:`multiprocessing` does, and its own metric classes must be importable.
"""

from __future__ import annotations

import contextlib
import functools
import io
import itertools
import multiprocessing
import os
import re
import sys
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any, ClassVar

import anyio
import anyio.to_thread
import attrs

from ctxeval._calls.limits import Limits
from ctxeval._data.loading import COLUMNS_FROM, SampleStream
from ctxeval._data.sample import Sample
from ctxeval._errors import ConfigError, CtxevalError
from ctxeval._plugins.hooks import ranked_column_scorer
from ctxeval._results.columns import Lines, RowBlock, Texts
from ctxeval._results.results import MetricResult
from ctxeval._run.checks import check_runner_options
from ctxeval._run.local import score_locally
from ctxeval._run.plan import RunPlan
from ctxeval._run.progress import ProgressTracker
from ctxeval._run.settings import RunSettings
from ctxeval._run.sink import GatheredParts, RowSink, SampleDigests

__all__ = ["ProcessesRunner", "WorkerLostError", "divided_settings", "run_on_executor"]

_BYTES_PER_SAMPLE = 256
"""A JSONL file is cut into parts of ``part_size`` times this many bytes."""

_Payload = tuple[str, Any]
"""What a worker scores: ``("lines", (path, first_line, lines))`` or ``("items", items)``."""
_Done = tuple[list[Sequence[MetricResult]], list[list[str]] | None, BaseException | None]
"""What a worker sends back: its rows in parts, their digests, and the failure that stopped
it (raised once its rows are in the sink)."""


class WorkerLostError(CtxevalError, BrokenProcessPool):
    """A worker process of the ``processes`` runner ended abruptly (killed, out of memory): the
    run stops; the rows handed on before are kept (journaled, with a journal), and a resumed
    run scores the others. Also a :class:`~concurrent.futures.process.BrokenProcessPool`."""


def _lost(part: int, runner: str) -> WorkerLostError:
    return WorkerLostError(
        f"a worker process of runner {runner!r} ended abruptly (killed, or out of memory) "
        f"while scoring part {part} of the input; the rows finished before it are kept (an LLM "
        "metric's rows in the journal): run again with resume=True (ctxeval evaluate "
        "--resume) to finish the run, with fewer --workers if memory ran out"
    )


class ProcessesRunner:
    """Scores a run in ``workers`` processes of this machine (the runner ``processes``).

    Args:
        workers: worker processes (default: the machine's CPU count).
        part_size: samples a worker scores at a time (a JSONL file is cut into parts of
            ``part_size`` x 256 bytes).
    """

    name: ClassVar[str] = "processes"

    def __init__(self, workers: int | None = None, part_size: int = 8192) -> None:
        if workers is None:
            workers = os.cpu_count() or 1
        check_runner_options("processes", whole={"workers": workers, "part_size": part_size})
        self.workers = workers
        self.part_size = part_size

    def __repr__(self) -> str:
        return f"ProcessesRunner(workers={self.workers}, part_size={self.part_size})"

    async def run(self, plan: RunPlan, samples: Iterable[Any] | Any, sink: RowSink) -> None:
        """Score ``samples`` in the worker processes and hand the rows to ``sink``."""
        pool = ProcessPoolExecutor(
            max_workers=self.workers, mp_context=multiprocessing.get_context("spawn")
        )
        try:
            for _ in range(self.workers):  # start them now, while the input is opened and read
                pool.submit(_ready, plan.metrics)
            await run_on_executor(
                plan, samples, sink, pool, workers=self.workers, part_size=self.part_size
            )
        finally:
            pool.shutdown(wait=False, cancel_futures=True)


async def run_on_executor(
    plan: RunPlan,
    samples: Iterable[Any] | Any,
    sink: RowSink,
    executor: Executor,
    *,
    workers: int,
    part_size: int = 8192,
    runner: str = "processes",
) -> None:
    """Score ``samples`` in parts of ``part_size`` on ``executor`` (any
    :class:`concurrent.futures.Executor` whose workers can import ctxeval: a process pool,
    Dask's ``client.get_executor()``, the Spark plugin's executor) and hand the rows to
    ``sink`` in input order, as the ``processes`` runner does.

    The run's limits and cost cap are divided among ``workers`` (give ``shared_limits=`` in
    the settings to share them instead); at most two parts per worker wait at a time, so the
    input is read as the work goes. The executor is the caller's to shut down."""
    if hasattr(samples, "__aiter__"):
        raise ConfigError(
            f"runner {runner!r} reads samples from a file or an iterable, not an async "
            "iterable; use the local runner for an async source"
        )
    worker_plan = plan.for_workers(**divided_settings(plan.settings, workers))
    previous = _by_sample(plan.previous)  # a resume: each part gets its own rows only
    if previous:
        worker_plan = attrs.evolve(worker_plan, previous={})
    digests = sink.journaled
    pending: deque[Future[_Done]] = deque()
    part = 0
    try:
        for first, payload in _parts(
            samples,
            part_size,
            by_lines=not previous,
            lenient=plan.settings.lenient,
            workers=workers,
        ):
            part_plan = worker_plan
            if previous:
                part_plan = attrs.evolve(
                    worker_plan, previous=_previous_of(previous, first, payload[1])
                )
            pending.append(executor.submit(_score_part, part_plan, first, payload, digests))
            if len(pending) > 2 * workers:  # two parts queued per worker at most
                part = await _deliver(pending.popleft(), sink, part, runner)
        while pending:
            part = await _deliver(pending.popleft(), sink, part, runner)
    finally:
        for future in pending:
            future.cancel()


async def _deliver(future: Future[_Done], sink: RowSink, part: int, runner: str) -> int:
    """Hand a worker's rows to the sink as parts ``part``, ``part + 1``...; the next part."""
    try:
        parts, digests, error = await anyio.to_thread.run_sync(
            future.result, abandon_on_cancel=True
        )
    except WorkerLostError:  # said by the executor itself
        raise
    except BrokenProcessPool as exc:  # (a bare BrokenProcessPool said nothing of --resume)
        raise _lost(part, runner) from exc
    for index, rows in enumerate(parts):
        last = error is not None and index == len(parts) - 1  # a failure ended this part
        await sink.put(part, rows, None if digests is None else digests[index], last=last)
        part += 1
    if error is not None:
        raise error
    return part


def _by_sample(previous: Any) -> dict[str, dict[tuple[str, str], Any]]:
    """The rows of an interrupted run by sample id."""
    grouped: dict[str, dict[tuple[str, str], Any]] = {}
    for key, value in previous.items():
        grouped.setdefault(key[0], {})[key] = value
    return grouped


def _previous_of(
    previous: dict[str, dict[tuple[str, str], Any]], first: int, items: list[Any]
) -> dict[tuple[str, str], Any]:
    """The rows of an interrupted run that the samples ``items`` (from position ``first``)
    may reuse: those of their ids, or of their positions when they have none."""
    mine: dict[tuple[str, str], Any] = {}
    for position, item in enumerate(items, start=first):
        given = item.id if isinstance(item, Sample) else None
        if isinstance(item, Mapping):
            given = item.get("id")
        rows = previous.get(str(position) if given is None else str(given))
        if rows:
            mine.update(rows)
    return mine


def _parts(
    samples: Any, size: int, *, by_lines: bool, lenient: bool = False, workers: int = 1
) -> Iterator[tuple[int, _Payload]]:
    """The input in parts of ``size`` samples: each part's position in the input, and what
    a worker needs to read it (``by_lines``: a JSONL file may go to the workers as lines;
    ``lenient``: a file's bad row goes as its :class:`~ctxeval.DataError`, for error rows)."""
    if (
        by_lines
        and isinstance(samples, SampleStream)
        and samples.format == "jsonl"
        and samples.as_read  # (a column map renames the fields of each row it reads)
        and samples.strict
        and samples.rows_read == 0
    ):
        samples.close()  # read by line here, by sample in the workers
        yield from _line_parts(samples.path, size * _BYTES_PER_SAMPLE, workers)
        return
    first = 0
    lenient_read = lenient and isinstance(samples, SampleStream)
    items = samples._samples_and_errors() if lenient_read else iter(samples)
    while True:
        taken = list(itertools.islice(items, size))
        if not taken:
            return
        yield first, ("items", taken)
        first += len(taken)


_ODD_LINE = re.compile(rb"\n(?!\{)")
"""The end of a line followed by a line that does not start with ``{`` (rare in JSONL: a
blank line, an indented or a bad one), found at the speed of a byte search."""


def _line_parts(path: Path, size: int, workers: int = 1) -> Iterator[tuple[int, _Payload]]:
    """Parts of a JSONL file of about ``size`` bytes each, cut at line ends: each part's
    position in the input (a blank line is no row, as the reader decides it) and the number of
    its first line. The lines are counted here, not parsed. Toward the end of the file the
    parts grow smaller (down to an eighth), so that the ``workers`` finish together rather
    than one scoring the last large part alone."""
    first = 0
    line = 1
    rest = b""
    left = _size_of(path)
    with path.open("rb") as handle:
        while True:
            wanted = max(size // 8, min(size, left // (4 * workers))) if left > 0 else size
            block = handle.read(wanted)
            left -= len(block)
            data = rest + block
            if not block:
                rest = b""
            else:
                cut = data.rfind(b"\n") + 1
                if cut == 0:  # one line longer than a part: read on
                    rest = data
                    continue
                data, rest = data[:cut], data[cut:]
            if not data:
                return
            lines = data.count(b"\n") + (not data.endswith(b"\n"))
            yield first, ("lines", (str(path), line, data))
            first += lines - _blank_lines(data, line)
            line += lines


def _size_of(path: Path) -> int:
    """The file's size in bytes (0 when it is not a regular file, such as a pipe)."""
    try:
        return path.stat().st_size if path.is_file() else 0
    except OSError:
        return 0


def _blank_lines(data: bytes, first_line: int) -> int:
    """How many lines of ``data`` (whose first line is line ``first_line`` of the file) are
    blank as the reader decides it (no row): only lines that do not start with ``{`` are
    looked at."""
    starts = [0] if not data.startswith(b"{") else []
    starts += [m.end() for m in _ODD_LINE.finditer(data) if m.end() < len(data)]
    blank = 0
    number, counted = first_line, 0
    for start in starts:
        number += data.count(b"\n", counted, start)
        counted = start
        end = data.find(b"\n", start)
        raw = data[start : len(data) if end < 0 else end + 1]
        if raw.isascii():
            blank += not raw.strip()
            continue
        with contextlib.suppress(UnicodeDecodeError):  # (a bad row: it takes a place)
            blank += not raw.decode("utf-8-sig" if number == 1 else "utf-8").strip()
    return blank


def divided_settings(settings: RunSettings, workers: int) -> dict[str, Any]:
    """Settings for each of ``workers`` workers so that together they keep the run's limits
    and cost cap (nothing to divide when the limits are shared)."""
    if settings.shared_limits is not None or workers == 1:
        return {}

    def share(limits: Limits) -> Limits:
        return attrs.evolve(
            limits,
            max_concurrency=max(1, limits.max_concurrency // workers),
            requests_per_minute=None
            if limits.requests_per_minute is None
            else limits.requests_per_minute / workers,
            tokens_per_minute=None
            if limits.tokens_per_minute is None
            else limits.tokens_per_minute / workers,
        )

    cap = settings.max_cost_usd
    return {
        "limits": {name: share(limits) for name, limits in settings.resource_limits.items()},
        "max_concurrency": None,
        "max_cost_usd": None if cap is None else cap / workers,
    }


def _ready(metrics: object) -> None:
    """In a new worker process: nothing more than what unpickling ``metrics`` imports (the
    runner and the metrics' plugins), so the worker is ready when its first part comes."""


def _plain_part(
    plan: RunPlan, blob: bytes, first_line: int, first: int
) -> tuple[Any, list[bytes]] | None:
    """The lines of a part as ranked columns (:mod:`ctxeval._data.jsonl_columns`), read in
    bulk as the local runner reads a whole file of plain ID samples, and its rows' lines,
    when the part is large enough to pay numpy's import (a worker pays it once: then the
    file's last, smaller parts too) and every metric scores such columns; else None."""
    least = COLUMNS_FROM // 32 if "numpy" in sys.modules else COLUMNS_FROM // 8
    if len(blob) < least or any(ranked_column_scorer(m) is None for m in plan.metrics):
        return None
    from ctxeval._data.jsonl_columns import read_plain_lines

    lines = io.BytesIO(blob).readlines()  # split as iterating the file splits it
    source = read_plain_lines(lines, first_line=first_line, first_index=first)
    return None if source is None else (source, [line for line in lines if line.strip()])


def _score_part(plan: RunPlan, first: int, payload: _Payload, digests: bool) -> _Done:
    """In a worker process: score one part of the input with the local runner."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    kind, data = payload
    kept: list[bytes] | None = None  # (the part's rows' lines, when read as columns)
    samples: Any = data
    if kind == "lines":
        path, first_line, blob = data
        plain = None if digests else _plain_part(plan, blob, first_line, first)
        if plain is not None:
            samples, kept = plain
        else:
            lines = io.BytesIO(blob)  # split as iterating the file splits it
            samples = SampleStream.of_lines(Path(path), lines, first_line=first_line)
    collected = GatheredParts()
    log = SampleDigests(plan.previous) if digests else None
    sink = RowSink(plan, collected, ProgressTracker(None, None), log)
    error: BaseException | None = None
    try:
        anyio.run(functools.partial(score_locally, plan, samples, sink, first_index=first))
    except Exception as exc:  # raised by the driving process once these rows are in
        error = exc
    per_part = None if log is None else [log.per_row(rows) for rows in collected.parts]
    done = 0  # (the part's rows before this block's: a columnar run's blocks come in order)
    for rows in collected.parts:
        if isinstance(rows, RowBlock):
            if kept is not None:  # its samples as their lines: the columns stay here
                rows.sources = kept[done : done + len(rows.sources)]
            done += len(rows.sources)
            # the parsed samples stay here: unpickling them cost the driving process more
            # than the whole local run (89 ms against 1.7 ms a part of 5 000 samples); the
            # rows' evidence is read from their lines, as from any kept block
            rows.parsed = None
            # the block travels as the driving process keeps it (RowBlock.compact): its lines
            # in one buffer, its ids in one string, each column's scores in one array; what
            # the workers do here the driving process, the busiest of the run, does not
            if isinstance(rows.sources, list):
                rows.sources = Lines(rows.sources)
            if not isinstance(rows.sample_ids, Texts):
                rows.sample_ids = Texts(rows.sample_ids)
            rows.columns = tuple(column.compact() for column in rows.columns)
    return collected.parts, per_part, error
