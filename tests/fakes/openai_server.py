"""A fake OpenAI-compatible chat-completions server, over real HTTP on 127.0.0.1.

It answers ``POST /v1/chat/completions`` (and ``/chat/completions``) from a scripted responder,
with fault injection, a request log and usage numbers in every reply::

    with FakeOpenAI(responder=lambda request: '{"verdict": 1}') as server:
        server.url            # "http://127.0.0.1:PORT/v1"
        ... run the code under test against server.url ...
        server.requests       # every request received, parsed

A responder gets the parsed request body (a dict) and returns what to answer:

* a ``str``: the assistant message content (a normal 200 reply with usage numbers);
* a :class:`Reply`: full control (status, headers, raw body, delay, hang);
* a :class:`Fault` name: ``"429"``, ``"500"``, ``"401"``, ``"hang"``, ``"truncated"``,
  ``"malformed"``, and answers at once but wrong: ``"html"`` (a 200 HTML page), ``"empty"``
  (an empty 200), ``"not-completion"`` (JSON that is no chat completion) (see
  :meth:`FakeOpenAI.fault_reply`).

``hung=True`` makes the whole server accept every connection and never answer (any path,
``GET`` as ``POST``: a judge whose process is stuck), until it stops.

``faults=`` injects faults at random rates before the responder is asked (seeded, so a test is
reproducible), and ``latency=`` delays every answer. ``max_in_flight=`` makes the server answer
429 with ``Retry-After`` beyond that many requests at once, as a small provider would;
``requests_per_minute=`` answers 429 to requests beyond that rate (a bucket of one second's
requests, as providers enforce a per-minute limit per second). ``arrivals`` holds each chat
request's arrival time (``time.monotonic()``).

Its chat answers have the wire shape of ``ctxeval serve-judge`` (:mod:`ctxeval._judge_server.wire`,
one implementation), and :func:`scripted_judge` is that command's judge as a responder (the
shipped word-overlap answers to ctxeval's prompts, here with fault injection).

It also speaks OpenAI's Batch API: ``POST /v1/files`` (multipart, ``purpose=batch``),
``POST /v1/batches``, ``GET /v1/batches/{id}`` and ``GET /v1/files/{id}/content``. A batch
answers each line through the same responder and faults, ``batch_delay`` seconds after it is
created; ``batch_outcome`` makes it ``expired`` (half its lines done) or ``failed``;
``upload_failures`` answers the first uploads with that status.

A request with ``stream: true`` is answered as a stream of server-sent events, one
``data: {chunk}`` per word of the answer (as a server sends one per token), then the chunk with
the ``finish_reason``, the ``usage`` chunk when ``stream_options.include_usage`` asks for it
(unless ``stream_usage=False``: llama-cpp-python 0.3 sends none) and ``data: [DONE]``;
``stream_delay`` waits that many seconds before each chunk (a model generating). Stream
faults (a :class:`Reply`'s ``stream``, or the fault names ``stream-cut``, ``stream-garbage``,
``stream-error``, ``stream-endless``): the connection dropped halfway, a chunk that is not
JSON, an ``error`` event halfway (as llama.cpp's server sends), chunks without end.
``stream_chunks`` counts the chunks sent, ``hangups`` the streams whose client hung up before
their end, after which no chunk of theirs is sent (as llama-cpp-python stops generating).
``stream_refusal`` answers a streamed request 400 (a server that does not stream, as
``ctxeval serve-judge``). Raw ``Reply(body=...)`` answers go out as they are, streamed
request or not.

``routes`` maps more ``GET`` paths to what they answer (a dict or list: JSON; a str: plain
text, as Prometheus's ``/metrics``): ``/v1/models``, vLLM's ``/metrics``, Ollama's
``/api/version`` and ``/api/ps``, llama.cpp's ``/slots``...; ``post_routes`` more ``POST`` paths
(a function of the JSON body: the servers' tokenizer endpoints), their requests kept in
``post_route_requests``.

``POST /v1/embeddings`` (and ``/embeddings``) answers deterministic pseudo-embeddings of each
``input`` text (a hashed bag of words, normalised, ``embedding_dimensions`` long, 64 by default;
``dimensions`` in the request overrides it) with ``usage.prompt_tokens``. Its requests are
counted in ``requests`` like chat requests (and kept in ``embedding_requests`` too), and go
through the same ``faults``, ``latency``, ``max_in_flight``, ``outage`` and ``models`` checks;
``embedding_responder`` (request in; None for the normal answer, a fault name or a
:class:`Reply`) scripts them, and ``shuffle_embeddings`` answers the items in a shuffled order
(their ``index`` fields still right).
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import math
import random
import re
import select
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import attrs

from ctxeval._judge_server.answers import answer as judge_answer
from ctxeval._judge_server.wire import completion_body, count_tokens

__all__ = ["LLAMA_CPP_PYTHON_MODELS", "FakeOpenAI", "Reply", "fake_embedding", "scripted_judge"]


@attrs.frozen
class Reply:
    """One scripted answer."""

    status: int = 200
    content: str | None = None
    body: bytes | None = None
    """Raw body (overrides ``content``)."""
    headers: Mapping[str, str] = attrs.field(factory=dict)
    delay: float = 0.0
    hang: bool = False
    """Never answer (until the client hangs up or the server stops): the client's timeout
    must cut it."""
    reset: bool = False
    """Drop the connection (TCP reset) without answering."""
    endless: bool = False
    """Answer 200 with a chunked body that never ends (until the client hangs up)."""
    stream: str | None = None
    """For a streamed request: ``cut`` (the connection dropped halfway), ``garbage`` (a chunk
    that is not JSON), ``error`` (an ``error`` event halfway), ``endless`` (chunks without
    end, until the client hangs up)."""
    finish_reason: str = "stop"
    """The answer's ``finish_reason`` (``length``: cut at ``max_tokens``)."""


