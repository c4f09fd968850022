"""Issue #57 (the team's loop, third round): what a new user met on a plain install."""

from __future__ import annotations

import contextlib
import importlib.util
import inspect
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import attrs
import orjson
import pytest

import ctxeval
import ctxeval._view as view_package
from browser_dom import BROWSER, dump_dom
from ctxeval._output.qrels import write_qrels
from ctxeval._output.run_source import run_source
from ctxeval._plugins.registry import Registry
from ctxeval._results.judges import SCRIPTED_WARNING
from ctxeval._results.results import Usage
from ctxeval._run.progress import Progress
from ctxeval._run.settings import RunOptions, RunSettings
from ctxeval._view.index import ensure_index
from ctxeval._view.reader import Reader
from ctxeval._view.schema import connect_readonly
from ctxeval._view.server import ViewerApp, make_server, server_url
from ctxeval.cli import build_parser, main
from ctxeval.cli.progress import progress_line
from ctxeval.cli.view import cmd_view
from ctxeval.testing import assert_metric
from ctxeval_llm import LLMConfig
from ctxeval_llm import _pricing as pricing
from fakes.openai_server import FakeOpenAI, scripted_judge
from llm_judge import Judge
from test_qrels_end_to_end import DATA as E2E_DATA
from test_qrels_end_to_end import GRADES as E2E_GRADES
from test_qrels_end_to_end import doc_ids as e2e_doc_ids


