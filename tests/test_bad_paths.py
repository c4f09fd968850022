"""Paths that are not what they should be get one clear message, and leave nothing behind."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import ctxeval
from ctxeval import ConfigError

ROW = {"retrieved_context_ids": ["a"], "reference_context_ids": ["a"]}


def test_out_naming_a_file_is_refused(tmp_path: Path) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps(ROW) + "\n")
    taken = tmp_path / "taken"
    taken.write_text("mine")
    done = subprocess.run(
        [sys.executable, "-m", "ctxeval", "evaluate", str(data), "-m", "id_mrr",
         "--out", str(taken)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 2
    assert f"--out {taken}: a file is there, not a folder" in done.stderr
    assert "Traceback" not in done.stderr
    assert taken.read_text() == "mine"


def test_a_journal_path_that_is_a_folder_is_refused_and_leaves_no_tmp(tmp_path: Path) -> None:
    folder = tmp_path / "journal.jsonl"
    folder.mkdir()
    with pytest.raises(ConfigError, match="is a folder: give the journal file's path"):
        ctxeval.evaluate([ROW], ["id_mrr"], journal=folder)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["journal.jsonl"]
