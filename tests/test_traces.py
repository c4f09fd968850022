"""Trace readers (#52): the retrieval an application already traces, evaluated.

Traces are made by the real libraries (tests/trace_sources.py): the OpenTelemetry SDK with
OpenInference attributes, MLflow's ``mlflow.trace``, LangSmith's ``RunTree``; Phoenix's frame
is laid out from SDK spans. Each format gives the same rows as the equivalent samples JSONL.
Hostile traces give per-trace errors, never a crash or a hang.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

import ctxeval
import trace_sources as src
from ctxeval.cli import main

ID_METRICS = ["id_based_context_precision", "id_based_context_recall", "id_mrr"]
FIELDS = ("user_input", "response", "retrieved_contexts", "retrieved_context_ids")


def _same_as_jsonl(samples: list[ctxeval.Sample], tmp_path: Path) -> None:
    """The samples equal those of the equivalent JSONL, and so do their evaluation rows."""
    assert len(samples) == len(src.RAG)
    expected = src.rag_rows()
    for sample, row in zip(samples, expected, strict=True):
        row["id"] = sample.id
    jsonl = tmp_path / "equivalent.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in expected))
    plain = list(ctxeval.load_samples(jsonl))
    for got, want in zip(samples, plain, strict=True):
        assert {f: getattr(got, f) for f in FIELDS} == {f: getattr(want, f) for f in FIELDS}
    qrels = {s.id: {"d1": 1, "d3": 1} for s in plain}
    with_refs = [
        {**{f: getattr(s, f) for f in FIELDS}, "id": s.id, "reference_context_ids": qrels[s.id]}
        for s in samples
    ]
    plain_refs = [
        {**{f: getattr(s, f) for f in FIELDS}, "id": s.id, "reference_context_ids": qrels[s.id]}
        for s in plain
    ]
    a = ctxeval.evaluate(with_refs, ID_METRICS).results
    b = ctxeval.evaluate(plain_refs, ID_METRICS).results
    assert [(r.sample_id, r.metric, r.status, r.score) for r in a] == [
        (r.sample_id, r.metric, r.status, r.score) for r in b
    ]
    assert all(r.status.value == "ok" for r in a)


# --- OpenInference over OTLP JSON --------------------------------------------------------------


@pytest.mark.parametrize(("snake_case", "hex_ids"), [(False, True), (True, False), (False, False)])
def test_otlp_json_from_the_sdk_gives_the_rows_of_the_equivalent_jsonl(
    tmp_path: Path, snake_case: bool, hex_ids: bool
) -> None:
    path = src.write_otlp(tmp_path / "traces.jsonl", snake_case=snake_case, hex_ids=hex_ids)
    samples = list(ctxeval.load_traces(path, format="openinference"))
    _same_as_jsonl(samples, tmp_path)
    assert samples[0].metadata["question_id"] == "q1"
    assert samples[0].metadata["retrieval_scores"] == [0.9, 0.5]
    assert len(samples[0].id or "") == 32  # the trace id, in hex whatever the spelling


def test_a_folder_and_one_json_document_are_read(tmp_path: Path) -> None:
    folder = tmp_path / "export"
    folder.mkdir()
    src.write_otlp(folder / "a.jsonl")
    lines = src.otlp_json_lines(src.otel_spans()).splitlines()
    merged = {"resourceSpans": [r for line in lines for r in json.loads(line)["resourceSpans"]]}
    (folder / "b.json").write_text(json.dumps(merged, indent=2))
    samples = list(ctxeval.load_traces(folder, format="openinference"))
    assert [s.user_input for s in samples] == [r["question"] for r in src.RAG] * 2


def test_the_mapping_chooses_the_retrieval_the_question_and_the_id(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(src.otlp_json_lines(src.otel_spans(reranker=True)))

    def first(**mapping: str) -> ctxeval.Sample:
        return next(iter(ctxeval.load_traces(path, format="openinference", mapping=mapping)))

    assert first().retrieved_context_ids == ("d1",)  # the last step: the reranker's output
    assert first(retrieval="first").retrieved_context_ids == ("d9",)
    assert first(retrieval="reranker").retrieved_context_ids == ("d1",)
    every = first(retrieval="all")
    assert every.retrieved_context_ids == ("d9", "d1", "d2", "d1")
    steps = every.retrieval_steps
    assert steps is not None
    assert [s.retrieved_context_ids for s in steps] == [("d9",), ("d1", "d2"), ("d1",)]
    assert steps[0].query == "Who wrote Dune?"
    assert "retrieval_steps" not in every.metadata  # the field, no longer the metadata (#55)
    assert len(every.metadata["retrieval_step_spans"]) == 3
    assert first().retrieval_steps is None  # one step chosen: no steps
    rows = ctxeval.evaluate([every], ["search_evidence_recall"]).results
    assert rows[0].status.value == "error"  # no reference IDs: the metric says which field
    assert first(retrieval="first", id_key="metadata.source").retrieved_context_ids == ("d9",)
    assert first(question="llm").user_input == "Who wrote Dune?"
    assert first(answer="llm").response == "Frank Herbert wrote Dune."
    with pytest.raises(ctxeval.ConfigError, match="no mapping key 'retreival'"):
        first(retreival="last")
    with pytest.raises(ctxeval.ConfigError, match="retrieval='best'"):
        first(retrieval="best")
    with pytest.raises(ctxeval.UnknownNameError, match="trace format"):
        ctxeval.load_traces(path, format="otel")


def test_references_are_joined_on_a_trace_attribute(tmp_path: Path) -> None:
    path = src.write_otlp(tmp_path / "t.jsonl")
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("q1 0 d1 1\nq1 0 d7 1\nq2 0 d3 2\n")
    samples = ctxeval.load_traces(
        path, format="openinference", references=qrels, join_on="question_id"
    )
    evaluation = ctxeval.evaluate(samples, ["id_based_context_recall"])
    assert [r.score for r in evaluation.results] == [0.5, 1.0]
    refs = tmp_path / "refs.jsonl"
    refs.write_text('{"id": "q2", "reference": "Paris.", "reference_context_ids": ["d3"]}\n')
    joined = list(
        ctxeval.load_traces(path, format="openinference", references=refs, join_on="question_id")
    )
    assert joined[0].reference is None  # no reference for q1: reference-free metrics only
    assert joined[1].reference == "Paris."
    assert joined[1].reference_context_ids == ("d3",)


def test_the_command_line_reads_traces(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = src.write_otlp(tmp_path / "t.jsonl")
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("q1 0 d9 1\nq2 0 d8 1\n")
    out = tmp_path / "run"
    args = ["evaluate", str(path), "--from", "openinference", "-m", "id_mrr", "--out", str(out)]
    join = ["--references", str(qrels), "--join-on", "question_id", "-q"]
    assert main([*args, "--map", "retrieval=first", *join]) == 0
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [r["score"] for r in rows] == [1.0, 1.0]
    assert main([*args, "--overwrite", *join]) == 0  # the last retrieval: none relevant
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [r["score"] for r in rows] == [0.0, 0.0]
    for bad, said in [
        (["--map", "retrieval"], "--map: give FIELD=PATH"),
        (["--map", "nope=1"], "no mapping key 'nope'"),
    ]:
        with pytest.raises(SystemExit) as stopped:
            main([*args, "--overwrite", *bad])
        assert stopped.value.code == 2
        assert said in capsys.readouterr().err
    with pytest.raises(SystemExit) as stopped:
        main(["evaluate", str(path), "-m", "id_mrr", "--map", "retrieval=first"])
    assert stopped.value.code == 2
    said = capsys.readouterr().err  # a column map of DATA, with the hint towards --from
    assert "'retrieval' is not a sample field" in said
    assert "add --from FORMAT" in said


# --- hostile traces ----------------------------------------------------------------------------


def _span(trace: str, span: str, parent: str | None, kind: str, **attrs: Any) -> dict[str, Any]:
    attributes = [{"key": "openinference.span.kind", "value": {"stringValue": kind}}]
    for key, value in attrs.items():
        key = key.replace("__", ".")
        if isinstance(value, dict):
            attributes.append({"key": key, "value": value})
        else:
            attributes.append({"key": key, "value": {"stringValue": value}})
    raw: dict[str, Any] = {"traceId": trace * 32, "spanId": span * 16, "name": f"s-{span}"}
    if parent:
        raw["parentSpanId"] = parent * 16
    raw["attributes"] = attributes
    return raw


def _line(*spans: dict[str, Any]) -> str:
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": list(spans)}]}]})


def _good(trace: str) -> list[dict[str, Any]]:
    doc = "retrieval__documents__0__document__"
    return [
        _span(trace, "2", "1", "RETRIEVER", **{doc + "id": "d1", doc + "content": "text"}),
        _span(trace, "1", None, "CHAIN", input__value="q?", output__value="a."),
    ]


def test_hostile_traces_are_error_rows_naming_trace_and_span(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    doc = "retrieval__documents__0__document__"
    lines = [
        _line(*_good("a")),
        _line(_span("b", "2", "9", "RETRIEVER"), _span("b", "1", None, "CHAIN")),  # lost parent
        _line(_span("c", "1", "2", "CHAIN"), _span("c", "2", "1", "RETRIEVER")),  # a cycle
        _line(
            _span("d", "2", "1", "RETRIEVER", **{doc + "content": {"intValue": "5"}}),
            _span("d", "1", None, "CHAIN"),
        ),
        _line(_span("e", "1", None, "CHAIN", input__value={"intValue": 3})),
        '{"resourceSpans": [{"scopeSpans": [{"spans": [{"name": "\xff"}]}]}]}',
        "not json",
        _line(_span("f", "1", None, "CHAIN", input__value="no retrieval")),
        _line(*_good("0")),
    ]
    path = tmp_path / "hostile.jsonl"
    path.write_bytes("\n".join(lines).encode("utf-8").replace("\xff".encode(), b"\xff") + b"\n")
    qrels = tmp_path / "qrels.txt"  # joined on the trace id (the default join_on)
    qrels.write_text(f"{'a' * 32} 0 d1 1\n{'0' * 32} 0 d1 1\n")
    samples = ctxeval.load_traces(path, format="openinference", references=qrels)
    evaluation = ctxeval.evaluate(samples, ["id_mrr"], lenient=True)
    rows = {str(r.sample_id): r for r in evaluation.results}
    assert rows["a" * 32].status.value == "ok"
    assert rows["0" * 32].status.value == "ok"
    reason = {k: r.reason or "" for k, r in rows.items() if r.status.value == "error"}
    assert "span 's-2' (RETRIEVER, id 2222222222222222) has the parent 9999" in reason["b" * 32]
    assert "missing parent" in reason["b" * 32]
    assert "cycle" in reason["c" * 32]
    assert "retrieval.documents.0.document: the document's content is int" in reason["d" * 32]
    assert "input.value is int, not text" in reason["e" * 32]
    assert "no RETRIEVER, RERANKER, TOOL or MCP span with documents" in reason["f" * 32]
    assert any("hostile.jsonl:6" in r and "not valid UTF-8" in r for r in reason.values())
    assert any("hostile.jsonl:7" in r and "not valid JSON" in r for r in reason.values())
    with pytest.raises(ctxeval.DataError, match=f"trace {'b' * 32}: span 's-2'"):
        list(ctxeval.load_traces(path, format="openinference"))


def test_the_fast_otlp_path_and_the_general_one_give_the_same_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The OTLP reader decodes a line in the collector's spelling with msgspec, attribute values
    left raw until read (#52); any other line goes the general way. Both give the same rows:
    the SDK's spans (one a line, so each trace spans lines and its raw values are copied out
    of their line), wrong types in attributes, a span of too many attributes."""
    from ctxeval_traces import otlp_typed

    doc = "retrieval__documents__0__document__"
    many = {f"k__{i}": "v" for i in range(12_000)}
    sdk = src.otlp_json_lines(src.otel_spans(reranker=True)).splitlines()
    lines = [
        *sdk,
        _line(
            _span("d", "2", "1", "RETRIEVER", **{doc + "content": {"intValue": "5"}}),
            _span("d", "1", None, "CHAIN"),
        ),
        _line(_span("e", "1", None, "CHAIN", input__value={"intValue": 3})),
        _line(_span("f", "2", "1", "TOOL", **many), *_good("f")[1:]),
        _line(*_good("a")),
    ]
    assert all(otlp_typed.decode(line.encode()) is not None for line in lines)  # the fast path
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(lines) + "\n")

    def read(**mapping: str) -> list[Any]:
        stream = ctxeval.load_traces(path, format="openinference", mapping=mapping, strict=False)
        samples = list(stream)
        return [*samples, *[(e.sample_id, e.problem) for e in stream.errors]]

    fast = [read(), read(retrieval="all", max_documents="2000")]
    monkeypatch.setattr(otlp_typed, "msgspec", None)
    assert otlp_typed.decode(lines[0].encode()) is None
    assert fast == [read(), read(retrieval="all", max_documents="2000")]
    assert len(fast[0]) == len(src.RAG) + 4
    assert any("content is int" in str(row) for row in fast[0])
    assert any("12001 attributes, more than max_documents=2000" in str(row) for row in fast[1])


