"""The engine-neutral batch scorer: :class:`BatchScorer`, a batch of samples in, its rows out.

Data engines hand a function one batch of a table at a time: Spark ``mapInPandas``, Ray Data
``map_batches``, Dask ``map_partitions``, Daft batch functions. A :class:`BatchScorer` is that
function for a ctxeval run: built once on the driver from the run's metrics and settings, it
pickles to the workers, and in each worker process it keeps one event loop (a daemon thread)
and one handle on the run's SQLite LLM cache across the batches it scores. A batch is a pandas
DataFrame or a pyarrow Table whose columns are :class:`~ctxeval.Sample` fields (the ragas
names, the older ones too, and ``id``); the rows come back as a table of the same kind, one
row per sample and metric, with the columns of ``results.parquet`` and
:meth:`Evaluation.to_arrow <ctxeval.Evaluation.to_arrow>` (those of ``results.jsonl``,
``details`` as JSON text, the usage in six columns).
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Final

import attrs
import orjson

from ctxeval._calls.cache import SQLiteCache
from ctxeval._data.arrow_columns import arrow_ranked, arrow_samples
from ctxeval._errors import ConfigError, DataError
from ctxeval._output.lines import (
    PlainRow,
    block_rows,
    built_row,
    evidence_of,
)
from ctxeval._output.writers import arrow_schema
from ctxeval._plugins.hooks import ranked_column_scorer
from ctxeval._plugins.protocols import Metric
from ctxeval._results.columns import RowBlock, Scores
from ctxeval._results.results import NO_USAGE, MetricResult, Usage, json_line
from ctxeval._results.table import ROW_COLUMNS as TABLE_COLUMNS
from ctxeval._results.table import USAGE_COLUMNS
from ctxeval._run.local import score_locally
from ctxeval._run.loop_thread import LoopThread
from ctxeval._run.plan import RunPlan
from ctxeval._run.processes import divided_settings
from ctxeval._run.progress import ProgressTracker
from ctxeval._run.settings import RunSettings
from ctxeval._run.sink import GatheredParts, RowSink, SampleDigests

__all__ = ["ROW_COLUMNS", "BatchScorer", "ScoredPart", "score_part"]

ROW_COLUMNS: Final = TABLE_COLUMNS
"""The columns of the rows a :class:`BatchScorer` gives, in order: those of every table of
rows ctxeval makes (``results.parquet``, :meth:`Evaluation.to_arrow
<ctxeval.Evaluation.to_arrow>`, :meth:`Evaluation.to_pandas <ctxeval.Evaluation.to_pandas>`):
a row's fields of ``results.jsonl``, ``details`` as JSON text, and its usage flattened
(``requests``, ``retries``, ``prompt_tokens``, ``completion_tokens``, ``cost_usd``,
``cache_hits``)."""

_ZERO: Final = tuple(NO_USAGE.to_dict().values())
"""A row's usage when it made no outside call, in :data:`USAGE_COLUMNS` order."""


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
    log = SampleDigests(plan.previous)
    parts, error = await _scored(plan, samples, log, first_index=first_index)
    rows = [row for part in parts for row in part]
    return ScoredPart(rows, log.per_row(rows), error)


async def _scored(
    plan: RunPlan, samples: Iterable[Any], log: SampleDigests | None, *, first_index: int = 0
) -> tuple[list[Sequence[MetricResult]], Exception | None]:
    """The parts the local runner gives for ``samples`` (row blocks on the fast path), and
    what stopped it, if anything did (the parts before it kept): the one scoring of
    :func:`score_part` and :class:`BatchScorer`, so of every engine's worker."""
    gathered = GatheredParts()
    sink = RowSink(plan, gathered, ProgressTracker(None, None), log)
    try:
        await score_locally(plan, samples, sink, first_index=first_index)
    except Exception as exc:  # handed back with the rows scored before it
        return list(gathered.parts), exc
    return list(gathered.parts), None


