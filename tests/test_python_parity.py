"""Python users get what command-line users get: an evaluation prints as the summary table
(text, rich, a notebook's HTML), ``Evaluation.write`` writes the run folder ``--out`` writes,
``ctxeval.write_report`` writes a run's report again, and samples held as a DataFrame, a dict
of columns, a Hugging Face dataset or a ragas dataset are read as a list of dicts is."""

from __future__ import annotations

import io
import itertools
import json
import logging
import sys
import tracemalloc
import types
from pathlib import Path
from typing import Any

import attrs
import pytest

import ctxeval
from ctxeval import ConfigError, DataError, MetricResult, Sample, Status
from ctxeval._data.frames import table_rows
from ctxeval._plugins.base import BaseMetric
from ctxeval.cli import main

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "core" / "ctxeval" / "data" / "demo.jsonl"
METRICS = ["id_mrr", "nDCG@10", "non_llm_context_recall"]

ID_ROWS: list[dict[str, Any]] = [
    {"id": "q1", "retrieved_context_ids": ["a", "b", "c"], "reference_context_ids": ["b"]},
    {"id": "q2", "retrieved_context_ids": ["d"], "reference_context_ids": ["d", "e"]},
    {"id": "q3", "retrieved_context_ids": ["f", "g"], "reference_context_ids": ["x"]},
]


def _rows(ev: ctxeval.Evaluation) -> list[tuple[Any, ...]]:
    return [(r.sample_id, r.metric, r.status, r.score, r.reason) for r in ev.results]


def _table_lines(text: str) -> list[str]:
    """The lines of the summary table: from its header to the last metric's line."""
    lines = text.splitlines()
    top = next(i for i, line in enumerate(lines) if line.lstrip().startswith("metric "))
    ends = ("", "summary", "LLM:")  # a blank line, the next table's title, the usage line
    bottom = next(
        (i for i in range(top + 1, len(lines)) if lines[i].strip().startswith(ends[1:])
         or not lines[i].strip()),
        len(lines),
    )  # fmt: skip
    return [line.rstrip() for line in lines[top:bottom]]


@pytest.fixture(scope="module")
def demo_ev() -> ctxeval.Evaluation:
    return ctxeval.evaluate(ctxeval.load_samples(DEMO), METRICS)


# --- printing --------------------------------------------------------------------------------


def test_print_shows_the_command_lines_summary_table(demo_ev: ctxeval.Evaluation) -> None:
    from rich.console import Console

    from ctxeval._output.summary import summary_dict
    from ctxeval.cli.render import print_summary

    out = io.StringIO()
    print_summary(summary_dict(demo_ev), Console(file=out, width=120, color_system=None))
    text = str(demo_ev)
    assert _table_lines(text) == _table_lines(out.getvalue())
    assert text.lstrip().startswith("summary: 30 samples \u00d7 3 metrics")
    assert "MetricSummary(" not in text
    assert "Usage(" not in text
    summary = demo_ev.summary()
    assert _table_lines(str(summary)) == _table_lines(out.getvalue())
    assert repr(summary) == str(summary)


def test_the_table_is_styled_as_the_command_lines() -> None:
    from rich.console import Console

    from ctxeval._output.summary import summary_dict
    from ctxeval._results.display import summary_table
    from ctxeval.cli.render import print_summary

    rows = [*ID_ROWS, {"id": "q4", "reference_context_ids": ["a"]}]  # an error row: red
    summary = summary_dict(ctxeval.evaluate(rows, ["id_mrr"]))
    cli, ours = io.StringIO(), io.StringIO()
    print_summary(summary, Console(file=cli, width=100, color_system="truecolor"))
    Console(file=ours, width=100, color_system="truecolor").print(summary_table(summary["metrics"]))
    assert "\x1b[31m1\x1b[0m" in cli.getvalue()
    assert ours.getvalue() == cli.getvalue()


