"""A run streams to its folder: rows written once, a part at a time, byte for byte as
``row.to_json()``; summaries from columns of scores equal to ``Evaluation.summary()`` to the
bit; a report of bounded size that shows the samples to look at first; ``ctxeval report``
writes it again from ``results.jsonl``."""

from __future__ import annotations

import csv
import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

import ctxeval
from ctxeval import MetricResult, Sample
from ctxeval._output.folder import RunFolder, write_outputs
from ctxeval._output.lines import jsonl_lines
from ctxeval._output.selection import RANDOM, UNSURE, WORST, ReportSelection
from ctxeval._output.totals import RunTotals
from ctxeval._plugins.base import BaseMetric
from ctxeval.cli import main

IDS = ["id_based_context_precision", "id_based_context_recall", "id_ndcg_at_k", "id_mrr"]


def id_samples(n: int, *, seed: int = 3) -> list[dict[str, Any]]:
    import random

    rng = random.Random(seed)
    out: list[dict[str, Any]] = []
    for i in range(n):
        row: dict[str, Any] = {
            "retrieved_context_ids": [f"d{rng.randrange(30)}" for _ in range(rng.randrange(0, 8))],
            "reference_context_ids": [f"d{rng.randrange(30)}" for _ in range(rng.randrange(0, 4))],
            "user_input": f"question {i}",
        }
        if i % 3:
            row["id"] = f"q{i}"
        if i % 97 == 5:
            del row["reference_context_ids"]  # an error row in the middle of a chunk
        out.append(row)
    return out


class Odd(BaseMetric):
    """An async metric whose details orjson cannot write as they are."""

    name = "odd"
    requires = ()

    async def ascore(self, sample: Sample, ctx: Any) -> MetricResult:
        i = int(sample.id or 0)
        details: dict[Any, Any] = {
            0: {"big": 2**70},
            1: {"set": {1, 2}},
            2: {"text": "lone \ud800 surrogate"},
            3: {("tuple", "key"): 1.5, "nan": float("nan")},
        }.get(i % 5, {"plain": [1, 2, 3]})
        if i % 7 == 6:
            return MetricResult.undefined("nothing to judge")
        return MetricResult.ok(0.25 * (i % 5), details=details)


def test_lines_are_each_rows_to_json(tmp_path: Path) -> None:
    """The fast writer of columns gives, byte for byte, what ``to_json`` gives, for every row
    kind: plain column rows, edge rows kept whole, rows of async metrics, unwritable details."""
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(s) + "\n" for s in id_samples(5000)))
    evaluation = ctxeval.evaluate(
        ctxeval.load_samples(data),
        [*IDS, "non_llm_context_precision_with_reference"],
        lenient=True,
    )
    odd = ctxeval.evaluate([{"id": str(i)} for i in range(40)], [Odd(), "id_mrr"])
    for ev in (evaluation, odd):
        written = b"".join(jsonl_lines(part) for part in ev._parts)
        expected = "".join(row.to_json() + "\n" for row in ev.results)
        assert written == expected.encode("utf-8", "backslashreplace")


@pytest.mark.parametrize("n", [300, 25_000])  # the bootstrap, then the normal approximation
def test_totals_equal_the_evaluations_summary(n: int) -> None:
    samples = id_samples(n)
    evaluation = ctxeval.evaluate(samples, IDS, lenient=True)
    totals = RunTotals(evaluation.metrics)
    for part in evaluation._parts:
        totals.add(part)
    ours = {k: v.to_dict() for k, v in totals.summary().items()}
    theirs = {k: v.to_dict() for k, v in evaluation.summary().items()}
    assert json.dumps(ours) == json.dumps(theirs)  # to the bit, floats and all
    assert totals.n_samples == n
    assert totals.rows_added == len(evaluation)
    assert totals.ok == evaluation.ok
    errors = evaluation.errors()
    assert totals.error_count == len(errors)
    groups = totals.error_groups()
    assert sum(g.count for g in groups) == len(errors)
    assert groups[0].example == errors[0].sample_id


def test_totals_of_rows_of_async_metrics() -> None:
    evaluation = ctxeval.evaluate([{"id": str(i)} for i in range(60)], [Odd(), "id_mrr"])
    totals = RunTotals(evaluation.metrics)
    for part in evaluation._parts:
        totals.add(part)
    assert totals.summary() == evaluation.summary()
    assert totals.usage == evaluation.usage


