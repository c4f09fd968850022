"""The ``openai`` transport: chat completions to an OpenAI-compatible endpoint.

One HTTP client per run and endpoint (:mod:`ctxeval_llm._http.base`), made on the run's
event loop at the first request and closed when the run ends: aiohttp on asyncio, httpx on
trio (and for HTTP/2, or a proxy other than ``http://``). Either way:

* connection pool sized to the resource's ``max_concurrency`` (keep-alive, reused across
  requests), optional HTTP/2 (``LLMConfig(http2=True)``, needs ``h2``; httpx);
* ``HTTPS_PROXY`` / ``HTTP_PROXY`` / ``ALL_PROXY`` / ``NO_PROXY`` honoured as httpx's
  ``trust_env`` reads them, and certificates checked against the system's CA store
  (``truststore`` when installed, else OpenSSL's default paths, which ``SSL_CERT_FILE`` /
  ``SSL_CERT_DIR`` change);
* ``LLMConfig(extra_headers=...)`` sent with every request (over the key's ``Authorization``
  when they name it too);
* no timeout of its own beyond connecting (the scheduler times each attempt), and no retries
  (the scheduler owns them); a cancelled attempt closes its connection;
* answers read as they come and cut at ``max_response_bytes``: an endless body cannot fill
  the memory.

Streaming (``LLMConfig(stream=...)``: ``True`` always, ``False`` never, ``"auto"`` (the
default) to a local endpoint (a loopback, private or ``.local`` host) whose server is not known
to stop a whole request whose client hung up). Why: a server computes an abandoned request (its
timeout, a sibling's failure, Ctrl-C) to its end unless it notices the client is gone, and
llama-cpp-python notices only while it streams (between two chunks): without streaming, an
abandoned request keeps its only slot busy to the end of the answer. vLLM (its routes cancel
the request when the client disconnects), llama.cpp's ``llama-server`` (it cancels a task whose
connection closed) and Ollama (its request context ends) stop a whole request too, so they are
not streamed by ``"auto"``: a whole answer costs the client less CPU (a streamed one is a chunk
per token, each read and parsed: about 0.2 ms more per request), which matters against a fast
batching server. Which server it is comes from :mod:`ctxeval_llm._local.slots`, asked before the
first request; a local server not recognised (LM Studio, others) is streamed. Hosted APIs are
not streamed.

A streamed request carries ``stream: true`` and ``stream_options: {"include_usage": true}``;
the answer's server-sent events (``data: {chunk}`` lines, ``data: [DONE]`` at the end) are
assembled into one :class:`~ctxeval.plugin.Completion`: the ``delta`` contents, the
``finish_reason``, the ``usage`` of the last chunk that has one and the ``model`` the chunks
name. Everything else holds as for a whole answer: the bytes streamed count against
``max_response_bytes``; a stream cut before its end (no ``finish_reason``, no ``[DONE]``), a
chunk that is not JSON or an ``error`` event fails the attempt as a service error (retried);
a stream that never ends is cut by the size limit or the timeout. A server that sends no
usage in the stream (llama-cpp-python 0.3 ignores ``include_usage``) leaves the answer's token
counts and cost unknown (:attr:`HTTPCompletion.usage_known`), never zero; a server that
answers a streamed request with a whole JSON body is read as such; one that refuses
streaming (a 400 naming ``stream``) is asked again without it, and not streamed to again in
the run.

Every failure becomes the :class:`ctxeval.CallError` of its kind through
:func:`ctxeval.plugin.error_for_status` (and :class:`ctxeval.ConnectionFailedError` for a
connection that never opened), with the key masked out of its message.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Mapping
from typing import Any

import attrs
import orjson

from ctxeval.plugin import (
    BadRequestError,
    CallError,
    Completion,
    MalformedOutputError,
    MissingCredentialsError,
    MissingExtraError,
    RunContext,
    ServiceError,
    Usage,
    error_for_status,
    retry_after_of,
)
from ctxeval_llm._http.base import CONNECT_TIMEOUT, Answer, ssl_context
from ctxeval_llm._http.choice import LoopClient, load_client
from ctxeval_llm._local.slots import is_local, server_slots
from ctxeval_llm._parsing import redact
from ctxeval_llm.config import LLMConfig

__all__ = ["CONNECT_TIMEOUT", "HTTPCompletion", "OpenAITransport", "ssl_context", "streams"]

logger = logging.getLogger(__name__)

KEY_HINT = " (check the API key: LLMConfig(api_key=...) or OPENAI_API_KEY)"
_JSON = {"Content-Type": "application/json"}
_BUILT_BY_THE_CLIENT = frozenset({"host", "content-length", "transfer-encoding", "connection"})
_STREAMED = {"stream": True, "stream_options": {"include_usage": True}}
_REFUSES_STREAM = re.compile(r"\bstream", re.IGNORECASE)
"""In a 400's message: the server refuses ``stream`` or ``stream_options`` (not "upstream")."""


