"""Real traces made by the real libraries, offline, for the trace readers' tests.

* OpenTelemetry: spans made with the OpenTelemetry SDK under OpenInference's attribute names
  (``openinference-semantic-conventions``), kept by the SDK's in-memory exporter, encoded by
  ``opentelemetry-exporter-otlp-proto-common`` as the OTLP exporter sends them, and written as
  the collector's file exporter writes them (protobuf JSON, one request per line).
* MLflow: ``mlflow.trace(span_type="RETRIEVER")`` into a local SQLite store, read back with
  ``mlflow.search_traces``.
* LangSmith: a ``RunTree`` serialised as its client would send it (no network).

The retrieval of each is :data:`RAG`: the same question, documents, scores and answer, so a test
compares the rows of each format with the rows of the equivalent JSONL (:func:`rag_rows`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

RAG: list[dict[str, Any]] = [
    {
        "qid": "q1",
        "question": "Who wrote Dune?",
        "answer": "Frank Herbert wrote Dune.",
        "first": [("d9", "Dune is a 1965 novel.", 0.4)],
        "docs": [
            ("d1", "Frank Herbert wrote Dune in 1965.", 0.9),
            ("d2", "Dune is set on the planet Arrakis.", 0.5),
        ],
    },
    {
        "qid": "q2",
        "question": "What is the capital of France?",
        "answer": "Paris.",
        "first": [("d8", "France is in Europe.", 0.3)],
        "docs": [("d3", "Paris is the capital of France.", 0.8)],
    },
]


def rag_rows() -> list[dict[str, Any]]:
    """The samples JSONL equivalent to :data:`RAG`'s traces (the last retrieval), without ids."""
    return [
        {
            "user_input": r["question"],
            "response": r["answer"],
            "retrieved_contexts": [d[1] for d in r["docs"]],
            "retrieved_context_ids": [d[0] for d in r["docs"]],
        }
        for r in RAG
    ]


# --- OpenTelemetry ----------------------------------------------------------------------------


def otel_spans(rag: list[dict[str, Any]] | None = None, *, reranker: bool = False) -> list[Any]:
    """Finished SDK spans of one trace per item: a CHAIN root, two RETRIEVER spans (a first
    search, then the one kept), optionally a RERANKER, and an LLM span."""
    from openinference.semconv.trace import (
        DocumentAttributes,
        OpenInferenceSpanKindValues,
        RerankerAttributes,
        SpanAttributes,
    )
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("rag-app")
    kind = SpanAttributes.OPENINFERENCE_SPAN_KIND

    def documents(prefix: str, docs: list[tuple[str, str, float]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for i, (doc_id, text, score) in enumerate(docs):
            base = f"{prefix}.{i}."
            out[base + DocumentAttributes.DOCUMENT_ID] = doc_id
            out[base + DocumentAttributes.DOCUMENT_CONTENT] = text
            out[base + DocumentAttributes.DOCUMENT_SCORE] = score
            out[base + DocumentAttributes.DOCUMENT_METADATA] = json.dumps({"source": doc_id})
        return out

    for item in rag or RAG:
        with tracer.start_as_current_span("rag") as root:
            root.set_attribute(kind, OpenInferenceSpanKindValues.CHAIN.value)
            root.set_attribute(SpanAttributes.INPUT_VALUE, item["question"])
            root.set_attribute(SpanAttributes.METADATA, json.dumps({"question_id": item["qid"]}))
            for name, docs in (("search-1", item["first"]), ("search-2", item["docs"])):
                with tracer.start_as_current_span(name) as span:
                    span.set_attribute(kind, OpenInferenceSpanKindValues.RETRIEVER.value)
                    span.set_attribute(SpanAttributes.INPUT_VALUE, item["question"])
                    span.set_attributes(documents(SpanAttributes.RETRIEVAL_DOCUMENTS, docs))
            if reranker:
                with tracer.start_as_current_span("rerank") as span:
                    span.set_attribute(kind, OpenInferenceSpanKindValues.RERANKER.value)
                    span.set_attributes(
                        documents(RerankerAttributes.RERANKER_OUTPUT_DOCUMENTS, item["docs"][:1])
                    )
            with tracer.start_as_current_span("llm") as span:
                span.set_attribute(kind, OpenInferenceSpanKindValues.LLM.value)
                span.set_attribute(SpanAttributes.INPUT_VALUE, item["question"])
                span.set_attribute(SpanAttributes.OUTPUT_VALUE, item["answer"])
            root.set_attribute(SpanAttributes.OUTPUT_VALUE, item["answer"])
    provider.shutdown()
    return list(exporter.get_finished_spans())


def otlp_json_lines(spans: list[Any], *, snake_case: bool = False, hex_ids: bool = True) -> str:
    """``spans`` as the collector's file exporter writes them: one ExportTraceServiceRequest a
    line in protobuf JSON (ids in hex as OTLP JSON has them, or base64 as plain protobuf JSON
    does; camelCase, or the proto field names), each span in the request of its own batch as
    the SDK exported it (children before their parent)."""
    from google.protobuf.json_format import MessageToDict
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    lines = []
    for span in spans:  # (SimpleSpanProcessor: one export per span, in the order they ended)
        request = MessageToDict(encode_spans([span]), preserving_proto_field_name=snake_case)
        if hex_ids:
            _hex_ids(request)
        lines.append(json.dumps(request))
    return "\n".join(lines) + "\n"


def _hex_ids(value: Any) -> None:
    import base64

    if isinstance(value, dict):
        for key, inner in value.items():
            if key in ("traceId", "spanId", "parentSpanId", "trace_id", "span_id"):
                value[key] = base64.b64decode(inner).hex()
            elif key == "parent_span_id":
                value[key] = base64.b64decode(inner).hex()
            else:
                _hex_ids(inner)
    elif isinstance(value, list):
        for inner in value:
            _hex_ids(inner)


def write_otlp(path: Path, **options: Any) -> Path:
    path.write_text(otlp_json_lines(otel_spans(), **options), encoding="utf-8")
    return path


# --- MLflow -----------------------------------------------------------------------------------


def mlflow_traces(folder: Path) -> Any:
    """The traces of :data:`RAG` made with ``mlflow.trace`` into a SQLite store in ``folder``,
    read back with ``mlflow.search_traces()`` (a DataFrame)."""
    import os

    os.environ["MLFLOW_ENABLE_ASYNC_TRACE_LOGGING"] = "false"
    import mlflow
    from mlflow.entities import Document, SpanType

    mlflow.set_tracking_uri(f"sqlite:///{folder / 'mlflow.sqlite'}")
    experiment = mlflow.set_experiment(f"rag-{folder.name}")

    @mlflow.trace(span_type=SpanType.RETRIEVER)
    def search(query: str, docs: list[tuple[str, str, float]]) -> list[Document]:
        return [
            Document(page_content=text, metadata={"doc_uri": doc_id, "score": score}, id=doc_id)
            for doc_id, text, score in docs
        ]

    @mlflow.trace(span_type=SpanType.LLM)
    def generate(question: str, answer: str) -> str:
        return answer

    @mlflow.trace(span_type=SpanType.CHAIN)
    def rag(question: str, item: dict[str, Any]) -> str:
        mlflow.update_current_trace(metadata={"question_id": item["qid"]})
        search(question, item["first"])
        search(question, item["docs"])
        return generate(question, item["answer"])

    for item in RAG:
        rag(item["question"], item)
    mlflow.flush_trace_async_logging()
    return mlflow.search_traces(
        locations=[experiment.experiment_id], order_by=["timestamp_ms ASC"]
    )