def test_ray_runner_is_unavailable_with_its_install_command_without_ray(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = importlib.util.find_spec

    def find_spec(name: str, *args: object) -> object:
        return None if name == "ray" or name.startswith("ray.") else real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    [info] = [
        p
        for p in Registry.from_entry_points().plugins()
        if p.group == "ctxeval.runners" and p.name == "ray"
    ]
    assert info.status == "unavailable"
    assert info.install == "pip install 'ctxeval[ray]'"


# --- 2. the scripted judge is named in every view ------------------------------------------


@pytest.fixture(scope="module")
def scripted_run() -> ctxeval.Evaluation:
    with FakeOpenAI(scripted_judge) as fake:
        return ctxeval.evaluate(
            [
                {"id": "a", "user_input": "Where?", "reference": "Paris is in France.",
                 "retrieved_contexts": ["Paris is in France.", "Bananas are yellow."]},
                {"id": "b", "user_input": "Who?", "reference": "Ada wrote it.",
                 "retrieved_contexts": ["Bananas are yellow.", "Ada wrote it."]},
            ],
            ["context_precision"],
            llm=LLMConfig(
                model="openai/scripted-judge", api_base=fake.url, api_key="sk-test"
            ),
            cache=None,
        )  # fmt: skip


def test_print_repr_and_notebook_table_say_not_a_real_judge(
    scripted_run: ctxeval.Evaluation,
) -> None:
    assert SCRIPTED_WARNING in str(scripted_run)
    assert "NOT A REAL JUDGE" in repr(scripted_run)
    page = scripted_run._repr_html_()
    assert "NOT A REAL JUDGE" in page
    assert page.index("NOT A REAL JUDGE") < page.index("<table")  # above the scores


def test_a_failed_assert_metric_says_not_a_real_judge(scripted_run: ctxeval.Evaluation) -> None:
    with pytest.raises(AssertionError, match="NOT A REAL JUDGE"):
        assert_metric(scripted_run, "context_precision", at_least=1.0)


def test_the_viewer_says_not_a_real_judge(
    scripted_run: ctxeval.Evaluation, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scripted_run.write(tmp_path / "run")
    app = ViewerApp(index=ensure_index([run_source(tmp_path / "run")]),
                    runs=[run_source(tmp_path / "run")])  # fmt: skip
    app.load_info()
    assert app.info["runs"][0]["scripted_judge"] == SCRIPTED_WARNING
    assets = Path(view_package.__file__).parent / "assets"
    script = (assets / "viewer.js").read_text(encoding="utf-8")
    assert "r.scripted_judge" in script
    args = build_parser().parse_args(["view", str(tmp_path / "run"), "--port", "0"])
    with mock.patch("ctxeval.cli.view.serve_until_stopped"):
        assert cmd_view(args) == 0
    assert "NOT A REAL JUDGE" in capsys.readouterr().err.replace("\n", " ")


# --- 4. cost without litellm: the price table comes with ctxeval[llm] ---------------------


@pytest.fixture
def no_litellm(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """As on the README's plain install: litellm (and its price table) is not installed."""
    real = importlib.util.find_spec

    def find_spec(name: str, *args: object) -> object:
        return None if name.split(".")[0] == "litellm" else real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    _forget_prices()
    yield
    _forget_prices()  # (a later test of this process sees the table again)


def _forget_prices() -> None:
    pricing.price_table.cache_clear()
    pricing._mentioned.cache_clear()  # "not in the table" is remembered per model name


ROWS = [{"id": f"s{i}", "user_input": "q", "reference": f"reference {i}",
         "retrieved_contexts": ["useful", "useless"]} for i in range(3)]  # fmt: skip


def test_dry_run_without_litellm_says_where_the_price_table_comes_from(
    tmp_path: Path, no_litellm: None, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    args = ["evaluate", str(data), "-m", "context_precision", "--model", "openai/gpt-4o-mini",
            "--api-base", "http://127.0.0.1:9/v1", "--dry-run"]  # fmt: skip
    assert main(args) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert "estimated cost: unknown" in printed
    assert 'it comes with ctxeval[llm] (pip install "ctxeval[llm]")' in printed
    assert "--price IN,OUT" in printed


def test_max_cost_without_litellm_says_where_the_price_table_comes_from(
    no_litellm: None,
) -> None:
    llm = LLMConfig(model="openai/gpt-4o-mini", api_base="http://127.0.0.1:9/v1", api_key="k")
    with pytest.raises(ctxeval.ConfigError) as error:
        ctxeval.evaluate(ROWS, ["context_precision"], llm=llm, max_cost_usd=1.0)
    message = str(error.value)
    assert 'it comes with ctxeval[llm] (pip install "ctxeval[llm]")' in message
    assert "--price IN,OUT" in message


# --- 7. two metrics named alike: the options they differ in, and the command ---------------


def test_ap_twice_with_another_relevance_level_names_the_option_and_the_fix(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rows = [{"id": "q", "retrieved_context_ids": ["a", "b"],
             "reference_context_ids": {"a": 1, "b": 2}}]  # fmt: skip
    with pytest.raises(ctxeval.ConfigError) as error:
        ctxeval.evaluate(rows, ["AP", ctxeval.get_metric("AP", relevance_level=2)])
    message = str(error.value)
    assert "differ in relevance_level (1 and 2), which is not part of the row name" in message
    assert "-m AP:relevance_level=2,name=AP_relevance_level2" in message
    assert "non_llm_context_recall" not in message  # (an unrelated metric, before)
    fixed = ctxeval.evaluate(
        rows, ["AP", ctxeval.get_metric("AP", relevance_level=2, name="AP_relevance_level2")]
    )
    assert [r.score for r in fixed.results] == [1.0, 0.5]


# --- 3. one rule for "nothing relevant" and the relevance cut-off on both routes ------------


ROUTES = [  # context_relevance options, the IR measure on its written qrels
    ({"measure": "ap"}, "AP"),
    ({"measure": "ap", "k": 3}, "AP@3"),
    ({"measure": "precision", "k": 3}, "P@3"),
    ({"measure": "ndcg", "k": 3}, "nDCG@3"),
    ({"measure": "ap", "min_grade": 2}, "AP:relevance_level=2"),
    ({"measure": "precision", "k": 3, "min_grade": 2}, "P@3:relevance_level=2"),
]


@pytest.mark.parametrize("averaging", [False, True], ids=["default", "trec_eval_averaging"])
def test_context_relevance_and_the_ir_measures_on_its_qrels_agree(
    tmp_path: Path, averaging: bool
) -> None:
    """The same grades, two routes: ``context_relevance:measure=...`` and ``--qrels/--run
    -m ...`` on the qrels it wrote give the same value (or both ``undefined``) on every query,
    by default and with trec_eval's averaging (q3: nothing graded relevant)."""
    with FakeOpenAI(Judge(grades=E2E_GRADES)) as fake:
        llm = LLMConfig(model="openai/fake-judge", api_base=fake.url, api_key="sk-test")
        metrics = [
            ctxeval.get_metric("context_relevance", trec_eval_averaging=averaging, **options)
            for options, _ in ROUTES
        ]
        ev = ctxeval.evaluate(E2E_DATA, metrics, llm=llm, cache=None)
    qrels, run = tmp_path / "judged.qrels", tmp_path / "retrieved.run"
    write_qrels(ev, qrels)
    run.write_text("".join(
        f"{s['id']} Q0 {doc} {rank} {100 - rank} r\n"
        for s in E2E_DATA for rank, doc in enumerate(e2e_doc_ids(s), start=1)
    ))  # fmt: skip
    ir_metrics = []
    for _, spec in ROUTES:
        name, _, option = spec.partition(":relevance_level=")
        extra = {"relevance_level": int(option), "name": spec} if option else {}
        ir_metrics.append(ctxeval.get_metric(name, trec_eval_averaging=averaging, **extra))
    ir = ctxeval.evaluate(ctxeval.load_trec(qrels, run), ir_metrics)
    theirs = {(r.sample_id, r.metric): r for r in ir.results}
    statuses = set()
    for metric, (_, spec) in zip(metrics, ROUTES, strict=True):
        for row in ev.rows(metric.name):
            other = theirs[row.sample_id, spec]
            assert (row.status, row.score) == (other.status, other.score), (spec, row.sample_id)
            statuses.add(row.status)
        assert ev.summary()[metric.name].mean == ir.summary()[spec].mean, spec
    expected = {ctxeval.Status.OK} if averaging else {ctxeval.Status.OK, ctxeval.Status.UNDEFINED}
    assert statuses == expected


# --- 6. a per-query view for IR users, and the hint towards trec_eval's averaging -----------

QRELS = "q1 0 d1 2\nq1 0 d2 0\nq1 0 d3 1\nq2 0 d4 0\nq2 0 d5 0\nq3 0 d6 1\nq3 0 d7 3\n"
RUN = "q1 Q0 d2 1 9.5 r\nq1 Q0 d1 2 8.0 r\nq2 Q0 d4 1 3.0 r\nq3 Q0 d7 1 3.0 r\nq3 Q0 d9 2 2 r\n"


def test_per_query_table_and_file_as_trec_eval_q(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    (tmp_path / "q.txt").write_text(QRELS)
    (tmp_path / "r.txt").write_text(RUN)
    argv = ["evaluate", "--qrels", str(tmp_path / "q.txt"), "--run", str(tmp_path / "r.txt"),
            "-m", "nDCG@10", "-m", "AP", "-m", "P@5", "-m", "Rprec",
            "--out", str(tmp_path / "run"), "--per-query"]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    head = next(i for i, line in enumerate(lines) if line.split()[:2] == ["query", "nDCG@10"])
    paths = ("results:", "summary:", "report:", "per query:")  # (a path is as long as it is)
    assert max(len(line) for line in lines if not line.startswith(paths)) <= 80
    assert lines[head + 2].split() == ["q1", "0.4796", "0.2500", "0.2000", "0.5000"]
    assert lines[head + 3].split() == ["q2", "undef", "undef", "undef", "undef"]
    written = (tmp_path / "run" / "per-query.tsv").read_text().splitlines()
    assert written[0] == "metric\tquery\tvalue"
    assert "AP\tq1\t0.25" in written
    assert "AP\tq2\tundefined" in written
    assert len(written) == 1 + 3 * 4
    flat = " ".join(out.split())
    assert "1 query is undefined" in flat
    assert "--trec-eval-averaging gives trec_eval's means" in flat
    # with trec_eval's averaging: no hint, and q2 scored 0
    averaged = tmp_path / "averaged.tsv"
    argv = [*argv[:-3], "--trec-eval-averaging", "--per-query", str(averaged)]
    assert main(argv) == 0
    assert "--trec-eval-averaging gives" not in " ".join(capsys.readouterr().out.split())
    assert "AP\tq2\t0.0" in averaged.read_text().splitlines()


def test_per_query_without_a_file_or_out_says_what_to_give(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "q.txt").write_text(QRELS)
    (tmp_path / "r.txt").write_text(RUN)
    argv = ["evaluate", "--qrels", str(tmp_path / "q.txt"), "--run", str(tmp_path / "r.txt"),
            "-m", "AP", "--per-query"]  # fmt: skip
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    assert "--per-query FILE" in capsys.readouterr().err


# --- 5. a run written from a DataFrame keeps its texts for the viewer ----------------------


def test_write_with_data_in_memory_keeps_the_texts_for_ctxeval_view(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pandas = pytest.importorskip("pandas")
    frame = pandas.DataFrame(
        {
            "id": ["q1", "q2"],
            "user_input": ["Where is the tower?", "Who built it?"],
            "retrieved_contexts": [["The tower is in Paris."], ["Eiffel's firm built it."]],
            "retrieved_context_ids": [["d1"], ["d2"]],
            "reference_context_ids": [["d1"], ["d3"]],
        }
    )
    ev = ctxeval.evaluate(frame, ["id_based_context_precision"])
    ev.write(tmp_path / "run", data=frame)
    source = run_source(tmp_path / "run")
    assert source.data == (tmp_path / "run" / "samples.jsonl").resolve()
    app = ViewerApp(index=ensure_index([source]), runs=[source])
    app.load_info()
    assert app.info["runs"][0]["data"] is not None
    with contextlib.closing(connect_readonly(app.index)) as conn:
        sample = Reader(conn, app.counts).sample("q2")
    assert sample is not None
    texts = json.loads(orjson.dumps(sample["texts"]))  # (kept as JSON, an orjson Fragment)
    assert texts["user_input"] == "Who built it?"
    # written without data=: the viewer says plainly that the run names no data file
    ev.write(tmp_path / "bare")
    args = build_parser().parse_args(["view", str(tmp_path / "bare"), "--port", "0"])
    with mock.patch("ctxeval.cli.view.serve_until_stopped"):
        assert cmd_view(args) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert "the run names no data file" in err
    assert "was not found" not in err


# --- 8. docs that do not mislead -----------------------------------------------------------

DOCS = Path(__file__).parent.parent / "docs"


def test_docs_index_installs_from_a_clone_not_the_package_index() -> None:
    text = (DOCS / "index.md").read_text(encoding="utf-8")
    commands = [line.split("#")[0].split() for line in text.splitlines()]
    assert ["pip", "install", "ctxeval"] not in commands
    assert any(c[:3] == [".venv/bin/pip", "install", "-e"] for c in commands)


def test_api_reference_lists_each_name_with_its_summary_readable_in_the_repository() -> None:
    text = (DOCS / "reference" / "api.md").read_text(encoding="utf-8")
    names = [line[4:].strip() for line in text.splitlines() if line.startswith("::: ")]
    assert len(names) > 50
    for name in names:
        assert f"- `{name}`: " in text, name


def test_serve_judge_page_lists_context_relevance_and_the_embedding_pages_differ() -> None:
    llm = (DOCS / "llm.md").read_text(encoding="utf-8")
    answers = llm[llm.index("**What it answers**") :].split("\n- **", 1)[0]
    assert "`context_relevance`" in answers
    titles = [(DOCS / f).read_text(encoding="utf-8").splitlines()[0]
              for f in ("embedding.md", "embeddings.md")]  # fmt: skip
    assert "Embedding" not in titles[0]
    assert all(word in titles[1] for word in ("Embeddings", "meaning"))


# --- 10. smaller things --------------------------------------------------------------------


def test_evaluate_keywords_are_typed_and_agree_with_run_settings() -> None:
    """An IDE completes evaluate's keywords (RunOptions: **overrides typed), and RunSettings
    stays their one source of truth: the same names and types, field by field."""
    options = {name: ref.__forward_arg__ for name, ref in RunOptions.__annotations__.items()}
    fields = {f.name: str(f.type) for f in attrs.fields(RunSettings)}
    assert list(options) == list(fields)
    fields["retry"] += " | None"  # (None is converted to the default RetryPolicy)
    assert options == fields
    explicit = ["llm", "registry", "settings", "labels", "runner"]
    for function in (ctxeval.evaluate, ctxeval.aevaluate, ctxeval.stream):
        parameters = inspect.signature(function).parameters
        assert parameters["overrides"].annotation == "Unpack[RunOptions]", function
        assert all(name in parameters for name in explicit if name != "labels" or
                   function is not ctxeval.stream), function  # fmt: skip
    assert "backend" in inspect.signature(ctxeval.evaluate).parameters
    with pytest.raises(ctxeval.ConfigError, match="did you mean 'max_concurrency'"):
        ctxeval.evaluate([{}], ["id_mrr"], max_concurency=2)  # type: ignore[call-arg]
    ev = ctxeval.evaluate(
        [{"retrieved_context_ids": ["a"], "reference_context_ids": ["a"]}],
        ["id_mrr"],
        max_concurrency=2,
        timeout=5.0,
    )
    assert ev.results[0].score == 1.0


def test_dir_ctxeval_shows_no_helpers_of_its_own_module() -> None:
    shown = dir(ctxeval)
    assert not {"Any", "TYPE_CHECKING", "importlib"} & set(shown)
    assert {"evaluate", "Evaluation", "__version__", "ConfigError"} <= set(shown)


def test_one_row_is_one_row_not_one_rows() -> None:
    progress = Progress(done=1, total=1, errors=0, undefined=0, resumed=0, usage=Usage(),
                        elapsed=0.5, finished=True)  # fmt: skip
    line = " ".join(progress_line(progress, 200, total=1).split())
    assert "scored 1/1 row in" in line


LOGS = [{"qid": "a", "query": "Where?", "got": ["d1", "d2"], "want": ["d1"]},
        {"qid": "b", "query": "Who?", "got": ["d3"], "want": ["d3"]}]  # fmt: skip
MAP = {"id": "qid", "user_input": "query", "retrieved_context_ids": "got",
       "reference_context_ids": "want"}  # fmt: skip


def test_column_map_for_dicts_dataframes_and_files(tmp_path: Path) -> None:
    expected = [("a", 0.5), ("b", 1.0)]
    ev = ctxeval.evaluate(LOGS, ["id_based_context_precision"], column_map=MAP)
    assert [(r.sample_id, r.score) for r in ev.results] == expected
    pandas = pytest.importorskip("pandas")
    frame = ctxeval.evaluate(pandas.DataFrame(LOGS), ["id_based_context_precision"], column_map=MAP)
    assert [(r.sample_id, r.score) for r in frame.results] == expected
    path = tmp_path / "logs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in LOGS))
    [first, _] = list(ctxeval.load_samples(path, column_map=MAP))
    assert (first.id, first.user_input, first.retrieved_context_ids) == (
        "a",
        "Where?",
        ("d1", "d2"),
    )
    with pytest.raises(ctxeval.DataError, match="column 'want'"):
        list(ctxeval.load_samples(_missing(tmp_path), column_map=MAP))


def _missing(tmp_path: Path) -> Path:
    path = tmp_path / "short.jsonl"
    path.write_text(json.dumps({k: v for k, v in LOGS[0].items() if k != "want"}) + "\n")
    return path


def test_column_map_to_an_unknown_field_is_a_config_error_naming_the_fields() -> None:
    with pytest.raises(ctxeval.ConfigError) as error:
        ctxeval.evaluate(LOGS, ["id_mrr"], column_map={"questoin": "query"})
    message = str(error.value)
    assert "'questoin' is not a sample field (did you mean 'user_input'?)" in message
    assert "retrieved_context_ids" in message


def test_map_on_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "logs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in LOGS))
    argv = ["evaluate", str(path), "-m", "id_based_context_precision", "--out",
            str(tmp_path / "run"), "-q"]  # fmt: skip
    for field, column in MAP.items():
        argv += ["--map", f"{field}={column}"]
    assert main(argv) == 0
    rows = [json.loads(line) for line in (tmp_path / "run" / "results.jsonl").open()]
    assert [(r["sample_id"], r["score"]) for r in rows] == [("a", 0.5), ("b", 1.0)]
    with pytest.raises(SystemExit):
        main(["evaluate", str(path), "-m", "id_mrr", "--map", "questoin=query"])
    assert "did you mean 'user_input'" in capsys.readouterr().err


def test_the_viewer_page_in_a_browser_says_not_a_real_judge(
    scripted_run: ctxeval.Evaluation, tmp_path: Path
) -> None:
    if BROWSER is None:
        if os.environ.get("CTXEVAL_REQUIRE_BROWSER") == "1":
            raise RuntimeError("CTXEVAL_REQUIRE_BROWSER=1 but no chromium")
        pytest.skip("no chromium (apt-get install -y chromium)")
    scripted_run.write(tmp_path / "run")
    runs = [run_source(tmp_path / "run")]
    server = make_server(runs, ensure_index(runs))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        page = dump_dom(server_url(server))
    finally:
        server.shutdown()
        server.server_close()
    assert "NOT A REAL JUDGE" in page.text


def test_column_map_reads_lists_from_the_csv_columns_it_maps(tmp_path: Path) -> None:
    """A CSV column mapped onto a list field holds a list (a JSON array or a Python list
    literal), as a column named like the field does; a cell that is neither says so."""
    path = tmp_path / "logs.csv"
    path.write_text(
        'qid,query,got,want\na,Where?,"[""d1"", ""d2""]",[\'d1\']\nb,Who?,"[""d3""]","[""d3""]"\n'
    )
    ev = ctxeval.evaluate(
        ctxeval.load_samples(path, column_map=MAP), ["id_based_context_precision"]
    )
    assert [(r.sample_id, r.score) for r in ev.results] == [("a", 0.5), ("b", 1.0)]
    path.write_text("qid,query,got,want\na,Where?,d1 d2,d1\n")
    with pytest.raises(ctxeval.DataError, match="JSON array or a Python list literal"):
        list(ctxeval.load_samples(path, column_map=MAP))
