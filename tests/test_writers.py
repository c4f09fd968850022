"""Output formats are writer plugins: the run folder's files, and --format for more."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

import ctxeval
from ctxeval._output.folder import write_outputs
from ctxeval._output.summary import summary_dict
from ctxeval.cli import main

ROWS = [
    {"id": "a", "retrieved_context_ids": ["d1", "d2"], "reference_context_ids": ["d1"]},
    {"id": "b", "retrieved_context_ids": ["d3"], "reference_context_ids": ["d1", "d3"]},
    {"id": "c", "retrieved_context_ids": ["d9"]},  # an error row: no reference
]


@pytest.fixture
def evaluation() -> ctxeval.Evaluation:
    return ctxeval.evaluate(ROWS, ["id_mrr", "P@2"])


def test_the_default_writers_and_the_extra_formats(
    evaluation: ctxeval.Evaluation, tmp_path: Path
) -> None:
    paths = write_outputs(
        evaluation, tmp_path, title="t", formats=["csv", "markdown", "parquet", "csv"]
    )
    assert {p.name for p in tmp_path.iterdir()} == {
        "results.jsonl", "summary.json", "report.html", "results.csv", "summary.md",
        "results.parquet",
    }  # fmt: skip
    assert paths["results"] == tmp_path / "results.jsonl"
    rows = list(csv.DictReader((tmp_path / "results.csv").open(encoding="utf-8")))
    assert [(r["sample_id"], r["metric"], r["status"]) for r in rows] == [
        (row.sample_id, row.metric, row.status.value) for row in evaluation.results
    ]
    assert json.loads(rows[0]["details"]) == {"first_relevant_rank": 1}
    markdown = (tmp_path / "summary.md").read_text()
    summary = summary_dict(evaluation)["metrics"]["id_mrr"]
    assert f"| `id_mrr` | {summary['mean']:.3f} |" in markdown
    assert "| 2 | 0 | 1 |" in markdown
    pq = pytest.importorskip("pyarrow.parquet")
    table = pq.read_table(tmp_path / "results.parquet").to_pylist()
    assert [r["score"] for r in table] == [r.score for r in evaluation.results]


def test_a_writer_of_another_package_is_used_like_the_built_ins(
    evaluation: ctxeval.Evaluation, tmp_path: Path
) -> None:
    import attrs

    from ctxeval.plugin import Evaluation as PluginEvaluation

    @attrs.frozen
    class Scores:
        name: str = "scores"
        filename: str = "scores.txt"

        def write(self, evaluation: PluginEvaluation, summary, folder: Path, *, title: str) -> Path:  # type: ignore[no-untyped-def]
            path = folder / self.filename
            path.write_text("\n".join(str(r.score) for r in evaluation.results))
            return path

    registry = ctxeval.default_registry().copy()
    registry.register("ctxeval.writers", "scores", Scores)
    writer = registry.get_writer("scores")
    assert isinstance(writer, ctxeval.plugin.Writer)
    path = writer.write(evaluation, summary_dict(evaluation), tmp_path, title="t")
    assert path.read_text().splitlines()[0] == "1.0"


def test_format_on_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in ROWS[:2]))
    out = tmp_path / "run"
    assert main(["evaluate", str(data), "-m", "RR", "--out", str(out), "--format", "csv",
                 "--format", "markdown"]) == 0  # fmt: skip
    printed = capsys.readouterr().out
    assert f"csv:      {out / 'results.csv'}" in printed
    assert (out / "summary.md").exists()
    for args, message in [
        (["--format", "xlsx", "--out", str(tmp_path / "x")], "unknown output format 'xlsx'"),
        (["--format", "csv"], "--format writes files into the run folder: add --out DIR"),
    ]:
        with pytest.raises(SystemExit) as exit_:
            main(["evaluate", str(data), "-m", "RR", *args])
        assert exit_.value.code == 2
        assert message in capsys.readouterr().err


def test_run_files_are_private(tmp_path: Path) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in ROWS[:2]))
    out = tmp_path / "run"
    formats = ["--format", "csv", "--format", "markdown", "--format", "parquet"]
    assert main(["evaluate", str(data), "-m", "RR", "--out", str(out), "-q", *formats]) == 0
    assert out.stat().st_mode & 0o777 == 0o700
    modes = {p.name: p.stat().st_mode & 0o777 for p in out.iterdir()}
    assert modes == dict.fromkeys(
        ["results.jsonl", "summary.json", "report.html", "journal.jsonl", "results.csv",
         "summary.md", "results.parquet"], 0o600,
    )  # fmt: skip
    mine = tmp_path / "mine"
    mine.mkdir(mode=0o755)
    write_outputs(ctxeval.evaluate(ROWS[:2], ["RR"]), mine, title="t")
    assert mine.stat().st_mode & 0o777 == 0o755  # a folder of the user's own is left as it is
    assert (mine / "report.html").stat().st_mode & 0o777 == 0o600
