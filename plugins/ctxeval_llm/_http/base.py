"""What the HTTP clients under the ``openai`` transport share: the :class:`Answer` they give,
the :class:`HTTPClient` protocol they follow, and the limits both honour: the answer cut at
``max_response_bytes`` (:mod:`ctxeval_llm._http.errors` says so), the proxies of the
environment as httpx's ``trust_env`` reads them (:func:`env_proxy`), certificates checked
against the system's store (:func:`ssl_context`), no redirects, no timeout but the connect one
(the scheduler times each attempt), no retries (the scheduler owns them), and a cancelled
request closes its connection (the server sees the client hang up).

Which client a run gets, and its making, is :mod:`ctxeval_llm._http.choice`'s.
"""

from __future__ import annotations

import ipaddress
import ssl
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from typing import Protocol

from ctxeval.plugin import current_async_library

__all__ = [
    "CONNECT_TIMEOUT",
    "Answer",
    "HTTPClient",
    "Redact",
    "async_library",
    "env_proxy",
    "ssl_context",
]

CONNECT_TIMEOUT = 10.0
"""Seconds to open a connection (the scheduler's timeout covers the whole attempt)."""

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


def async_library() -> str | None:
    """``asyncio``, ``trio``: the async library running this code, or None outside of one."""
    return current_async_library()
