"""Render an HTML file (a run's report.html, a docs page) to PNG with headless Chromium.

    python scripts/screenshot.py ctxeval-demo/report.html report.png [--size 1280,2000]

Needs Debian's ``chromium`` (``apt-get install chromium``). The flags keep Chromium off the
network: this machine has none, and a report must not need any.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path


def screenshot(page: Path, png: Path, size: str = "1280,2000") -> None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        sys.exit("chromium is not installed: apt-get install chromium")
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run(
            [
                browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                "--no-first-run", "--disable-background-networking", "--disable-component-update",
                "--disable-sync", f"--user-data-dir={profile}", f"--window-size={size}",
                f"--screenshot={png}", page.resolve().as_uri(),
            ],
            check=True,
            capture_output=True,
            timeout=120,
        )  # fmt: skip
    print(f"wrote {png}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("page", type=Path)
    parser.add_argument("png", type=Path)
    parser.add_argument("--size", default="1280,2000")
    args = parser.parse_args()
    screenshot(args.page, args.png, args.size)


if __name__ == "__main__":
    main()
