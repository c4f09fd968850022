"""Shared fixtures. Async tests run on both asyncio and trio (anyio's pytest plugin).

The suite does not depend on how it was started: a shell starts a background job (``pytest &``,
a CI step, a load test) with SIGINT ignored, which its child processes inherit, and a Python
started with SIGINT ignored installs no Ctrl-C handler. The tests that stop a command with
Ctrl-C would then wait for a process that never stops; so SIGINT is given back its usual
handler here, before any test starts a process.

Nor does it share state with the rest of the machine: the command line keeps its LLM answers in
``$XDG_CACHE_HOME/ctxeval/llm.sqlite`` (default ``~/.cache``), one file for every run of every
user session, where a test could be answered from an earlier run's answers (another fake server
that had the same port) or wait on another session's lock. The session gets a cache folder of
its own instead, in which everything else of the real one (pip's, Chromium's...) is linked;
with ``-n`` (pytest-xdist), so does each worker.

With ``-n``, the README's command, tests run on one worker per core. Tests marked
``xdist_group`` run on one worker, one after the other (``--dist loadgroup``, in
``pyproject.toml``): ``"ray"`` (one local Ray cluster at a time: each claims the machine's
cores) and ``"llama"`` (a real model on CPU: one computing at a time).
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
from pathlib import Path

import pytest

import ctxeval

_PRIVATE_CACHE: Path | None = None


def pytest_configure(config: pytest.Config) -> None:
    global _PRIVATE_CACHE
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    real = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    _PRIVATE_CACHE = Path(tempfile.mkdtemp(prefix="ctxeval-tests-cache-"))
    if real.is_dir():
        for entry in real.iterdir():
            if entry.name != "ctxeval":
                (_PRIVATE_CACHE / entry.name).symlink_to(entry)
    os.environ["XDG_CACHE_HOME"] = str(_PRIVATE_CACHE)  # (this process and the ones it starts)


def pytest_unconfigure(config: pytest.Config) -> None:
    if _PRIVATE_CACHE is not None:
        shutil.rmtree(_PRIVATE_CACHE, ignore_errors=True)  # (the links, not what they point to)


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def registry() -> ctxeval.Registry:
    """A writable copy of the installed plugins, private to one test."""
    return ctxeval.default_registry().copy()