def test_the_llm_usage_is_shown_under_the_table() -> None:
    usage = ctxeval.Usage(requests=3, retries=1, prompt_tokens=100, completion_tokens=20)
    rows = [
        MetricResult(status=Status.OK, score=1.0, sample_id="a", metric="judged", usage=usage),
        MetricResult(status=Status.OK, score=0.0, sample_id="b", metric="judged", usage=usage),
    ]
    ev = ctxeval.Evaluation(rows, ["judged"])
    line = "LLM: 6 requests (2 retries), 0 cache hits, 240 tokens, cost $0.0000"
    assert line in str(ev)
    assert line in str(ev.summary())
    assert line in ev._repr_html_()


def test_means_print_rounded_and_stay_exact() -> None:
    third = 0.1 + 0.2  # 0.30000000000000004
    rows = [MetricResult(status=Status.OK, score=third, sample_id="a", metric="m")]
    ev = ctxeval.Evaluation(rows, ["m"])
    assert ev.summary()["m"].mean == third  # the number kept is exact
    for shown in (str(ev), str(ev.summary()), str(ev.summary()["m"]), ev._repr_html_()):
        assert "0.30000000000000004" not in shown
        assert "0.300" in shown
    assert str(ev.summary()["m"]) == "m: mean 0.300 (95% CI —), 1 ok, 0 undefined, 0 errors"


def test_the_summary_is_still_a_dict_of_metric_summaries(demo_ev: ctxeval.Evaluation) -> None:
    summary = demo_ev.summary()
    assert isinstance(summary, dict)
    assert isinstance(summary, ctxeval.Summary)
    assert isinstance(summary["id_mrr"], ctxeval.MetricSummary)
    assert summary["id_mrr"].mean == pytest.approx(0.693, abs=5e-4)
    assert list(summary) == METRICS
    assert summary == dict(summary)
    assert summary.n_samples == 30
    assert json.loads(json.dumps(summary.to_dict()))["nDCG@10"]["n_ok"] == 29
    frame = summary.to_pandas()
    assert list(frame.index) == METRICS
    assert frame.loc["id_mrr", "n_ok"] == 29


def test_from_jsonl_and_asummary_give_a_summary_too(
    tmp_path: Path, demo_ev: ctxeval.Evaluation
) -> None:
    back = ctxeval.Evaluation.from_jsonl(demo_ev.to_jsonl(tmp_path / "rows.jsonl"))
    assert isinstance(back.summary(), ctxeval.Summary)
    assert back.summary() == demo_ev.summary()


@pytest.mark.anyio
async def test_aevaluate_gives_a_printable_summary() -> None:
    ev = await ctxeval.aevaluate(ID_ROWS, ["id_mrr"])
    summary = await ev.asummary()
    assert isinstance(summary, ctxeval.Summary)
    assert "id_mrr" in str(summary)


def test_error_rows_are_listed_under_the_table_by_reason() -> None:
    rows = [*ID_ROWS, {"id": "q4", "reference_context_ids": ["a"]}]
    ev = ctxeval.evaluate(rows, ["id_mrr", "id_precision_at_k"])
    text = str(ev)
    assert "2 error row(s) (ev.errors() lists them), by reason:" in text
    assert "id_mrr: the sample has no 'retrieved_context_ids'" in text
    assert "(e.g. sample q4)" in text
    assert "Evaluation.errors() lists them" in str(ev.summary())


def test_a_rich_console_shows_the_table(demo_ev: ctxeval.Evaluation) -> None:
    from rich.console import Console

    console = Console(file=io.StringIO(), width=120, color_system=None)
    console.print(demo_ev)
    console.print(demo_ev.summary())
    printed = console.file.getvalue()  # type: ignore[attr-defined]
    assert _table_lines(printed) == _table_lines(str(demo_ev))
    assert sum(line.startswith("metric ") for line in printed.splitlines()) == 2  # two tables