def _read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def test_the_folder_streams_what_the_writers_wrote_whole(tmp_path: Path) -> None:
    samples = id_samples(3000)
    evaluation = ctxeval.evaluate(samples, IDS, lenient=True)
    paths = write_outputs(evaluation, tmp_path / "a", title="t", formats=["csv", "parquet"])
    expected = "".join(row.to_json() + "\n" for row in evaluation.results)
    assert paths["results"].read_text(encoding="utf-8") == expected
    rows = _read_csv(paths["csv"])
    assert len(rows) == len(evaluation)
    assert rows[1]["metric"] == evaluation.results[1].metric
    assert json.loads(rows[1]["details"]) == evaluation.results[1].to_dict()["details"]
    import pyarrow.parquet as pq

    table = pq.read_table(paths["parquet"])
    assert table.num_rows == len(evaluation)
    assert table.column("score").to_pylist() == [r.score for r in evaluation.results]
    for path in paths.values():
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert not list((tmp_path / "a").glob("*.partial"))


def test_an_aborted_folder_leaves_no_partial_file(tmp_path: Path) -> None:
    evaluation = ctxeval.evaluate(id_samples(100), IDS, lenient=True)
    folder = RunFolder(tmp_path / "run", evaluation.metrics, title="t", formats=["csv"])
    for part in evaluation._parts:
        folder.add(part)
    assert (tmp_path / "run" / "results.jsonl.partial").exists()
    folder.abort()
    assert list((tmp_path / "run").iterdir()) == []


def test_a_large_run_shows_the_samples_to_look_at_first() -> None:
    samples = id_samples(12_000)
    evaluation = ctxeval.evaluate(samples, IDS, lenient=True)
    names = evaluation.metrics
    selection = ReportSelection(names)
    for part in evaluation._parts:
        selection.add(part)
    assert not selection.complete
    shown = selection.shown
    caps = len(IDS) * (WORST + UNSURE) + RANDOM + 30 * 10 + 50
    assert len(shown) <= caps
    assert selection.left_out == 12_000 - len(shown)
    positions = [s.position for s in shown]
    assert positions == sorted(positions)
    ids = {s.sample_id for s in shown}
    for metric in names:  # the WORST lowest ok scores (ties: the earlier sample) are all there
        rows = evaluation.rows(metric)  # (built anew at each call: 12 000 rows, read once here)
        ranked = sorted(
            (r.score, i)
            for i, r in enumerate(rows)
            if r.status is ctxeval.Status.OK and r.score is not None
        )
        worst = {rows[i].sample_id for _, i in ranked[:WORST]}
        assert worst <= ids
    failed = [s for s in shown if any(w.startswith("failed:") for w in s.why)]
    assert failed
    assert all(any(row["status"] == "error" for row in s.rows.values()) for s in failed)


def test_the_random_draw_does_not_depend_on_how_the_rows_were_cut() -> None:
    samples = id_samples(9000)
    one = ctxeval.evaluate(samples, IDS, lenient=True)
    rows = list(one.results)
    names = one.metrics
    whole = ReportSelection(names)
    whole.add(rows)
    cut = ReportSelection(names)
    width = len(names)
    for start in range(0, len(rows), 37 * width):
        cut.add(rows[start : start + 37 * width])
    blocks = ReportSelection(names)
    for part in one._parts:
        blocks.add(part)

    def drawn(selection: ReportSelection) -> list[str]:
        return [s.sample_id for s in selection.shown if "random" in s.why]

    assert drawn(whole) == drawn(cut) == drawn(blocks)
    assert len(drawn(whole)) == RANDOM


def test_a_small_run_shows_every_sample(tmp_path: Path) -> None:
    evaluation = ctxeval.evaluate(id_samples(200), IDS, lenient=True)
    selection = ReportSelection(evaluation.metrics)
    for part in evaluation._parts:
        selection.add(part)
    assert selection.complete
    assert len(selection.shown) == 200
    assert selection.left_out == 0


def test_the_report_stays_small_with_long_texts(tmp_path: Path) -> None:
    """Every sample holds 8 kB of text: the report stops showing every sample at its byte
    budget, and says how to see them all."""
    long = "lorem ipsum dolor sit amet " * 150
    data = tmp_path / "long.jsonl"
    with data.open("w", encoding="utf-8") as handle:
        for i in range(4000):
            handle.write(
                json.dumps(
                    {
                        "id": f"s{i}",
                        "retrieved_contexts": [long + str(i), long],
                        "reference_contexts": [long],
                    }
                )
                + "\n"
            )
    out = tmp_path / "run"
    code = main(
        ["evaluate", str(data), "-m", "non_llm_context_recall", "--out", str(out), "--quiet"]
    )
    assert code == 0
    report = (out / "report.html").read_text(encoding="utf-8")
    assert len(report.encode()) < 15_000_000
    assert "ctxeval view" in report
    assert "leaves out" in report


