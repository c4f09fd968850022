"""A llama-cpp-python server process in the tests: wait until it answers, stop it after."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest


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
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
