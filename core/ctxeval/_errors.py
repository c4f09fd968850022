"""The exceptions ctxeval raises, in one hierarchy users can catch.

Every exception derives from :class:`CtxevalError`. Each one says what was wrong, where
(file, line, field, sample id, plugin) and what to do about it, so that its message can be
shown to a user as it is.

::

    CtxevalError
    ├── DataError            a sample or an input file is malformed (also a ValueError)
    ├── ConfigError          a metric, option or argument is wrong (also a ValueError)
    │   ├── UnknownNameError a plugin name that no registered plugin has (also a LookupError)
    │   └── SessionClosedError   a :class:`~ctxeval.Session` used after ``close()``
    ├── PluginError          a plugin could not be loaded or misbehaved
    │   ├── PluginConflictError  two distributions claim one name
    │   └── MissingExtraError    an optional dependency is not installed (also an ImportError)
    ├── InvalidResultError   a metric produced a result that breaks the score policy
    ├── BudgetExceededError  a run stopped at its cost limit (its journal can be resumed)
    ├── CacheError           the LLM answer cache cannot be used (locked by another process)
    └── CallError            a call to a service (an LLM) failed
        ├── TransientCallError   worth retrying
        │   ├── RateLimitError       429 Too Many Requests (with ``retry_after`` when given)
        │   ├── ServiceError         5xx, a connection reset
        │   │   └── ConnectionFailedError  connection refused, DNS failure (no answer at all)
        │   ├── CallTimeoutError     no answer within the timeout (also a TimeoutError)
        │   └── MalformedOutputError the answer broke the expected schema (retried a few times)
        └── FatalCallError       never retried
            ├── BadRequestError      400/404/422: the request itself is wrong
            └── UnusableLLMError     no request of the run can succeed: the run stops at once
                ├── AuthenticationError       401/403: a wrong or unauthorised key
                ├── MissingCredentialsError   no key where the provider needs one
                ├── ModelNotFoundError        the endpoint does not serve the model
                └── EndpointUnreachableError  no connection ever succeeded

Plugins raise the :class:`CallError` subclasses (or errors carrying an HTTP ``status_code``) from
the functions they give to :meth:`RunContext.call`; the scheduler retries exactly the transient
ones. An :class:`UnusableLLMError` stops the whole run (the rows already finished are kept and
journaled, the others stay to be resumed): retrying it, or failing every row with it, would only
burn time.
"""

from __future__ import annotations

__all__ = [
    "AuthenticationError",
    "BadRequestError",
    "BudgetExceededError",
    "CacheError",
    "CallError",
    "CallTimeoutError",
    "ConfigError",
    "ConnectionFailedError",
    "CtxevalError",
    "DataError",
    "EndpointUnreachableError",
    "FatalCallError",
    "InvalidResultError",
    "MalformedOutputError",
    "MissingCredentialsError",
    "MissingExtraError",
    "ModelNotFoundError",
    "PluginConflictError",
    "PluginError",
    "RateLimitError",
    "ServiceError",
    "SessionClosedError",
    "TransientCallError",
    "UnknownNameError",
    "UnusableLLMError",
]


class CtxevalError(Exception):
    """Base class of every error ctxeval raises on purpose."""


class DataError(CtxevalError, ValueError):
    """A sample, or a row of an input file, is malformed.

    The message names the place as precisely as it is known: ``file:line``, the field and the
    sample id, followed by what was wrong and, where there is one, what to do.

    Attributes:
        problem: what is wrong, in words (without the location).
        path: the input file, when the sample came from one.
        line: the 1-based line (JSONL, JSON, CSV) or row (Parquet) of the sample in ``path``.
        field: the field that is wrong, when one is.
        sample_id: the sample's id, when it is known.
        hint: what to do about it.
    """

    def __init__(
        self,
        problem: str,
        *,
        path: str | None = None,
        line: int | None = None,
        field: str | None = None,
        sample_id: str | None = None,
        hint: str | None = None,
    ) -> None:
        self.problem = problem
        self.path = path
        self.line = line
        self.field = field
        self.sample_id = sample_id
        self.hint = hint
        super().__init__(self._render())

    def located(
        self,
        *,
        path: str | None = None,
        line: int | None = None,
        sample_id: str | None = None,
    ) -> DataError:
        """Return a copy (of the same class) that also names the file, line and sample id (known
        ones are kept)."""
        return type(self)(
            self.problem,
            path=self.path or path,
            line=self.line if self.line is not None else line,
            field=self.field,
            sample_id=self.sample_id if self.sample_id is not None else sample_id,
            hint=self.hint,
        )

    def _render(self) -> str:
        where = ""
        if self.path is not None:
            where = self.path if self.line is None else f"{self.path}:{self.line}"
        elif self.line is not None:
            where = f"line {self.line}"
        parts = []
        if where:
            parts.append(where)
        if self.sample_id is not None:
            parts.append(f"sample {self.sample_id!r}")
        if self.field is not None:
            parts.append(f"field {self.field!r}")
        message = ": ".join([*parts, self.problem]) if parts else self.problem
        if self.hint:
            message += f" ({self.hint})"
        return message

    def __reduce__(self) -> tuple[object, ...]:  # keep keyword arguments through pickling
        return (_rebuild_data_error, (self.problem, self.__dict__, type(self)))


