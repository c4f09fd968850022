"""``--lenient`` / ``lenient=True``: one rule wherever the samples come from.

A bad row (unreadable JSON, a field of the wrong type, an id an earlier row has) becomes one
``error`` row per metric that says why, the other rows are scored, and the exit code is 1: from
the command line, from Python with a file's stream or with dicts in memory, and with the
``processes`` runner (whose workers read parts of the file themselves).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import ctxeval
from ctxeval._run.rows import SET_ASIDE
from ctxeval.cli import main
from ctxeval.runners import get_runner

METRICS = ["id_based_context_precision", "id_based_context_recall"]

LINES = [
    '{"id": "a", "retrieved_context_ids": ["d1", "d2"], "reference_context_ids": ["d1"]}',
    '{"id": "b", "retrieved_context_ids": "oops", "reference_context_ids": ["d1"]}',
    "{not json",
    '{"id": "a", "retrieved_context_ids": ["d3"], "reference_context_ids": ["d1"]}',
    '{"id": "c", "retrieved_context_ids": ["d1"], "reference_context_ids": ["d1"]}',
]


def _file(tmp_path: Path) -> Path:
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(LINES) + "\n")
    return path


def _kinds(rows: list[tuple[str, str, str, str]]) -> list[tuple[str, str, str]]:
    return [(sample, metric, status) for sample, metric, status, _ in rows]


EXPECTED = [
    ("a", METRICS[0], "ok"),
    ("a", METRICS[1], "ok"),
    ("b", METRICS[0], "error"),
    ("b", METRICS[1], "error"),
    ("2", METRICS[0], "error"),
    ("2", METRICS[1], "error"),
    ("a#", METRICS[0], "error"),
    ("a#", METRICS[1], "error"),
    ("c", METRICS[0], "ok"),
    ("c", METRICS[1], "ok"),
]


def _rows(evaluation: ctxeval.Evaluation) -> list[tuple[str, str, str, str]]:
    return [
        (str(r.sample_id), str(r.metric), r.status.value, r.reason or "")
        for r in evaluation.results
    ]


def test_the_command_line_makes_error_rows_and_counts_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    code = main(["evaluate", str(_file(tmp_path)), *_flags(), "--lenient", "--out", str(out)])
    assert code == 1
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    got = [(r["sample_id"], r["metric"], r["status"]) for r in rows]
    assert got == EXPECTED
    reasons = {r["sample_id"]: r["reason"] for r in rows if r["status"] == "error"}
    assert "bad.jsonl:2" in reasons["b"]
    assert "retrieved_context_ids" in reasons["b"]
    assert "bad.jsonl:3" in reasons["2"]
    assert "not valid JSON" in reasons["2"]
    assert reasons["a#"].startswith("set aside: ")
    assert "bad.jsonl:4: sample 'a': field 'id': an earlier row has this id" in reasons["a#"]
    assert "--lenient" not in reasons["a#"]  # (the run is lenient already)
    summary = json.loads((out / "summary.json").read_text())
    assert "skipped_rows" not in summary
    printed = capsys.readouterr()
    assert "6 error row(s)" in printed.out  # the errors the exit code 1 is for
    assert "skipping" not in printed.err  # (reading the file again for the report is quiet)


def _flags() -> list[str]:
    return [flag for name in METRICS for flag in ("-m", name)]


def test_python_gives_the_same_rows_from_a_stream_and_from_dicts(tmp_path: Path) -> None:
    path = _file(tmp_path)
    from_stream = ctxeval.evaluate(ctxeval.load_samples(path), METRICS, lenient=True)
    assert _kinds(_rows(from_stream)) == EXPECTED
    dicts: list[object] = []
    for line in LINES:
        try:
            dicts.append(json.loads(line))
        except json.JSONDecodeError:
            dicts.append({"id": 7})  # an unreadable sample in memory (ids not a list...)
    dicts[2] = {"retrieved_context_ids": 5, "reference_context_ids": ["d1"]}
    from_dicts = ctxeval.evaluate(dicts, METRICS, lenient=True)
    assert _kinds(_rows(from_dicts)) == EXPECTED


def test_a_strict_run_stops_at_the_first_bad_row_and_says_what_lenient_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["evaluate", str(_file(tmp_path)), *_flags()])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert "bad.jsonl:2" in err
    assert "record each bad one as error rows, pass --lenient" in err


@pytest.mark.parametrize("part_size", [1, 2, 8192])
def test_the_processes_runner_gives_the_local_rows(tmp_path: Path, part_size: int) -> None:
    """Each part read by a worker, the repeated id in another part than the first one (part
    sizes 1 and 2): the same rows, reasons included, as the local run."""
    path = _file(tmp_path)
    local = _rows(ctxeval.evaluate(ctxeval.load_samples(path), METRICS, lenient=True))
    runner = get_runner("processes", workers=2)
    runner.part_size = part_size  # type: ignore[attr-defined]
    spread = _rows(
        ctxeval.evaluate(ctxeval.load_samples(path), METRICS, lenient=True, runner=runner)
    )
    if part_size == 8192:  # one part: the worker reads the whole file, as the local run does
        assert spread == local
        return
    # parts cut by bytes: the repeated id in the same part (found with its line) or in a later
    # one (found when the parts meet, its line unknown)
    assert _kinds(spread) == _kinds(local)
    for (sample, _, _, here), (_, _, _, there) in zip(local, spread, strict=True):
        if sample == "a#":
            assert here.startswith("set aside: ")
            assert there in (here, "set aside: " + SET_ASIDE.format("a"))
        else:
            assert here == there