Responder = Callable[[dict[str, Any]], "str | Reply"]

LLAMA_CPP_PYTHON_MODELS: dict[str, Any] = {
    "object": "list",
    "data": [{"id": "/m.gguf", "object": "model", "owned_by": "me", "permissions": []}],
}
"""What llama-cpp-python's server lists at ``/v1/models`` (how the slot probe knows it): give
it as ``routes={"/v1/models": LLAMA_CPP_PYTHON_MODELS}``."""


def scripted_judge(request: dict[str, Any]) -> str:
    """A responder answering ctxeval's LLM-metric prompts as ``ctxeval serve-judge`` does (by
    word overlap; see :mod:`ctxeval._judge_server.answers`), to combine with ``faults=``."""
    return json.dumps(judge_answer(request), ensure_ascii=False)


class FakeOpenAI:
    """The server; use it as a context manager (it starts on a random free port)."""

    def __init__(
        self,
        responder: Responder | None = None,
        *,
        faults: Mapping[str, float] | None = None,
        latency: float = 0.0,
        max_in_flight: int | None = None,
        requests_per_minute: float | None = None,
        retry_after: float = 0.05,
        seed: int = 0,
        model: str = "fake-model",
        models: set[str] | None = None,
        accepts: tuple[str, ...] = ("json_schema", "json_object"),
        batch_delay: float = 0.2,
        batch_outcome: str = "completed",
        embedding_dimensions: int = 64,
        embedding_responder: Callable[[dict[str, Any]], str | Reply | None] | None = None,
        shuffle_embeddings: bool = False,
        stream_usage: bool = True,
        stream_delay: float = 0.0,
        stream_refusal: bool = False,
        routes: Mapping[str, Any] | None = None,
    ) -> None:
        self.responder = responder or (lambda request: "ok")
        self.stream_usage = stream_usage
        """Send the ``usage`` chunk a stream's ``include_usage`` asks for (False: none)."""
        self.stream_delay = stream_delay
        self.stream_refusal = stream_refusal
        self.routes: dict[str, Any] = dict(routes or {})
        self.post_routes: dict[str, Callable[[Any], Any]] = {}
        """More ``POST`` paths: a function of the JSON body to the JSON answered (None: 404),
        as llama.cpp's ``/tokenize`` and ``/apply-template``, vLLM's ``/tokenize``,
        llama-cpp-python's ``/extras/tokenize/count``."""
        self.post_route_requests: list[tuple[str, Any]] = []
        """Every request to a :attr:`post_routes` path: its path and JSON body, in order
        (not in :attr:`requests`)."""
        """More ``GET`` paths and their answers (see the module)."""
        self.streams = 0
        """Streamed answers begun."""
        self.stream_chunks = 0
        """Chunks (``data:`` events) sent in every stream."""
        self.hangups = 0
        """Streams whose client hung up before their end (no chunk sent after)."""
        self.hung_up = threading.Event()
        """Set when a client hangs up in the middle of a stream."""
        self.faults = dict(faults or {})
        self.latency = latency
        self.max_in_flight = max_in_flight
        self.requests_per_minute = requests_per_minute
        self._rate_capacity = max(1.0, (requests_per_minute or 0) / 60)
        self._rate_tokens = self._rate_capacity
        self._rate_stamp = time.monotonic()
        self.arrivals: list[float] = []
        self.retry_after = retry_after
        self.model = model
        self.models = models
        """When given, the only models served: others get 404 ``model_not_found``."""
        self.accepts = accepts
        """The ``response_format`` types accepted; others get 400, as some local servers do."""
        self.batch_delay = batch_delay
        self.batch_outcome = batch_outcome
        self.upload_failures: list[int] = []
        """Statuses to answer the next uploads with (consumed one per upload)."""
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        """Every batch created, by id (its OpenAI-shaped object)."""
        self.batch_lines: list[dict[str, Any]] = []
        """Every request body answered inside a batch."""
        self.requests: list[dict[str, Any]] = []
        """Every request body received, in arrival order."""
        self.embedding_dimensions = embedding_dimensions
        self.embedding_responder = embedding_responder
        self.shuffle_embeddings = shuffle_embeddings
        self.embedding_requests: list[dict[str, Any]] = []
        """Every ``/v1/embeddings`` request body received (also in ``requests``)."""
        self.headers: list[dict[str, str]] = []
        """The headers of every request."""
        self.statuses: list[int] = []
        self.outage: range | None = None
        """Requests (numbered from 0 in arrival order) answered 503, as a provider outage."""
        self.in_flight = 0
        self.peak_in_flight = 0
        self.hung = False
        self.hung_requests = 0
        """Requests :attr:`hung` accepted (any path) and never answered."""
        """Accept every request (any path) and never answer it, until the server stops."""
        self.props: dict[str, Any] | None = None
        """What ``GET /props`` answers (llama.cpp's server: ``{"total_slots": N}``); None: 404."""
        self._random = random.Random(seed)
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def _over_rate(self) -> bool:
        """Whether this request is beyond ``requests_per_minute`` (with the lock held)."""
        if self.requests_per_minute is None:
            return False
        now = time.monotonic()
        rate = self.requests_per_minute / 60
        self._rate_tokens = min(
            self._rate_capacity, self._rate_tokens + (now - self._rate_stamp) * rate
        )
        self._rate_stamp = now
        if self._rate_tokens < 1:
            return True
        self._rate_tokens -= 1
        return False

    # --- lifecycle ----------------------------------------------------------------------------

    def __enter__(self) -> FakeOpenAI:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                return

            def do_POST(self) -> None:
                if fake.hung:
                    fake._hang(self)
                    return
                path = self.path.rstrip("/")
                if path == "/v1/files":
                    fake._upload(self)
                elif path == "/v1/batches":
                    fake._create_batch(self)
                elif path in fake.post_routes:
                    body = json.loads(fake._body(self) or b"null")
                    with fake._lock:
                        fake.post_route_requests.append((path, body))
                    answer = fake.post_routes[path](body)
                    if answer is None:
                        self._send(404, b'{"error": {"message": "not found"}}', {})
                    else:
                        self._send(200, json.dumps(answer).encode(), {})
                else:
                    fake._handle(self)

            def do_GET(self) -> None:
                if fake.hung:
                    fake._hang(self)
                    return
                path = self.path.rstrip("/")
                if path == "/stats":  # for benchmarks in other processes
                    self._send(200, json.dumps(fake.stats()).encode(), {})
                elif path == "/props" and fake.props is not None:  # as llama.cpp's server
                    self._send(200, json.dumps(fake.props).encode(), {})
                elif path in fake.routes:
                    answer = fake.routes[path]
                    if isinstance(answer, str):
                        self._send(200, answer.encode(), {"Content-Type": "text/plain"})
                    else:
                        self._send(200, json.dumps(answer).encode(), {})
                elif path.startswith("/v1/batches/"):
                    fake._batch_status(self, path.rsplit("/", 1)[1])
                elif path.startswith("/v1/files/") and path.endswith("/content"):
                    fake._file_content(self, path.split("/")[3])
                else:
                    self._send(404, b'{"error": {"message": "not found"}}', {})

            disable_nagle_algorithm = True

            def _send(self, status: int, body: bytes, headers: Mapping[str, str]) -> None:
                # One write for head and body: two small writes meet delayed ACKs on loopback.
                head = [f"HTTP/1.1 {status} {self.responses.get(status, ('',))[0]}"]
                if not any(key.lower() == "content-type" for key in headers):
                    head.append("Content-Type: application/json")
                head.append(f"Content-Length: {len(body)}")
                head += [f"{key}: {value}" for key, value in headers.items()]
                self.wfile.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body)
                self.wfile.flush()

        class Server(ThreadingHTTPServer):
            request_queue_size = 1024  # the default of 5 makes bursts wait for SYN retries

            def handle_error(self, request: Any, client_address: Any) -> None:
                if not isinstance(sys.exc_info()[1], ConnectionResetError):  # a client hung up
                    super().handle_error(request, client_address)

        server = Server(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, name="fake-openai", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    @property
    def url(self) -> str:
        """The base URL, ending in ``/v1``, as ``api_base`` takes it."""
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def stats(self) -> dict[str, Any]:
        """Requests received, answers by status, most requests in flight at once."""
        with self._lock:
            statuses: dict[str, int] = {}
            for status in self.statuses:
                statuses[str(status)] = statuses.get(str(status), 0) + 1
            return {
                "requests": len(self.requests),
                "statuses": statuses,
                "peak_in_flight": self.peak_in_flight,
            }

    @property
    def count(self) -> int:
        """Requests received so far."""
        return len(self.requests)

    # --- answering ----------------------------------------------------------------------------

    def fault_reply(self, fault: str) -> Reply:
        """The reply for a named fault."""
        if fault == "429":
            return Reply(
                429,
                body=b'{"error": {"message": "Rate limit reached", "type": "rate_limit"}}',
                headers={"Retry-After": f"{self.retry_after:g}"},
            )
        if fault == "429-no-retry-after":
            return Reply(429, body=b'{"error": {"message": "Rate limit reached"}}')
        if fault == "500":
            return Reply(
                500, body=b'{"error": {"message": "internal error", "type": "server_error"}}'
            )
        if fault == "503":
            return Reply(503, body=b'{"error": {"message": "overloaded"}}')
        if fault == "401":
            return Reply(
                401,
                body=b'{"error": {"message": "Incorrect API key provided", "type": "invalid_request_error", "code": "invalid_api_key"}}',
            )
        if fault == "400":
            return Reply(
                400, body=b'{"error": {"message": "bad request", "type": "invalid_request_error"}}'
            )
        if fault == "hang":
            return Reply(hang=True)
        if fault == "truncated":
            return Reply(200, content='{"verdicts": [1, 0')
        if fault == "malformed":
            return Reply(200, content="I think the answer is yes.")
        if fault == "wrong-schema":
            return Reply(200, content='{"answer": "yes"}')
        if fault == "broken-body":
            return Reply(200, body=b'{"id": "x", "choices": [')
        if fault == "html":  # a proxy's or a login page, at once, with 200
            return Reply(200, body=b"<!doctype html><html><body>Sign in</body></html>",
                         headers={"Content-Type": "text/html"})  # fmt: skip
        if fault == "empty":
            return Reply(200, body=b"")
        if fault == "not-completion":  # JSON, but no chat completion
            return Reply(200, body=b'{"status": "ok", "message": "service is up"}')
        if fault == "reset":
            return Reply(reset=True)
        if fault == "endless":
            return Reply(endless=True)
        if fault.startswith("stream-") and fault[7:] in ("cut", "garbage", "error", "endless"):
            return Reply(200, content='{"verdict": 1, "reason": "a streamed answer"}',
                         stream=fault[7:])  # fmt: skip
        if fault == "404-model":
            return Reply(
                404,
                body=b'{"error": {"message": "The model does not exist or you do not have access to it.", "type": "invalid_request_error", "code": "model_not_found"}}',
            )
        raise ValueError(f"unknown fault {fault!r}")

    def _hang(self, handler: Any) -> None:
        """Count the request (any path; in :attr:`in_flight` while its client waits), then
        answer nothing until the client hangs up or the server stops."""
        if handler.command == "POST":
            self._body(handler)
        with self._lock:
            self.hung_requests += 1
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            self._wait_for_hangup(handler)
        finally:
            with self._lock:
                self.in_flight -= 1

    def _wait_for_hangup(self, handler: Any) -> None:
        """Answer nothing until the client hangs up (a timeout) or the server stops."""
        handler.close_connection = True
        connection = handler.connection
        while not self._stopping.is_set():
            ready, _, _ = select.select([connection], [], [], 0.05)
            if not ready:
                continue
            try:
                if not connection.recv(1, socket.MSG_PEEK):
                    return  # the client hung up
            except OSError:
                return
            self._stopping.wait(0.05)  # (more bytes of a request: not a hang-up)

    def _random_fault(self) -> Reply | None:
        """A fault drawn at the configured rates (``faults``), or None."""
        with self._lock:
            roll = self._random.random()
        threshold = 0.0
        for fault, rate in self.faults.items():
            threshold += rate
            if roll < threshold:
                return self.fault_reply(fault)
        return None

    def _choose(self, request: dict[str, Any]) -> Reply:
        drawn = self._random_fault()
        if drawn is not None:
            return drawn
        answer = self.responder(request)
        if isinstance(answer, Reply):
            return answer
        if answer in {
            "429",
            "500",
            "503",
            "401",
            "400",
            "hang",
            "truncated",
            "malformed",
            "wrong-schema",
            "broken-body",
            "html",
            "empty",
            "not-completion",
            "429-no-retry-after",
            "endless",
            "404-model",
            "stream-cut",
            "stream-garbage",
            "stream-error",
            "stream-endless",
        }:
            return self.fault_reply(answer)
        return Reply(200, content=answer)

    def _choose_embedding(self, request: dict[str, Any]) -> Reply:
        """The reply to an embeddings request: a random fault, else the script, else normal."""
        drawn = self._random_fault()
        if drawn is not None:
            return drawn
        answer = self.embedding_responder(request) if self.embedding_responder else None
        if isinstance(answer, Reply):
            return answer
        if isinstance(answer, str):
            return self.fault_reply(answer)
        return Reply(200)

    def _embeddings(self, request: dict[str, Any]) -> bytes:
        """A ``/v1/embeddings`` answer: a hashed bag of words per input text, normalised."""
        texts = request.get("input")
        if isinstance(texts, str):
            texts = [texts]
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            raise ValueError("input must be a string or a list of strings")
        size = int(request.get("dimensions") or self.embedding_dimensions)
        items = [
            {"object": "embedding", "index": i, "embedding": fake_embedding(text, size)}
            for i, text in enumerate(texts)
        ]
        if self.shuffle_embeddings:
            with self._lock:
                self._random.shuffle(items)
        tokens = sum(count_tokens(text) for text in texts)
        reply = {
            "object": "list",
            "data": items,
            "model": request.get("model", self.model),
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }
        return json.dumps(reply).encode()

    def _handle(self, handler: Any) -> None:
        raw = self._body(handler)
        embedding = handler.path.rstrip("/") in {"/v1/embeddings", "/embeddings"}
        if not embedding and handler.path.rstrip("/") not in {
            "/v1/chat/completions",
            "/chat/completions",
        }:
            handler._send(404, b'{"error": {"message": "no such route"}}', {})
            return
        try:
            request = json.loads(raw)
        except json.JSONDecodeError:
            handler._send(400, b'{"error": {"message": "request body is not JSON"}}', {})
            return
        with self._lock:
            number = len(self.requests)
            self.requests.append(request)
            if embedding:
                self.embedding_requests.append(request)
            self.headers.append({k.lower(): v for k, v in handler.headers.items()})
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
            self.arrivals.append(time.monotonic())
            over = self.max_in_flight is not None and self.in_flight > self.max_in_flight
            over = self._over_rate() or over
        counted = True  # this request counts as in flight until its answer is sent
        try:
            refusal = self._refusal(request)
            if refusal is None and self.stream_refusal and request.get("stream"):
                refusal = Reply(400, body=b'{"error": {"message": "this server does not stream"}}')
            if refusal is not None:
                reply = refusal
            elif self.outage is not None and number in self.outage:
                reply = self.fault_reply("503")
            elif over:
                reply = self.fault_reply("429")
            else:
                reply = (self._choose_embedding if embedding else self._choose)(request)
            if reply.reset:
                import struct

                handler.close_connection = True
                with contextlib.suppress(OSError):
                    handler.connection.setsockopt(
                        socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                    )
                    handler.connection.close()
                return
            if reply.hang:
                self._wait_for_hangup(handler)
                return
            if reply.endless:
                self._send_endless(handler)
                return
            # refused for capacity: at once, as a provider does (no model time spent)
            delay = reply.delay if over else self.latency + reply.delay
            if delay:
                time.sleep(delay)
            if reply.body is not None:
                body = reply.body
            elif embedding:
                try:
                    body = self._embeddings(request)
                except (ValueError, TypeError) as exc:
                    reply = Reply(400)
                    body = json.dumps({"error": {"message": str(exc)}}).encode()
            elif request.get("stream") and reply.status == 200:
                with self._lock:
                    self.statuses.append(reply.status)
                self._send_stream(handler, request, reply)
                return
            else:
                body = self._completion(request, reply.content or "")
                if reply.finish_reason != "stop":
                    reply_json = json.loads(body)
                    reply_json["choices"][0]["finish_reason"] = reply.finish_reason
                    body = json.dumps(reply_json).encode()
            with self._lock:
                self.statuses.append(reply.status)
                # done before the answer leaves: a client that sends its next request as soon
                # as it reads this one must not find the server still counting this one
                self.in_flight -= 1
                counted = False
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                handler._send(reply.status, body, reply.headers)
        finally:
            if counted:
                with self._lock:
                    self.in_flight -= 1

    # --- the Batch API ---------------------------------------------------------------------------

    @staticmethod
    def _body(handler: Any) -> bytes:
        """The request body, sent with a length or in chunks."""
        if "chunked" not in (handler.headers.get("Transfer-Encoding") or "").lower():
            return bytes(handler.rfile.read(int(handler.headers.get("Content-Length") or 0)))
        parts = []
        while True:
            size = int(handler.rfile.readline().split(b";")[0].strip(), 16)
            if size == 0:
                handler.rfile.readline()
                return b"".join(parts)
            parts.append(handler.rfile.read(size))
            handler.rfile.readline()

    def _upload(self, handler: Any) -> None:
        import email.parser
        import email.policy

        raw = self._body(handler)
        with self._lock:
            failure = self.upload_failures.pop(0) if self.upload_failures else None
        if failure is not None:
            handler._send(failure, b'{"error": {"message": "upload failed"}}', {})
            return
        head = f"Content-Type: {handler.headers.get('Content-Type')}\r\n\r\n".encode()
        message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + raw)
        fields = {
            part.get_param("name", header="content-disposition"): part.get_payload(decode=True)
            for part in message.iter_parts()
        }
        if fields.get("purpose") != b"batch" or "file" not in fields:
            handler._send(400, b'{"error": {"message": "purpose=batch and file required"}}', {})
            return
        with self._lock:
            file_id = f"file-{len(self.files)}"
            self.files[file_id] = fields["file"]
        body = {"id": file_id, "object": "file", "bytes": len(fields["file"]), "purpose": "batch"}
        handler._send(200, json.dumps(body).encode(), {})

    def _create_batch(self, handler: Any) -> None:
        request = json.loads(self._body(handler))
        file_id = request.get("input_file_id")
        if file_id not in self.files or request.get("endpoint") != "/v1/chat/completions":
            handler._send(400, b'{"error": {"message": "bad input_file_id or endpoint"}}', {})
            return
        lines = [json.loads(line) for line in self.files[file_id].splitlines() if line.strip()]
        with self._lock:
            batch_id = f"batch_{len(self.batches)}"
            batch = {
                "id": batch_id, "object": "batch", "endpoint": "/v1/chat/completions",
                "input_file_id": file_id, "status": "validating", "output_file_id": None,
                "error_file_id": None, "created_at": int(time.time()),
                "request_counts": {"total": len(lines), "completed": 0, "failed": 0},
            }  # fmt: skip
            self.batches[batch_id] = batch
        threading.Thread(target=self._run_batch, args=(batch, lines), daemon=True).start()
        handler._send(200, json.dumps(batch).encode(), {})

    def _run_batch(self, batch: dict[str, Any], lines: list[dict[str, Any]]) -> None:
        with self._lock:
            batch["status"] = "in_progress"
        if self._stopping.wait(self.batch_delay):
            return
        if self.batch_outcome == "failed":
            with self._lock:
                batch["status"] = "failed"
                batch["errors"] = {"data": [{"code": "invalid_file", "message": "bad file"}]}
            return
        if self.batch_outcome == "expired":
            lines = lines[: len(lines) // 2]
        out, errors = [], []
        for line in lines:
            body = line["body"]
            with self._lock:
                self.batch_lines.append(body)
            reply = self._refusal(body) or self._choose(body)
            payload = (
                reply.body if reply.body is not None
                else self._completion(body, reply.content or "")
            )  # fmt: skip
            try:
                parsed: Any = json.loads(payload)
            except ValueError:
                parsed = {"raw": payload.decode("utf-8", "replace")}
            record = {"id": f"req-{len(out) + len(errors)}", "custom_id": line["custom_id"],
                      "response": {"status_code": reply.status, "body": parsed}, "error": None}  # fmt: skip
            (out if reply.status == 200 else errors).append(json.dumps(record))
        with self._lock:
            output_id, error_id = f"file-{len(self.files)}", f"file-{len(self.files) + 1}"
            self.files[output_id] = ("\n".join(out) + "\n").encode()
            self.files[error_id] = ("\n".join(errors) + "\n").encode()
            batch["output_file_id"] = output_id if out else None
            batch["error_file_id"] = error_id if errors else None
            batch["request_counts"]["completed"] = len(out)
            batch["request_counts"]["failed"] = len(errors)
            batch["status"] = "expired" if self.batch_outcome == "expired" else "completed"

    def _batch_status(self, handler: Any, batch_id: str) -> None:
        with self._lock:
            batch = self.batches.get(batch_id)
            body = json.dumps(batch).encode() if batch is not None else None
        if body is None:
            handler._send(404, b'{"error": {"message": "no such batch"}}', {})
        else:
            handler._send(200, body, {})

    def _file_content(self, handler: Any, file_id: str) -> None:
        data = self.files.get(file_id)
        if data is None:
            handler._send(404, b'{"error": {"message": "no such file"}}', {})
        else:
            handler._send(200, data, {})

    def _refusal(self, request: dict[str, Any]) -> Reply | None:
        """The 404 for a model not served, the 400 for an output mode not supported."""
        model = request.get("model")
        if self.models is not None and model not in self.models:
            message = f"The model `{model}` does not exist."
            body = {"error": {"message": message, "type": "invalid_request_error",
                              "code": "model_not_found"}}  # fmt: skip
            return Reply(404, body=json.dumps(body).encode())
        kind = (request.get("response_format") or {}).get("type")
        if kind is not None and kind not in self.accepts:
            body = {"error": {"message": f"response_format type '{kind}' is not supported",
                              "type": "invalid_request_error"}}  # fmt: skip
            return Reply(400, body=json.dumps(body).encode())
        return None

    def _send_endless(self, handler: Any) -> None:
        head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        chunk = b"x" * 65536
        framed = f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n"
        handler.close_connection = True
        with contextlib.suppress(OSError):
            handler.wfile.write(head.encode())
            while not self._stopping.is_set():
                handler.wfile.write(framed)

    def _send_stream(self, handler: Any, request: dict[str, Any], reply: Reply) -> None:
        """A streamed answer: server-sent events, one chunk a word (see the module)."""
        content = reply.content or ""
        with self._lock:
            number = len(self.requests)
            self.streams += 1
        base = {"id": f"chatcmpl-{number}", "object": "chat.completion.chunk",
                "created": int(time.time()), "model": request.get("model", self.model)}  # fmt: skip

        def event(choices: list[dict[str, Any]], **more: Any) -> bytes:
            return b"data: " + json.dumps({**base, "choices": choices, **more}).encode() + b"\n\n"

        def delta(text: str) -> bytes:
            return event([{"index": 0, "delta": {"content": text}, "finish_reason": None}])

        words = re.findall(r"\s*\S+", content) or [content]
        half = max(1, len(words) // 2)
        events = [event([{"index": 0, "delta": {"role": "assistant", "content": ""},
                          "finish_reason": None}])]  # fmt: skip
        events += [delta(word) for word in words]
        events.append(event([{"index": 0, "delta": {}, "finish_reason": reply.finish_reason}]))
        if (request.get("stream_options") or {}).get("include_usage") and self.stream_usage:
            usage = json.loads(self._completion(request, content))["usage"]
            events.append(event([], usage=usage))
        events.append(b"data: [DONE]\n\n")
        fault = reply.stream
        if fault == "garbage":
            events.insert(half, b"data: {this is not json\n\n")
        elif fault == "error":
            error = {"error": {"code": 500, "message": "the model crashed", "type": "server_error"}}
            events[half:] = [b"data: " + json.dumps(error).encode() + b"\n\n"]
        elif fault == "cut":
            events = events[:half]
        head = (
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
            "Transfer-Encoding: chunked\r\n\r\n"
        )
        if fault == "endless":
            events = events[:1]
        handler.close_connection = fault in ("cut", "endless")
        chunks = (
            itertools.chain(events, itertools.repeat(delta(" more")))
            if fault == "endless"
            else events
        )
        try:
            handler.wfile.write(head.encode())
            handler.wfile.flush()
            for chunk in chunks:
                if self._stopping.is_set():
                    return
                if self.stream_delay and self._stopping.wait(self.stream_delay):
                    return
                handler.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                handler.wfile.flush()
                with self._lock:
                    self.stream_chunks += 1
            if fault == "cut":  # dropped: no end of the chunked body
                with contextlib.suppress(OSError):
                    handler.connection.shutdown(2)
                return
            handler.wfile.write(b"0\r\n\r\n")
            handler.wfile.flush()
        except OSError:  # the client hung up: nothing more is generated for it
            with self._lock:
                self.hangups += 1
            self.hung_up.set()

    def _completion(self, request: dict[str, Any], content: str) -> bytes:
        # the wire shape of ctxeval's scripted judge (ctxeval serve-judge): one implementation
        return completion_body(request, content, number=len(self.requests), model=self.model)


def fake_embedding(text: str, size: int = 64) -> list[float]:
    """The fake server's vector of ``text``: its lower-cased words hashed into ``size``
    buckets with a sign, normalised to length 1 (texts sharing words point the same way; never
    the zero vector)."""
    vector = [0.0] * size
    for word in re.findall(r"\w+", text.lower()) or [""]:
        digest = hashlib.sha256(word.encode()).digest()
        bucket = int.from_bytes(digest[:4], "little") % size
        vector[bucket] += 1.0 if digest[4] & 1 else -1.0
    if not any(vector):  # (words cancelled out: a model never answers zeros, ctxeval refuses)
        vector[0] = 1.0
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector]
