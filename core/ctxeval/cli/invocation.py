"""How the user started ctxeval, for the commands the terminal tells them to run next.

A README install puts the command at ``.venv/bin/ctxeval``, not on the ``PATH``: a hint that
says ``ctxeval view run1`` would then fail as typed. :func:`program` gives the words that
started this process (``ctxeval`` when that is what the ``PATH`` finds, else the path typed, or
``python -m ctxeval``).
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path

__all__ = ["program"]


def program(argv0: str | None = None, executable: str | None = None) -> str:
    """The command that started ctxeval, as the user can type it again from here: ``ctxeval``
    when the ``PATH`` finds this very program, else its path (relative to the current folder
    when under it), or ``PYTHON -m ctxeval`` when started so; ``ctxeval`` when it cannot be
    told (ctxeval called from Python)."""
    argv0 = sys.argv[0] if argv0 is None else argv0
    executable = sys.executable if executable is None else executable
    path = Path(argv0)
    if path.name == "__main__.py" and path.parent.name == "ctxeval":
        return f"{shlex.quote(_short(Path(executable)))} -m ctxeval"
    if path.name not in ("ctxeval", "ctxeval.exe"):
        return "ctxeval"  # (ctxeval.cli.main called by a test, a harness...)
    found = shutil.which("ctxeval")
    if found is not None and _same(Path(found), path):
        return "ctxeval"
    return shlex.quote(_short(path))


def _same(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _short(path: Path) -> str:
    """``path`` relative to the current folder when under it, else absolute."""
    absolute = path if path.is_absolute() else Path.cwd() / path
    try:
        relative = absolute.relative_to(Path.cwd())
    except ValueError:
        return str(absolute)
    return str(relative) if relative.parts[:1] != ("..",) else str(absolute)