class BatchScorer:
    """A picklable callable that scores a batch of samples with a run's metrics.

    Build it with :meth:`build` (the arguments of :func:`ctxeval.evaluate`) or from a
    :class:`~ctxeval.runners.RunPlan`; call it on a pandas DataFrame or a pyarrow Table of
    samples; it returns the rows as a table of the same kind (:data:`ROW_COLUMNS`). Every
    sample needs an ``id`` (a batch's position in the whole input is not known to a worker).

    Args:
        plan: the run's plan (the journal, resume, progress callback and cache object of the
            driving process stay there; see :meth:`RunPlan.for_workers`).
        cache_path: a SQLite LLM cache file every worker of a machine opens once and shares
            (a batch run again after a lost task pays no call twice).
        details: False leaves each row's evidence out (``details`` is null): a deterministic
            metric's evidence is computed only to be written, and writing it is most of a
            batch's time (two thirds, on ID metrics).

    In a worker process the scorer keeps one event loop (in a daemon thread) and one cache
    handle across its batches; :meth:`close` stops the loop (a process that exits stops it
    too). Outside calls keep the plan's limits *per process*: build with ``workers=N`` to
    divide the limits and the cost cap among N processes, or give ``shared_limits=``.
    """

    def __init__(
        self,
        plan: RunPlan,
        *,
        cache_path: str | os.PathLike[str] | None = None,
        details: bool = True,
    ):
        if not isinstance(plan, RunPlan):
            raise ConfigError(f"BatchScorer needs a RunPlan, got {type(plan).__name__}")
        if not isinstance(details, bool):
            raise ConfigError(f"details must be True or False, got {details!r}")
        self.plan = plan.for_workers()
        self.cache_path = None if cache_path is None else os.fspath(cache_path)
        self.details = details
        self._loop: LoopThread | None = None
        self._lock = threading.Lock()

    @classmethod
    def build(
        cls,
        metrics: Sequence[str | Metric],
        *,
        llm: Any = None,
        settings: RunSettings | None = None,
        workers: int = 1,
        cache_path: str | os.PathLike[str] | None = None,
        details: bool = True,
        **overrides: Any,
    ) -> BatchScorer:
        """A scorer of ``metrics`` (names or metrics, as :func:`ctxeval.evaluate` takes them)
        for ``workers`` processes: the run's limits of outside calls and its cost cap are
        divided among them, so that together they keep them."""
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise ConfigError(f"workers must be a whole number of at least 1, got {workers!r}")
        plan = RunPlan.build(list(metrics), llm=llm, settings=settings, **overrides)
        if cache_path is None:
            cache_path = getattr(plan.settings.cache, "path", None)
        plan = plan.for_workers(**divided_settings(plan.settings, workers))
        return cls(plan, cache_path=cache_path, details=details)

    def _ranked(self) -> bool:
        """Whether every metric scores ranked columns (then an Arrow batch of the plain shape
        is scored as such, without a sample per row: :func:`~ctxeval._data.arrow_columns.
        arrow_ranked`)."""
        metrics = self.plan.metrics
        return bool(metrics) and all(ranked_column_scorer(m) is not None for m in metrics)

    @property
    def metrics(self) -> tuple[str, ...]:
        """The metrics' row names, in the order of each sample's rows."""
        return self.plan.names

    def __getstate__(self) -> dict[str, Any]:
        return {"plan": self.plan, "cache_path": self.cache_path, "details": self.details}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.plan = state["plan"]
        self.cache_path = state["cache_path"]
        self.details = state["details"]
        self._loop = None
        self._lock = threading.Lock()

    def __call__(self, batch: Any) -> Any:
        """The rows of ``batch`` (a pandas DataFrame, a pyarrow Table or RecordBatch), as a
        table of the same kind."""
        samples, kind = _samples(batch, ranked=self._ranked())
        parts = self._parts(samples)
        if kind == "arrow":
            return _arrow_table(parts, details=self.details)
        return _table(parts, kind, details=self.details)

    def rows_per_sample(self, batch: Any) -> list[str]:
        """Each sample's rows as one JSON array (the rows as ``results.jsonl`` writes them),
        in the order of ``batch``: for engines whose functions give one value per input row
        (Daft's batch functions, Spark's ``pandas_udf``)."""
        samples, _ = _samples(batch, ranked=self._ranked())
        width = len(self.metrics)
        rows = [row for part in self._parts(samples) for row in part]
        return [
            "[" + ",".join(row.to_json() for row in rows[i : i + width]) + "]"
            for i in range(0, len(rows), width)
        ]

    @staticmethod
    def empty(kind: str = "pandas") -> Any:
        """A table of no rows with the rows' columns and types (``"pandas"`` or ``"arrow"``):
        what Dask's ``map_partitions`` takes as ``meta``."""
        if kind not in ("pandas", "arrow"):
            raise ConfigError(f"kind must be 'pandas' or 'arrow', got {kind!r}")
        return _table([], kind, details=True)

    def map_batches(self, batches: Iterable[Any]) -> Iterator[Any]:
        """Each batch's rows: the form of Spark's ``mapInPandas`` and ``mapInArrow``."""
        for batch in batches:
            yield self(batch)

    def score_records(self, records: Iterable[Mapping[str, Any]]) -> list[MetricResult]:
        """The rows of samples given as mappings of field names, sample by sample and metric
        by metric."""
        return [row for part in self._parts([_sample(r) for r in records]) for row in part]

    def score_part(self, samples: Sequence[Any], *, first_index: int = 0) -> ScoredPart:
        """:func:`score_part` on this scorer's event loop, plan and cache: the rows of
        ``samples`` (samples or dicts), each row's sample digest, and what stopped them (the
        rows before it kept). For an engine's worker whose rows go back to a runner's sink
        (the ``ray`` runner's); a row reused from an interrupted run is the plan's own."""
        return self._event_loop().submit(self._score_part, list(samples), first_index).result()

    async def _score_part(self, samples: list[Any], first_index: int) -> ScoredPart:
        return await score_part(self.plan, samples, first_index=first_index)

    def _parts(self, samples: Sequence[Any]) -> list[Sequence[MetricResult]]:
        """The rows of ``samples`` (samples, or dicts of their fields) in the parts the local
        runner gives (row blocks: columns)."""
        if not samples:
            return []
        parts: list[Sequence[MetricResult]] = (
            self._event_loop().submit(self._score, samples).result()
        )
        return parts

    async def _score(self, samples: Sequence[Any]) -> list[Sequence[MetricResult]]:
        parts, error = await _scored(self.plan, samples, None)
        if error is not None:
            raise error
        return parts

    def _event_loop(self) -> LoopThread:
        with self._lock:
            if self._loop is None:
                os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
                if self.cache_path is not None:  # one handle per process, for every batch
                    self.plan = self.plan.for_workers(cache=SQLiteCache(self.cache_path))
                loop = LoopThread(name="ctxeval-batch-loop", on_start=_nothing, on_stop=_done)
                loop.start()
                self._loop = loop
            return self._loop

    def close(self) -> None:
        """Stop this process's event loop (a later batch starts another)."""
        with self._lock:
            loop, self._loop = self._loop, None
        if loop is not None:
            loop.stop(10.0)


