"""The commands the terminal suggests can be typed as printed: ``ctxeval`` when the ``PATH``
finds it, else the path the user typed (``.venv/bin/ctxeval``, the README's install) or
``python -m ctxeval``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ctxeval.cli.invocation import program


def test_a_program_the_path_finds_is_named_by_its_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "ctxeval"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    assert program(str(exe)) == "ctxeval"


def test_a_program_off_the_path_is_named_by_its_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    exe = tmp_path / ".venv" / "bin" / "ctxeval"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.chdir(tmp_path)
    assert program(".venv/bin/ctxeval") == ".venv/bin/ctxeval"
    assert program(str(exe)) == ".venv/bin/ctxeval"  # (relative to here when under it)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert program(str(exe)) == str(exe)
    spaced = tmp_path / "my tools" / "ctxeval"
    assert program(str(spaced)) == f"'{spaced}'"  # quoted for the shell


def test_python_dash_m_and_a_library_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    main = str(Path(__file__).parent.parent / "core" / "ctxeval" / "__main__.py")
    python = tmp_path / ".venv" / "bin" / "python"
    assert program(main, str(python)) == ".venv/bin/python -m ctxeval"
    assert program("/usr/bin/pytest") == "ctxeval"  # main() called from Python


def test_the_demo_prints_a_view_command_that_runs_as_typed(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": "/usr/bin:/bin", "COLUMNS": "200"}
    exe = Path(sys.executable).parent / "ctxeval"
    done = subprocess.run(
        [str(exe), "demo", "--out", "run", "--quiet"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode in (0, 1), done.stderr
    [hint] = [line for line in done.stdout.splitlines() if "local viewer:" in line]
    command = hint.split("local viewer: ", 1)[1]
    assert command == f"{exe} view run"
