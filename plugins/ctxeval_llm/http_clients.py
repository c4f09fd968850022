"""The HTTP clients under the ``openai`` transport, and which one a run gets.

One protocol, :class:`HTTPClient` (one request in, an :class:`Answer` out, ``aclose()``), two
implementations:

* :class:`~ctxeval_llm.aiohttp_transport.AiohttpClient` on asyncio: about a tenth of httpx's
  CPU per request, which is what a fast local server (vLLM answering thousands of short
  judgements a second) needs from its client;
* :class:`~ctxeval_llm.httpx_transport.HttpxClient` on trio, for HTTP/2, and behind a proxy
  that is not a plain ``http://`` one (``https://``, ``socks5://``).

:func:`choose_client` picks one from the running async library (``current_async_library``),
once per run; :func:`load_client` imports it in a worker thread the first time, not on the
event loop (aiohttp's import loads the system's certificates: 0.1 to 0.2 s that would hold
every task of the loop, a host application's too). Both
honour the same limits: the answer cut at ``max_response_bytes``, the proxies of the
environment as httpx's ``trust_env`` reads them (:func:`env_proxy`), certificates checked
against the system's store (:func:`ssl_context`), no redirects, no timeout but the connect
one (the scheduler times each attempt), no retries (the scheduler owns them), and a cancelled
request closes its connection (the server sees the client hang up).

``CTXEVAL_HTTP_CLIENT=httpx`` (or ``aiohttp``) forces a client where it can run (aiohttp only
on asyncio): for comparing them, or working around one.
"""

from __future__ import annotations

import importlib
import importlib.util
import ipaddress
import logging
import os
import ssl
import sys
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from typing import Protocol

import anyio

from ctxeval.plugin import ConfigError, UnusableLLMError, current_async_library

__all__ = [
    "CLIENT_VARIABLE",
    "CONNECT_TIMEOUT",
    "Answer",
    "HTTPClient",
    "LoopClient",
    "async_library",
    "choose_client",
    "env_proxy",
    "load_client",
    "make_client",
    "open_client",
    "oversize_message",
    "ssl_context",
]

logger = logging.getLogger(__name__)

CONNECT_TIMEOUT = 10.0
"""Seconds to open a connection (the scheduler's timeout covers the whole attempt)."""

CLIENT_VARIABLE = "CTXEVAL_HTTP_CLIENT"
"""The environment variable that forces a client: ``aiohttp``, ``httpx`` or ``auto``."""

Redact = Callable[[str], str]


