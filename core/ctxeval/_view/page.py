"""The viewer's page: one self-contained HTML page (no outside resources) with the report's
CSS, toolbar and explorer script, and the viewer's script, which asks the server for the
summary and for each page of samples (:func:`render_page`).
"""

from __future__ import annotations

import functools
from importlib.resources import files

from ctxeval._output.asset_files import asset

__all__ = ["render_page"]


@functools.cache
def _own(name: str) -> str:
    return (files("ctxeval._view") / "assets" / name).read_bytes().decode("utf-8")


def render_page(nonce: str) -> str:
    """The page; its ``<style>`` and ``<script>`` elements carry ``nonce`` (the one of the
    response's Content-Security-Policy). No text of the run is in it: the script sets them."""
    css = asset("report.css") + asset("explorer.css") + _own("viewer.css")
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width,initial-scale=1">
<title>ctxeval view</title><style nonce="{nonce}">{css}</style></head>
<body><header><h1 id="title">ctxeval view</h1><p id="subtitle">loading…</p></header>
<main>
<div id="notice" class="notice"></div>
<h2>Summary</h2>
<table id="summary-table"></table>
<p class="muted">Means are over <code>ok</code> rows; <code>undefined</code> rows (nothing to
recall, nothing retrieved) are counted apart, never as zero.</p>
<h2>Every sample, with its evidence</h2>
{asset("toolbar.html")}
<script nonce="{nonce}">{asset("explorer.js")}</script>
<script nonce="{nonce}">{_own("viewer.js")}</script>
</main></body></html>
"""