def _nothing() -> None:
    """What the loop makes before it takes work: nothing (the plan makes its own)."""


async def _done() -> None:
    """What the loop cleans up when it stops: nothing."""


def _samples(batch: Any, *, ranked: bool = False) -> tuple[Sequence[Any], str]:
    """The samples of ``batch``, and the kind of table it is: an Arrow batch read by columns
    when it can be (:func:`~ctxeval._data.arrow_columns.arrow_samples`; with ``ranked``, as
    ranked columns when it is of their plain shape: :func:`~ctxeval._data.arrow_columns.
    arrow_ranked`), else each row as a dict of plain Python values (Arrow's cells come plain;
    pandas' are made plain) that the run reads as it reads any sample."""
    module = type(batch).__module__.split(".")[0]
    if module == "pyarrow" and hasattr(batch, "to_pylist"):
        source = arrow_ranked(batch) if ranked and hasattr(batch, "schema") else None
        if source is not None:
            return source, "arrow"
        read = arrow_samples(batch) if hasattr(batch, "schema") else None
        if read is not None:
            return read, "arrow"
        return [_sample(record) for record in batch.to_pylist()], "arrow"
    if module == "pandas" and hasattr(batch, "to_dict"):
        records = batch.to_dict("records")
        return [_sample({k: _plain(v) for k, v in r.items()}) for r in records], "pandas"
    raise DataError(
        f"a batch to score must be a pandas DataFrame or a pyarrow Table, got "
        f"{type(batch).__module__}.{type(batch).__name__}"
    )


