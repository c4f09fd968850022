"""The ``openai`` transport's HTTP client on asyncio: aiohttp.

One :class:`aiohttp.ClientSession` per run and endpoint, made on the run's event loop at the
first request and closed on it when the run ends:

* a connection pool of the resource's ``max_concurrency`` connections, kept alive across
  requests (an idle one for 4 s: less than the 5 s after which uvicorn, under vLLM, closes it);
* the environment's proxy resolved once, as httpx's ``trust_env`` does
  (:func:`~ctxeval_llm._http.base.env_proxy`; credentials in the proxy URL are sent as
  ``Proxy-Authorization``), instead of aiohttp's own ``trust_env``, which looks the
  environment and ``~/.netrc`` up in a worker thread for every request;
* certificates checked against the system's store (:func:`~ctxeval_llm._http.base.ssl_context`);
* no cookies kept, no redirects followed, no timeout but the connect one (the scheduler times
  each attempt), no retry of a POST;
* the body read as it comes and cut at ``max_response_bytes``;
* a request cancelled (its timeout, the run stopped) closes its connection at once: the server
  sees the client hang up, and stops generating a streamed answer; one cancelled before it had
  its connection never left, and says so (:func:`ctxeval.plugin.request_not_sent`: not
  counted in ``usage.requests``).
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Mapping
from contextvars import ContextVar
from functools import cache
from typing import TYPE_CHECKING, Any

from ctxeval.plugin import request_not_sent

from .base import CONNECT_TIMEOUT, Answer, Redact, env_proxy, ssl_context
from .errors import ResponseTooLargeError, oversize_message
from .exception_maps import aiohttp_error

if TYPE_CHECKING:
    import aiohttp

__all__ = ["AiohttpClient"]

KEEPALIVE = 4.0
"""Seconds an idle connection is kept for the next request."""

_CONNECTED: ContextVar[bool] = ContextVar("ctxeval_aiohttp_connected", default=False)
"""Whether the running task's request has its connection (and so goes out at once)."""


@cache
def _connector_class() -> type[aiohttp.TCPConnector]:
    """aiohttp's connector, noting when a request gets its connection: a request cancelled
    before that never left (:func:`ctxeval.plugin.request_not_sent`)."""
    import aiohttp

    class Connector(aiohttp.TCPConnector):
        async def connect(self, *args: Any, **kwargs: Any) -> Any:
            connection = await super().connect(*args, **kwargs)
            _CONNECTED.set(True)
            return connection

    return Connector


class AiohttpClient:
    """aiohttp for requests to ``endpoint``, ``max_connections`` at once (see the module).

    Made inside the run's event loop (it binds to it); ``say`` masks secrets in messages.
    """

    name = "aiohttp"

    def __init__(self, endpoint: str, *, max_connections: int, say: Redact) -> None:
        import aiohttp
        import yarl

        self._aiohttp = aiohttp
        self._url = yarl.URL
        self._loop = asyncio.get_running_loop()
        self._say = say
        proxy = env_proxy(endpoint)
        self._proxy: Any = None
        self._proxy_headers: dict[str, str] | None = None
        """For the proxy's CONNECT (https): its credentials."""
        self._forwarded: dict[str, str] | None = None
        """For each request the proxy forwards (http): its credentials."""
        if proxy is not None:
            url = yarl.URL(proxy)
            if url.user is not None:  # as httpx sends them: Basic, UTF-8
                pair = f"{url.user}:{url.password or ''}".encode()
                auth = {"Proxy-Authorization": "Basic " + base64.b64encode(pair).decode()}
                if endpoint.startswith("https:"):
                    self._proxy_headers = auth
                else:
                    self._forwarded = auth
                url = url.with_user(None)
            self._proxy = url
        self._urls: dict[str, Any] = {}
        self._session = aiohttp.ClientSession(
            connector=_connector_class()(
                limit=max_connections,
                limit_per_host=0,
                ssl=ssl_context() if endpoint.startswith("https:") else True,
                # idle connections dropped before a server drops them (uvicorn, under vLLM
                # and most Python servers: after 5 s), so that no request goes out on one the
                # server is closing
                keepalive_timeout=KEEPALIVE,
            ),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT),
            cookie_jar=aiohttp.DummyCookieJar(),
            trust_env=False,  # the proxy is resolved once, above
        )

    def usable_here(self) -> bool:
        try:
            return asyncio.get_running_loop() is self._loop
        except RuntimeError:  # not on asyncio
            return False

    async def request(
        self, method: str, url: str, content: bytes | None, headers: Mapping[str, str], limit: int
    ) -> Answer:
        aiohttp = self._aiohttp
        target = self._urls.get(url)
        if target is None:
            if len(self._urls) > 64:  # batch file and batch URLs: many, each used a few times
                self._urls.clear()
            target = self._urls[url] = self._url(url)
        if self._forwarded is not None:
            headers = {**headers, **self._forwarded}
        connecting = _CONNECTED.set(False)
        try:
            try:
                response = await self._session.request(
                    method,
                    target,
                    data=content,
                    headers=headers,
                    proxy=self._proxy,
                    proxy_headers=self._proxy_headers,
                    allow_redirects=False,
                )
            except BaseException:
                if not _CONNECTED.get():  # cancelled (or failed) before it left
                    request_not_sent()
                raise
            finally:
                _CONNECTED.reset(connecting)
            try:
                body = await self._read(response, url, limit)
            except BaseException:
                response.close()  # drop the connection: the rest of the answer is not read
                raise
            response.release()
        except aiohttp.ClientError as exc:
            raise aiohttp_error(aiohttp, exc, url, self._say) from None
        return Answer(response.status, response.headers, body)

    async def _read(self, response: aiohttp.ClientResponse, url: str, limit: int) -> bytes:
        stream = response.content
        first = await stream.readany()
        if not first:
            return first
        size = len(first)
        if size > limit:
            raise ResponseTooLargeError(oversize_message(url, limit))
        if stream.at_eof():  # the usual answer: one piece, all read (no second read, #58)
            return first
        chunk = await stream.readany()
        if not chunk:
            return first
        chunks = [first]
        while chunk:
            size += len(chunk)
            if size > limit:
                raise ResponseTooLargeError(oversize_message(url, limit))
            chunks.append(chunk)
            chunk = await stream.readany()
        return b"".join(chunks)

    async def aclose(self) -> None:
        session = self._session
        if session.closed:
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            await session.close()
        else:  # its loop is gone (a transport kept across runs): nothing to close it on
            session.detach()
