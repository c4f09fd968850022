"""The ``openai`` transport: chat completions to an OpenAI-compatible endpoint.

One HTTP client per run and endpoint (:mod:`ctxeval_llm.http_clients`), made on the run's
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

Every failure becomes the :class:`ctxeval.CallError` of its kind through
:func:`ctxeval.plugin.error_for_status` (and :class:`ctxeval.ConnectionFailedError` for a
connection that never opened), with the key masked out of its message.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping
from typing import Any

import orjson

from ctxeval.plugin import (
    CallError,
    Completion,
    MalformedOutputError,
    MissingCredentialsError,
    MissingExtraError,
    RunContext,
    ServiceError,
    error_for_status,
    retry_after_of,
)

from .config import LLMConfig
from .http_clients import CONNECT_TIMEOUT, Answer, HTTPClient, choose_client, ssl_context
from .parsing import redact

__all__ = ["CONNECT_TIMEOUT", "OpenAITransport", "ssl_context"]

logger = logging.getLogger(__name__)

KEY_HINT = " (check the API key: LLMConfig(api_key=...) or OPENAI_API_KEY)"
_JSON = {"Content-Type": "application/json"}
_BUILT_BY_THE_CLIENT = frozenset({"host", "content-length", "transfer-encoding", "connection"})


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
        self._max_connections = max_connections
        self._client: HTTPClient | None = None
        auth = {"Authorization": f"Bearer {self._key}"} if self._key else {}
        self._headers = _merged(auth, config.extra_headers)
        """Sent with every request: the key, then ``extra_headers``."""
        self._json_headers = _merged(_JSON, self._headers)
        self._secrets = (self._key, config.api_key, *_secret_parts(config.extra_headers))

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
        return None if self._client is None else self._client.name

    async def ready(self, ctx: RunContext) -> None:
        """Checked once per run, before the first request (see :meth:`check_ready`)."""
        self.check_ready()

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

    def _client_now(self) -> HTTPClient:
        """The run's client, made on the running event loop at the first request."""
        client = self._client
        if client is not None and client.usable_here():
            return client
        if client is not None:  # made on another run's loop (a transport kept across runs)
            logger.debug("%s: a new %s client for this event loop", self.endpoint, client.name)
        size = self._max_connections
        if choose_client(self.endpoint, http2=self.config.http2) == "aiohttp":
            from .aiohttp_transport import AiohttpClient

            client = AiohttpClient(self.endpoint, max_connections=size, say=self._say)
        else:
            from .httpx_transport import HttpxClient

            client = HttpxClient(
                self.endpoint, max_connections=size, http2=self.config.http2, say=self._say
            )
        self._client = client
        return client

    async def complete(self, ctx: RunContext, request: Mapping[str, Any]) -> Completion:
        """Send ``request`` once; the answer, or the :class:`ctxeval.CallError` of its kind."""
        body = orjson.dumps(request if type(request) is dict else dict(request))
        answer = await self._client_now().request(
            "POST", self.url, body, self._json_headers, self.config.max_response_bytes
        )
        if not 200 <= answer.status < 300:
            raise self._http_error(self.url, answer)
        return self._completion(answer.body)

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
        answer = await self._client_now().request(
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
            usage = reply.get("usage") or {}
            prompt_tokens = int(usage.get("prompt_tokens") or 0)
            completion_tokens = int(usage.get("completion_tokens") or 0)
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            snippet = data[:120].decode("utf-8", "replace")
            raise ServiceError(
                self._say(f"{self.url}: the reply is not a chat completion: {snippet!r}")
            ) from None
        if not isinstance(content, str):
            raise MalformedOutputError("the model's answer has no text content")
        return Completion(
            content,
            prompt_tokens,
            completion_tokens,
            finish if isinstance(finish, str) else None,
            served if isinstance(served, str) else None,
        )

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
        if self._client is not None:
            client, self._client = self._client, None
            await client.aclose()
