"""Retrieval units (#55): chunk or document level, the source fields, duplicate chunks."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import ctxeval
from ctxeval import DataError, Sample
from ctxeval._data.loading import load_samples
from ctxeval.cli import main
from ctxeval_llm import LLMConfig
from fakes.openai_server import FakeOpenAI
from llm_judge import Judge

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

DATA = Path(__file__).parent / "data"
sys.path.insert(0, str(DATA))
import make_sliding_windows  # noqa: E402


def windows() -> list[Sample]:
    return list(load_samples(DATA / "sliding_windows.jsonl"))


def mean_by_overlap(metric: Any) -> list[float]:
    evaluation = ctxeval.evaluate(windows(), metrics=[metric])
    by: dict[int, list[float]] = {}
    for sample, row in zip(windows(), evaluation.results, strict=True):
        assert row.score is not None, row.reason
        by.setdefault(sample.metadata["overlap"], []).append(row.score)
    return [sum(by[o]) / len(by[o]) for o in make_sliding_windows.OVERLAPS]


# --- the test data ---------------------------------------------------------------------------


def test_sliding_windows_file_is_what_its_generator_writes() -> None:
    written = (DATA / "sliding_windows.jsonl").read_text(encoding="utf-8")
    assert written == "\n".join(make_sliding_windows.lines()) + "\n"
    assert len(windows()) == 3 * make_sliding_windows.DOCUMENTS


# --- overlap ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "options"),
    [
        ("id_based_context_precision", {"doc_id_separator": "#"}),
        ("id_based_context_precision", {}),  # the documents from retrieved_context_sources
    ],
)
def test_document_precision_does_not_fall_as_overlap_grows(
    name: str, options: dict[str, Any]
) -> None:
    chunk = mean_by_overlap(ctxeval.get_metric(name, **options))
    document = mean_by_overlap(ctxeval.get_metric(name, unit="document", **options))
    assert chunk[0] > chunk[1] > chunk[2]  # each overlapping window dilutes the chunks
    assert document[0] <= document[1] <= document[2]
    assert document[0] == pytest.approx(1 / 3)  # the document, then two others


# --- pytrec_eval on the document-level qrels and run -----------------------------------------

MEASURES = {
    "id_precision_at_k": ("P_5", {"k": 5}),
    "id_recall_at_k": ("recall_5", {"k": 5}),
    "id_ndcg_at_k": ("ndcg_cut_10", {"k": 10}),
    "id_mrr": ("recip_rank", {}),
    "id_average_precision": ("map", {}),
    "id_r_precision": ("Rprec", {}),
}


def document_level_files(samples: list[Sample]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The qrels and run of ``samples`` at document level, made here by hand: a document is
    relevant with its best chunk's grade and ranked at its best chunk's rank."""
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for sample in samples:
        assert sample.id is not None
        graded = dict(zip(sample.reference_context_ids or (), getattr(
            sample.reference_context_ids, "grades", [1] * 99), strict=False))  # fmt: skip
        judged: dict[str, int] = {}
        for chunk_id, grade in graded.items():
            document = chunk_id.split("#")[0]
            judged[document] = max(grade, judged.get(document, grade))
        qrels[sample.id] = judged
        ranked: dict[str, float] = {}
        for rank, chunk_id in enumerate(sample.retrieved_context_ids or ()):
            ranked.setdefault(chunk_id.split("#")[0], 1000.0 - rank)
        run[sample.id] = ranked
    return qrels, run


def graded_samples() -> list[Sample]:
    """The sliding windows, and queries whose graded chunk qrels name several documents."""
    out = windows()[::7]
    out.append(
        Sample(
            id="graded",
            retrieved_context_ids=["x#1", "y#2", "x#2", "z#1", "y#1", "w#9"],
            reference_context_ids={"y#1": 1, "y#3": 2, "z#4": 0, "w#1": 1, "v#1": 2},
        )
    )
    return out


