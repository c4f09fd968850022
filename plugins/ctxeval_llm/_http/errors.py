"""Any exception of a transport's library as the ctxeval call error of its kind: one map per
foreign library (:func:`aiohttp_error`, :func:`httpx_error`; :func:`as_call_error` for
litellm, the openai SDK and a user's callable), and the one error of an answer past
``max_response_bytes`` (:class:`ResponseTooLargeError`, :func:`oversize_message`) on every
transport."""

from __future__ import annotations

from typing import Any

from ctxeval.plugin import (
    CallError,
    CallTimeoutError,
    ConnectionFailedError,
    FatalCallError,
    MalformedOutputError,
    ServiceError,
    classify,
    error_for_status,
    retry_after_of,
    status_of,
)
from ctxeval_llm._parsing import redact
from ctxeval_llm.config import LLMConfig

from .base import CONNECT_TIMEOUT, Redact

__all__ = [
    "ResponseTooLargeError",
    "aiohttp_error",
    "as_call_error",
    "httpx_error",
    "oversize_message",
]


class ResponseTooLargeError(FatalCallError):
    """The answer was larger than ``max_response_bytes`` (or in a coding not asked for): the
    row fails at once, as the next attempt would be as large (every transport)."""


def oversize_message(url: str, limit: int, how: str = "; cut off") -> str:
    """What an answer past the size limit says, on every transport (``how``: how it ended)."""
    return (
        f"{url}: the answer is larger than {limit} bytes (max_response_bytes){how}; if "
        "answers this large are expected, raise the bound: LLMConfig(max_response_bytes=...)"
    )


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


_CONNECT_NAMES = frozenset({"ConnectError", "APIConnectionError", "ClientConnectorError"})


def as_call_error(exc: BaseException, config: LLMConfig) -> CallError:
    """``exc`` (from litellm, openai, httpx or a user's callable) as the
    :class:`ctxeval.CallError` of its kind, by :func:`ctxeval.plugin.classify`'s table, with
    secrets masked in the message."""
    if isinstance(exc, CallError):
        return exc
    message = redact(
        f"{config.model} at {config.shown_endpoint}: {type(exc).__name__}: {exc}",
        *config.secrets(),
    )
    status = status_of(exc)
    names = {cls.__name__ for cls in type(exc).__mro__}
    if status is not None:
        return error_for_status(
            status,
            message,
            retry_after=retry_after_of(exc),
            code="NotFoundError" if "NotFoundError" in names else None,
            hint=" (check the API key: LLMConfig(api_key=...) or the provider's variable)",
        )
    kind = classify(exc)
    if kind == "rate_limit":
        return error_for_status(429, message, retry_after=retry_after_of(exc))
    if kind == "malformed":
        return MalformedOutputError(message)
    if kind == "transient":
        if isinstance(exc, TimeoutError) or "Timeout" in type(exc).__name__:
            return CallTimeoutError(message)
        if names & _CONNECT_NAMES or isinstance(exc, ConnectionRefusedError):
            return ConnectionFailedError(message)
        return ServiceError(message)
    if names & {"AuthenticationError", "PermissionDeniedError"}:
        return error_for_status(401, message)
    if "NotFoundError" in names:
        return error_for_status(404, message, code="NotFoundError")
    return error_for_status(400, message)