@pytest.mark.slow
def test_a_span_with_a_million_documents_is_an_error_row_not_a_hang(tmp_path: Path) -> None:
    n = 1_000_000
    key = '{"key":"retrieval.documents.%d.document.id","value":{"stringValue":"%d"}}'
    attributes = ",".join(key % (i, i) for i in range(n))
    kind = '{"key":"openinference.span.kind","value":{"stringValue":"RETRIEVER"}}'
    big = (
        f'{{"traceId":"{"b" * 32}","spanId":"{"2" * 16}","parentSpanId":"{"1" * 16}",'
        f'"name":"huge","attributes":[{kind},{attributes}]}}'
    )
    root = json.dumps(_span("b", "1", None, "CHAIN"))
    line = '{"resourceSpans":[{"scopeSpans":[{"spans":[' + big + "," + root + "]}]}]}"
    path = tmp_path / "big.jsonl"
    path.write_text(line + "\n" + _line(*_good("a")) + "\n")
    del attributes, big, line
    stream = ctxeval.load_traces(path, format="openinference", strict=False)
    samples = list(stream)
    assert [s.id for s in samples] == ["a" * 32]
    assert "span 'huge'" in str(stream.errors[0])
    assert "1000001 attributes, more than max_documents=10000" in str(stream.errors[0])