def test_the_notebook_view_is_a_small_escaped_self_contained_table() -> None:
    hostile = "<img src=x onerror=alert(1)>"
    rows = [
        MetricResult(status=Status.OK, score=0.25, sample_id="a", metric=hostile),
        MetricResult(status=Status.ERROR, reason="<b>boom</b>", sample_id="b", metric=hostile),
    ]
    page = ctxeval.Evaluation(rows, [hostile])._repr_html_()
    assert "<img" not in page
    assert "<b>boom" not in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page
    assert "&lt;b&gt;boom&lt;/b&gt;" in page
    for outside in ("<script", "<link", "<style", "http://", "https://", "url("):
        assert outside not in page
    assert page.startswith("<div class='ctxeval-summary'>")
    assert page.endswith("</div>")
    assert "ctxeval: 2 samples \u00d7 1 metric" in page
    assert "0.250" in page
    summary_page = ctxeval.Evaluation(rows, [hostile]).summary()._repr_html_()
    assert "&lt;img" in summary_page
    assert "<img" not in summary_page


def test_the_notebook_view_shows_the_same_numbers(demo_ev: ctxeval.Evaluation) -> None:
    page = demo_ev._repr_html_()
    for name, summary in demo_ev.summary().items():
        assert f"<code>{name}</code>" in page
        assert f"{summary.mean:.3f}" in page
        assert summary.ci95 is not None
        assert f"{summary.ci95[0]:.3f}\u2013{summary.ci95[1]:.3f}" in page


# --- the run folder -----------------------------------------------------------------------------


def test_write_gives_the_folder_the_command_line_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ctxeval.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "data.jsonl").write_bytes(DEMO.read_bytes())
    options = [arg for metric in METRICS for arg in ("-m", metric)]
    assert main(["evaluate", "data.jsonl", *options, "--out", "cli", "-q"]) == 0
    ev = ctxeval.evaluate(ctxeval.load_samples("data.jsonl"), METRICS)
    paths = ev.write("py", data="data.jsonl")
    assert paths["results"] == Path("py/results.jsonl")
    assert paths["summary"] == Path("py/summary.json")
    assert paths["report"] == Path("py/report.html")
    for name in ("results.jsonl", "report.html"):
        assert (tmp_path / "py" / name).read_bytes() == (tmp_path / "cli" / name).read_bytes()
    cli = json.loads((tmp_path / "cli" / "summary.json").read_text())
    py = json.loads((tmp_path / "py" / "summary.json").read_text())
    assert py["metrics"] == cli["metrics"]
    assert py["usage"] == cli["usage"]
    assert py["data"] == cli["data"] == "data.jsonl"
    assert py["ctxeval"] == cli["ctxeval"] == ctxeval.__version__
    assert (tmp_path / "py" / "report.html").stat().st_mode & 0o777 == 0o600


def test_write_runs_the_writers_asked_for(tmp_path: Path, demo_ev: ctxeval.Evaluation) -> None:
    paths = demo_ev.write(tmp_path / "run", formats=["csv", "markdown", "report"])
    assert {p.name for p in (tmp_path / "run").iterdir()} == {
        "results.jsonl",
        "summary.json",
        "report.html",
        "results.csv",
        "summary.md",
    }
    assert paths["csv"] == tmp_path / "run" / "results.csv"
    assert "| `id_mrr` | 0.693 |" in paths["markdown"].read_text()
    assert "<title>ctxeval: run</title>" in paths["report"].read_text()


def test_write_never_replaces_a_run_unless_told(
    tmp_path: Path, demo_ev: ctxeval.Evaluation
) -> None:
    folder = tmp_path / "run"
    demo_ev.write(folder)
    before = (folder / "results.jsonl").read_bytes()
    other = ctxeval.evaluate(ID_ROWS, ["id_mrr"])
    with pytest.raises(FileExistsError, match=r"holds a run already .*overwrite=True"):
        other.write(folder)
    assert (folder / "results.jsonl").read_bytes() == before
    other.write(folder, overwrite=True)
    assert ctxeval.Evaluation.from_jsonl(folder / "results.jsonl").metrics == ("id_mrr",)


def test_an_unknown_writer_writes_nothing(tmp_path: Path, demo_ev: ctxeval.Evaluation) -> None:
    with pytest.raises(ctxeval.UnknownNameError, match="xlsx"):
        demo_ev.write(tmp_path / "run", formats=["xlsx"])
    assert not (tmp_path / "run").exists()


