"""What a new user of the command line met, each once: a bad line that does not say how to go
on, a skipped line told twice, a run that saved nothing silently, a folder nobody else can
read, a broken line in ``--help``."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path

ROWS = [
    {"id": f"q{i}", "retrieved_context_ids": ["d1", "d2"], "reference_context_ids": ["d1"]}
    for i in range(4)
]


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ctxeval", *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
    )


def data_with_a_bad_line(tmp_path: Path) -> Path:
    lines = [json.dumps(r) for r in ROWS]
    lines.insert(2, '{"retrieved_context_ids": [')
    path = tmp_path / "d.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_bad_line_says_what_lenient_does_and_lenient_tells_it_once(tmp_path: Path) -> None:
    data = data_with_a_bad_line(tmp_path).name  # as typed where it is (a path is never cut)
    done = cli("evaluate", data, "-m", "id_mrr", cwd=tmp_path)
    assert done.returncode == 2
    assert f"{data}:3: not valid JSON" in done.stderr
    assert "pass --lenient" in done.stderr
    done = cli("evaluate", data, "-m", "id_mrr", "--lenient", cwd=tmp_path)
    assert done.returncode == 1  # a bad row is an error row: not a clean run
    said = " ".join((done.stdout + done.stderr).split())  # (lines wrapped at the width)
    assert said.count(f"{data}:3: not valid JSON") == 1, said
    assert "1 error row(s)" in done.stdout


def test_many_bad_rows_are_listed_up_to_ten_reasons(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text("".join("not json\n" for _ in range(25)) + json.dumps(ROWS[0]) + "\n")
    done = cli("evaluate", str(path), "-m", "id_mrr", "--lenient", "--out", str(tmp_path / "r"))
    assert done.returncode == 1
    said = " ".join(done.stdout.split())  # (lines wrapped at the width)
    assert said.count("not valid JSON") == 10
    assert "25 error row(s)" in said
    assert "and 15 more reason(s); see results.jsonl" in said
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["metrics"]["id_mrr"]["n_error"] == 25


def test_a_run_without_out_says_nothing_was_saved(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    done = cli("evaluate", str(path), "-m", "id_mrr", cwd=tmp_path)
    assert done.returncode == 0
    assert "nothing was saved: add --out DIR" in done.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.jsonl"]


def test_shared_lets_others_read_the_results_not_the_journal(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    private, shared = tmp_path / "private", tmp_path / "shared"
    assert cli("evaluate", str(path), "-m", "id_mrr", "--out", str(private), "-q").returncode == 0
    args = ("evaluate", str(path), "-m", "id_mrr", "--out", str(shared), "-q", "--shared")
    assert cli(*args).returncode == 0

    def mode(p: Path) -> int:
        return stat.S_IMODE(p.stat().st_mode)

    assert mode(private) == 0o700
    assert mode(private / "report.html") == 0o600
    assert mode(shared) == 0o755
    for name in ("results.jsonl", "summary.json", "report.html"):
        assert mode(shared / name) == 0o644, name
    assert mode(shared / "journal.jsonl") == 0o600


def test_every_help_example_is_a_whole_command() -> None:
    done = cli("evaluate", "--help")
    examples = done.stdout.split("examples:")[1].split("\n\n")[0].splitlines()
    for line in examples:
        assert "  " not in line.strip(), f"a broken line in --help: {line!r}"
        assert len(line) <= 100, line