def test_more_documents_than_max_documents_is_an_error_row(tmp_path: Path) -> None:
    doc = "retrieval__documents__%d__document__id"
    many = _span("b", "2", "1", "RETRIEVER", **{doc % i: f"d{i}" for i in range(30)})
    path = tmp_path / "many.jsonl"
    path.write_text(_line(many, _span("b", "1", None, "CHAIN")) + "\n")
    capped = ctxeval.load_traces(path, format="openinference", mapping={"max_documents": "29"})
    with pytest.raises(ctxeval.DataError, match="more than max_documents=29"):
        list(capped)
    whole = ctxeval.load_traces(path, format="openinference", mapping={"max_documents": "30"})
    assert len(next(iter(whole)).retrieved_context_ids or ()) == 30


def test_open_traces_are_bounded_and_late_spans_said(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    a, b, c = (_good(t) for t in "abc")
    lines = [_line(a[0]), _line(b[0]), _line(c[0]), _line(a[1]), _line(b[1]), _line(c[1])]
    lines.append(_line(_span("c", "3", "1", "LLM")))  # after its root: left out, said
    path = tmp_path / "interleaved.jsonl"
    path.write_text("\n".join(lines) + "\n")
    whole = list(ctxeval.load_traces(path, format="openinference"))
    assert [s.id for s in whole] == ["a" * 32, "b" * 32, "c" * 32]
    assert "came after the trace's root span" in caplog.text
    stream = ctxeval.load_traces(
        path, format="openinference", mapping={"max_open_traces": "2"}, strict=False
    )
    assert [s.id for s in stream] == ["b" * 32, "c" * 32]
    assert "before 2 other traces were open" in str(stream.errors[0])


def test_a_fallback_key_is_said_once_per_run(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    doc = "retrieval__documents__0__document__"
    lines = []
    for t in "ab":
        spans = _good(t)
        spans[0] = _span(t, "2", "1", "TOOL", output__value=json.dumps(
            [{"page_content": "x", "metadata": {"doc_uri": "u1"}}]
        ))  # fmt: skip
        lines.append(_line(*spans))
    del doc
    path = tmp_path / "tools.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with caplog.at_level(logging.WARNING, logger="ctxeval_traces"):
        samples = list(ctxeval.load_traces(path, format="openinference"))
    assert [s.retrieved_context_ids for s in samples] == [("u1",), ("u1",)]
    assert caplog.text.count("read from 'page_content', a fallback") == 1
    assert caplog.text.count("read from 'metadata.doc_uri', a fallback") == 1
    no_tools = ctxeval.load_traces(path, format="openinference", mapping={"tools": "no"})
    with pytest.raises(ctxeval.DataError, match="no RETRIEVER, RERANKER span"):
        list(no_tools)


# --- MLflow, LangSmith, Phoenix ---------------------------------------------------------------


@pytest.fixture(scope="module")
def mlflow_frame(tmp_path_factory: pytest.TempPathFactory) -> Any:
    pytest.importorskip("mlflow")
    return src.mlflow_traces(tmp_path_factory.mktemp("mlflow"))


@pytest.mark.slow
def test_mlflow_search_traces_gives_the_rows_of_the_equivalent_jsonl(
    mlflow_frame: Any, tmp_path: Path
) -> None:
    samples = list(ctxeval.load_traces(mlflow_frame, format="mlflow"))
    _same_as_jsonl(samples, tmp_path)
    assert samples[0].metadata["question_id"] == "q1"
    exported = tmp_path / "traces.jsonl"
    exported.write_text("".join(t + "\n" for t in mlflow_frame["trace"]))
    again = list(ctxeval.load_traces(exported, format="mlflow"))
    assert [s.to_dict() for s in again] == [s.to_dict() for s in samples]
    one = tmp_path / "one.json"
    one.write_text(mlflow_frame["trace"][0])
    assert next(iter(ctxeval.load_traces(one, format="mlflow"))).to_dict() == samples[0].to_dict()
    by_uri = ctxeval.load_traces(
        mlflow_frame, format="mlflow", mapping={"id_key": "metadata.doc_uri"}
    )
    assert [s.retrieved_context_ids for s in by_uri] == [("d1", "d2"), ("d3",)]


def test_mlflow_documents_spelled_content_and_page_content(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    def span(sid: str, parent: str | None, kind: str, inputs: Any, outputs: Any) -> Any:
        return {
            "trace_id": "x", "span_id": sid, "parent_span_id": parent, "name": sid,
            "start_time_unix_nano": int(sid),
            "attributes": {
                "mlflow.spanType": json.dumps(kind),
                "mlflow.spanInputs": json.dumps(inputs),
                "mlflow.spanOutputs": json.dumps(outputs),
            },
        }  # fmt: skip

    docs = [{"content": "Paris is the capital.", "metadata": {"doc_uri": "u1"}}]
    trace = {
        "info": {"trace_id": "tr-1", "trace_metadata": {"question_id": "q9"}},
        "data": {"spans": [
            span("1", None, "CHAIN", {"question": "Capital?"}, "Paris"),
            span("2", "1", "RETRIEVER", {"query": "Capital?"}, docs),
        ]},
    }  # fmt: skip
    without = {"info": {"trace_id": "tr-2"}, "data": {"spans": [trace["data"]["spans"][0]]}}
    path = tmp_path / "traces.json"
    path.write_text(json.dumps([trace, without]))
    with caplog.at_level(logging.WARNING, logger="ctxeval_traces"):
        stream = ctxeval.load_traces(path, format="mlflow", strict=False)
        samples = list(stream)
    assert samples[0].retrieved_contexts == ("Paris is the capital.",)
    assert samples[0].retrieved_context_ids == ("u1",)
    assert "read from 'content', a fallback" in caplog.text
    assert "trace tr-2: no RETRIEVER" in str(stream.errors[0])


def test_langsmith_runs_give_the_rows_of_the_equivalent_jsonl(tmp_path: Path) -> None:
    flat = tmp_path / "runs.jsonl"
    flat.write_bytes(b"\n".join(src.langsmith_runs()) + b"\n")
    samples = list(ctxeval.load_traces(flat, format="langsmith"))
    _same_as_jsonl(samples, tmp_path)
    assert samples[0].metadata["question_id"] == "q1"
    trees = [json.loads(r) for r in src.langsmith_runs(tree=True)]
    from_trees = list(
        ctxeval.load_traces(trees, format="langsmith", mapping={"id_key": "metadata.id"})
    )
    assert [{f: getattr(s, f) for f in FIELDS} for s in from_trees] == [
        {f: getattr(s, f) for f in FIELDS} for s in samples
    ]


@pytest.mark.parametrize("form", ["frame", "parquet", "jsonl"])
def test_a_phoenix_spans_frame_gives_the_rows_of_the_equivalent_jsonl(
    tmp_path: Path, form: str
) -> None:
    frame = src.phoenix_frame()
    source: Any = frame
    if form == "parquet":
        source = tmp_path / "spans.parquet"
        frame.to_parquet(source)
    elif form == "jsonl":
        source = tmp_path / "spans.jsonl"
        frame.to_json(source, orient="records", lines=True, date_format="iso", date_unit="ns")
    samples = list(ctxeval.load_traces(source, format="phoenix", mapping={"retrieval": "first"}))
    assert [s.retrieved_context_ids for s in samples] == [("d9",), ("d8",)]
    chosen = ctxeval.load_traces(source, format="phoenix", mapping={"retrieval": "all"})
    steps = [s.retrieval_steps or () for s in chosen]
    assert [len(s) for s in steps] == [3, 3]
    rows = []
    for sample in ctxeval.load_traces(source, format="phoenix"):
        rows.append(sample)
    # the last step is the reranker's: its one document, as in the OTLP test
    assert [s.retrieved_context_ids for s in rows] == [("d1",), ("d3",)]
    second = list(ctxeval.load_traces(source, format="phoenix", mapping={"retrieval": "first"}))
    assert second == samples
    plain = src.otel_spans()
    del plain
    without_reranker = frame[frame["span_kind"] != "RERANKER"]
    _same_as_jsonl(list(ctxeval.load_traces(without_reranker, format="phoenix")), tmp_path)


@pytest.mark.parametrize("format", ["openinference", "mlflow", "langsmith", "phoenix"])
def test_a_missing_source_is_said_at_once(tmp_path: Path, format: str) -> None:
    with pytest.raises(ctxeval.DataError, match="no such file"):
        ctxeval.load_traces(tmp_path / "nothing.jsonl", format=format)


def test_the_command_line_makes_a_bad_trace_its_error_rows_with_lenient(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = [_line(*_good("a")), _line(_span("c", "1", "2", "CHAIN"), _span("c", "2", "1", "LLM"))]
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(lines) + "\n")
    qrels = tmp_path / "qrels.txt"
    qrels.write_text(f"{'a' * 32} 0 d1 1\n")
    out = tmp_path / "run"
    args = ["evaluate", str(path), "--from", "openinference", "-m", "id_mrr", "--out", str(out)]
    assert main([*args, "--references", str(qrels), "--lenient", "-q"]) == 1
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [(r["sample_id"], r["status"]) for r in rows] == [("a" * 32, "ok"), ("c" * 32, "error")]
    assert f"trace {'c' * 32}: no root span" in rows[1]["reason"]
    assert "skipping" not in capsys.readouterr().err  # (reading again for the report: quiet)
    assert "no root span" in (out / "report.html").read_text()
    with pytest.raises(SystemExit) as stopped:
        main([*args, "--references", str(qrels), "--overwrite"])
    assert stopped.value.code == 2
    assert "pass --lenient" in capsys.readouterr().err


def test_a_deep_trace_with_a_cycle_is_found_in_one_walk(tmp_path: Path) -> None:
    """20 000 spans in one chain under the root, then two spans whose parents form a cycle:
    the cycle is named at once (a walk from each span to the root would take minutes)."""
    n = 20_000
    chain = [_span("c", f"{i + 2:x}", f"{i + 1:x}", "CHAIN") for i in range(n)]
    spans = [_span("c", "1", None, "CHAIN"), *chain]
    for number, item in enumerate(spans, start=1):
        item["spanId"] = f"{number:016x}"
        item["parentSpanId"] = f"{number - 1:016x}" if number > 1 else ""
    spans += [_span("c", "e", "f", "RETRIEVER"), _span("c", "f", "e", "RETRIEVER")]
    path = tmp_path / "deep.jsonl"
    path.write_text(_line(*spans[:-2][::-1], *spans[-2:]) + "\n")  # the deepest first
    with pytest.raises(ctxeval.DataError, match="the parent ids form a cycle at span 's-"):
        list(ctxeval.load_traces(path, format="openinference"))


def test_a_trace_of_too_many_spans_is_an_error_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ctxeval_traces.grouping

    monkeypatch.setattr(ctxeval_traces.grouping, "MAX_SPANS", 3)
    extra = [_span("a", f"{i}", "1", "LLM") for i in range(3, 9)]
    path = tmp_path / "many.jsonl"
    path.write_text(_line(*extra, *_good("a")) + "\n" + _line(*_good("b")) + "\n")
    stream = ctxeval.load_traces(path, format="openinference", strict=False)
    assert [s.id for s in stream] == ["b" * 32]
    assert "8 spans (from line 1), more than the 3 one trace may have" in str(stream.errors[0])


def test_protobuf_json_values_are_read_in_each_spelling(tmp_path: Path) -> None:
    doc = "retrieval__documents__0__document__"
    values = {doc + "id": {"intValue": "42"}, doc + "content": "text"}
    values[doc + "score"] = {"intValue": "3"}
    retriever = _span("a", "2", "1", "RETRIEVER", **values)
    retriever["attributes"][1:] = [
        {"key": a["key"], "value": {"string_value": a["value"]["stringValue"]}}
        if "stringValue" in a["value"] else a
        for a in retriever["attributes"][1:]
    ]  # fmt: skip
    path = tmp_path / "t.jsonl"
    path.write_text(_line(retriever, _good("a")[1]) + "\n")
    sample = next(iter(ctxeval.load_traces(path, format="openinference")))
    assert sample.retrieved_context_ids == ("42",)
    assert sample.retrieved_contexts == ("text",)
    assert sample.metadata["retrieval_scores"] == [3.0]


def test_bad_documents_in_each_format_are_error_rows_naming_the_span(tmp_path: Path) -> None:
    runs = [
        {"id": "r2", "trace_id": "r1", "parent_run_id": "r1", "name": "search",
         "run_type": "retriever", "outputs": {"docs": []}},
        {"id": "r1", "trace_id": "r1", "name": "rag", "run_type": "chain"},
    ]  # fmt: skip
    stream = ctxeval.load_traces(runs, format="langsmith", strict=False)
    assert list(stream) == []
    assert "trace r1: span 'search' (RETRIEVER, id r2): the outputs hold no list" in str(
        stream.errors[0]
    )
    frame = src.phoenix_frame()
    frame["attributes.retrieval.documents"] = frame["attributes.retrieval.documents"].map(
        lambda docs: "not a list" if isinstance(docs, list) else docs
    )
    stream = ctxeval.load_traces(
        frame, format="phoenix", strict=False, mapping={"retrieval": "first"}
    )
    assert list(stream) == []
    assert "span 'search-1' (RETRIEVER" in str(stream.errors[0])
    assert "its documents are str, not a list" in str(stream.errors[0])