@attrs.frozen(kw_only=True)
class Judged(BaseMetric):
    """An async metric (as an LLM judge is): its rows carry no sample."""

    registry_name = "judged"
    requires = ("user_input",)

    async def ascore(self, sample: Sample, ctx: ctxeval.RunContext) -> MetricResult:
        return MetricResult.ok(0.5, details={"length": len(sample.user_input or "")})


TEXT_ROWS = [
    {"id": f"s{i}", "user_input": f"QUESTION-{i}", "retrieved_contexts": [f"CHUNK-{i}"]}
    for i in range(4)
]


def test_the_report_of_a_judged_run_takes_its_texts_from_data(tmp_path: Path) -> None:
    pandas = pytest.importorskip("pandas")
    ev = ctxeval.evaluate(TEXT_ROWS, [Judged()])
    bare = ev.write(tmp_path / "bare")["report"].read_text()
    assert "QUESTION-2" not in bare  # the rows carry no texts
    for data in (TEXT_ROWS, pandas.DataFrame(TEXT_ROWS)):
        page = ev.write(tmp_path / "run", data=data, overwrite=True)["report"].read_text()
        assert "QUESTION-2" in page
        assert "CHUNK-3" in page
    with pytest.raises(DataError, match="no such file"):
        ev.write(tmp_path / "other", data=tmp_path / "missing.jsonl")


def test_evaluate_saves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    ev = ctxeval.evaluate(ID_ROWS, ["id_mrr"])
    assert len(ev) == 3
    assert list(tmp_path.iterdir()) == []


# --- the report again ---------------------------------------------------------------------------


def test_write_report_rebuilds_the_page_the_run_wrote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data.jsonl").write_bytes(DEMO.read_bytes())
    ev = ctxeval.evaluate(ctxeval.load_samples("data.jsonl"), METRICS)
    written = ev.write("run", data="data.jsonl")["report"].read_bytes()
    (tmp_path / "run" / "report.html").unlink()
    assert ctxeval.write_report("run") == Path("run/report.html")
    assert (tmp_path / "run" / "report.html").read_bytes() == written  # texts: data.jsonl
    out = ctxeval.write_report(tmp_path / "run" / "results.jsonl", tmp_path / "again.html")
    assert out == tmp_path / "again.html"
    assert out.read_bytes() == written


def test_write_report_of_a_results_file_with_samples_in_memory(tmp_path: Path) -> None:
    ev = ctxeval.evaluate(TEXT_ROWS, [Judged()])
    rows = ev.to_jsonl(tmp_path / "nightly.jsonl")
    page = ctxeval.write_report(rows, data=TEXT_ROWS)
    assert page == tmp_path / "report.html"
    text = page.read_text()
    assert "QUESTION-1" in text
    assert "CHUNK-0" in text
    assert "judged" in text


