"""The scripted judge's HTTP server (stdlib :class:`~http.server.ThreadingHTTPServer`): an
OpenAI-compatible endpoint that answers ctxeval's LLM-metric prompts (:mod:`.answers`).

* ``POST /v1/chat/completions``: the prompt's JSON answer as the assistant message, with usage
  numbers; ``response_format`` ``json_schema``, ``json_object`` and ``text`` are taken (the
  content is the JSON object in every mode), any other type is a 400 naming it;
* ``GET /v1/models``: its one model, ``scripted-judge``.

A request for another model is a 404 ``model_not_found`` (so a run's provenance can never
name a real model for the scripted answers), a request that is none of ctxeval's prompts a
400. Bound to a loopback address, it only answers requests addressed to it by that name
(``Host``), so no web page can reach it through DNS rebinding. Every answer carries
``X-Scripted-Judge: not a real judge``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import threading
import time
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from ctxeval._judge_server.answers import UnknownPromptError, answer, prompt_kind
from ctxeval._judge_server.wire import completion_body, error_body, models_body, stream_body
from ctxeval._results.judges import SCRIPTED_JUDGE

__all__ = ["MAX_BODY", "MODEL", "JudgeServer", "make_server", "server_url"]

logger = logging.getLogger(__name__)

MODEL = SCRIPTED_JUDGE
"""The one model the scripted judge serves (``--model openai/scripted-judge``)."""

MAX_BODY = 16 * 1024 * 1024
"""The largest request body read (bytes)."""

_LOOPBACK = ("127.0.0.1", "localhost", "::1")
_FORMATS = ("json_schema", "json_object", "text")


class JudgeServer(ThreadingHTTPServer):
    """The scripted judge on ``address`` (port 0: a free one), not serving until
    ``serve_forever`` is called.

    Args:
        address: host and port.
        latency: seconds to wait before each answer (as a real model would take).
    """

    daemon_threads = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], *, latency: float = 0.0) -> None:
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        self.latency = latency
        self.answered = 0
        """Chat completions answered (200)."""
        self._lock = threading.Lock()
        super().__init__(address, _Handler)
        host, port = address[0], self.server_address[1]
        self.allowed_hosts: frozenset[str] | None = None
        if host in _LOOPBACK:
            names = ("127.0.0.1", "localhost", "[::1]")
            self.allowed_hosts = frozenset([*names, *(f"{n}:{port}" for n in names)])

    def next_number(self) -> int:
        with self._lock:
            self.answered += 1
            return self.answered


def make_server(host: str = "127.0.0.1", port: int = 0, *, latency: float = 0.0) -> JudgeServer:
    """A scripted judge bound to ``host``:``port`` (0: a free port), not serving yet.

    Raises:
        OSError: the address cannot be bound (the port is in use, the host is unknown).
    """
    return JudgeServer((host, port), latency=latency)


def server_url(server: JudgeServer) -> str:
    """The base URL as ``--api-base`` takes it, e.g. ``http://127.0.0.1:8799/v1``."""
    host, port = str(server.server_address[0]), server.server_address[1]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/v1"


class _RefusedError(Exception):
    def __init__(self, status: HTTPStatus, body: bytes) -> None:
        super().__init__(status)
        self.status = status
        self.body = body


def _refuse(
    status: HTTPStatus,
    message: str,
    *,
    kind: str = "invalid_request_error",
    code: str | None = None,
) -> _RefusedError:
    return _RefusedError(status, error_body(message, kind=kind, code=code))


class _Handler(BaseHTTPRequestHandler):
    server: JudgeServer
    protocol_version = "HTTP/1.1"
    server_version = "ctxeval-scripted-judge"
    sys_version = ""
    disable_nagle_algorithm = True

    def version_string(self) -> str:
        return self.server_version

    def log_message(self, format: str, *args: Any) -> None:
        logger.info("%s %s", self.address_string(), format % args)

    def do_GET(self) -> None:
        self._serve(self._get)

    def do_POST(self) -> None:
        self._serve(self._post)

    def _serve(self, route: Callable[[str], tuple[HTTPStatus, bytes]]) -> None:
        self._body_read = False
        self._content_type = "application/json"
        try:
            allowed = self.server.allowed_hosts
            if allowed is not None and self.headers.get("Host", "") not in allowed:
                raise _refuse(HTTPStatus.FORBIDDEN, "unknown Host: use the address printed")
            status, body = route(self.path.split("?", 1)[0].rstrip("/"))
        except _RefusedError as refused:
            status, body = refused.status, refused.body
            if self.command == "POST" and not self._body_read:
                self.close_connection = True  # its body was not read
        except Exception:
            logger.exception("scripted judge: %s failed", self.path)
            status, body = HTTPStatus.INTERNAL_SERVER_ERROR, error_body("internal error")
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self.send_response(status)
            self.send_header("Content-Type", self._content_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("X-Scripted-Judge", "not a real judge")
            self.end_headers()
            self.wfile.write(body)

    def _get(self, path: str) -> tuple[HTTPStatus, bytes]:
        if path in ("/v1/models", "/models"):
            return HTTPStatus.OK, models_body([MODEL], owner="ctxeval (scripted, not a real judge)")
        raise _refuse(HTTPStatus.NOT_FOUND, f"nothing at {path or '/'}")

    def _post(self, path: str) -> tuple[HTTPStatus, bytes]:
        if path not in ("/v1/chat/completions", "/chat/completions"):
            raise _refuse(HTTPStatus.NOT_FOUND, f"nothing at {path or '/'}")
        request = self._json_body()
        model = request.get("model")
        if model not in (MODEL, f"openai/{MODEL}"):
            raise _refuse(
                HTTPStatus.NOT_FOUND,
                f"The model {model!r} does not exist: this is ctxeval's scripted judge (not a "
                f"real judge), whose only model is {MODEL!r} (--model openai/{MODEL})",
                code="model_not_found",
            )
        response_format = request.get("response_format")
        if response_format is not None:
            kind = response_format.get("type") if isinstance(response_format, dict) else None
            if kind not in _FORMATS:
                raise _refuse(
                    HTTPStatus.BAD_REQUEST,
                    f"response_format type {kind!r} is not supported: one of {', '.join(_FORMATS)}",
                )
        try:
            prompt = prompt_kind(request)
            content = json.dumps(answer(request), ensure_ascii=False)
        except UnknownPromptError as exc:
            raise _refuse(HTTPStatus.BAD_REQUEST, str(exc)) from None
        if self.server.latency:
            time.sleep(self.server.latency)
        logger.debug("scripted judge: %s -> %s", prompt, content)
        number = self.server.next_number()
        if request.get("stream"):  # (as OpenAI streams: the answer's chunks, then [DONE])
            self._content_type = "text/event-stream"
            return HTTPStatus.OK, stream_body(request, content, number=number, model=MODEL)
        return HTTPStatus.OK, completion_body(request, content, number=number, model=MODEL)

    def _json_body(self) -> dict[str, Any]:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            raise _refuse(HTTPStatus.LENGTH_REQUIRED, "send the body with a Content-Length")
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if not 0 < length <= MAX_BODY:
            raise _refuse(
                HTTPStatus.BAD_REQUEST,
                f"the body must be JSON with a Content-Length of 1 to {MAX_BODY} bytes",
            )
        raw = self.rfile.read(length)
        self._body_read = True
        try:
            request = json.loads(raw)
        except ValueError:
            raise _refuse(HTTPStatus.BAD_REQUEST, "the body is not JSON") from None
        if not isinstance(request, dict):
            raise _refuse(HTTPStatus.BAD_REQUEST, "the body must be a JSON object")
        return request
