"""Reading traces: OTLP JSON (OpenInference spans, as the collector's file exporter writes them)
against the equivalent samples JSONL, time and peak memory.

Each trace has 10 spans: a CHAIN root, an EMBEDDING, a RETRIEVER with 5 documents (id, text,
score, metadata), a RERANKER with 3, an LLM, and five CHAIN/TOOL spans with plain input and
output. The spans are written as a collector writes a BatchSpanProcessor's exports: in the order
they end (children before their parent), 512 spans to a line, so a trace spans lines. The
equivalent JSONL holds one sample per trace: the question, the answer, the reranker's documents
(texts and ids).

Each measurement runs in a fresh process (``ru_maxrss`` of that process only): reading every
sample (``list`` not kept: a loop that counts) of ``ctxeval.load_traces(path,
format="openinference")`` and of ``ctxeval.load_samples(jsonl)``.

    python bench/traces.py [--traces 100000] [--small 10000]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

SPANS_PER_TRACE = 10
BATCH = 512

MEASURE = """
import resource, sys, time
import ctxeval
path, kind = sys.argv[1], sys.argv[2]
start = time.perf_counter()
stream = (
    ctxeval.load_traces(path, format="openinference") if kind == "traces"
    else ctxeval.load_samples(path)
)
n = 0
for sample in stream:
    n += 1
seconds = time.perf_counter() - start
usage = resource.getrusage(resource.RUSAGE_SELF)
print(n, seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024)
"""


def _attr(key: str, value: object) -> str:
    if isinstance(value, float):
        return json.dumps({"key": key, "value": {"doubleValue": value}})
    return json.dumps({"key": key, "value": {"stringValue": value}})


def _documents(prefix: str, ids: list[str]) -> list[str]:
    out = []
    for i, doc in enumerate(ids):
        base = f"{prefix}.{i}.document."
        out += [
            _attr(base + "id", doc),
            _attr(base + "content", f"The text of document {doc}, a chunk of some length. " * 3),
            _attr(base + "score", 1.0 / (i + 1)),
            _attr(base + "metadata", json.dumps({"source": f"file-{doc}.md"})),
        ]
    return out


def _trace_spans(t: int) -> Iterator[str]:
    """The spans of trace ``t`` as OTLP JSON, in the order they end."""
    trace = f"{t + 1:032x}"
    question = f"What does document {t} say about topic {t % 97}?"
    answer = f"It says {t} things."
    root = f"{1:016x}"
    kinds = ["EMBEDDING", "RETRIEVER", "RERANKER", "LLM", "CHAIN", "TOOL", "CHAIN", "TOOL", "CHAIN"]
    ids = [f"doc-{(t * 7 + k) % 100000}" for k in range(5)]
    for n, kind in enumerate(kinds, start=2):
        attrs = [_attr("openinference.span.kind", kind), _attr("input.value", question)]
        if kind == "RETRIEVER":
            attrs += _documents("retrieval.documents", ids)
        elif kind == "RERANKER":
            attrs += _documents("reranker.output_documents", ids[:3])
        else:
            attrs.append(_attr("output.value", answer if kind == "LLM" else "ok"))
        yield _span(trace, f"{n:016x}", root, kind.lower(), t, n, attrs)
    attrs = [
        _attr("openinference.span.kind", "CHAIN"),
        _attr("input.value", question),
        _attr("output.value", answer),
        _attr("metadata", json.dumps({"question_id": f"q{t}"})),
    ]
    yield _span(trace, root, None, "rag", t, 1, attrs)


def _span(
    trace: str, span: str, parent: str | None, name: str, t: int, n: int, attrs: list[str]
) -> str:
    start = 1_700_000_000_000_000_000 + t * 1_000_000 + n * 1000
    head = f'{{"traceId":"{trace}","spanId":"{span}",'
    if parent:
        head += f'"parentSpanId":"{parent}",'
    return (
        head + f'"name":"{name}","kind":1,"startTimeUnixNano":"{start}",'
        f'"endTimeUnixNano":"{start + 500}","attributes":[{",".join(attrs)}],"status":{{}}}}'
    )


def write_otlp(path: Path, traces: int) -> None:
    with path.open("w") as out:
        batch: list[str] = []
        for t in range(traces):
            for span in _trace_spans(t):
                batch.append(span)
                if len(batch) == BATCH:
                    out.write(_request(batch))
                    batch = []
        if batch:
            out.write(_request(batch))


def _request(spans: list[str]) -> str:
    resource = '{"attributes":[{"key":"service.name","value":{"stringValue":"rag"}}]}'
    return (
        f'{{"resourceSpans":[{{"resource":{resource},"scopeSpans":[{{"scope":'
        f'{{"name":"rag-app"}},"spans":[{",".join(spans)}]}}]}}]}}\n'
    )


def write_jsonl(path: Path, traces: int) -> None:
    with path.open("w") as out:
        for t in range(traces):
            ids = [f"doc-{(t * 7 + k) % 100000}" for k in range(3)]
            text = [f"The text of document {d}, a chunk of some length. " * 3 for d in ids]
            row = {
                "id": f"{t + 1:032x}",
                "user_input": f"What does document {t} say about topic {t % 97}?",
                "response": f"It says {t} things.",
                "retrieved_contexts": text,
                "retrieved_context_ids": ids,
            }
            out.write(json.dumps(row) + "\n")


def measure(path: Path, kind: str) -> tuple[int, float, float, float]:
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, str(path), kind],
        check=True,
        capture_output=True,
        text=True,
    )
    n, seconds, cpu, peak = done.stdout.split()
    return int(n), float(seconds), float(cpu), float(peak)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", type=int, default=100_000)
    parser.add_argument("--small", type=int, default=10_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        rows = []
        for traces in (args.small, args.traces):
            otlp = Path(folder) / f"traces-{traces}.jsonl"
            plain = Path(folder) / f"samples-{traces}.jsonl"
            write_otlp(otlp, traces)
            write_jsonl(plain, traces)
            for kind, path in (("traces", otlp), ("samples", plain)):
                n, seconds, cpu, peak = measure(path, kind)
                assert n == traces, (kind, n, traces)
                size = path.stat().st_size / 1e6
                rows.append((kind, traces * (SPANS_PER_TRACE if kind == "traces" else 1), n,
                             size, seconds, cpu, peak))  # fmt: skip
                print(f"{kind:8} {rows[-1][1]:>9} items {n:>7} samples {size:8.1f} MB "
                      f"{seconds:7.2f} s wall {cpu:7.2f} s CPU {peak:7.1f} MB peak RSS",
                      flush=True)  # fmt: skip
    small_traces, _, big_traces, big_samples = rows
    print(
        f"peak RSS, {args.traces * SPANS_PER_TRACE} spans / {args.small * SPANS_PER_TRACE}: "
        f"{big_traces[6] / small_traces[6]:.2f}x; traces / samples JSONL: wall "
        f"{big_traces[4] / big_samples[4]:.2f}x, CPU {big_traces[5] / big_samples[5]:.2f}x"
    )


if __name__ == "__main__":
    main()
