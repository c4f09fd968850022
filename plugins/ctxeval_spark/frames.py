""":func:`evaluate_frame`: a Spark DataFrame of samples in, a Spark DataFrame of rows out."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import Any

from ctxeval.plugin import ConfigError, DataError, Metric
from ctxeval.runners import ROW_COLUMNS, BatchScorer

__all__ = ["ROW_SCHEMA", "evaluate_frame"]

ROW_SCHEMA = (
    "sample_id string, metric string, status string, score double, reason string, "
    "details string, requests bigint, retries bigint, prompt_tokens bigint, "
    "completion_tokens bigint, cost_usd double, cache_hits bigint"
)
"""The Spark schema of the rows (:data:`ctxeval.runners.ROW_COLUMNS`: those of
``results.parquet``, ``details`` as JSON text, the usage flattened)."""


def evaluate_frame(
    frame: Any,
    metrics: Sequence[str | Metric],
    *,
    llm: Any = None,
    settings: Any = None,
    workers: int | None = None,
    output: str | os.PathLike[str] | None = None,
    mode: str = "errorifexists",
    cache_path: str | os.PathLike[str] | None = None,
    details: bool = True,
    **overrides: Any,
) -> Any:
    """Score the samples of the Spark DataFrame ``frame`` with ``metrics``, in Spark.

    ``frame`` has a column per sample field (``user_input``, ``retrieved_context_ids``,
    ... as :func:`ctxeval.evaluate` takes them) and an ``id`` column (a task does not know a
    row's position in the whole frame; ``pyspark.sql.functions.monotonically_increasing_id``
    makes one). The result is a lazy DataFrame with one row per sample and metric and the
    columns of ``results.parquet`` (:data:`ROW_SCHEMA`: a row's fields, ``details`` as JSON
    text, the usage in six numeric columns), in the order of ``frame``'s
    partitions; with ``output=`` the executors write it as Parquet there (``mode``: Spark's
    save mode) and the DataFrame read back from it is returned.

    Outside calls keep the run's limits across the cluster: they are divided among
    ``workers`` tasks (default: the frame's number of partitions), as the cost cap is.
    Other keyword arguments are :func:`ctxeval.evaluate`'s settings (``max_concurrency=``,
    ``timeout=``, ``max_cost_usd=``...); ``cache_path`` is a SQLite LLM cache the tasks of a
    machine share; ``details=False`` leaves each row's evidence out (the ``details`` column
    null): writing it is most of the time of a deterministic metric's rows.
    """
    columns = list(getattr(frame, "columns", None) or [])
    if not hasattr(frame, "mapInPandas"):
        raise ConfigError(
            f"evaluate_frame takes a Spark DataFrame, got {type(frame).__name__}; "
            "use ctxeval.evaluate for samples in memory or in a file"
        )
    if "id" not in columns:
        raise DataError(
            f"evaluate_frame needs an 'id' column (the frame has {columns}): add one, e.g. "
            "frame.withColumn('id', F.monotonically_increasing_id().cast('string'))"
        )
    if workers is None:
        workers = max(1, frame.rdd.getNumPartitions())
    scorer = BatchScorer.build(
        metrics,
        llm=llm,
        settings=settings,
        workers=workers,
        cache_path=cache_path,
        details=details,
        **overrides,
    )
    shared = frame.sparkSession.sparkContext.broadcast(scorer)  # one scorer per process
    rows = frame.mapInArrow(_Batches(shared), ROW_SCHEMA)
    if output is None:
        return rows
    rows.write.mode(mode).parquet(os.fspath(output))
    return frame.sparkSession.read.parquet(os.fspath(output))


class _Batches:
    """The function ``mapInArrow`` runs: the broadcast scorer on each Arrow batch (no pandas
    on the way). A broadcast value is unpickled once per Python worker process, so the
    scorer's event loop and cache handle serve every task of that process."""

    def __init__(self, shared: Any) -> None:
        self.shared = shared

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        scorer: BatchScorer = self.shared.value
        for batch in batches:
            yield from scorer(batch).select(list(ROW_COLUMNS)).to_batches()