@pytest.mark.parametrize("name", sorted(MEASURES))
def test_document_level_id_metrics_equal_pytrec_eval(name: str) -> None:
    pytrec_eval = pytest.importorskip("pytrec_eval")
    samples = graded_samples()
    qrels, run = document_level_files(samples)
    measure, options = MEASURES[name]
    family = {"P_5": "P", "recall_5": "recall", "ndcg_cut_10": "ndcg_cut"}.get(measure, measure)
    expected = pytrec_eval.RelevanceEvaluator(qrels, {family}).evaluate(run)
    metric = ctxeval.get_metric(name, unit="document", doc_id_separator="#", **options)
    rows = ctxeval.evaluate(samples, metrics=[metric]).results
    for sample, row in zip(samples, rows, strict=True):
        assert row.score == pytest.approx(expected[sample.id][measure], abs=1e-12), sample.id


# --- the worked example of docs/metrics/units.md ---------------------------------------------


def test_worked_example() -> None:
    sample = Sample(
        retrieved_context_ids=["A#1", "A#2", "B#1", "C#1", "A#3"],
        reference_context_ids=["A#2", "C#7"],
    )
    chunk, document = (
        ctxeval.evaluate(
            [sample],
            metrics=[
                ctxeval.get_metric(name, unit=unit, doc_id_separator="#")
                for name in ("id_based_context_precision", "id_based_context_recall", "id_mrr")
            ],
        ).results
        for unit in ("chunk", "document")
    )
    assert [r.score for r in chunk] == [1 / 5, 1 / 2, 1 / 2]
    assert [r.score for r in document] == [2 / 3, 1.0, 1.0]
    assert [r.metric for r in document] == [
        "id_based_context_precision@document",
        "id_based_context_recall@document",
        "id_mrr@document",
    ]


def test_text_metric_keeps_a_document_once_with_its_best_verdict() -> None:
    sample = Sample(
        retrieved_contexts=["the cat sat", "a dog ran", "the cat sat on a mat", "rain"],
        retrieved_context_sources=["A", "B", "B", "C"],
        reference_contexts=["the cat sat on a mat"],
    )
    [chunk, document] = ctxeval.evaluate(
        [sample],
        metrics=[
            ctxeval.get_metric("non_llm_context_precision_with_reference"),
            ctxeval.get_metric("non_llm_context_precision_with_reference", unit="document"),
        ],
    ).results
    assert [v["matched"] for v in chunk.details["verdicts"]] == [True, False, True, False]
    assert [v["matched"] for v in document.details["verdicts"]] == [True, True, False]
    assert document.score == 1.0  # A and B relevant (B by its second chunk), at ranks 1, 2
    assert chunk.score == pytest.approx((1 + 2 / 3) / 2)


# --- the fields --------------------------------------------------------------------------------


def test_sources_must_have_one_id_per_chunk() -> None:
    with pytest.raises(DataError) as caught:
        Sample.from_dict(
            {"id": "q7", "retrieved_context_ids": ["a", "b"], "retrieved_context_sources": ["d"]}
        )
    assert caught.value.sample_id == "q7"
    assert caught.value.field == "retrieved_context_sources"
    assert "1 document IDs for 2 retrieved_context_ids" in str(caught.value)
    with pytest.raises(DataError, match="reference_context_sources"):
        Sample(reference_contexts=["x", "y"], reference_context_sources=["d", "e", "f"])
    with pytest.raises(DataError, match="retrieved_context_sources"):  # the converters' path
        Sample.from_dict({"retrieved_contexts": ["é"], "retrieved_context_sources": []})


def test_sources_load_from_csv_dataframes_and_map(tmp_path: Path) -> None:
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(
        {
            "id": ["q1"],
            "chunks": [["c1", "c2"]],
            "docs": [["d1", "d1"]],
            "reference_context_ids": [["d1"]],
        }
    )
    mapped = {"retrieved_context_ids": "chunks", "retrieved_context_sources": "docs"}
    jsonl = tmp_path / "d.jsonl"
    jsonl.write_text(frame.to_json(orient="records", lines=True))
    [from_jsonl] = load_samples(jsonl, column_map=mapped)
    assert from_jsonl.retrieved_context_sources == ("d1", "d1")
    renamed = frame.rename(columns={v: k for k, v in mapped.items()})
    path = tmp_path / "d.csv"
    renamed.to_csv(path, index=False)
    [from_csv] = load_samples(path)
    assert from_csv == from_jsonl
    metric = ctxeval.get_metric("id_based_context_precision", unit="document")
    [row] = ctxeval.evaluate(renamed, metrics=[metric]).results
    assert row.score == 1.0
    bad = renamed.assign(retrieved_context_sources=[["d1"]])
    with pytest.raises(DataError, match="q1"):
        ctxeval.evaluate(bad, metrics=[metric])