@attrs.frozen(slots=True)
class HTTPCompletion(Completion):
    """A :class:`~ctxeval.plugin.Completion` from the ``openai`` transport, which also says
    whether the server reported the answer's usage: when it did not (a streamed answer from
    llama-cpp-python, a body without ``usage``), ``prompt_tokens`` and ``completion_tokens``
    are 0 and ``usage_known`` is False: the answer's tokens and cost are unknown, not zero."""

    usage_known: bool = True


STOPS_WHOLE_REQUESTS = frozenset({"vllm", "llama.cpp", "ollama"})
"""The local servers (:attr:`ctxeval_llm._local.slots.ServerSlots.kind`) known to stop computing a
whole (not streamed) request whose client hung up: ``"auto"`` does not stream to them."""


def streams(config: LLMConfig, server: str | None = None) -> bool:
    """Whether the ``openai`` transport streams ``config``'s requests: ``stream=True``;
    ``"auto"`` for a local endpoint (a loopback, private or ``.local`` host: a server on the
    user's own hardware) unless its ``server`` (the kind :mod:`ctxeval_llm._local.slots` found)
    stops a whole request whose client hung up by itself; never with ``stream=False``."""
    if config.stream == "auto":
        return is_local(config.endpoint) and server not in STOPS_WHOLE_REQUESTS
    return bool(config.stream)


def _merged(*layers: Mapping[str, str]) -> dict[str, str]:
    """Headers, a later layer replacing an earlier one's header of the same name (any case)."""
    merged: dict[str, str] = {}
    for layer in layers:
        for name, value in layer.items():
            for old in [k for k in merged if k.lower() == name.lower()]:
                del merged[old]
            merged[name] = value
    return merged


def _secret_parts(headers: Mapping[str, str]) -> list[str]:
    """The parts of header values masked in messages: any of 8 characters or more (a token,
    with or without its ``Bearer``)."""
    parts = {v for v in headers.values() if len(v) >= 8}
    parts.update(w for v in headers.values() for w in v.split() if len(w) >= 8)
    return sorted(parts, key=len, reverse=True)


