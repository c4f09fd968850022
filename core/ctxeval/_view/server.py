"""The viewer's HTTP server (stdlib :class:`~http.server.ThreadingHTTPServer`), read-only:

* ``GET /``: the page (:func:`~ctxeval._view.page.render_page`);
* ``GET /api/summary``: the runs, their metrics' summaries, the explorer's columns;
* ``GET /api/samples?offset=&limit=&sort=&metric=&status=&q=&min=&max=&id=``: one page of
  samples with their rows, and ``total`` (the samples the view shows) and ``all``;
* ``GET /api/sample?id=``: one sample with its texts and every row.

``GET`` and ``HEAD`` only (any other method: 405). Answers are JSON (orjson), errors too
(``{"error": ...}`` with 400, 403, 404, 405 or 500). Each connection's thread reads the index
through its own read-only SQLite connection. Bound to a loopback address, the server only
answers requests addressed to it by that name (``Host``), so no other site can reach it
through DNS rebinding; the page's Content-Security-Policy lets only its own scripts run.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import socket
import sqlite3
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import orjson

from ctxeval._output.run_source import RunSource
from ctxeval._view.page import render_page
from ctxeval._view.query import View
from ctxeval._view.reader import CountCache, Reader
from ctxeval._view.schema import connect_readonly

__all__ = ["MAX_LIMIT", "ViewerApp", "ViewerServer", "make_server", "server_url"]

logger = logging.getLogger(__name__)

MAX_LIMIT = 500
"""The most samples one ``/api/samples`` answer holds."""
MAX_OFFSET = 2**62
"""The largest page offset asked (SQLite's integers end at 2**63 - 1)."""

_LOOPBACK = ("127.0.0.1", "localhost", "::1")


class HTTPError(Exception):
    """An answer other than 200: its status and message."""

    def __init__(self, status: HTTPStatus, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class ViewerApp:
    """What every request shares: the index, the runs, the summary, the counts' cache."""

    index: Path
    runs: Sequence[RunSource]
    counts: CountCache = field(default_factory=CountCache)
    info: dict[str, Any] = field(default_factory=dict)

    def load_info(self) -> None:
        """Read what ``/api/summary`` answers (once, at start)."""
        with contextlib.closing(connect_readonly(self.index)) as conn:
            reader = Reader(conn, self.counts)
            pair = len(self.runs) > 1
            self.info = {
                "title": "ctxeval view: " + " vs ".join(r.folder.name for r in self.runs),
                "runs": [
                    {
                        "label": "AB"[i] if pair else "",
                        "folder": str(run.folder),
                        "data": None if run.data is None else str(run.data),
                        "data_named": run.data_named,
                        "metrics": run.summary.get("metrics", {}),
                        "scripted_judge": run.summary.get("scripted_judge"),
                    }
                    for i, run in enumerate(self.runs)
                ],
                "metrics": reader.metrics,
                "pair": pair,
                "bases": list(reader.catalog.bases),
                "samples": reader.samples,
                "rows": int(reader.meta.get("rows", "0")),
                "texts_missing": int(reader.meta.get("texts_missing", "0")),
                "search": "words" if reader.catalog.fts else "substring",
            }


class ViewerServer(ThreadingHTTPServer):
    """The HTTP server of one :class:`ViewerApp`."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], app: ViewerApp) -> None:
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        self.app = app
        super().__init__(address, _Handler)
        host = address[0]
        port = self.server_address[1]
        self.allowed_hosts: frozenset[str] | None = None
        if host in _LOOPBACK:
            names = ("127.0.0.1", "localhost", "[::1]")
            self.allowed_hosts = frozenset([*names, *(f"{n}:{port}" for n in names)])


def server_url(server: ViewerServer) -> str:
    """The address of the page, e.g. ``http://127.0.0.1:8765/``."""
    address = server.server_address
    host, port = str(address[0]), address[1]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/"


def make_server(
    runs: Sequence[RunSource], index: Path, *, host: str = "127.0.0.1", port: int = 0
) -> ViewerServer:
    """A server of the index ``index`` of ``runs``, bound to ``host``:``port`` (0: a free
    port), not serving yet (call ``serve_forever``).

    Raises:
        OSError: the address cannot be bound (the port is in use, the host is unknown).
    """
    app = ViewerApp(index=index, runs=runs)
    app.load_info()
    return ViewerServer((host, port), app)


def _json(data: Any) -> bytes:
    return orjson.dumps(data)


class _Handler(BaseHTTPRequestHandler):
    """One connection: its requests, read through its own read-only connection."""

    server: ViewerServer
    protocol_version = "HTTP/1.1"
    server_version = "ctxeval-view"
    sys_version = ""

    def setup(self) -> None:
        super().setup()
        self._conn: sqlite3.Connection | None = None
        self._reader: Reader | None = None

    def finish(self) -> None:
        with contextlib.suppress(OSError):
            super().finish()
        if self._conn is not None:
            self._conn.close()

    def reader(self) -> Reader:
        if self._reader is None:
            self._conn = connect_readonly(self.server.app.index)
            self._reader = Reader(self._conn, self.server.app.counts)
        return self._reader

    def version_string(self) -> str:
        return self.server_version

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("%s %s", self.address_string(), format % args)

    def do_GET(self) -> None:
        self._serve(body=True)

    def do_HEAD(self) -> None:
        self._serve(body=False)

    def __getattr__(self, name: str) -> Callable[[], None]:
        if name.startswith("do_"):  # every other method: 405
            return self._not_allowed
        raise AttributeError(name)

    def _not_allowed(self) -> None:
        self._send(
            HTTPStatus.METHOD_NOT_ALLOWED,
            _json({"error": "read-only: GET or HEAD"}),
            "application/json",
            body=self.command != "HEAD",
            extra={"Allow": "GET, HEAD"},
        )

    def _serve(self, *, body: bool) -> None:
        try:
            allowed = self.server.allowed_hosts
            if allowed is not None and self.headers.get("Host", "") not in allowed:
                raise HTTPError(HTTPStatus.FORBIDDEN, "unknown Host: open the address printed")
            url = urllib.parse.urlsplit(self.path)
            query = urllib.parse.parse_qs(url.query, keep_blank_values=True)
            params = {name: values[-1] for name, values in query.items()}
            if url.path in ("/", "/index.html"):
                nonce = secrets.token_urlsafe(16)
                policy = (
                    f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; "
                    "connect-src 'self'; img-src 'self' data:; base-uri 'none'; "
                    "form-action 'none'; frame-ancestors 'none'"
                )
                self._send(HTTPStatus.OK, render_page(nonce).encode("utf-8"),
                           "text/html; charset=utf-8", body=body,
                           extra={"Content-Security-Policy": policy})  # fmt: skip
                return
            answer = self._api(url.path, params)
            self._send(HTTPStatus.OK, _json(answer), "application/json", body=body)
        except HTTPError as exc:
            self._send(exc.status, _json({"error": str(exc)}), "application/json", body=body)
        except (BrokenPipeError, ConnectionResetError):
            pass
        except Exception:
            logger.exception("viewer: %s failed", self.path)
            with contextlib.suppress(OSError):
                self._send(HTTPStatus.INTERNAL_SERVER_ERROR, _json({"error": "internal error"}),
                           "application/json", body=body)  # fmt: skip

    def _api(self, path: str, params: dict[str, str]) -> Any:
        if path == "/api/summary":
            return self.server.app.info
        if path == "/api/samples":
            try:
                view = View.from_params(params)
                offset = int(params.get("offset", "0") or 0)
                limit = int(params.get("limit", "50") or 50)
            except ValueError as exc:
                raise HTTPError(HTTPStatus.BAD_REQUEST, str(exc)) from None
            if not 0 <= offset <= MAX_OFFSET or not 1 <= limit <= MAX_LIMIT:
                raise HTTPError(
                    HTTPStatus.BAD_REQUEST,
                    f"0 <= offset <= {MAX_OFFSET} and 1 <= limit <= {MAX_LIMIT}",
                )
            try:
                return self.reader().page(view, offset, limit)
            except ValueError as exc:
                raise HTTPError(HTTPStatus.BAD_REQUEST, str(exc)) from None
        if path == "/api/sample":
            sample_id = params.get("id")
            if sample_id is None:
                raise HTTPError(HTTPStatus.BAD_REQUEST, "id: which sample (/api/sample?id=...)")
            sample = self.reader().sample(sample_id)
            if sample is None:
                raise HTTPError(HTTPStatus.NOT_FOUND, f"no sample {sample_id!r} in this run")
            return sample
        raise HTTPError(HTTPStatus.NOT_FOUND, f"nothing at {path}")

    def _send(
        self,
        status: HTTPStatus,
        payload: bytes,
        kind: str,
        *,
        body: bool,
        extra: dict[str, str] | None = None,
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        for name, value in (extra or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if body:
            self.wfile.write(payload)
