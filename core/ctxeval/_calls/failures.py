"""Which failures of a call are worth retrying, and what the service asked for.

This is the one table that classifies failures: the scheduler retries by it, and transports
and plugins read it rather than mapping HTTP statuses themselves.

:func:`classify` sorts an exception into one of four kinds:

==============  ============================================================================
kind            what it covers
==============  ============================================================================
``rate_limit``  429 Too Many Requests (:class:`~ctxeval.RateLimitError`, or any error whose
                HTTP status is 429); waits at least the ``Retry-After`` the service gave
``transient``   5xx, 408, timeouts, refused or reset connections
``malformed``   an answer that broke the expected schema; retried at most
                :attr:`ctxeval.RetryPolicy.max_malformed_retries` times
``fatal``       401/403 (authentication), 400/404/422 (bad request), and anything unknown:
                never retried
==============  ============================================================================

:func:`error_for_status` is the same table the other way round, for transports that see an
HTTP status: it makes the :class:`~ctxeval.CallError` of that kind (a 401/403 an
:class:`~ctxeval.AuthenticationError`, a 404 naming the model a
:class:`~ctxeval.ModelNotFoundError`, both of which stop the run).

It reads ctxeval's own :class:`~ctxeval.CallError` classes first, then an HTTP ``status_code``
(on the error or on its ``response``), then well-known exception names of httpx, aiohttp,
openai and litellm, so that it needs none of those packages imported.

:func:`label_of` names a failure in a few words (``HTTP 500``, ``timeout``...): the scheduler
counts a call's failed attempts by it when the call's deadline ends it.
"""

from __future__ import annotations

import email.utils
import math
import time
from typing import Any, Final, Literal

from ctxeval._errors import (
    AuthenticationError,
    BadRequestError,
    CallError,
    ConnectionFailedError,
    FatalCallError,
    MalformedOutputError,
    ModelNotFoundError,
    RateLimitError,
    ServiceError,
    TransientCallError,
)

__all__ = ["Kind", "classify", "error_for_status", "label_of", "retry_after_of", "status_of"]

Kind = Literal["rate_limit", "transient", "malformed", "fatal"]

_TRANSIENT_NAMES: Final = frozenset(
    {
        # httpx
        "TimeoutException", "ConnectError", "ConnectTimeout", "ReadTimeout", "WriteTimeout",
        "PoolTimeout", "ReadError", "WriteError", "RemoteProtocolError", "NetworkError",
        # aiohttp
        "ClientConnectionError", "ServerDisconnectedError", "ClientOSError",
        "ServerTimeoutError", "ClientPayloadError",
        # openai / litellm
        "APIConnectionError", "APITimeoutError", "Timeout", "InternalServerError",
        "ServiceUnavailableError", "BadGatewayError",
    }
)  # fmt: skip
_RATE_LIMIT_NAMES: Final = frozenset({"RateLimitError"})
_FATAL_NAMES: Final = frozenset(
    {
        "AuthenticationError", "PermissionDeniedError", "BadRequestError", "NotFoundError",
        "UnprocessableEntityError", "ContextWindowExceededError", "ContentPolicyViolationError",
        "UnsupportedParamsError",
    }
)  # fmt: skip


def status_of(exc: BaseException) -> int | None:
    """The HTTP status behind ``exc``, from ``exc.status_code`` or ``exc.response.status_code``."""
    for holder in (exc, getattr(exc, "response", None)):
        status = getattr(holder, "status_code", None) if holder is not None else None
        if isinstance(status, int) and not isinstance(status, bool):
            return status
    status = getattr(exc, "status", None)  # aiohttp.ClientResponseError
    if isinstance(status, int) and not isinstance(status, bool):
        return status
    return None


def classify(exc: BaseException) -> Kind:
    """The kind of ``exc``: ``rate_limit``, ``transient``, ``malformed`` or ``fatal``."""
    if isinstance(exc, RateLimitError):
        return "rate_limit"
    if isinstance(exc, MalformedOutputError):
        return "malformed"
    if isinstance(exc, TransientCallError):
        return "transient"
    if isinstance(exc, FatalCallError):
        return "fatal"
    status = status_of(exc)
    if status is not None:
        if status == 429:
            return "rate_limit"
        if status == 408 or status >= 500:
            return "transient"
        if 400 <= status < 500:
            return "fatal"
    names = {cls.__name__ for cls in type(exc).__mro__}
    if names & _RATE_LIMIT_NAMES:
        return "rate_limit"
    if names & _FATAL_NAMES:
        return "fatal"
    if names & _TRANSIENT_NAMES or isinstance(exc, (TimeoutError, ConnectionError)):
        return "transient"
    return "fatal"


def label_of(exc: BaseException) -> str:
    """A short name for the failure ``exc``, to count a call's failed attempts by: ``HTTP 500``
    (any error with an HTTP status), ``connection failed``, ``timeout``, ``malformed answer``,
    else the exception's type name."""
    status = status_of(exc)
    if status is not None:
        return f"HTTP {status}"
    if isinstance(exc, ConnectionFailedError):
        return "connection failed"
    if isinstance(exc, TimeoutError) or "Timeout" in type(exc).__name__:
        return "timeout"
    if isinstance(exc, MalformedOutputError):
        return "malformed answer"
    return type(exc).__name__


def retry_after_of(exc: object, *, now: float | None = None) -> float | None:
    """Seconds the service asked to wait, from ``exc.retry_after`` or a ``Retry-After`` header
    (of ``exc.response``, or of ``exc`` itself when it is a response).

    The header may hold seconds or an HTTP date. Returns None when there is none or it cannot
    be read; never a negative number.
    """
    value: Any = getattr(exc, "retry_after", None)
    if value is None:
        headers = getattr(getattr(exc, "response", None), "headers", None) or getattr(
            exc, "headers", None
        )
        if headers is not None:
            try:
                value = headers.get("retry-after") or headers.get("Retry-After")
            except Exception:
                value = None
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    else:
        text = str(value).strip()
        try:
            seconds = float(text)
        except ValueError:
            try:
                when = email.utils.parsedate_to_datetime(text)
            except (TypeError, ValueError, IndexError):
                return None
            seconds = when.timestamp() - (time.time() if now is None else now)
    if not math.isfinite(seconds):
        return None
    return max(0.0, seconds)


_MODEL_NOT_FOUND_CODES: Final = frozenset({"model_not_found", "invalid_model", "NotFoundError"})


def error_for_status(
    status: int,
    message: str,
    *,
    retry_after: float | None = None,
    code: str | None = None,
    hint: str = "",
) -> CallError:
    """The :class:`~ctxeval.CallError` for an HTTP answer ``status`` (not 2xx).

    Args:
        status: the HTTP status.
        message: what to say (the endpoint and the service's own words; no secrets).
        retry_after: the ``Retry-After`` of a 429, in seconds.
        code: the service's error code (OpenAI's ``error.code``), when it gave one.
        hint: what to do about a refused key (added to the message of a 401/403).
    """
    if status == 429:
        return RateLimitError(message, retry_after=retry_after, status_code=429)
    if status == 408 or status >= 500:
        return ServiceError(message, status_code=status)
    if status in (401, 403):
        return AuthenticationError(f"{message}{hint}", status_code=status)
    lowered = message.lower()
    if code in _MODEL_NOT_FOUND_CODES or (
        status == 404 and "model" in lowered and ("not found" in lowered or "not exist" in lowered)
    ):
        return ModelNotFoundError(message, status_code=status)
    return BadRequestError(message, status_code=status)