class OpenAITransport:
    """POST ``{endpoint}/chat/completions`` (see the module's description).

    Args:
        config: the LLM configuration (endpoint, key, headers, HTTP/2, body size limit).
        max_connections: the pool size (the resource's concurrency).
    """

    name = "openai-compatible"

    def __init__(self, config: LLMConfig, *, max_connections: int = 16) -> None:
        self.config = config
        self.endpoint = config.endpoint.rstrip("/")
        self.url = self.endpoint + "/chat/completions"
        self._key = config.openai_key()
        self._pool = LoopClient(
            self.endpoint, max_connections=max_connections, http2=config.http2, say=self._say
        )
        auth = {"Authorization": f"Bearer {self._key}"} if self._key else {}
        self._headers = _merged(auth, config.extra_headers)
        """Sent with every request: the key, then ``extra_headers``."""
        self._json_headers = _merged(_JSON, self._headers)
        self._secrets = (self._key, *config.secrets(), *_secret_parts(config.extra_headers))
        self.stream: bool | None = None if config.stream == "auto" else bool(config.stream)
        """Whether requests go out streamed (see the module): None until known (``"auto"``:
        once the server is recognised, or not); False after a refusal."""

    @staticmethod
    def shared_key(config: LLMConfig) -> str:
        """The run-wide key of the transport for ``config`` (endpoint, key and headers,
        hashed)."""
        secret = orjson.dumps([config.openai_key() or "", sorted(config.extra_headers.items())])
        digest = hashlib.sha256(secret).hexdigest()[:12]
        return f"ctxeval_llm.openai:{config.endpoint}:{digest}:{config.http2}"

    @property
    def client_name(self) -> str | None:
        """The HTTP client in use (``aiohttp`` or ``httpx``); None before the first request."""
        client = self._pool.current
        return None if client is None else client.name

    async def ready(self, ctx: RunContext) -> None:
        """Checked once per run, before the first request (see :meth:`check_ready`); the HTTP
        client's library imported meanwhile, in a worker thread (:func:`load_client`)."""
        self.check_ready()
        await load_client(self.endpoint, http2=self.config.http2)

    def check_ready(self) -> None:
        """Raise what can be known before the first request: OpenAI's own API without a key,
        HTTP/2 asked for without ``h2``."""
        if self.config.is_openai_default_endpoint and not self._key:
            raise MissingCredentialsError(
                f"model {self.config.model!r} goes to {self.endpoint}, which needs an API key, "
                "and none is set: export OPENAI_API_KEY=... (or pass LLMConfig(api_key=...)); "
                "for a local or other OpenAI-compatible server, give its URL with api_base= / "
                "--api-base"
            )
        if self.config.http2:
            try:
                import h2  # noqa: F401
            except ImportError:
                raise MissingExtraError(
                    "LLMConfig(http2=True) needs the h2 package",
                    install="pip install 'httpx[http2]'",
                ) from None

    async def complete(self, ctx: RunContext, request: Mapping[str, Any]) -> Completion:
        """Send ``request`` once (streamed or not: see the module); the answer, or the
        :class:`ctxeval.CallError` of its kind."""
        payload = request if type(request) is dict else dict(request)
        stream = self.stream if self.stream is not None else self._streams(ctx)
        streamed = stream and "stream" not in payload  # (a request's own choice stands)
        if streamed:
            payload = {**payload, **_STREAMED}
        answer = await (self._pool.here() or await self._pool.get()).request(
            "POST", self.url, orjson.dumps(payload), self._json_headers,
            self.config.max_response_bytes,
        )  # fmt: skip
        if not 200 <= answer.status < 300:
            error = self._http_error(self.url, answer)
            if not (streamed and _refuses_streaming(error)):
                raise error
            if self.stream is not False:  # the first refusal (of those sent at once)
                self.stream = False  # for the rest of the run; this one is asked again, whole
                logger.warning(
                    "%s refused a streamed request (%s); sending whole requests for the rest "
                    "of the run (an abandoned request then goes on computing on the server)",
                    self.endpoint, error,
                )  # fmt: skip
            if ctx is not None:
                ctx.add_usage(Usage(requests=1))  # the refused request was sent too
            return await self.complete(ctx, request)
        if _is_event_stream(answer):
            return self._streamed(answer.body)
        return self._completion(answer.body)

    def _streams(self, ctx: RunContext | None) -> bool:
        """``"auto"``: whether to stream, by the endpoint and the server found there (decided
        once the server has been asked; streamed until then, the safe side)."""
        if not is_local(self.endpoint):
            self.stream = False
            return False
        if ctx is None:  # (a request from outside a run: nothing known of the server)
            return True
        slots = server_slots(ctx, self.config.endpoint)
        if not slots.found:
            return True
        self.stream = streams(self.config, slots.kind)
        if slots.kind is not None:
            logger.info(
                "%s is %s: requests %s", self.endpoint, slots.kind,
                "streamed (it stops an abandoned request only while it streams)" if self.stream
                else "not streamed (it stops an abandoned request by itself)",
            )  # fmt: skip
        return self.stream

    async def send(
        self, method: str, path: str, *, limit: int | None = None, **arguments: Any
    ) -> bytes:
        """One request to ``{endpoint}{path}``; the body of a 2xx answer (at most ``limit``
        bytes, default ``max_response_bytes``), else the :class:`ctxeval.CallError` of its
        kind. ``arguments`` as httpx takes them (``content``, ``headers``, and ``files``,
        ``data``, ``json``, ``params``, encoded by httpx whatever the client). The Batch API
        mode sends its uploads and polls through here, the embedder its requests."""
        url = self.endpoint + path
        content: bytes | None
        if arguments.keys() <= {"content", "headers"}:
            content = arguments.get("content")
            if isinstance(content, str):
                content = content.encode()
            headers = _merged(self._headers, arguments.get("headers") or {})
        else:  # a form, an upload, a query: encoded by httpx, sent by either client
            import httpx

            built = httpx.Request(method, url, **arguments)
            url, content = str(built.url), built.read()
            made = {k: v for k, v in built.headers.items() if k not in _BUILT_BY_THE_CLIENT}
            headers = _merged(self._headers, made)
        answer = await (self._pool.here() or await self._pool.get()).request(
            method, url, content, headers, limit or self.config.max_response_bytes
        )
        if not 200 <= answer.status < 300:
            raise self._http_error(url, answer)
        return answer.body

    def _completion(self, data: bytes) -> Completion:
        try:
            reply = orjson.loads(data)
            choice = reply["choices"][0]
            content = choice["message"]["content"]
            finish, served = choice.get("finish_reason"), reply.get("model")
            usage = reply.get("usage")
            known = type(usage) is dict or isinstance(usage, Mapping)  # (an ABC's check: slow)
            usage = usage if known else {}
            prompt_tokens = int(usage.get("prompt_tokens") or 0)
            completion_tokens = int(usage.get("completion_tokens") or 0)
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            snippet = data[:120].decode("utf-8", "replace")
            raise ServiceError(
                self._say(f"{self.url}: the reply is not a chat completion: {snippet!r}")
            ) from None
        if not isinstance(content, str):
            raise MalformedOutputError("the model's answer has no text content")
        return HTTPCompletion(
            content,
            prompt_tokens,
            completion_tokens,
            finish if isinstance(finish, str) else None,
            served if isinstance(served, str) else None,
            usage_known=known,
        )

    def _streamed(self, data: bytes) -> Completion:
        """The answer of a stream of server-sent events (``data: {chunk}`` lines)."""
        payloads: list[bytes] = []
        done = False
        for line in data.split(b"\n"):
            if line[:5] != b"data:":
                continue  # blank lines, ": ping" comments, event: and id: fields
            payload = line[5:].strip()
            if payload == b"[DONE]":
                done = True
                break
            payloads.append(payload)
        try:  # one parse for every chunk: a tenth of the CPU of one per chunk
            chunks = orjson.loads(b"[" + b",".join(payloads) + b"]")
        except ValueError:
            chunks = [self._chunk(payload) for payload in payloads]  # which one is bad
        parts: list[str] = []
        finish: Any = None
        served: Any = None
        usage: Any = None
        try:
            for chunk in chunks:
                if "error" in chunk:
                    raise self._stream_error(chunk["error"])
                served = chunk.get("model") or served
                usage = chunk.get("usage") or usage
                choices = chunk.get("choices")
                if choices:
                    choice = choices[0]
                    text = (choice.get("delta") or {}).get("content")
                    if text:
                        parts.append(text)
                    finish = choice.get("finish_reason") or finish
        except (TypeError, AttributeError, KeyError, IndexError):
            raise ServiceError(
                self._say(f"{self.url}: a streamed chunk is not a chat completion chunk: "
                          f"{str(chunk)[:120]!r}")
            ) from None  # fmt: skip
        if not done and finish is None:
            raise ServiceError(
                f"{self.url}: the stream ended before the answer did (no finish_reason, no "
                f"[DONE]; {len(data)} bytes): cut off"
            )
        known = isinstance(usage, Mapping)
        try:
            prompt_tokens = int(usage.get("prompt_tokens") or 0) if known else 0
            completion_tokens = int(usage.get("completion_tokens") or 0) if known else 0
        except (TypeError, ValueError):
            known, prompt_tokens, completion_tokens = False, 0, 0
        return HTTPCompletion(
            "".join(parts),
            prompt_tokens,
            completion_tokens,
            finish if isinstance(finish, str) else None,
            served if isinstance(served, str) else None,
            usage_known=known,
        )

    def _chunk(self, payload: bytes) -> Any:
        """One streamed chunk, parsed; a :class:`ctxeval.ServiceError` when it is not JSON."""
        try:
            return orjson.loads(payload)
        except ValueError:
            snippet = payload[:120].decode("utf-8", "replace")
            raise ServiceError(
                self._say(f"{self.url}: a streamed chunk is not a chat completion chunk: "
                          f"{snippet!r}")
            ) from None  # fmt: skip

    def _stream_error(self, error: Any) -> CallError:
        """The error an ``error`` event in a stream stands for (llama.cpp's server and vLLM
        send one when the request fails after its answer began): the status it names, else
        500 (retried)."""
        if isinstance(error, Mapping):
            detail, code = error.get("message") or error, error.get("code")
        else:
            detail, code = error, None
        status = code if isinstance(code, int) and 400 <= code <= 599 else 500
        message = self._say(
            f"{self.url} (model {self.config.wire_model!r}), in the stream: {str(detail)[:300]}"
        )
        return error_for_status(status, message, hint=KEY_HINT)

    def _http_error(self, url: str, answer: Answer) -> CallError:
        status, data = answer.status, answer.body
        text = data.decode("utf-8", "replace")
        code: str | None = None
        detail: Any = text
        try:
            error = orjson.loads(data).get("error")
            if isinstance(error, Mapping):
                detail = error.get("message") or text
                code = error.get("code") or error.get("type")
            elif isinstance(error, str):
                detail = error
        except (ValueError, AttributeError):
            pass
        message = self._say(
            f"HTTP {status} from {url} (model {self.config.wire_model!r}): {str(detail)[:300]}"
        )
        return error_for_status(
            status,
            message,
            retry_after=retry_after_of(answer),
            code=str(code) if code is not None else None,
            hint=KEY_HINT,
        )

    def _say(self, text: str) -> str:
        return redact(text, *self._secrets)

    async def aclose(self) -> None:
        """Close the connection pool (on the run's event loop)."""
        await self._pool.aclose()


def _is_event_stream(answer: Answer) -> bool:
    """Whether ``answer`` is a stream of server-sent events (by its type, else its start)."""
    kind = answer.headers.get("Content-Type") or answer.headers.get("content-type") or ""
    if kind.startswith("text/event-stream"):
        return True
    return not kind.startswith("application/json") and answer.body[:5] in (b"data:", b": pin")


def _refuses_streaming(error: CallError) -> bool:
    """Whether ``error`` is a server's refusal of ``stream`` / ``stream_options``."""
    return isinstance(error, BadRequestError) and bool(_REFUSES_STREAM.search(str(error)))
