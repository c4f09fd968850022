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
cores), ``"spark"`` (one Spark session) and ``"llama"`` (a real model on CPU: one computing at
a time, one server for the session). pytest-xdist (3.8) tells the scheduler a test's group by
a suffix of its node id, which pytest 9.2's structured node ids silently drop
(pytest-dev/pytest-xdist#1386): the groups were then spread over the workers (two Ray
clusters, two Spark sessions and two llama servers at once). ``pytest_collection_modifyitems``
below puts the suffix back where pytest 9.2 reads it; ``tests/test_suite_groups.py`` fails if a
group's suffix goes missing again.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import NamedTuple

import pytest

import ctxeval
from llama_process import LlamaServer, llama_server

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


def xdist_group_of(item: pytest.Item) -> str | None:
    """The ``xdist_group`` of ``item`` as pytest-xdist names it (its groups joined by ``_``)."""
    names = {
        str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
        for mark in item.iter_markers("xdist_group")
    }
    return "_".join(sorted(names)) or None


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On a ``--dist loadgroup`` worker, the ``@group`` suffix pytest-xdist gives the node id
    of a grouped test, written where pytest 9.2 reads it (its structured ``NodeId``): the
    scheduler sends the tests whose ids end in one group to one worker. Where xdist's own
    suffix took (an older pytest; a fixed xdist), nothing is done."""
    if not hasattr(config, "workerinput") or not config.getoption("loadgroup", False):
        return
    for item in items:
        group = xdist_group_of(item)
        structured = getattr(item, "_id", None)
        if group is None or item.nodeid.endswith(f"@{group}") or structured is None:
            continue
        item._id = type(structured).parse(f"{item.nodeid}@{group}")  # type: ignore[attr-defined]


RAY_CLUSTER_GROUP = "ray"
"""The tests that share the worker's one local Ray cluster (``ray_cluster``)."""


class RayCluster(NamedTuple):
    address: str
    """Its GCS ``host:port``: a command a test starts joins it through ``RAY_ADDRESS``."""

    def joined(self, env: Mapping[str, str]) -> dict[str, str]:
        """``env`` for a command that joins the cluster: its address, and the file of the token
        Ray's authentication asks for (Ray's default, under this ``HOME``). Its workers run in
        the environment and the folder of the test worker, not the command's: a command whose
        workers need its own (relative paths, an ``OPENAI_BASE_URL``) starts a cluster of its
        own."""
        token = os.environ.get("RAY_AUTH_TOKEN_PATH") or str(Path.home() / ".ray" / "auth_token")
        return {**env, "RAY_ADDRESS": self.address, "RAY_AUTH_TOKEN_PATH": token}


@pytest.fixture
def ray_cluster() -> RayCluster:
    """The worker's one local Ray cluster (2 CPUs), for the ``xdist_group("ray")`` tests: started
    by the first of them that asks for it (a cluster start and Ray Data's first run cost tens of
    seconds on a loaded machine), shut down after the group's last test (a test of another group
    next: ``pytest_runtest_teardown``)."""
    import ray

    from ctxeval_ray import ray_init

    ray_init(None, num_cpus=2)  # (nothing when it runs already)
    return RayCluster(str(ray.get_runtime_context().gcs_address))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """After the test's own teardown: the Ray cluster of ``ray_cluster`` shut down, unless the
    next test is of its group too (with ``-n``, the group's tests run one after the other)."""
    yield
    if xdist_group_of(item) != RAY_CLUSTER_GROUP or (
        nextitem is not None and xdist_group_of(nextitem) == RAY_CLUSTER_GROUP
    ):
        return
    ray = sys.modules.get("ray")  # (not imported here: a test that never used Ray)
    if ray is not None and ray.is_initialized():
        ray.shutdown()


@pytest.fixture(scope="session")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """The session's real llama-cpp-python server (SmolLM2-135M; ``tests/llama_process.py``),
    for the ``xdist_group("llama")`` tests: one process on the one worker that runs them."""
    with llama_server(tmp_path_factory.mktemp("llama")) as server:
        yield server