def test_a_retrieved_reference_chunk_takes_its_source() -> None:
    sample = Sample(
        retrieved_context_ids=["d1", "a2", "d2"],
        retrieved_context_sources=["D", "A", "D"],
        reference_context_ids=["d2", "Z"],
    )
    metric = ctxeval.get_metric("id_based_context_precision", unit="document")
    [row] = ctxeval.evaluate([sample], metrics=[metric]).results
    assert row.score == 1 / 2
    assert row.details == {
        "unit": "document",
        "relevant": ["D"],
        "irrelevant": ["A"],
        "missing": ["Z"],
    }


def test_document_level_without_sources_is_an_error_row_that_says_what_to_give() -> None:
    sample = Sample(id="s", retrieved_context_ids=["a#1"], reference_context_ids=["a"])
    [row] = ctxeval.evaluate([sample], metrics=[ctxeval.get_metric("id_mrr", unit="document")])
    assert row.status is ctxeval.Status.ERROR
    assert "retrieved_context_sources" in (row.reason or "")
    assert "doc_id_separator" in (row.reason or "")


def test_bad_unit_options_are_config_errors() -> None:
    with pytest.raises(ctxeval.ConfigError, match="'chunk' or 'document'"):
        ctxeval.get_metric("id_mrr", unit="documents")
    with pytest.raises(ctxeval.ConfigError, match="duplicates"):
        ctxeval.get_metric("id_mrr", duplicates=1.5)
    with pytest.raises(ctxeval.ConfigError, match="doc_id_separator"):
        ctxeval.get_metric("id_mrr", doc_id_separator="")


def test_ir_names_and_chunk_level_defaults_stay() -> None:
    assert ctxeval.get_metric("nDCG@10", unit="document").name == "nDCG@10@document"
    assert ctxeval.get_metric("nDCG@10").name == "nDCG@10"
    plain = ctxeval.get_metric("id_precision_at_k", k=3)
    assert (plain.name, plain.unit) == ("id_precision_at_3", "chunk")  # type: ignore[attr-defined]


# --- the command line ------------------------------------------------------------------------