def test_write_report_keeps_the_texts_of_the_report_it_replaces(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run written from samples in memory keeps them in its folder (samples.jsonl, #57):
    the report written again shows the same texts (byte for byte the same page)."""
    ev = ctxeval.evaluate(TEXT_ROWS, [Judged()])
    first = ev.write(tmp_path / "run", data=TEXT_ROWS)["report"].read_bytes()
    assert b"QUESTION-1" in first
    with caplog.at_level(logging.WARNING, logger="ctxeval"):
        page = ctxeval.write_report(tmp_path / "run")
    assert page.read_bytes() == first
    assert "without the samples' texts" not in caplog.text
    assert main(["report", str(tmp_path / "run")]) == 0  # the command line: the same
    assert page.read_bytes() == first
    assert "without the samples' texts" not in capsys.readouterr().err


def test_write_report_without_texts_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ev = ctxeval.evaluate(TEXT_ROWS, [Judged()])
    ev.write(tmp_path / "run")
    (tmp_path / "run" / "report.html").unlink()  # no data file, no report to keep texts of
    with caplog.at_level(logging.WARNING, logger="ctxeval"):
        page = ctxeval.write_report(tmp_path / "run")
    assert page.is_file()
    assert "QUESTION-1" not in page.read_text()
    assert "without the samples' texts; pass data=" in caplog.text


def test_write_report_names_what_is_missing(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="no such file or folder"):
        ctxeval.write_report(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match=r"no results\.jsonl in this folder"):
        ctxeval.write_report(tmp_path / "empty")
    (tmp_path / "bad.jsonl").write_text('{"not": "a row"}\n')
    with pytest.raises(DataError, match=r"bad\.jsonl:1: not a row of results\.jsonl"):
        ctxeval.write_report(tmp_path / "bad.jsonl")


# --- samples held as tables -------------------------------------------------------------------


def test_a_data_frame_scores_as_its_list_of_dicts() -> None:
    pandas = pytest.importorskip("pandas")
    numpy = pytest.importorskip("numpy")
    metrics = ["id_mrr", "id_precision_at_k"]
    expected = _rows(ctxeval.evaluate(ID_ROWS, metrics))
    frame = pandas.DataFrame(ID_ROWS)
    assert _rows(ctxeval.evaluate(frame, metrics)) == expected
    # cells as numpy arrays (as pandas reads Parquet), ids as the index
    arrays = frame.assign(
        retrieved_context_ids=[numpy.array(v) for v in frame.retrieved_context_ids],
        reference_context_ids=[numpy.array(v, dtype=object) for v in frame.reference_context_ids],
    )
    assert _rows(ctxeval.evaluate(arrays, metrics)) == expected
    assert _rows(ctxeval.evaluate(frame.set_index("id"), metrics)) == expected


def test_missing_cells_of_a_data_frame_are_missing_fields() -> None:
    pandas = pytest.importorskip("pandas")
    rows: list[dict[str, Any]] = [
        {"reference": "r", "reference_contexts": ["r"], "retrieved_contexts": ["r"]},
        {"reference": None, "retrieved_contexts": ["r"]},  # no reference_contexts
        {"reference": "x", "reference_contexts": ["r"]},  # no retrieved_contexts
    ]
    expected = _rows(ctxeval.evaluate(rows, ["non_llm_context_recall"]))
    frame = pandas.DataFrame(rows)  # NaN where a value is missing
    for table in (
        frame,
        frame.astype({"reference": "string"}),  # pd.NA
        frame.astype(object).where(frame.notna(), None),  # None
    ):
        read = list(table_rows(table))  # type: ignore[arg-type]
        assert read[1] == {
            "reference": None,
            "reference_contexts": None,
            "retrieved_contexts": ["r"],
        }
        got = _rows(ctxeval.evaluate(table, ["non_llm_context_recall"]))
        assert got == expected
        assert got[1][2] is Status.ERROR
        assert "no 'reference_contexts'" in (got[1][4] or "")


def test_numbers_of_a_data_frame_are_plain_python() -> None:
    pandas = pytest.importorskip("pandas")
    numpy = pytest.importorskip("numpy")
    frame = pandas.DataFrame(
        {
            "id": [10, None, 12],  # an integer column with a gap: float64 in pandas
            "retrieved_context_ids": [numpy.array([1, 2]), [numpy.int64(3)], [4]],
            "reference_context_ids": [{"1": numpy.int64(2)}, [3], numpy.array([4, 5])],
        }
    )
    expected = [
        {"id": 10, "retrieved_context_ids": [1, 2], "reference_context_ids": {"1": 2}},
        {"retrieved_context_ids": [3], "reference_context_ids": [3]},
        {"id": 12, "retrieved_context_ids": [4], "reference_context_ids": [4, 5]},
    ]
    metrics = ["id_mrr", "nDCG@10"]
    assert _rows(ctxeval.evaluate(frame, metrics)) == _rows(ctxeval.evaluate(expected, metrics))
    assert [r.sample_id for r in ctxeval.evaluate(frame, ["id_mrr"]).results] == ["10", "1", "12"]


def test_a_bad_cell_is_named_as_in_a_list_of_dicts() -> None:
    pandas = pytest.importorskip("pandas")
    rows = [dict(row) for row in ID_ROWS]
    rows[1]["retrieved_context_ids"] = "d"  # a single string, not a list
    with pytest.raises(DataError) as from_list:
        ctxeval.evaluate(rows, ["id_mrr"])
    with pytest.raises(DataError) as from_frame:
        ctxeval.evaluate(pandas.DataFrame(rows), ["id_mrr"])
    assert str(from_frame.value) == str(from_list.value)
    assert from_frame.value.sample_id == "q2"
    assert from_frame.value.field == "retrieved_context_ids"
    # without ids, the sample's position
    positional = [{k: v for k, v in row.items() if k != "id"} for row in rows]
    with pytest.raises(DataError, match=r"sample '1': field 'retrieved_context_ids'"):
        ctxeval.evaluate(pandas.DataFrame(positional), ["id_mrr"])
    # lenient: one error row per metric, the others scored
    lenient = ctxeval.evaluate(pandas.DataFrame(rows), ["id_mrr"], lenient=True)
    assert _rows(lenient) == _rows(ctxeval.evaluate(rows, ["id_mrr"], lenient=True))
    assert [r.status for r in lenient.results] == [Status.OK, Status.ERROR, Status.OK]


def test_two_columns_of_one_name_are_refused() -> None:
    pandas = pytest.importorskip("pandas")
    frame = pandas.DataFrame([[["a"], ["b"]]], columns=["retrieved_context_ids"] * 2)
    with pytest.raises(ConfigError, match="two columns named 'retrieved_context_ids'"):
        ctxeval.evaluate(frame, ["id_mrr"])


def test_a_data_frame_is_read_a_row_at_a_time() -> None:
    pandas = pytest.importorskip("pandas")
    n = 100_000
    frame = pandas.DataFrame(
        {
            "id": [f"q{i}" for i in range(n)],
            "retrieved_context_ids": [["a", "b"]] * n,
            "reference_context_ids": [["a"]] * n,
        }
    )
    rows = table_rows(frame)
    assert rows is not None
    assert len(rows) == n
    tracemalloc.start()
    try:
        first = list(itertools.islice(iter(rows), 10))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [row["id"] for row in first] == [f"q{i}" for i in range(10)]
    assert peak < 1_000_000  # a list of every row's dict would take tens of MB


def test_a_dict_of_columns_scores_as_its_list_of_dicts() -> None:
    numpy = pytest.importorskip("numpy")
    columns = {key: [row[key] for row in ID_ROWS] for key in ID_ROWS[0]}
    expected = _rows(ctxeval.evaluate(ID_ROWS, ["id_mrr"]))
    assert _rows(ctxeval.evaluate(columns, ["id_mrr"])) == expected
    arrays = {**columns, "id": numpy.array(columns["id"])}
    assert _rows(ctxeval.evaluate(arrays, ["id_mrr"])) == expected
    # the older ragas names
    older = {"question": ["q1", "q2"], "contexts": [["a"], ["b"]], "ground_truth": ["a", "c"]}
    ev = ctxeval.evaluate(older, ["non_llm_context_recall"], lenient=True)
    assert len(ev) == 2


def test_columns_of_different_lengths_are_named() -> None:
    columns = {"retrieved_context_ids": [["a"], ["b"]], "reference_context_ids": [["a"]]}
    with pytest.raises(ConfigError) as caught:
        ctxeval.evaluate(columns, ["id_mrr"])
    message = str(caught.value)
    assert "dict of columns of different lengths" in message
    assert "retrieved_context_ids: 2, reference_context_ids: 1" in message


def test_a_single_sample_dict_is_not_columns() -> None:
    for single in (
        {"retrieved_context_ids": ["a", "b"], "reference_context_ids": ["a"]},
        {"retrieved_context_ids": [1, 2], "reference_context_ids": [3, 4]},
        {"user_input": "q", "retrieved_contexts": ["a"]},
    ):
        assert table_rows(single) is None
        with pytest.raises(ConfigError, match="wrap it in a list"):
            ctxeval.evaluate(single, ["id_mrr"])


# --- Hugging Face datasets and ragas ------------------------------------------------------------


def test_a_hugging_face_dataset() -> None:
    datasets = pytest.importorskip("datasets")
    dataset = datasets.Dataset.from_list(ID_ROWS)
    expected = _rows(ctxeval.evaluate(ID_ROWS, ["id_mrr"]))
    assert _rows(ctxeval.evaluate(dataset, ["id_mrr"])) == expected
    assert _rows(ctxeval.evaluate(dataset.with_format("numpy"), ["id_mrr"])) == expected
    with pytest.raises(ConfigError, match=r"pass one split, e\.g\. samples\['test'\]"):
        ctxeval.evaluate(datasets.DatasetDict(test=dataset), ["id_mrr"])


def test_a_ragas_evaluation_dataset() -> None:
    pytest.importorskip("ragas")
    from ragas import EvaluationDataset, SingleTurnSample

    samples = [
        SingleTurnSample(
            user_input="Where is the Eiffel Tower?",
            retrieved_contexts=["The Eiffel Tower is in Paris."],
            reference_contexts=["The Eiffel Tower is located in Paris."],
            reference="In Paris.",
        ),
        SingleTurnSample(
            user_input="Who wrote Hamlet?",
            retrieved_contexts=["Paris is the capital of France."],
            reference_contexts=["Hamlet is a tragedy by William Shakespeare."],
            reference="Shakespeare.",
        ),
    ]
    as_dicts = [s.model_dump(exclude_none=True) for s in samples]
    metrics = ["non_llm_context_recall", "non_llm_context_precision_with_reference"]
    expected = _rows(ctxeval.evaluate(as_dicts, metrics))
    assert _rows(ctxeval.evaluate(EvaluationDataset(samples=samples), metrics)) == expected
    assert _rows(ctxeval.evaluate(samples, metrics)) == expected


def _stand_ins(monkeypatch: pytest.MonkeyPatch) -> types.SimpleNamespace:
    """Stand-ins for ``datasets`` and ``ragas`` (neither is installed here): classes with
    their names, modules and fields, in ``sys.modules`` as an import would put them, so that
    the detection and the mapping of their rows are tested. The real libraries are tested
    above when installed."""
    pydantic = pytest.importorskip("pydantic")

    class BaseSample(pydantic.BaseModel):  # type: ignore[misc,name-defined]
        def to_dict(self) -> dict[str, Any]:
            return self.model_dump(exclude_none=True)  # type: ignore[no-any-return]

    class SingleTurnSample(BaseSample):
        user_input: str | None = None
        retrieved_contexts: list[str] | None = None
        reference_contexts: list[str] | None = None
        retrieved_context_ids: list[str] | None = None
        reference_context_ids: list[str] | None = None
        response: str | None = None
        multi_responses: list[str] | None = None
        reference: str | None = None
        rubrics: dict[str, str] | None = None

    class MultiTurnSample(BaseSample):
        user_input: list[dict[str, str]]
        reference: str | None = None

    class EvaluationDataset(pydantic.BaseModel):  # type: ignore[misc,name-defined]
        samples: list[Any]

        def __iter__(self) -> Any:  # type: ignore[override]
            return iter(self.samples)

        def __len__(self) -> int:
            return len(self.samples)

    schema = types.ModuleType("ragas.dataset_schema")
    for cls in (BaseSample, SingleTurnSample, MultiTurnSample, EvaluationDataset):
        cls.__module__ = schema.__name__
        setattr(schema, cls.__name__, cls)
    ragas = types.ModuleType("ragas")
    ragas.dataset_schema = schema  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "ragas", ragas)
    monkeypatch.setitem(sys.modules, "ragas.dataset_schema", schema)

    class Dataset:
        __module__ = "datasets.arrow_dataset"

        def __init__(self, rows: list[dict[str, Any]]) -> None:
            self.rows = rows

        def __len__(self) -> int:
            return len(self.rows)

        def __iter__(self) -> Any:
            return iter([dict(row) for row in self.rows])

    class IterableDataset:  # (not a Dataset, no length: rows as they stream)
        __module__ = "datasets.iterable_dataset"

        def __init__(self, rows: list[dict[str, Any]]) -> None:
            self.rows = rows

        def __iter__(self) -> Any:
            return (dict(row) for row in self.rows)

    class DatasetDict(dict):  # type: ignore[type-arg]
        __module__ = "datasets.dataset_dict"

    datasets = types.ModuleType("datasets")
    datasets.Dataset = Dataset  # type: ignore[attr-defined]
    datasets.IterableDataset = IterableDataset  # type: ignore[attr-defined]
    datasets.DatasetDict = DatasetDict  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "datasets", datasets)
    return types.SimpleNamespace(
        SingleTurnSample=SingleTurnSample,
        MultiTurnSample=MultiTurnSample,
        EvaluationDataset=EvaluationDataset,
        Dataset=Dataset,
        IterableDataset=IterableDataset,
        DatasetDict=DatasetDict,
    )


def test_ragas_samples_are_read_by_their_field_names(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _stand_ins(monkeypatch)
    samples = [
        fake.SingleTurnSample(
            user_input="Where?",
            retrieved_contexts=["It is in Paris."],
            reference_contexts=["It is located in Paris."],
            reference="Paris",
            retrieved_context_ids=["d1", "d2"],
            reference_context_ids=["d2"],
            rubrics={"score1": "bad"},
        ),
        fake.SingleTurnSample(
            user_input="Who?",
            retrieved_contexts=["Nobody knows."],
            reference_contexts=["Shakespeare wrote it."],
            retrieved_context_ids=["d3"],
            reference_context_ids=["d4"],
        ),
    ]
    as_dicts = [s.to_dict() for s in samples]
    metrics = ["non_llm_context_recall", "id_mrr", "nDCG@10"]
    expected = _rows(ctxeval.evaluate(as_dicts, metrics))
    dataset = fake.EvaluationDataset(samples=samples)
    rows = table_rows(dataset)
    assert rows is not None
    assert len(rows) == 2
    assert _rows(ctxeval.evaluate(dataset, metrics)) == expected
    assert _rows(ctxeval.evaluate(samples, metrics)) == expected
    conversation = fake.MultiTurnSample(user_input=[{"content": "hi", "type": "human"}])
    with pytest.raises(DataError, match=r"sample '1': a ragas MultiTurnSample"):
        ctxeval.evaluate(fake.EvaluationDataset(samples=[samples[0], conversation]), metrics)


def test_hugging_face_datasets_are_read_as_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    numpy = pytest.importorskip("numpy")
    fake = _stand_ins(monkeypatch)
    expected = _rows(ctxeval.evaluate(ID_ROWS, ["id_mrr"]))
    numpy_rows = [
        {key: numpy.array(value) if isinstance(value, list) else value for key, value in r.items()}
        for r in ID_ROWS
    ]
    seen: list[ctxeval.Progress] = []
    ev = ctxeval.evaluate(fake.Dataset(numpy_rows), ["id_mrr"], on_progress=seen.append)
    assert _rows(ev) == expected
    assert seen[-1].total == 3  # sized: the progress has a total
    assert _rows(ctxeval.evaluate(fake.IterableDataset(ID_ROWS), ["id_mrr"])) == expected
    splits = fake.DatasetDict(train=fake.Dataset(ID_ROWS), test=fake.Dataset(ID_ROWS))
    with pytest.raises(ConfigError, match=r"splits \('train', 'test'\): pass one split"):
        ctxeval.evaluate(splits, ["id_mrr"])


def test_the_table_libraries_are_never_imported() -> None:
    import subprocess

    code = (
        "import sys, ctxeval\n"
        "ctxeval.evaluate([{'retrieved_context_ids': ['a'], 'reference_context_ids': ['a']}],"
        " ['id_mrr'])\n"
        "ctxeval.evaluate({'retrieved_context_ids': [['a']], 'reference_context_ids': [['a']]},"
        " ['id_mrr'])\n"
        "print(sorted(m for m in ('pandas', 'polars', 'datasets', 'ragas') if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.strip() == "[]"


def test_load_samples_points_a_table_to_evaluate() -> None:
    pandas = pytest.importorskip("pandas")
    with pytest.raises(ConfigError, match=r"load_samples reads a file: .*not a DataFrame"):
        ctxeval.load_samples(pandas.DataFrame(ID_ROWS))  # type: ignore[arg-type]
