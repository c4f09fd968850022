"""Any exception of a transport's library as the ctxeval call error of its kind
(:func:`as_call_error`: litellm, the openai SDK, a user's callable; the two HTTP clients'
libraries in :mod:`ctxeval_llm._http.exception_maps`), and the one error of an answer past
``max_response_bytes`` (:class:`ResponseTooLargeError`, :func:`oversize_message`) on every
transport."""

from __future__ import annotations

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

__all__ = ["ResponseTooLargeError", "as_call_error", "oversize_message"]


class ResponseTooLargeError(FatalCallError):
    """The answer was larger than ``max_response_bytes`` (or in a coding not asked for): the
    row fails at once, as the next attempt would be as large (every transport)."""


def oversize_message(url: str, limit: int, how: str = "; cut off") -> str:
    """What an answer past the size limit says, on every transport (``how``: how it ended)."""
    return (
        f"{url}: the answer is larger than {limit} bytes (max_response_bytes){how}; if "
        "answers this large are expected, raise the bound: LLMConfig(max_response_bytes=...)"
    )


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