def _plain(value: Any) -> Any:
    """A cell as plain Python: numpy arrays (pandas' list cells) as lists, numpy scalars as
    Python ones; None for a missing cell (NaN, pandas' NA)."""
    if value is None:
        return None
    tolist = getattr(value, "tolist", None)
    if tolist is not None and type(value).__module__ == "numpy":
        value = tolist()
    if isinstance(value, float) and math.isnan(value):
        return None
    if type(value).__name__ in ("NAType", "NaTType"):
        return None
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _sample(record: Mapping[str, Any]) -> dict[str, Any]:
    """A batch row as a sample's fields (a missing cell left out). The run reads it as it
    reads any sample: a malformed one stops a strict run, and is one error row per metric in a
    lenient one."""
    present = {str(k): v for k, v in record.items() if v is not None}
    if "id" not in present:
        raise DataError(
            "every sample of a batch needs an 'id' (a worker does not know a row's position in "
            f"the whole input); this one has the fields {sorted(present)}: add an id column"
        )
    return present


def _table(parts: Sequence[Sequence[MetricResult]], kind: str, *, details: bool) -> Any:
    """The rows of ``parts`` as a table of ``kind``: a row block's plain rows read from its
    columns, their evidence computed a batch at a time (as ``results.jsonl`` is written)."""
    columns: dict[str, list[Any]] = {name: [] for name in ROW_COLUMNS}
    add = _Adder(columns, details=details)
    for part in parts:
        if not isinstance(part, RowBlock):
            for row in part:
                add.row(row)
            continue
        if not any(column.rows for column in part.columns):  # plain rows only: by column
            add.plain_block(part)
            continue
        for item in block_rows(part, with_evidence=details):
            if isinstance(item, MetricResult):
                add.row(item)
            else:
                add.plain(part, item)
    if kind == "arrow":
        import pyarrow as pa

        return pa.table(columns, schema=row_schema())
    import pandas as pd

    frame = pd.DataFrame(columns, columns=list(ROW_COLUMNS))
    return frame.astype(_PANDAS_TYPES)


_PANDAS_TYPES: Final = {
    "score": "float64",
    **{name: "float64" if name == "cost_usd" else "int64" for name in USAGE_COLUMNS},
}
"""The types of the numeric columns of a pandas table of rows (a column of no rows too)."""


def _arrow_table(parts: Sequence[Sequence[MetricResult]], *, details: bool) -> Any:
    """The rows of ``parts`` as a pyarrow Table, a row block's columns at a time: its ids,
    metric names and scores put in place by Arrow, the rows kept whole written into them,
    the plain rows' evidence computed a batch at a time (as ``results.jsonl`` is written)."""
    import pyarrow as pa

    pieces = [
        _block_table(part, details=details)
        if isinstance(part, RowBlock)
        else _table([part], "arrow", details=details)
        for part in parts
        if len(part)
    ]
    if not pieces:
        return _table([], "arrow", details=details)
    return pieces[0] if len(pieces) == 1 else pa.concat_tables(pieces)


