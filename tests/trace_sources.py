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
            if (
                key in ("traceId", "spanId", "parentSpanId", "trace_id", "span_id")
                or key == "parent_span_id"
            ):
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
    return mlflow.search_traces(locations=[experiment.experiment_id], order_by=["timestamp_ms ASC"])


# --- LangSmith --------------------------------------------------------------------------------


def langsmith_runs(*, tree: bool = False) -> list[bytes]:
    """The runs of :data:`RAG` as ``RunTree`` objects (a chain, two retriever children, an LLM
    child), serialised as the client sends them: each run's payload (``_get_dicts_safe``)
    through the client's JSON encoder, children first (each run is posted when it ends); or,
    ``tree=True``, each root with its nested ``child_runs``."""
    from langsmith._internal._serde import dumps_json
    from langsmith.run_trees import RunTree

    sent: list[bytes] = []
    for item in RAG:
        root = RunTree(
            name="rag",
            run_type="chain",
            inputs={"question": item["question"]},
            extra={"metadata": {"question_id": item["qid"]}},
            project_name="rag",
        )
        children = []
        for name, docs in (("search-1", item["first"]), ("search-2", item["docs"])):
            child = root.create_child(
                name=name, run_type="retriever", inputs={"query": item["question"]}
            )
            documents = [
                {
                    "page_content": text,
                    "metadata": {"id": doc_id, "score": score},
                    "type": "Document",
                }
                for doc_id, text, score in docs
            ]
            child.end(outputs={"documents": documents})
            children.append(child)
        llm = root.create_child(name="llm", run_type="llm", inputs={"question": item["question"]})
        llm.end(outputs={"answer": item["answer"]})
        children.append(llm)
        root.end(outputs={"answer": item["answer"]})
        if tree:
            whole = root._get_dicts_safe()
            whole["child_runs"] = [c._get_dicts_safe() for c in children]
            sent.append(dumps_json(whole))
        else:
            sent += [dumps_json(run._get_dicts_safe()) for run in (*children, root)]
    return sent


# --- Phoenix ----------------------------------------------------------------------------------


def phoenix_frame() -> Any:
    """The spans of :data:`RAG` as ``px.Client().get_spans_dataframe()`` returns them: made
    with the OpenTelemetry SDK (:func:`otel_spans`, with a reranker) and laid out as Phoenix
    lays out OpenInference spans (one row a span, sorted by start time, the document lists
    unflattened, indexed by ``context.span_id``)."""
    import pandas as pd

    rows = []
    for span in otel_spans(reranker=True):
        attrs = dict(span.attributes)
        row: dict[str, Any] = {
            "name": span.name,
            "span_kind": attrs.pop("openinference.span.kind"),
            "parent_id": f"{span.parent.span_id:016x}" if span.parent else None,
            "start_time": pd.Timestamp(span.start_time, unit="ns", tz="UTC"),
            "end_time": pd.Timestamp(span.end_time, unit="ns", tz="UTC"),
            "status_code": "OK",
            "context.span_id": f"{span.context.span_id:016x}",
            "context.trace_id": f"{span.context.trace_id:032x}",
        }
        for prefix in ("retrieval.documents", "reranker.output_documents"):
            documents: list[dict[str, Any]] = []
            while f"{prefix}.{len(documents)}.document.id" in attrs:
                base = f"{prefix}.{len(documents)}."
                documents.append(
                    {
                        key: json.loads(attrs.pop(base + key))
                        if key == "document.metadata"
                        else attrs.pop(base + key)
                        for key in (
                            "document.id",
                            "document.content",
                            "document.score",
                            "document.metadata",
                        )
                    }
                )
            if documents:
                row[f"attributes.{prefix}"] = documents
        if "metadata" in attrs:
            row["attributes.metadata"] = json.loads(attrs.pop("metadata"))
        row.update({f"attributes.{k}": v for k, v in attrs.items()})
        rows.append(row)
    frame = pd.DataFrame(rows).sort_values("start_time")
    return frame.set_index("context.span_id", drop=False).rename_axis(None)