def test_ctxeval_report_writes_the_same_report_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(s) + "\n" for s in id_samples(7000)))
    out = tmp_path / "run"
    metrics = [arg for m in IDS for arg in ("-m", m)]
    command = ["evaluate", str(data), *metrics, "--out", str(out), "--quiet", "--lenient"]
    assert main(command) == 1  # (error rows: exit 1)
    first = (out / "report.html").read_bytes()
    assert b"question 1" in first  # texts of shown samples, read again from their lines
    (out / "report.html").unlink()
    assert main(["report", str(out)]) == 0
    assert (out / "report.html").read_bytes() == first
    moved = tmp_path / "elsewhere.jsonl"
    data.rename(moved)
    capsys.readouterr()
    assert main(["report", str(out), "-o", str(tmp_path / "r.html")]) == 0
    assert "no data file" in capsys.readouterr().err
    assert main(["report", str(out), "--data", str(moved), "-o", str(tmp_path / "r2.html")]) == 0
    assert (tmp_path / "r2.html").read_bytes() == first


def test_csv_and_parquet_rows_are_each_rows_flat_record(tmp_path: Path) -> None:
    """Written from columns, a row of results.csv / results.parquet is what the row itself
    gives (``_flat``), for every row kind."""
    import io

    import pyarrow.parquet as pq

    from ctxeval._output.writers import _COLUMNS, _flat

    evaluation = ctxeval.evaluate(
        id_samples(3000), [*IDS, "non_llm_context_precision_with_reference"], lenient=True
    )
    odd = ctxeval.evaluate([{"id": str(i)} for i in range(40)], [Odd(), "id_mrr"])
    for number, ev in enumerate((evaluation, odd)):
        paths = write_outputs(ev, tmp_path / str(number), title="t", formats=["csv", "parquet"])
        expected = io.StringIO(newline="")
        writer = csv.DictWriter(expected, fieldnames=_COLUMNS)
        writer.writeheader()
        writer.writerows(map(_flat, ev.results))
        assert paths["csv"].read_bytes().decode("utf-8") == expected.getvalue()
        table = pq.read_table(paths["parquet"]).to_pylist()
        assert table == [_flat(row) for row in ev.results]


def test_kept_blocks_hold_lines_not_samples(tmp_path: Path) -> None:
    """The samples a block carries to its reader are dropped once the reader moves on: an
    evaluation kept in memory holds each sample's line only."""
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(s) + "\n" for s in id_samples(5000)))
    evaluation = ctxeval.evaluate(ctxeval.load_samples(data), IDS, lenient=True)
    blocks = [p for p in evaluation._parts if hasattr(p, "parsed")]
    assert len(blocks) > 2
    assert all(block.parsed is None for block in blocks)
    assert sum(isinstance(block.sources[0], bytes) for block in blocks) >= len(blocks) - 1


def test_a_full_disk_removes_the_files_begun_and_says_how_to_finish(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import errno

    from ctxeval._output import writers

    written = writers._JSONLFile.add
    calls = 0

    def add(self: Any, rows: Any) -> None:
        nonlocal calls
        calls += 1
        if calls == 3:
            raise OSError(errno.ENOSPC, "No space left on device", str(self.partial))
        written(self, rows)

    monkeypatch.setattr(writers._JSONLFile, "add", add)
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(s) + "\n" for s in id_samples(3000)))
    out = tmp_path / "run"
    with pytest.raises(SystemExit) as stopped:
        main(["evaluate", str(data), "-m", "id_mrr", "--out", str(out), "--format", "csv", "-q"])
    assert stopped.value.code == 1
    err = capsys.readouterr().err
    assert "No space left on device" in err
    assert "--resume" in err
    assert "Traceback" not in err
    assert sorted(p.name for p in out.iterdir()) == ["journal.jsonl"]


def test_a_link_planted_in_the_run_folder_is_replaced_not_followed(tmp_path: Path) -> None:
    """A symbolic link at a file's name in the run folder is replaced; its target is left as
    it was (and a link at a partial file's name is refused, never followed)."""
    target = tmp_path / "precious.txt"
    target.write_text("keep me")
    out = tmp_path / "run"
    out.mkdir()
    for name in ("report.html", "summary.json", "results.jsonl"):
        (out / name).symlink_to(target)
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(s) + "\n" for s in id_samples(50)))
    code = main(["evaluate", str(data), "-m", "id_mrr", "--out", str(out), "--overwrite", "-q"])
    assert code == 1  # (error rows of samples without a reference)
    assert target.read_text() == "keep me"
    for name in ("report.html", "summary.json", "results.jsonl"):
        assert not (out / name).is_symlink()
        assert stat.S_IMODE(os.stat(out / name).st_mode) == 0o600
    (out / "results.jsonl.partial").symlink_to(target)
    with pytest.raises(SystemExit):
        main(["evaluate", str(data), "-m", "id_mrr", "--out", str(out), "--overwrite", "-q"])
    assert target.read_text() == "keep me"