def _block_table(block: RowBlock, *, details: bool) -> Any:
    """The rows of ``block`` as a pyarrow Table (sample by sample, metric by metric)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    columns = block.columns
    width, size = len(columns), len(block.sample_ids)
    count = width * size
    index = pa.array(range(count), pa.int64())
    sample = pc.divide(index, width)  # each row's sample, and its metric's column
    metric = pc.subtract(index, pc.multiply(sample, width))
    order = pc.add(pc.multiply(metric, size), sample)  # each row's place, column by column
    scores = pa.concat_arrays([_scores(column.scores) for column in columns]).take(order)
    whole = {  # the rows kept whole, by row number
        position * width + number: row
        for number, column in enumerate(columns)
        for position, row in column.rows.items()
    }
    statuses: Any = pa.repeat(pa.scalar("ok"), count)
    reasons: Any = pa.nulls(count, pa.string())
    schema = row_schema()
    usage: list[Any] = [
        pa.repeat(pa.scalar(value, schema.field(name).type), count)
        for name, value in zip(USAGE_COLUMNS, _ZERO, strict=True)
    ]
    if whole:
        statuses, reasons, usage, scores = _with_whole(whole, count, scores)
    texts: Any = pa.nulls(count, pa.string())
    if details:
        texts = _detail_texts(block, order)
    names = pa.array([column.metric for column in columns], pa.string())
    values = (
        pa.array(list(block.sample_ids), pa.string()).take(sample),
        names.take(metric),
        statuses,
        scores,
        reasons,
        texts,
        *usage,
    )
    return pa.table(dict(zip(ROW_COLUMNS, values, strict=True)), schema=schema)


def _detail_texts(block: RowBlock, order: Any) -> Any:
    """The details of ``block``'s rows as JSON text, in row order (``order``: each row's
    place in the block's columns laid end to end). A block of plain rows whose columns all
    have their evidence in bulk (:func:`~ctxeval._output.lines.evidence_of`) is written a
    column at a time, by orjson at C speed, and put in row order by Arrow; another row by
    row, as :func:`block_rows` gives them."""
    import pyarrow as pa

    _, details = evidence_of(block)
    if any(column.rows for column in block.columns) or None in details:
        return [
            _json(item.to_dict()["details"])
            if isinstance(item, MetricResult)
            else _details_of(block, item)
            for item in block_rows(block)
        ]
    texts: list[Any] = []
    for column, evidence in zip(block.columns, details, strict=True):
        assert evidence is not None
        try:
            texts += list(map(orjson.dumps, evidence))  # (bytes of UTF-8: Arrow checks them)
        except TypeError:  # a detail orjson refuses: as MetricResult.to_json writes it
            ids = block.sample_ids
            texts += [
                _details_of(block, (position, column, ids[position], 0.0, these))
                for position, these in enumerate(evidence)
            ]
    return pa.array(texts, pa.string()).take(order)


def _scores(scores: Sequence[float | None]) -> Any:
    """A column's scores as an Arrow array of doubles (a kept column's straight from its
    buffer; NaN or null where a row is kept whole: its own score is put there)."""
    import pyarrow as pa

    if isinstance(scores, Scores):
        return pa.Array.from_buffers(pa.float64(), len(scores), [None, pa.py_buffer(scores.values)])
    return pa.array(scores, pa.float64())


def _with_whole(
    whole: dict[int, MetricResult], count: int, scores: Any
) -> tuple[list[Any], list[Any], list[list[Any]], list[Any]]:
    """The statuses, reasons, usage columns and scores of a block of ``count`` rows, those of
    the rows kept whole (by row number) written in."""
    statuses: list[Any] = ["ok"] * count
    reasons: list[Any] = [None] * count
    usage: list[list[Any]] = [[value] * count for value in _ZERO]
    scored: list[Any] = scores.to_pylist()
    values = _UsageValues()
    for number, row in whole.items():
        statuses[number] = row.status.value
        reasons[number] = row.reason
        for column, value in zip(usage, values(row.usage), strict=True):
            column[number] = value
        scored[number] = row.score
    return statuses, reasons, usage, scored


class _UsageValues:
    """A row's usage as the values of :data:`USAGE_COLUMNS` (rows share their usage object:
    the last one's values are kept)."""

    def __init__(self) -> None:
        self._last: tuple[Usage | None, tuple[Any, ...]] = (NO_USAGE, _ZERO)

    def __call__(self, usage: Usage) -> tuple[Any, ...]:
        if usage is not self._last[0]:
            self._last = (usage, tuple(usage.to_dict().values()))
        return self._last[1]


