"""``results.csv`` is safe to open in a spreadsheet: a text cell that starts like a formula is
written with a ``'`` before it (OWASP's rule); ``csv_raw`` writes every cell as it is."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

HOSTILE = ["=1+1", "+SUM(A1)", "-2+3", "@cmd", "\t=1", "\r=1", '=HYPERLINK("http://x")']


def run(tmp_path: Path, fmt: str) -> list[dict[str, str]]:
    data = tmp_path / "d.jsonl"
    rows = [
        {"id": sample_id, "retrieved_context_ids": ["d1"], "reference_context_ids": ["d1"]}
        for sample_id in [*HOSTILE, "plain", "-"]
    ]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / fmt
    done = subprocess.run(
        [sys.executable, "-m", "ctxeval", "evaluate", str(data), "-m", "id_mrr",
         "-m", "id_mrr:name=@metric", "--out", str(out), "--format", fmt, "-q"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    with (out / "results.csv").open(newline="") as handle:
        return list(csv.DictReader(handle))


def test_formula_cells_are_written_as_text(tmp_path: Path) -> None:
    records = run(tmp_path, "csv")
    ids = [r["sample_id"] for r in records if r["metric"] == "id_mrr"]
    assert ids == ["'" + h for h in HOSTILE] + ["plain", "'-"]
    assert {r["metric"] for r in records} == {"id_mrr", "'@metric"}
    for record in records:
        for cell in record.values():
            assert not cell.startswith(("=", "+", "-", "@", "\t", "\r")), record
    assert {r["score"] for r in records} == {"1.0"}  # numbers are left alone


@pytest.mark.parametrize("fmt", ["csv_raw"])
def test_csv_raw_writes_every_cell_as_it_is(tmp_path: Path, fmt: str) -> None:
    records = run(tmp_path, fmt)
    ids = [r["sample_id"] for r in records if r["metric"] == "id_mrr"]
    assert ids == [*HOSTILE, "plain", "-"]