class Answer:
    """A whole answer: its status, headers (for ``Retry-After``) and body."""

    __slots__ = ("body", "headers", "status")

    def __init__(self, status: int, headers: Mapping[str, str], body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body


class HTTPClient(Protocol):
    """One connection pool, made on the run's event loop and closed on it."""

    name: str

    def usable_here(self) -> bool:
        """Whether this client can send from the running event loop (the one it was made on)."""
        ...

    async def request(
        self, method: str, url: str, content: bytes | None, headers: Mapping[str, str], limit: int
    ) -> Answer:
        """Send one request; the answer with at most ``limit`` bytes of body, else the
        :class:`ctxeval.CallError` of the failure (never a retry, never a redirect)."""
        ...

    async def aclose(self) -> None:
        """Close the pool (on the loop it was made on)."""
        ...


def ssl_context() -> ssl.SSLContext:
    """Certificates from the system's store: ``truststore`` when installed (the OS store on
    macOS and Windows too), else OpenSSL's default paths (``SSL_CERT_FILE``/``SSL_CERT_DIR``)."""
    try:
        import truststore  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        return ssl.create_default_context()
    context: ssl.SSLContext = truststore.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    return context


def oversize_message(url: str, limit: int) -> str:
    """What an answer cut at the size limit says."""
    return (
        f"{url}: the answer is larger than {limit} bytes (max_response_bytes); cut off; if "
        "answers this large are expected, raise the bound: LLMConfig(max_response_bytes=...)"
    )


# --- proxies, as httpx's trust_env reads them -----------------------------------------------


def env_proxy(url: str) -> str | None:
    """The proxy a request to ``url`` goes through, from the environment, as httpx
    (``trust_env``) reads it: ``HTTPS_PROXY`` / ``HTTP_PROXY`` by the URL's scheme, else
    ``ALL_PROXY`` (lower-case names first; the system's settings on macOS and Windows), unless
    ``NO_PROXY`` names the host (``*``: every host; ``example.com``: it and its subdomains;
    ``.example.com``: its subdomains only; an IP address or ``localhost``: that host; a
    ``host:port``: that port only). None: no proxy."""
    proxies = urllib.request.getproxies()
    parts = urllib.parse.urlsplit(url)
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    try:
        port = parts.port
    except ValueError:
        port = None
    if port == _DEFAULT_PORTS.get(scheme):
        port = None
    for entry in proxies.get("no", "").split(","):
        entry = entry.strip()
        if entry == "*":
            return None
        if entry and _matches(_no_proxy_pattern(entry), scheme, host, port):
            return None
    proxy = proxies.get(scheme) or proxies.get("all")
    if not proxy:
        return None
    return proxy if "://" in proxy else f"http://{proxy}"


_DEFAULT_PORTS = {"http": 80, "https": 443}


def _no_proxy_pattern(entry: str) -> str:
    """The URL pattern httpx makes of one ``NO_PROXY`` entry (curl's rules)."""
    if "://" in entry:
        return entry
    kind = _ip(entry)
    if kind is ipaddress.IPv4Address:
        return f"all://{entry}"
    if kind is ipaddress.IPv6Address:
        return f"all://[{entry}]"
    if entry.lower() == "localhost":
        return f"all://{entry}"
    return f"all://*{entry}"


def _ip(text: str) -> type | None:
    """The kind of IP address ``text`` is (before any ``/``), or None."""
    for kind in (ipaddress.IPv4Address, ipaddress.IPv6Address):
        try:
            kind(text.split("/")[0])
        except ValueError:
            continue
        return kind
    return None


def _matches(pattern: str, scheme: str, host: str, port: int | None) -> bool:
    """Whether httpx's ``URLPattern(pattern)`` matches a URL of this scheme, host and port."""
    parts = urllib.parse.urlsplit(pattern)
    want_scheme = parts.scheme.lower()
    if want_scheme not in ("all", "", scheme):
        return False
    want = (parts.hostname or "").lower()
    if want and want != "*":
        if want.startswith("*."):  # *.example.com: www.example.com, not example.com
            if not (host.endswith(want[1:]) and len(host) > len(want) - 1):
                return False
        elif want.startswith("*"):  # *example.com: example.com and www.example.com
            if not (host == want[1:] or host.endswith("." + want[1:])):
                return False
        elif host != want:
            return False
    try:
        want_port = parts.port
    except ValueError:
        return False
    if want_port is not None and want_scheme in _DEFAULT_PORTS:
        want_port = None if want_port == _DEFAULT_PORTS[want_scheme] else want_port
    return want_port is None or want_port == port


# --- which client -----------------------------------------------------------------------------


def async_library() -> str | None:
    """``asyncio``, ``trio``: the async library running this code, or None outside of one."""
    return current_async_library()


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
        from .aiohttp_transport import AiohttpClient

        return AiohttpClient(url, max_connections=max_connections, say=say)
    from .httpx_transport import HttpxClient

    return HttpxClient(url, max_connections=max_connections, http2=http2, say=say)


def choose_client(url: str, *, http2: bool) -> str:
    """``aiohttp`` or ``httpx``, for a request to ``url`` from the running async library.

    aiohttp on asyncio, unless HTTP/2 is asked for, the environment's proxy for ``url`` is not
    a plain ``http://`` one, aiohttp is not installed, or ``CTXEVAL_HTTP_CLIENT=httpx``; httpx
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
    if importlib.util.find_spec("aiohttp") is None:  # pragma: no cover - a dependency; an
        return "httpx"  # install without it still works
    return "aiohttp"
