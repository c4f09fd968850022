"""The HTTP clients under the ``openai`` transport, and which one a run gets.

One protocol, :class:`~ctxeval_llm._http.base.HTTPClient` (one request in, an
:class:`~ctxeval_llm._http.base.Answer` out, ``aclose()``), two implementations:

* :class:`~ctxeval_llm._http.aiohttp_client.AiohttpClient` on asyncio: about a tenth of httpx's
  CPU per request, which is what a fast local server (vLLM answering thousands of short
  judgements a second) needs from its client;
* :class:`~ctxeval_llm._http.httpx_client.HttpxClient` on trio, for HTTP/2, and behind a proxy
  that is not a plain ``http://`` one (``https://``, ``socks5://``).

:func:`choose_client` picks one from the running async library (``current_async_library``),
once per run; :func:`load_client` imports it in a worker thread the first time, not on the
event loop (aiohttp's import loads the system's certificates: 0.1 to 0.2 s that would hold
every task of the loop, a host application's too). Both honour the same limits
(:mod:`ctxeval_llm._http.base`).

``CTXEVAL_HTTP_CLIENT=httpx`` (or ``aiohttp``) forces a client where it can run (aiohttp only
on asyncio): for comparing them, or working around one.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys

import anyio

from ctxeval.plugin import ConfigError, UnusableLLMError

from .aiohttp_client import AiohttpClient
from .base import HTTPClient, Redact, async_library, env_proxy
from .httpx_client import HttpxClient

__all__ = [
    "CLIENT_VARIABLE",
    "LoopClient",
    "choose_client",
    "load_client",
    "make_client",
    "open_client",
]

logger = logging.getLogger(__name__)

CLIENT_VARIABLE = "CTXEVAL_HTTP_CLIENT"
"""The environment variable that forces a client: ``aiohttp``, ``httpx`` or ``auto``."""


_MODULES = {"aiohttp": "aiohttp", "httpx": "httpx"}
"""The library each client's first use imports (a run on asyncio never imports httpx)."""


async def load_client(url: str, *, http2: bool) -> None:
    """Import the library of the client :func:`choose_client` picks for ``url``, in a worker
    thread the first time (later: at once, without a checkpoint). Its import holds no loop:
    aiohttp's loads the system's certificates (twice), as httpx's does, at import; aiohttp
    asks that it be imported before the loop starts or in a thread. Call it before
    :func:`make_client` on a path where the client may be new."""
    module = _MODULES[choose_client(url, http2=http2)]
    if module not in sys.modules:  # (one being imported by another thread is in it: the
        try:  # import then waits)
            await anyio.to_thread.run_sync(importlib.import_module, module)
        except ImportError as error:  # installed but broken: no request can be sent
            raise UnusableLLMError(unimportable(module, error)) from error


def unimportable(module: str, error: ImportError) -> str:
    """What a run says when the HTTP client library it picked is installed but cannot be
    imported (a wheel built for another Python, a missing shared library)."""
    other = f"; or send with httpx instead: {CLIENT_VARIABLE}=httpx" if module == "aiohttp" else ""
    return (
        f"the HTTP client library {module} is installed but cannot be imported "
        f"({type(error).__name__}: {error}): reinstall it, "
        f"pip install --force-reinstall {module}{other}"
    )


async def open_client(url: str, *, max_connections: int, http2: bool, say: Redact) -> HTTPClient:
    """A new pool for requests to ``url`` on the running event loop (:func:`make_client`), its
    library imported in a worker thread first (:func:`load_client`)."""
    await load_client(url, http2=http2)
    return make_client(url, max_connections=max_connections, http2=http2, say=say)


class LoopClient:
    """The one pool an object keeps for its requests to ``url``: made on the running event loop
    at the first request (:meth:`get`), made anew when a later run's loop asks (an object kept
    across runs; a pool serves the loop it was made on only), closed by :meth:`aclose`.

    A request's path asks ``holder.here() or await holder.get()``: one check once the pool is
    made.
    """

    __slots__ = ("_client", "_http2", "_max_connections", "_say", "url")

    def __init__(self, url: str, *, max_connections: int, http2: bool, say: Redact) -> None:
        self.url = url
        self._max_connections = max_connections
        self._http2 = http2
        self._say = say
        self._client: HTTPClient | None = None

    @property
    def current(self) -> HTTPClient | None:
        """The pool last made (on whichever loop), or None."""
        return self._client

    def here(self) -> HTTPClient | None:
        """The pool, if it was made on the running event loop."""
        client = self._client
        return client if client is not None and client.usable_here() else None

    async def get(self) -> HTTPClient:
        """The pool for the running event loop, made now if there is none (its library
        imported in a worker thread first: :func:`load_client`)."""
        await load_client(self.url, http2=self._http2)
        client = self._client  # (another request may have made it meanwhile)
        if client is not None and client.usable_here():
            return client
        if client is not None:
            logger.debug("%s: a new %s client for this event loop", self.url, client.name)
        client = make_client(
            self.url, max_connections=self._max_connections, http2=self._http2, say=self._say
        )
        self._client = client
        return client

    async def aclose(self) -> None:
        """Close the pool, if one was made (on the loop it was made on)."""
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()


def make_client(url: str, *, max_connections: int, http2: bool, say: Redact) -> HTTPClient:
    """A new pool for requests to ``url`` on the running event loop, of the client
    :func:`choose_client` picks (its library imported here when :func:`load_client` has not:
    on the loop)."""
    if choose_client(url, http2=http2) == "aiohttp":
        return AiohttpClient(url, max_connections=max_connections, say=say)
    return HttpxClient(url, max_connections=max_connections, http2=http2, say=say)


def choose_client(url: str, *, http2: bool) -> str:
    """``aiohttp`` or ``httpx``, for a request to ``url`` from the running async library.

    aiohttp (a dependency) on asyncio, unless HTTP/2 is asked for, the environment's proxy for
    ``url`` is not a plain ``http://`` one, or ``CTXEVAL_HTTP_CLIENT=httpx``; httpx
    everywhere else (trio).
    """
    forced = os.environ.get(CLIENT_VARIABLE, "auto").strip().lower() or "auto"
    if forced not in ("auto", "aiohttp", "httpx"):
        raise ConfigError(f"{CLIENT_VARIABLE} must be 'aiohttp', 'httpx' or 'auto', got {forced!r}")
    if forced == "httpx" or http2 or async_library() != "asyncio":
        return "httpx"
    proxy = env_proxy(url)
    if proxy is not None and not proxy.lower().startswith("http://"):
        return "httpx"
    return "aiohttp"
