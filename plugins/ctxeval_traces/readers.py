"""The trace readers registered in ``ctxeval.traces``: ``openinference``, ``mlflow``,
``langsmith`` and ``phoenix``. Each checks the mapping when :meth:`read` is called and yields
one ``(position, sample row or DataError)`` per trace, lazily."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from ctxeval import ConfigError

from .grouping import MAX_OPEN_TRACES
from .mapping import Notes, TraceMapping

__all__ = ["LangSmithReader", "MLflowReader", "OpenInferenceReader", "PhoenixReader"]

_STREAMING = {"max_open_traces": str(MAX_OPEN_TRACES)}
_DOCUMENTS = {"content_key": "page_content"}  # LangChain's and MLflow's Document


def _max_open(mapping: TraceMapping) -> int:
    try:
        value = int(mapping.extra["max_open_traces"])
    except ValueError:
        value = 0
    if value < 1:
        raise ConfigError(
            f"mapping max_open_traces={mapping.extra['max_open_traces']!r}: give a whole "
            "number >= 1"
        )
    return value


class OpenInferenceReader:
    """OpenInference spans in OTLP JSON files (the OpenTelemetry collector's file exporter)."""

    name = "openinference"

    def read(self, source: Any, mapping: Mapping[str, str]) -> Iterator[tuple[int, Any]]:
        from .otlp import read_otlp

        chosen = TraceMapping.parse(mapping, reader=self.name, extra=_STREAMING)
        return read_otlp(source, chosen, Notes(self.name), _max_open(chosen))


class MLflowReader:
    """MLflow traces: a ``mlflow.search_traces()`` DataFrame, a list of ``Trace`` objects, or
    exported trace JSON (``Trace.to_json()``: one per file, or one per line)."""

    name = "mlflow"

    def read(self, source: Any, mapping: Mapping[str, str]) -> Iterator[tuple[int, Any]]:
        from .mlflow_traces import read_mlflow

        chosen = TraceMapping.parse(mapping, reader=self.name, defaults=_DOCUMENTS)
        return read_mlflow(source, chosen, Notes(self.name))


class LangSmithReader:
    """LangSmith runs: run trees (nested ``child_runs``) or flat runs with ``trace_id`` and
    ``parent_run_id``, as JSON or JSONL files, or dicts / ``RunTree`` objects."""

    name = "langsmith"

    def read(self, source: Any, mapping: Mapping[str, str]) -> Iterator[tuple[int, Any]]:
        from .langsmith_runs import read_langsmith

        chosen = TraceMapping.parse(
            mapping, reader=self.name, extra=_STREAMING, defaults=_DOCUMENTS
        )
        return read_langsmith(source, chosen, Notes(self.name), _max_open(chosen))


class PhoenixReader:
    """Phoenix spans: a ``px.Client().get_spans_dataframe()`` DataFrame, or its Parquet or
    JSONL export (one span per row)."""

    name = "phoenix"

    def read(self, source: Any, mapping: Mapping[str, str]) -> Iterator[tuple[int, Any]]:
        from .phoenix_spans import read_phoenix

        chosen = TraceMapping.parse(mapping, reader=self.name, extra=_STREAMING)
        return read_phoenix(source, chosen, Notes(self.name), _max_open(chosen))
