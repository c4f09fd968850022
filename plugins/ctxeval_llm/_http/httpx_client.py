"""The ``openai`` transport's HTTP client on trio (and for HTTP/2, or an ``https://`` or
``socks5://`` proxy): httpx.

One :class:`httpx.AsyncClient` per run and endpoint, made on first use and closed when the run
ends:

* connection pool sized to the resource's ``max_concurrency`` (keep-alive, reused across
  requests), optional HTTP/2 (``LLMConfig(http2=True)``, needs ``h2``);
* ``HTTPS_PROXY`` / ``HTTP_PROXY`` / ``ALL_PROXY`` / ``NO_PROXY`` honoured (httpx's
  ``trust_env``), and certificates checked against the system's store
  (:func:`~ctxeval_llm._http.base.ssl_context`);
* no timeout of its own beyond connecting (the scheduler times each attempt), no retries (the
  scheduler owns them), no redirects;
* answers read as a stream and cut at ``max_response_bytes``; a cancelled request closes its
  connection, and one cancelled before it was sent (httpcore's trace says when) says so
  (:func:`ctxeval.plugin.request_not_sent`: not counted in ``usage.requests``).
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from ctxeval.plugin import request_not_sent

from .base import CONNECT_TIMEOUT, Answer, Redact, async_library, ssl_context
from .errors import ResponseTooLargeError, oversize_message
from .exception_maps import httpx_error

if TYPE_CHECKING:
    import httpx

__all__ = ["HttpxClient"]

_TRACED: dict[str, Any] = {}

_SENDING: ContextVar[bool] = ContextVar("ctxeval_httpx_sending", default=False)
"""Whether the running task's request has gone out (its headers and body)."""


async def _trace(event: str, info: Any) -> None:
    """httpcore's trace of a request: note when it has gone out (headers and body)."""
    if event.endswith("send_request_body.complete"):
        _SENDING.set(True)


_TRACED["trace"] = _trace


class HttpxClient:
    """httpx for requests to ``endpoint``, ``max_connections`` at once (see the module);
    ``say`` masks secrets in messages."""

    name = "httpx"

    def __init__(
        self, endpoint: str, *, max_connections: int, http2: bool = False, say: Redact
    ) -> None:
        import httpx

        self._httpx = httpx
        self._say = say
        self._library = async_library()
        self._client = httpx.AsyncClient(
            timeout=httpx.Timeout(None, connect=CONNECT_TIMEOUT),
            limits=httpx.Limits(
                max_connections=max_connections, max_keepalive_connections=max_connections
            ),
            http2=http2,
            trust_env=True,
            # certificates matter for https only (a plain-http local server needs none)
            verify=ssl_context() if endpoint.startswith("https:") else False,
            follow_redirects=False,
        )

    def usable_here(self) -> bool:
        return async_library() == self._library

    async def request(
        self, method: str, url: str, content: bytes | None, headers: Mapping[str, str], limit: int
    ) -> Answer:
        httpx = self._httpx
        sending = _SENDING.set(False)
        try:
            try:
                async with self._client.stream(
                    method, url, content=content, headers=headers, extensions=_TRACED
                ) as got:
                    body = await self._read(got, url, limit)
            except BaseException:
                if not _SENDING.get():  # cancelled (or failed) before it left
                    request_not_sent()
                raise
            finally:
                _SENDING.reset(sending)
        except httpx.TransportError as exc:
            raise httpx_error(httpx, exc, url, self._say) from None
        return Answer(got.status_code, got.headers, body)

    @staticmethod
    async def _read(response: httpx.Response, url: str, limit: int) -> bytes:
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_bytes():
            size += len(chunk)
            if size > limit:
                raise ResponseTooLargeError(oversize_message(url, limit))
            chunks.append(chunk)
        return b"".join(chunks)

    async def aclose(self) -> None:
        await self._client.aclose()
