"""The report's CSS, script and toolbar, read from the asset files beside this module
(``assets/report.css``, ``explorer.css``, ``explorer.js``, ``toolbar.html``) when a page is
first rendered, then kept.
"""

from __future__ import annotations

import functools
from importlib.resources import files

__all__ = ["asset"]


@functools.cache
def asset(name: str) -> str:
    """The text of the asset file ``name`` (``report.css``, ``explorer.css``,
    ``explorer.js``, ``toolbar.html``), as it is in the file."""
    return (files("ctxeval._output") / "assets" / name).read_bytes().decode("utf-8")
