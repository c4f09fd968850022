"""What headless Chromium shows of an explorer page (the report's or the viewer's): the page
rendered with ``--dump-dom`` (:func:`dump_dom`) and read by :class:`Shown`."""

from __future__ import annotations

import shutil
import subprocess
from html.parser import HTMLParser

BROWSER = shutil.which("chromium") or shutil.which("chromium-browser")
"""Debian's ``chromium`` (``.ci/run`` installs it when missing), or None."""


class Shown(HTMLParser):
    """What the explorer shows: the samples' ids (in order), the count line, the title, which
    samples are open and their text."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: list[str] = []
        self.opened: list[str] = []
        self.count = ""
        self.title = ""
        self.text = ""
        self._in: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "details" and "sample" in (found.get("class") or ""):
            self.ids.append(found.get("data-id") or "")
            if "open" in found:
                self.opened.append(found.get("data-id") or "")
        if found.get("id") == "count":
            self._in = "count"
        if tag == "title" and not self.title:  # the page's, not the histograms' SVG titles
            self._in = "title"

    def handle_endtag(self, tag: str) -> None:
        if tag in ("span", "title"):
            self._in = None

    def handle_data(self, data: str) -> None:
        if self._in == "count":
            self.count += data
        elif self._in == "title":
            self.title += data
        self.text += data


def dump_dom(address: str) -> Shown:
    """The page at ``address`` as headless Chromium renders it (scripts run)."""
    assert BROWSER is not None
    done = subprocess.run(
        [BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=5000",
         "--dump-dom", address],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    parser = Shown()
    parser.feed(done.stdout)
    return parser
