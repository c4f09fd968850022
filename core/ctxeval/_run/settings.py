"""The settings of a run, as one value: :class:`RunSettings` (and its :class:`RetryPolicy`).

``evaluate``, ``aevaluate``, ``stream``, the command line and the Ray runner all take the same
settings object, so a setting exists, is documented and is validated in one place::

    settings = ctxeval.RunSettings(max_concurrency=8, timeout=30, journal="run/journal.jsonl")
    ev = ctxeval.evaluate(samples, metrics, settings=settings)

Each setting can also be given as a keyword argument of those functions, which overrides the
same field of ``settings``: ``evaluate(samples, metrics, max_concurrency=8)``.
"""

from __future__ import annotations

import difflib
import inspect
import os
from collections.abc import Callable, Mapping
from typing import Any, TypedDict

import attrs

from ctxeval._calls.cache import Cache
from ctxeval._calls.limits import Limits, SharedLimits
from ctxeval._errors import ConfigError
from ctxeval._plugins.validators import (
    Validator,
    boolean,
    non_negative_int,
    non_negative_number,
    optional,
    optional_positive_number,
    positive_int,
    positive_number,
)
from ctxeval._run.progress import Progress

__all__ = ["RetryPolicy", "RunOptions", "RunSettings"]


def _setting(validator: Validator) -> Validator:
    """``validator``, raising :class:`~ctxeval.ConfigError` (a ValueError) that names the
    setting."""

    def check(instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
        try:
            validator(instance, attribute, value)
        except ValueError as exc:
            raise ConfigError(f"run setting {exc}") from None

    return check


@attrs.frozen(kw_only=True)
class RetryPolicy:
    """How the scheduler retries a failed call (see
    :meth:`ctxeval._calls.scheduler.Scheduler.backoff`).

    A call is retried until it succeeds or its **deadline** is spent: the time of its own
    attempts and of the waits between them (not its turn in the queue behind other calls).
    After the ``n``-th failure in a row the wait is ``initial_backoff * 2 ** (n - 1)`` plus a
    random jitter of up to ``jitter`` seconds, capped at ``max_backoff``; after a 429 it is at
    least the service's ``Retry-After`` (capped at ``max_retry_after``). Failures count as "in a
    row" only while no other call to the same resource succeeds: a random failure while the
    others get through waits ``initial_backoff`` again, an outage backs off exponentially. No
    retry starts that would end past the deadline, and each attempt's timeout is cut to what is
    left of it.

    Attributes:
        deadline: seconds one call may take, attempts and waits included (None: no limit;
            then ``max_attempts`` bounds it). Default 150: a call that never succeeds becomes
            an error row within about two and a half minutes.
        max_attempts: attempts in all, the first included (1 disables retries; None: as many
            as the deadline allows).
        initial_backoff: seconds before the first retry.
        max_backoff: the longest wait between attempts.
        jitter: the largest random extra wait, in seconds.
        max_malformed_retries: retries for answers that broke the schema.
        max_retry_after: the longest ``Retry-After`` honoured, in seconds.
        unreachable_after: connection failures in a row, with no answer ever from the endpoint,
            after which the run stops with :class:`~ctxeval.EndpointUnreachableError`.
        unanswered_after: calls in a row that ended at their deadline (no answer within it, or
            only answers that are no chat completion, 5xx) or on a malformed answer, with no
            call to the resource ever answered well, after which the run stops with
            :class:`~ctxeval.EndpointUnresponsiveError` (default 8: with the default
            concurrency of 16, the first round of calls; a judge that ever answered well is
            never stopped so, nor are calls a 429 held back).
    """

    deadline: float | None = attrs.field(
        default=150.0, validator=_setting(optional_positive_number)
    )
    max_attempts: int | None = attrs.field(default=None, validator=_setting(optional(positive_int)))
    initial_backoff: float = attrs.field(default=0.5, validator=_setting(positive_number))
    max_backoff: float = attrs.field(default=30.0, validator=_setting(positive_number))
    jitter: float = attrs.field(default=0.5, validator=_setting(non_negative_number))
    max_malformed_retries: int = attrs.field(default=2, validator=_setting(non_negative_int))
    max_retry_after: float = attrs.field(default=300.0, validator=_setting(positive_number))
    unreachable_after: int = attrs.field(default=3, validator=_setting(positive_int))
    unanswered_after: int = attrs.field(default=8, validator=_setting(positive_int))

    def __attrs_post_init__(self) -> None:
        if self.deadline is None and self.max_attempts is None:
            raise ConfigError(
                "run setting retry: give a deadline or max_attempts (with neither, a call that "
                "keeps failing would be retried forever)"
            )


def _limits(instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is None or isinstance(value, Limits):
        return
    if isinstance(value, Mapping) and all(
        isinstance(k, str) and isinstance(v, Limits) for k, v in value.items()
    ):
        return
    raise ConfigError(
        "run setting limits must be a ctxeval.Limits, or a mapping from resource name to Limits "
        f"(the key 'default' for the others), got {value!r}"
    )


def _journal(instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and not isinstance(value, (str, os.PathLike)):
        raise ConfigError(f"run setting journal must be a path or None, got {value!r}")


def _on_progress(instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is None:
        return
    if not callable(value):
        raise ConfigError(
            f"run setting on_progress must be callable or None, got {value!r}: it is called with "
            "one ctxeval.Progress"
        )
    try:
        signature = inspect.signature(value)
    except (TypeError, ValueError):  # a builtin or extension whose signature cannot be read
        return
    try:
        signature.bind(object())
    except TypeError:
        raise ConfigError(
            f"run setting on_progress must take exactly one positional argument (it is called "
            f"with one ctxeval.Progress), but {_callable_name(value)} has the signature "
            f"{signature}"
        ) from None


def _callable_name(value: Any) -> str:
    name = getattr(value, "__qualname__", None) or getattr(value, "__name__", None)
    return repr(name) if isinstance(name, str) else repr(value)


def _cache(instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and not isinstance(value, Cache):
        raise ConfigError(
            f"run setting cache must have get(key) and set(key, value) (a ctxeval cache: "
            f"ctxeval._calls.cache.SQLiteCache(path) or MemoryCache()), got {value!r}; pass "
            "None for no cache"
        )


def _shared(instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and not isinstance(value, SharedLimits):
        raise ConfigError(
            "run setting shared_limits must have async acquire() and release() and plain "
            f"pause() and spend() (ctxeval._calls.limits.SharedLimits), got {value!r}"
        )


def _retry(instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, RetryPolicy):
        raise ConfigError(f"run setting retry must be a ctxeval.RetryPolicy, got {value!r}")


def _to_retry(value: Any) -> Any:
    return RetryPolicy() if value is None else value


_RUNNER_OPTIONS = frozenset({"workers", "part_size", "address", "batch_size", "cpus_per_worker"})
"""Options of the shipped runners, which a user may pass to ``evaluate`` by mistake."""


@attrs.frozen(kw_only=True)
class RunSettings:
    """Everything about *how* a run goes (not *what* it scores), validated when built.

    Attributes:
        limits: the limits of every resource, or per resource name (see
            :class:`~ctxeval.Limits`; the key ``"default"`` applies to resources not named);
            default: 16 calls in flight per resource.
        max_concurrency: shortcut for ``limits=Limits(max_concurrency=...)``.
        retry: the retry policy for failed calls (see :class:`RetryPolicy`).
        timeout: seconds one call attempt may take (None: no limit; default 60). A call's
            attempts together are bounded by ``retry.deadline``.
        samples_in_flight: samples being worked on at once; bounds memory on large inputs.
        journal: a file to append each finished row to, so an interrupted run can resume.
        resume: reuse the ``ok`` and ``undefined`` rows of ``journal`` (error rows are redone).
        on_progress: called with a :class:`~ctxeval.Progress` at most every 0.1 s and at the end
            (a callable taking one positional argument).
        cache: a cache handed to plugins through the run context, with ``get(key)`` and
            ``set(key, value)`` (:class:`ctxeval._calls.cache.Cache`, e.g.
            :class:`~ctxeval._calls.cache.SQLiteCache`); None for no cache.
        max_cost_usd: stop taking new samples once the run has spent this much (the samples
            already started finish, and :class:`~ctxeval.BudgetExceededError` is raised; with a
            journal, the run can be resumed).
        metric_timeout: seconds one metric may take on one sample, retries included, before its
            row becomes an ``error`` (a plugin that hangs cannot hold the run). Synchronous
            plugin calls (``score``, ``score_batch``) are made in the run's worker thread and cut
            there, within 1.5 x the timeout (:mod:`ctxeval._run.worker`). None: no limit, and those
            calls are made in the caller's thread.
        lenient: a sample that cannot be read (a value of the wrong type, text that is not
            valid Unicode, an absurd ID, a duplicate id) becomes one ``error`` row per metric
            that names the field and the reason, and the run goes on; without it (the default)
            the first one stops the run with :class:`~ctxeval.DataError`.
        shared_limits: limits shared with other processes
            (:class:`~ctxeval.runners.SharedLimits`, e.g. ``ctxeval_ray``'s budget actor):
            the calls in flight, the rates, the pauses after a ``Retry-After`` and the cost
            cap are then counted across all of them.
    """

    limits: Limits | Mapping[str, Limits] | None = attrs.field(default=None, validator=_limits)
    max_concurrency: int | None = attrs.field(
        default=None, validator=_setting(optional(positive_int))
    )
    retry: RetryPolicy = attrs.field(factory=RetryPolicy, converter=_to_retry, validator=_retry)
    timeout: float | None = attrs.field(default=60.0, validator=_setting(optional_positive_number))
    samples_in_flight: int = attrs.field(default=256, validator=_setting(positive_int))
    journal: str | os.PathLike[str] | None = attrs.field(default=None, validator=_journal)
    resume: bool = attrs.field(default=False, validator=_setting(boolean))
    on_progress: Callable[[Progress], object] | None = attrs.field(
        default=None, validator=_on_progress, eq=False, repr=False
    )
    cache: Cache | None = attrs.field(default=None, validator=_cache, repr=False)
    max_cost_usd: float | None = attrs.field(
        default=None, validator=_setting(optional(non_negative_number))
    )
    metric_timeout: float | None = attrs.field(
        default=3600.0, validator=_setting(optional_positive_number)
    )
    lenient: bool = attrs.field(default=False, validator=_setting(boolean))
    shared_limits: SharedLimits | None = attrs.field(
        default=None, validator=_shared, eq=False, repr=False
    )

    def __attrs_post_init__(self) -> None:
        if self.max_concurrency is not None and self.limits is not None:
            raise ConfigError("give either limits= or max_concurrency=, not both")
        if self.resume and self.journal is None:
            raise ConfigError("resume=True needs journal= (the journal of the run to resume)")

    @property
    def resource_limits(self) -> dict[str, Limits]:
        """The limits per resource name, with a ``"default"`` entry for the others."""
        if self.max_concurrency is not None:
            return {"default": Limits(max_concurrency=self.max_concurrency)}
        if self.limits is None or isinstance(self.limits, Limits):
            return {"default": self.limits or Limits()}
        limits = dict(self.limits)
        limits.setdefault("default", Limits())
        return limits

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The names of the settings."""
        return tuple(f.name for f in attrs.fields(cls))

    @classmethod
    def build(cls, settings: RunSettings | None = None, /, **overrides: Any) -> RunSettings:
        """``settings`` (or the defaults) with ``overrides`` in place of the same fields.

        Raises:
            ConfigError: a name is not a setting (the message suggests the closest one), or a
                value is bad.
        """
        if settings is not None and not isinstance(settings, RunSettings):
            raise ConfigError(f"settings must be a ctxeval.RunSettings, got {settings!r}")
        unknown = [name for name in overrides if name not in cls.names()]
        if unknown:
            hints = []
            for name in unknown:
                close = difflib.get_close_matches(name, cls.names(), n=1)
                if name in _RUNNER_OPTIONS:
                    hints.append(
                        f"{name!r} (an option of the runner, not of the run: pass "
                        f"runner=ctxeval.runners.get_runner('processes', {name}=...))"
                    )
                    continue
                hints.append(repr(name) + (f" (did you mean {close[0]!r}?)" if close else ""))
            raise ConfigError(
                f"unknown run setting {', '.join(hints)}; the settings are: "
                f"{', '.join(cls.names())}"
            )
        if settings is None:
            return cls(**overrides)
        if not overrides:
            return settings
        if "max_concurrency" in overrides and "limits" not in overrides:
            overrides["limits"] = None  # the shortcut replaces the limits it overrides
        return attrs.evolve(settings, **overrides)


class RunOptions(TypedDict, total=False):
    """The fields of :class:`RunSettings` as keyword arguments of :func:`~ctxeval.evaluate`,
    :func:`~ctxeval.aevaluate` and :func:`~ctxeval.stream` (``**overrides``), typed so that an
    IDE completes and checks them (#57). :class:`RunSettings` stays the one source of truth:
    its fields are checked when a run starts (:meth:`RunSettings.build`), and a test keeps
    these names and types equal to its fields."""

    limits: Limits | Mapping[str, Limits] | None
    max_concurrency: int | None
    retry: RetryPolicy | None
    timeout: float | None
    samples_in_flight: int
    journal: str | os.PathLike[str] | None
    resume: bool
    on_progress: Callable[[Progress], object] | None
    cache: Cache | None
    max_cost_usd: float | None
    metric_timeout: float | None
    lenient: bool
    shared_limits: SharedLimits | None
