"""ctxeval on Spark (extra ``spark``): the runner ``spark`` and :func:`evaluate_frame`.

* :class:`SparkRunner` (``evaluate(..., runner="spark")``, ``ctxeval evaluate --runner spark
  --workers N``): the run's parts are scored by Spark tasks (local mode ``local[N]``, a master
  URL, or the ``SparkSession`` you give), and the rows come back to ctxeval in input order, so
  ``--out``, the journal, ``--resume`` and the report work as with any runner.
* :func:`evaluate_frame`: for people who live in Spark: a Spark DataFrame of samples in, a
  Spark DataFrame of rows out (``mapInArrow`` with :class:`ctxeval.runners.BatchScorer`),
  written as Parquet by the executors when you give ``output=``.

Outside calls (an LLM judge) keep the run's limits across the cluster: the limits and the
cost cap are divided among the workers (see docs/scaling-out.md).
"""

from __future__ import annotations

from .frames import evaluate_frame
from .runner import SparkExecutor, SparkRunner, spark_session

__all__ = ["SparkExecutor", "SparkRunner", "evaluate_frame", "spark_session"]