def test_cli_unit_both_shows_both_levels_side_by_side(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    args = ["evaluate", str(DATA / "sliding_windows.jsonl"), "-m", "P@5", "-m",
            "id_based_context_recall", "--unit", "both", "--doc-id-separator", "#",
            "--out", str(out), "-q"]  # fmt: skip
    assert main(args) == 0
    summary = json.loads((out / "summary.json").read_text())
    text = json.dumps(summary)
    names = ["P@5", "P@5@document", "id_based_context_recall", "id_based_context_recall@document"]
    for name in names:
        assert f'"{name}"' in text
    report = (out / "report.html").read_text()
    assert "P@5@document" in report
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    first = {r["metric"]: r for r in rows if r["sample_id"] == "o50-q3"}
    assert first["P@5@document"]["details"]["top_k"] == ["doc_3", "doc_4", "doc_10"]
    assert first["P@5"]["details"]["top_k"] == [
        "doc_3#0",
        "doc_3#1",
        "doc_3#2",
        "doc_3#3",
        "doc_3#4",
    ]
    assert first["id_based_context_recall@document"]["details"]["relevant"] == ["doc_3"]
    with pytest.raises(SystemExit) as stopped:
        main(["evaluate", str(DATA / "sliding_windows.jsonl"), "-m", "id_mrr",
              "--unit", "both", "--duplicates", "2"])  # fmt: skip
    assert stopped.value.code == 2
    assert "duplicates must be a similarity in (0, 1]" in capsys.readouterr().err


# --- duplicates, before the judge ------------------------------------------------------------


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(Judge(verdicts={"the cat sat on the mat": 1})) as fake:
        yield fake


DUPLICATED = {
    "user_input": "where did the cat sit?",
    "reference": "on the mat",
    "retrieved_contexts": [
        "the cat sat on the mat",
        "the cat sat on the mat",  # the same text, another chunk ID
        "the cat sat on the mat.",  # a near-duplicate
        "dogs bark",
    ],
    "retrieved_context_sources": ["A", "B", "C", "D"],
}


@pytest.mark.parametrize(("duplicates", "sent"), [(None, 4), (1.0, 3), (0.9, 2)])
def test_duplicates_are_judged_once(
    server: FakeOpenAI, duplicates: float | None, sent: int
) -> None:
    llm = LLMConfig(model="openai/fake-judge", api_base=server.url, api_key="sk-test")
    metric = ctxeval.get_metric("context_precision", duplicates=duplicates)
    [row] = ctxeval.evaluate([DUPLICATED], metrics=[metric], llm=llm, cache=None).results
    assert server.count == sent == row.usage.requests
    assert len(metric.estimate_calls(Sample.from_dict(DUPLICATED))) == sent  # type: ignore[attr-defined]
    assert row.score == 1.0 if duplicates == 0.9 else row.score is not None


def test_dry_run_counts_what_duplicates_leave(
    tmp_path: Path, server: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps(DUPLICATED) + "\n")
    base = ["evaluate", str(data), "-m", "context_precision", "--model", "openai/gpt-4o-mini",
            "--api-base", server.url, "--dry-run"]  # fmt: skip
    assert main(base) == 0
    assert "4 LLM calls" in " ".join(capsys.readouterr().out.split())
    assert main([*base, "--duplicates", "0.9"]) == 0
    assert "2 LLM calls" in " ".join(capsys.readouterr().out.split())
    assert server.count == 0


def test_context_relevance_grades_a_document_as_its_best_chunk(server: FakeOpenAI) -> None:
    server.responder = Judge(grades={"the cat sat on the mat": 3})
    sample = {
        "user_input": "where did the cat sit?",
        "retrieved_contexts": ["the cat sat on the mat", "dogs bark", "rain falls"],
        "retrieved_context_ids": ["A#1", "A#2", "B#1"],
    }
    llm = LLMConfig(model="openai/fake-judge", api_base=server.url, api_key="sk-test")
    metrics = [
        ctxeval.get_metric("context_relevance"),
        ctxeval.get_metric("context_relevance", unit="document", doc_id_separator="#"),
    ]
    chunk, document = ctxeval.evaluate([sample], metrics=metrics, llm=llm, cache=None).results
    assert chunk.score == pytest.approx(1 / 3)  # grades 3, 0, 0
    assert (document.metric, document.score) == ("context_relevance@document", 0.5)  # A 3, B 0
    assert document.details["qrels"] == [["A", 3], ["B", 0]]
    assert server.count == 3  # the judgements are shared by the two levels


def test_the_written_rows_show_the_unit_as_the_rows_do(tmp_path: Path) -> None:
    """The ID metrics' details in results.jsonl (built a chunk at a time) are the rows'
    details (built a row at a time): the unit options included. They were left out of the
    file at document level."""
    samples = [
        {
            "id": f"s{i}",
            "retrieved_context_ids": [f"d{i}#1", f"d{i}#2", "x#1", "x#1"],
            "reference_context_ids": [f"d{i}#3", f"d{i}#1"],
        }
        for i in range(6)
    ]
    names = ["id_based_context_precision", "id_based_context_recall", "id_ndcg_at_k", "id_mrr"]
    metrics = [ctxeval.get_metric(n, unit="document", doc_id_separator="#") for n in names]
    evaluation = ctxeval.evaluate(samples, metrics)
    evaluation.write(tmp_path / "run")
    lines = (tmp_path / "run" / "results.jsonl").read_text().splitlines()
    assert len(lines) == len(evaluation.results)
    for row, line in zip(evaluation.results, lines, strict=True):
        written = json.loads(line)["details"]
        assert written == row.details, row.metric
        assert written["unit"] == "document", row.metric