def _rebuild_data_error(
    problem: str, state: dict[str, object], kind: type[DataError] = DataError
) -> DataError:
    error = kind.__new__(kind)
    error.__dict__.update(state)
    Exception.__init__(error, error._render())
    return error


class ConfigError(CtxevalError, ValueError):
    """A metric, an option or an argument is wrong; the message names it and the accepted values."""


class SessionClosedError(ConfigError):
    """A :class:`~ctxeval.Session` was used after :meth:`~ctxeval.Session.close` (or closed
    while a sample of this call was being scored): make a new session, or score before
    closing."""


def plugin_kind(group: str) -> str:
    """What a plugin of entry-point ``group`` is called in messages (``ctxeval.metrics``:
    ``metric``; ``ctxeval.llms``: ``LLM provider``)."""
    last = group.rsplit(".", 1)[-1]
    return {"llms": "LLM provider", "writers": "output format"}.get(last, last.rstrip("s"))


class UnknownNameError(ConfigError, LookupError):
    """No registered plugin has this name.

    Attributes:
        group: the entry-point group that was searched (e.g. ``ctxeval.metrics``).
        name: the name that was asked for.
        suggestions: the closest known names, best first.
    """

    def __init__(self, group: str, name: str, known: list[str], suggestions: list[str]) -> None:
        self.group = group
        self.name = name
        self.suggestions = suggestions
        kind = plugin_kind(group)
        message = f"unknown {kind} {name!r}"
        if suggestions:
            message += f"; did you mean {' or '.join(repr(s) for s in suggestions)}?"
        elif known:
            message += f"; known {kind}s: {', '.join(sorted(known))}"
        else:
            message += f"; no {kind} is registered in group {group!r}"
        super().__init__(message)


class PluginError(CtxevalError):
    """A plugin could not be loaded, or did something a plugin must not do."""


class PluginConflictError(PluginError):
    """Two installed distributions register the same name in one entry-point group."""


class MissingExtraError(PluginError, ImportError):
    """A plugin needs an optional dependency that is not installed.

    Attributes:
        install: the exact command that installs what is missing.
    """

    def __init__(self, message: str, *, install: str) -> None:
        self.install = install
        super().__init__(f"{message}; install it with: {install}")


class CacheError(CtxevalError):
    """The LLM answer cache cannot be used (another process held its lock too long)."""


class InvalidResultError(CtxevalError):
    """A metric returned a result that breaks the score policy (e.g. a score outside [0, 1])."""


class CallError(CtxevalError):
    """A call to an outside service (an LLM endpoint) failed.

    Attributes:
        status_code: the HTTP status, when there was one.
    """

    def __init__(self, message: str, *, status_code: int | None = None) -> None:
        self.status_code = status_code
        super().__init__(message)


class TransientCallError(CallError):
    """A failure that may pass: the scheduler retries it with backoff."""


class RateLimitError(TransientCallError):
    """The service answered 429 Too Many Requests.

    Attributes:
        retry_after: seconds the service asked to wait (``Retry-After``), when it said.
    """

    def __init__(
        self, message: str, *, retry_after: float | None = None, status_code: int | None = 429
    ) -> None:
        self.retry_after = retry_after
        super().__init__(message, status_code=status_code)


class ServiceError(TransientCallError):
    """The service failed on its side (5xx), or the connection broke."""


class ConnectionFailedError(ServiceError):
    """No connection to the service: refused, a DNS failure, a TLS handshake that failed.

    Retried like any transient failure; when every call of a run so far failed so (none ever
    got an answer), the scheduler stops the run with :class:`EndpointUnreachableError`.
    """


class CallTimeoutError(TransientCallError, TimeoutError):
    """No answer arrived within the call's timeout."""


class MalformedOutputError(TransientCallError):
    """The answer did not fit the expected schema; retried up to a small cap."""


class FatalCallError(CallError):
    """A failure that retrying cannot fix: it fails the row at once."""


class BadRequestError(FatalCallError):
    """The service refused the request itself (400, 404, 422): check the model name and options."""


class UnusableLLMError(FatalCallError):
    """No request of this run can succeed with this LLM configuration: the run stops at once.

    Raised before the first request where it can be known (a missing key, a missing extra),
    otherwise on the first answer that shows it (401/403, an unknown model), or once the first
    calls all failed to connect. The message says what, for which model and endpoint, and what
    to do. The rows finished before it are kept (and journaled); the command line exits 2.
    """


class AuthenticationError(UnusableLLMError):
    """The service refused the credentials (401 or 403): check the API key and its rights."""


class MissingCredentialsError(UnusableLLMError):
    """The provider needs an API key and none was given or found in its environment variable."""


class ModelNotFoundError(UnusableLLMError):
    """The endpoint does not serve the model (404 ``model_not_found``, or litellm's
    ``NotFoundError``): check the model name, or the provider prefix."""


class EndpointUnreachableError(UnusableLLMError):
    """Every call so far failed to connect (refused, DNS failure), none ever got an answer:
    check ``api_base`` and that the server is running."""


class BudgetExceededError(CtxevalError):
    """A run reached its ``max_cost_usd`` and stopped taking new samples.

    Attributes:
        spent: what the run had spent, in USD.
        limit: the limit it was given.
    """

    def __init__(self, spent: float, limit: float) -> None:
        self.spent = spent
        self.limit = limit
        super().__init__(
            f"the run reached its cost limit: ${spent:.6f} spent of ${limit:.6f}; rows finished "
            "so far are kept (resume the run with a higher limit to finish it)"
        )
