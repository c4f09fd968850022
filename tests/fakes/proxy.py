"""A forward HTTP proxy on 127.0.0.1 (random port) that records what passes through it.

Plain-HTTP forwarding only (absolute-URI requests, as clients send to an ``HTTP_PROXY``)::

    with ForwardProxy() as proxy:
        os.environ["HTTP_PROXY"] = proxy.url
        ... requests to http:// URLs now go through it ...
        proxy.seen   # ["POST http://127.0.0.1:PORT/v1/chat/completions", ...]
"""

from __future__ import annotations

import http.client
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["ForwardProxy"]


class ForwardProxy:
    """The proxy; a context manager."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    def __enter__(self) -> ForwardProxy:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                proxy._forward(self, "POST")

            def do_GET(self) -> None:
                proxy._forward(self, "GET")

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()

    @property
    def posts(self) -> list[str]:
        """The POSTs forwarded (the requests), in order."""
        return [seen for seen in self.seen if seen.startswith("POST ")]

    def probed_only(self, root: str) -> bool:
        """Whether every GET forwarded was a probe of the server at ``root`` (a local
        server's probe takes the route its requests take), and there was one."""
        gets = [seen for seen in self.seen if seen.startswith("GET ")]
        return bool(gets) and all(seen.startswith(f"GET {root}/") for seen in gets)

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def _forward(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        with self._lock:
            self.seen.append(f"{method} {handler.path}")
        target = urllib.parse.urlsplit(handler.path)
        if not target.scheme:  # not a proxy request
            handler.send_error(400, "a forward proxy takes absolute URLs")
            return
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else None
        headers = {
            k: v
            for k, v in handler.headers.items()
            if k.lower() not in ("proxy-connection", "connection", "host", "keep-alive")
        }
        upstream = http.client.HTTPConnection(target.hostname, target.port, timeout=30)
        path = target.path + (f"?{target.query}" if target.query else "")
        upstream.request(method, path, body=body, headers=headers)
        response = upstream.getresponse()
        data = response.read()
        upstream.close()
        handler.send_response(response.status)
        for key, value in response.getheaders():
            if key.lower() not in ("transfer-encoding", "connection", "content-length"):
                handler.send_header(key, value)
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)