class _Adder:
    """Appends rows to the columns of a table."""

    def __init__(self, columns: dict[str, list[Any]], *, details: bool) -> None:
        self._columns = [columns[name] for name in ROW_COLUMNS]
        self._details = details
        self._usage = _UsageValues()

    def row(self, row: MetricResult) -> None:
        these = _json(row.to_dict()["details"]) if self._details else None
        values = (row.sample_id, row.metric, row.status.value, row.score, row.reason, these)
        for column, value in zip(self._columns, (*values, *self._usage(row.usage)), strict=True):
            column.append(value)

    def plain_block(self, block: RowBlock) -> None:
        """The rows of a block whose rows are all plain ``ok`` rows, a column at a time."""
        names = [column.metric for column in block.columns]
        width, size = len(names), len(block.sample_ids)
        ids, metrics, statuses, scores, reasons, details, *usage = self._columns
        ids.extend(sample_id for sample_id in block.sample_ids for _ in range(width))
        metrics.extend(names * size)
        statuses.extend(["ok"] * (width * size))
        scores.extend(
            s for per in zip(*(c.scores for c in block.columns), strict=True) for s in per
        )
        reasons.extend([None] * (width * size))
        for column, value in zip(usage, _ZERO, strict=True):
            column.extend([value] * (width * size))
        if not self._details:
            details.extend([None] * (width * size))
            return
        for item in block_rows(block):
            assert not isinstance(item, MetricResult)  # (no row is kept whole)
            details.append(_details_of(block, item))

    def plain(self, block: RowBlock, row: PlainRow) -> None:
        _, column, sample_id, score, _ = row
        these = _details_of(block, row) if self._details else None
        values = (sample_id, column.metric, "ok", score, None, these, *_ZERO)
        for target, value in zip(self._columns, values, strict=True):
            target.append(value)


def _details_of(block: RowBlock, row: PlainRow) -> str:
    """The details of a plain row of ``block`` as JSON text."""
    try:
        return orjson.dumps(row[4]).decode()
    except TypeError:  # as MetricResult.to_json writes what orjson refuses
        return _json(built_row(block, row).to_dict()["details"])


def _json(details: Any) -> str:
    """``details`` (a row's ``to_dict()["details"]``) as JSON text, as
    :meth:`MetricResult.to_json` writes them in ``results.jsonl``: what orjson refuses (a big
    integer, a plugin's set) by ``json``, what JSON has no word for as its repr."""
    try:
        return json_line(details)
    except (RecursionError, ValueError) as exc:  # details JSON cannot hold
        return orjson.dumps({"unwritable": f"details could not be written as JSON: {exc}"}).decode()


def row_schema() -> Any:
    """The pyarrow schema of the rows (:data:`ROW_COLUMNS`): that of ``results.parquet`` and
    :meth:`Evaluation.to_arrow <ctxeval.Evaluation.to_arrow>`."""
    return arrow_schema()
