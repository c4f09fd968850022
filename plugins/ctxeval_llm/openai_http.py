"""The ``openai`` transport: chat completions to an OpenAI-compatible endpoint, on httpx.

One :class:`httpx.AsyncClient` per run and endpoint, made on first use and closed when the run
ends:

* connection pool sized to the resource's ``max_concurrency`` (keep-alive, reused across
  requests), optional HTTP/2 (``LLMConfig(http2=True)``, needs ``h2``);
* ``HTTPS_PROXY`` / ``HTTP_PROXY`` / ``ALL_PROXY`` / ``NO_PROXY`` honoured (httpx's
  ``trust_env``), and certificates checked against the system's CA store (``truststore`` when
  installed, else OpenSSL's default paths, which ``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` change);
* no timeout of its own beyond connecting (the scheduler times each attempt), and no retries
  (the scheduler owns them);
* answers read as a stream and cut at ``max_response_bytes``: an endless body cannot fill
  the memory.

Every failure becomes the :class:`ctxeval.CallError` of its kind through
:func:`ctxeval.plugin.error_for_status` (and :class:`ctxeval.ConnectionFailedError` for a
connection that never opened), with the key masked out of its message.
"""

from __future__ import annotations

import hashlib
import logging
import ssl
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import orjson

from ctxeval.plugin import (
    CallError,
    CallTimeoutError,
    Completion,
    ConnectionFailedError,
    MalformedOutputError,
    MissingCredentialsError,
    MissingExtraError,
    RunContext,
    ServiceError,
    error_for_status,
    retry_after_of,
)

from .config import LLMConfig
from .parsing import redact

if TYPE_CHECKING:
    import httpx

__all__ = ["OpenAITransport", "ssl_context"]

logger = logging.getLogger(__name__)

CONNECT_TIMEOUT = 10.0
"""Seconds to open a connection (the scheduler's timeout covers the whole attempt)."""

KEY_HINT = " (check the API key: LLMConfig(api_key=...) or OPENAI_API_KEY)"


def ssl_context() -> ssl.SSLContext:
    """Certificates from the system's store: ``truststore`` when installed (the OS store on
    macOS and Windows too), else OpenSSL's default paths (``SSL_CERT_FILE``/``SSL_CERT_DIR``)."""
    try:
        import truststore  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        return ssl.create_default_context()
    context: ssl.SSLContext = truststore.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    return context


class OpenAITransport:
    """POST ``{endpoint}/chat/completions`` with httpx (see the module's description).

    Args:
        config: the LLM configuration (endpoint, key, HTTP/2, body size limit).
        max_connections: the pool size (the resource's concurrency).
    """

    name = "openai-compatible"

    def __init__(self, config: LLMConfig, *, max_connections: int = 16) -> None:
        self.config = config
        self.endpoint = config.endpoint.rstrip("/")
        self.url = self.endpoint + "/chat/completions"
        self._key = config.openai_key()
        self._max_connections = max_connections
        self._client: httpx.AsyncClient | None = None

    @staticmethod
    def shared_key(config: LLMConfig) -> str:
        """The run-wide key of the transport for ``config`` (endpoint and key, hashed)."""
        digest = hashlib.sha256((config.openai_key() or "").encode()).hexdigest()[:12]
        return f"ctxeval_llm.openai:{config.endpoint}:{digest}:{config.http2}"

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

    def _client_now(self) -> httpx.AsyncClient:
        if self._client is None:
            import httpx

            headers = {}
            if self._key:
                headers["Authorization"] = f"Bearer {self._key}"
            self._client = httpx.AsyncClient(
                headers=headers,
                timeout=httpx.Timeout(None, connect=CONNECT_TIMEOUT),
                limits=httpx.Limits(
                    max_connections=self._max_connections,
                    max_keepalive_connections=self._max_connections,
                ),
                http2=self.config.http2,
                trust_env=True,
                # certificates matter for https only (a plain-http local server needs none)
                verify=ssl_context() if self.endpoint.startswith("https:") else False,
                follow_redirects=False,
            )
        return self._client

    async def complete(self, ctx: RunContext, request: Mapping[str, Any]) -> Completion:
        """Send ``request`` once; the answer, or the :class:`ctxeval.CallError` of its kind."""
        data = await self.send(
            "POST",
            "/chat/completions",
            content=orjson.dumps(dict(request)),
            headers={"Content-Type": "application/json"},
        )
        return self._completion(data)

    async def send(
        self, method: str, path: str, *, limit: int | None = None, **arguments: Any
    ) -> bytes:
        """One request to ``{endpoint}{path}`` (``arguments`` as httpx takes them); the body of
        a 2xx answer (at most ``limit`` bytes, default ``max_response_bytes``), else the
        :class:`ctxeval.CallError` of its kind. The Batch API mode sends its uploads and polls
        through here."""
        import httpx

        client = self._client_now()
        url = self.endpoint + path
        try:
            async with client.stream(method, url, **arguments) as response:
                data = await self._read(response, limit or self.config.max_response_bytes)
        except httpx.ConnectError as exc:
            raise ConnectionFailedError(self._say(f"cannot connect to {url}: {exc}")) from None
        except httpx.ConnectTimeout:
            raise ConnectionFailedError(
                f"cannot connect to {url}: no connection within {CONNECT_TIMEOUT:g} s"
            ) from None
        except httpx.ProxyError as exc:
            raise ConnectionFailedError(self._say(f"proxy error for {url}: {exc}")) from None
        except httpx.TimeoutException as exc:
            raise CallTimeoutError(self._say(f"{url}: {type(exc).__name__}")) from None
        except httpx.TransportError as exc:  # reset, closed, protocol errors
            raise ServiceError(
                self._say(f"{url}: {type(exc).__name__}: {exc or 'connection lost'}")
            ) from None
        if not 200 <= response.status_code < 300:
            raise self._http_error(url, response, data)
        return data

    async def _read(self, response: httpx.Response, limit: int) -> bytes:
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_bytes():
            size += len(chunk)
            if size > limit:
                raise ServiceError(
                    f"{response.request.url}: the answer is larger than {limit} bytes "
                    "(max_response_bytes); cut off"
                )
            chunks.append(chunk)
        return b"".join(chunks)

    def _completion(self, data: bytes) -> Completion:
        try:
            reply = orjson.loads(data)
            content = reply["choices"][0]["message"]["content"]
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
        return Completion(content, prompt_tokens, completion_tokens)

    def _http_error(self, url: str, response: httpx.Response, data: bytes) -> CallError:
        status = response.status_code
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
            retry_after=retry_after_of(response),
            code=str(code) if code is not None else None,
            hint=KEY_HINT,
        )

    def _say(self, text: str) -> str:
        return redact(text, self._key, self.config.api_key)

    async def aclose(self) -> None:
        """Close the connection pool."""
        if self._client is not None:
            client, self._client = self._client, None
            await client.aclose()
