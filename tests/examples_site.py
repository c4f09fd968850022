"""Installing an example package of examples/ into a private folder for a test."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

__all__ = ["install_example"]


def install_example(example: Path, target: Path) -> Path:
    """pip-install the package at ``example`` into ``target`` (no index, no dependencies: the
    test environment is untouched); ``target``."""
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
         "--no-index", "--target", str(target), str(example)],
        check=True,
        capture_output=True,
        text=True,
    )  # fmt: skip
    return target
