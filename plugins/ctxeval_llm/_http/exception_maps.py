"""One map per foreign HTTP library: its exception of a failed request as the ctxeval call
error of its kind (:func:`aiohttp_error`, :func:`httpx_error`); litellm's, the openai SDK's and
a user's callable's are :func:`ctxeval_llm._http.errors.as_call_error`'s."""

from __future__ import annotations

from typing import Any

from ctxeval.plugin import CallError, CallTimeoutError, ConnectionFailedError, ServiceError

from .base import CONNECT_TIMEOUT, Redact

__all__ = ["aiohttp_error", "httpx_error"]


def aiohttp_error(aiohttp: Any, exc: BaseException, url: str, say: Redact) -> CallError:
    """aiohttp's ``exc`` (a ``ClientError``) of a request to ``url`` as the call error of its
    kind; ``aiohttp`` is the module, ``say`` masks secrets."""
    if isinstance(exc, (aiohttp.ClientHttpProxyError, aiohttp.ClientProxyConnectionError)):
        return ConnectionFailedError(say(f"proxy error for {url}: {exc}"))
    if isinstance(exc, aiohttp.ClientConnectorError):  # refused, DNS, certificates
        return ConnectionFailedError(say(f"cannot connect to {url}: {exc}"))
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return ConnectionFailedError(
            f"cannot connect to {url}: no connection within {CONNECT_TIMEOUT:g} s"
        )
    if isinstance(exc, aiohttp.ServerTimeoutError):
        return CallTimeoutError(say(f"{url}: {type(exc).__name__}"))
    # reset, closed, malformed HTTP
    return ServiceError(say(f"{url}: {type(exc).__name__}: {exc or 'connection lost'}"))


def httpx_error(httpx: Any, exc: BaseException, url: str, say: Redact) -> CallError:
    """httpx's ``exc`` (a ``TransportError``) of a request to ``url`` as the call error of its
    kind; ``httpx`` is the module, ``say`` masks secrets."""
    if isinstance(exc, httpx.ConnectError):
        return ConnectionFailedError(say(f"cannot connect to {url}: {_why(exc)}"))
    if isinstance(exc, httpx.ConnectTimeout):
        return ConnectionFailedError(
            f"cannot connect to {url}: no connection within {CONNECT_TIMEOUT:g} s"
        )
    if isinstance(exc, httpx.ProxyError):
        return ConnectionFailedError(say(f"proxy error for {url}: {_why(exc)}"))
    if isinstance(exc, httpx.TimeoutException):
        return CallTimeoutError(say(f"{url}: {type(exc).__name__}"))
    # reset, closed, protocol errors
    return ServiceError(say(f"{url}: {type(exc).__name__}: {_why(exc) or 'connection lost'}"))


def _why(exc: BaseException) -> str:
    """The message of ``exc``, or of the first exception under it that has one (on trio, a
    refused certificate is a ``ConnectError`` with no message of its own)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        text = str(current)
        if text:
            return text if current is exc else f"{type(current).__name__}: {text}"
        current = current.__cause__ or current.__context__
    return ""
