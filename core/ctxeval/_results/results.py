"""What a metric returns: :class:`MetricResult`, with its :class:`Status` and :class:`Usage`.

A result is checked when it is built, so a result that breaks the score policy cannot exist:
an ``ok`` result has a finite score in [0, 1]; an ``undefined`` or ``error`` result has no score
and says why in ``reason``.
"""

from __future__ import annotations

import enum
import json
import math
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final

import attrs

from ctxeval._errors import InvalidResultError
from ctxeval._plugins.validators import non_negative_int, non_negative_number, optional

__all__ = ["NO_USAGE", "LazyDetails", "MetricResult", "Status", "Usage", "ok_row", "plain_details"]


class Status(str, enum.Enum):
    """The outcome of scoring one sample with one metric."""

    OK = "ok"
    """A score was computed."""
    UNDEFINED = "undefined"
    """The metric has no value for this sample (e.g. nothing to recall); ``reason`` says why."""
    ERROR = "error"
    """Scoring failed (bad input, a failing plugin, an LLM that never answered); see ``reason``."""

    def __str__(self) -> str:
        return self.value


_optional_cost = optional(non_negative_number)


@attrs.frozen(slots=True)
class Usage:
    """What scoring cost: requests, retries, tokens, money and cache hits.

    ``cost_usd`` is ``None`` when the price of a model is unknown; it is never guessed. Usages
    add up with ``+``; a sum has a cost only if every part has one (or costs nothing).
    """

    requests: int = 0
    """LLM requests sent over the network (each retry attempt counts)."""
    retries: int = 0
    """Attempts that were retries of an earlier, failed attempt."""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = 0.0
    """Cost in US dollars from the local price table, or ``None`` when unknown."""
    cache_hits: int = 0
    """Answers served from the on-disk cache instead of the network."""

    def __attrs_post_init__(self) -> None:
        # Checked here, not by a validator per field: every LLM request builds a usage or two,
        # and one check of the usual case (whole numbers >= 0, a finite cost or None) costs a
        # sixth of six validators. The fields' own validators say what is wrong otherwise.
        cost = self.cost_usd
        if (
            type(self.requests) is int
            and type(self.retries) is int
            and type(self.prompt_tokens) is int
            and type(self.completion_tokens) is int
            and type(self.cache_hits) is int
            and min(self.requests, self.retries, self.prompt_tokens) >= 0
            and min(self.completion_tokens, self.cache_hits) >= 0
            and (cost is None or (type(cost) is float and 0.0 <= cost < math.inf))
        ):
            return
        for field in attrs.fields(Usage):
            check = _optional_cost if field.name == "cost_usd" else non_negative_int
            check(self, field, getattr(self, field.name))

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        if self.cost_usd is None or other.cost_usd is None:
            cost: float | None = None
        else:
            cost = self.cost_usd + other.cost_usd
            if cost == math.inf:  # (two huge costs): refused as any cost that is not finite
                return Usage(cost_usd=cost)
        # the sum of two checked usages needs no check (a request adds a few): built directly
        total = _new_usage(Usage)
        _set = object.__setattr__
        _set(total, "requests", self.requests + other.requests)
        _set(total, "retries", self.retries + other.retries)
        _set(total, "prompt_tokens", self.prompt_tokens + other.prompt_tokens)
        _set(total, "completion_tokens", self.completion_tokens + other.completion_tokens)
        _set(total, "cost_usd", cost)
        _set(total, "cache_hits", self.cache_hits + other.cache_hits)
        return total

    @property
    def is_zero(self) -> bool:
        """True when nothing was spent and nothing was looked up."""
        return self == _ZERO

    def to_dict(self) -> dict[str, Any]:
        """The usage as a plain JSON-ready dict."""
        return {
            "requests": self.requests,
            "retries": self.retries,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cost_usd": self.cost_usd,
            "cache_hits": self.cache_hits,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Usage:
        """Build a usage from :meth:`to_dict`'s output (missing keys count as zero)."""
        if not data or (data == _ZERO_DICT and list(map(type, data.values())) == _ZERO_TYPES):
            return _ZERO  # most rows (no LLM): the one zero usage, as checked as the others

        return cls(
            requests=data.get("requests", 0),
            retries=data.get("retries", 0),
            prompt_tokens=data.get("prompt_tokens", 0),
            completion_tokens=data.get("completion_tokens", 0),
            cost_usd=data.get("cost_usd", 0.0),
            cache_hits=data.get("cache_hits", 0),
        )


_ZERO = Usage()
_new_usage = object.__new__
NO_USAGE = _ZERO
_ZERO_DICT: Final = _ZERO.to_dict()
_ZERO_TYPES: Final = [type(value) for value in _ZERO_DICT.values()]


def _who(result: MetricResult) -> str:
    parts = []
    if result.metric:
        parts.append(f"metric {result.metric!r}")
    if result.sample_id:
        parts.append(f"sample {result.sample_id!r}")
    return ", ".join(parts) + ": " if parts else ""


def _check_result(result: MetricResult) -> None:
    status, score, reason = result.status, result.score, result.reason
    if status is Status.OK and type(score) is float and 0.0 <= score <= 1.0:
        return  # the common case, checked first: this runs for every row
    who = _who(result)
    if status is Status.OK:
        if isinstance(score, bool) or not isinstance(score, (int, float)):
            raise InvalidResultError(
                f"{who}an 'ok' result needs a float score, got {type(score).__name__} {score!r}"
            )
        if not (0.0 <= score <= 1.0):  # also rejects NaN
            raise InvalidResultError(
                f"{who}score {score!r} is outside [0, 1]; a metric must never produce such a score"
            )
    else:
        if score is not None:
            raise InvalidResultError(f"{who}a {status.value!r} result has no score, got {score!r}")
        if not reason:
            raise InvalidResultError(f"{who}a {status.value!r} result must say why in 'reason'")


def _to_status(value: Status | str) -> Status:
    return value if isinstance(value, Status) else Status(value)


def _to_score(value: float | None) -> float | None:
    # ints (0 and 1) become floats so that every score has one type; bools are refused later.
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return float(value)
    return value


@attrs.frozen(slots=True)
class MetricResult:
    """The score of one sample by one metric, with its evidence and its cost.

    Build results with :meth:`ok`, :meth:`undefined` and :meth:`error`; the constructor
    checks the score policy (``ok`` means a score in [0, 1], never NaN; other statuses carry a
    reason and no score) and raises :class:`~ctxeval.InvalidResultError` otherwise.

    ``sample_id`` and ``metric`` are filled in by the runner; a metric leaves them empty.
    """

    status: Status = attrs.field(converter=_to_status)
    score: float | None = attrs.field(default=None, converter=_to_score)
    reason: str | None = None
    """Why the result is undefined or an error, in words; optional for ``ok``."""
    details: Mapping[str, Any] = attrs.field(factory=dict)
    """The evidence: extracted units, per-item verdicts with index and reason, matched pairs."""
    usage: Usage = attrs.field(factory=Usage)
    sample_id: str = ""
    metric: str = ""

    def __attrs_post_init__(self) -> None:
        _check_result(self)

    @classmethod
    def ok(
        cls, score: float, *, details: Mapping[str, Any] | None = None, usage: Usage = NO_USAGE
    ) -> MetricResult:
        """A computed score in [0, 1]."""
        if cls is MetricResult and type(score) is float and 0.0 <= score <= 1.0:
            # the common case, built directly (every row of a large run passes here)
            return _make(Status.OK, score, None, {} if details is None else details, usage, "", "")
        return cls(Status.OK, score, None, {} if details is None else details, usage)

    @classmethod
    def undefined(
        cls, reason: str, *, details: Mapping[str, Any] | None = None, usage: Usage = NO_USAGE
    ) -> MetricResult:
        """No value exists for this sample (e.g. there is nothing to recall)."""
        if cls is MetricResult and type(reason) is str and reason:
            return _make(
                Status.UNDEFINED, None, reason, {} if details is None else details, usage, "", ""
            )
        return cls(Status.UNDEFINED, None, reason, {} if details is None else details, usage)

    @classmethod
    def error(
        cls, reason: str, *, details: Mapping[str, Any] | None = None, usage: Usage = NO_USAGE
    ) -> MetricResult:
        """Scoring failed; ``reason`` says how (exception type and message)."""
        if cls is MetricResult and type(reason) is str and reason:
            return _make(
                Status.ERROR, None, reason, {} if details is None else details, usage, "", ""
            )
        return cls(Status.ERROR, None, reason, {} if details is None else details, usage)

    def labelled(self, sample_id: str, metric: str) -> MetricResult:
        """This result, labelled with its sample and metric (the runner calls this).

        The result was checked when it was built, so the copy is not checked again.
        """
        return _make(
            self.status, self.score, self.reason, self.details, self.usage, sample_id, metric
        )

    def with_usage(self, usage: Usage) -> MetricResult:
        """This result with ``usage`` in place of its own."""
        return attrs.evolve(self, usage=usage)

    def with_details(self, **more: Any) -> MetricResult:
        """This result with ``more`` added to its details."""
        return attrs.evolve(self, details={**dict(self.details or {}), **more})

    @property
    def is_ok(self) -> bool:
        return self.status is Status.OK

    def to_dict(self) -> dict[str, Any]:
        """The row as written to ``results.jsonl`` (details a plugin nested beyond reason are
        replaced by a note saying so)."""
        return {
            "sample_id": self.sample_id,
            "metric": self.metric,
            "status": self.status.value,
            "score": self.score,
            "reason": self.reason,
            "details": plain_details(self.details),
            "usage": self.usage.to_dict(),
        }

    def to_json(self) -> str:
        """:meth:`to_dict` as one line of JSON (UTF-8 text, no newline), as written to
        ``results.jsonl`` and journals."""
        row = self.to_dict()
        try:
            return _dumps(row)
        except (RecursionError, ValueError) as exc:  # details JSON cannot hold
            row["details"] = {"unwritable": f"details could not be written as JSON: {exc}"}
            return _dumps(row)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MetricResult:
        """Rebuild a result from :meth:`to_dict`'s output (the policy is checked again)."""
        return cls(
            status=data["status"],
            score=data.get("score"),
            reason=data.get("reason"),
            details=data.get("details") or {},
            usage=Usage.from_dict(data.get("usage") or {}),
            sample_id=str(data.get("sample_id", "")),
            metric=str(data.get("metric", "")),
        )


def _slot_setters() -> tuple[Callable[[MetricResult, Any], None], ...]:
    return tuple(getattr(MetricResult, f.name).__set__ for f in attrs.fields(MetricResult))


(_status, _score, _reason, _details, _usage, _sample_id, _metric) = _slot_setters()


def _make(
    status: Status,
    score: float | None,
    reason: str | None,
    details: Mapping[str, Any],
    usage: Usage,
    sample_id: str,
    metric: str,
) -> MetricResult:
    """A result from values already converted and checked, built without ``__init__``
    (internal: large runs build every row here, at a third of the cost)."""
    new = object.__new__(MetricResult)
    _status(new, status)
    _score(new, score)
    _reason(new, reason)
    _details(new, details)
    _usage(new, usage)
    _sample_id(new, sample_id)
    _metric(new, metric)
    return new


def ok_row(
    score: float,
    *,
    details: Mapping[str, Any],
    sample_id: str,
    metric: str,
    usage: Usage = NO_USAGE,
) -> MetricResult:
    """An ``ok`` row already labelled with its sample and metric: the fast path of batch
    scorers. The score is checked as :class:`MetricResult` checks it; a valid float score is
    built without ``__init__``, at a third of the cost."""
    if type(score) is float and 0.0 <= score <= 1.0:
        return _make(Status.OK, score, None, details, usage, sample_id, metric)
    return MetricResult(Status.OK, score, None, details, usage, sample_id, metric)


class LazyDetails(Mapping[str, Any]):
    """A result's ``details``, computed on first use by ``compute(*args)``.

    Batch scorers use it to leave the evidence of a row (the lists of relevant and missing
    items, say) uncomputed until someone reads it, which on large runs is most of the cost
    of a row. It is a read-only mapping equal to the dict it stands for.
    """

    __slots__ = ("_args", "_compute", "_value")

    def __init__(self, compute: Callable[..., Mapping[str, Any]], *args: Any) -> None:
        self._compute = compute
        self._args = args
        self._value: Mapping[str, Any] | None = None

    def _get(self) -> Mapping[str, Any]:
        if self._value is None:
            self._value = self._compute(*self._args)
            self._args = ()
        return self._value

    def __getitem__(self, key: str) -> Any:
        return self._get()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._get())

    def __len__(self) -> int:
        return len(self._get())

    def __eq__(self, other: object) -> bool:
        return self._get() == other

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(self._get())

    def __reduce__(self) -> tuple[Any, ...]:
        return (dict, (dict(self._get()),))


def plain_details(details: Mapping[str, Any]) -> Any:
    """A row's details as :meth:`MetricResult.to_dict` gives them: JSON-ready values (details
    a plugin nested beyond reason replaced by a note saying so)."""
    try:
        return _plain(details)
    except RecursionError:
        return {"unwritable": "details nested too deeply to be written as JSON"}


def json_line(data: Any) -> str:
    """``data`` as one line of JSON that can always be written: orjson, else json; what JSON
    has no word for (a plugin's set or object) as its repr, a lone surrogate escaped."""
    return _dumps(data)


def _dumps(data: Any) -> str:
    """One line of JSON: orjson (several times faster), or json for what orjson refuses
    (integers beyond 64 bits)."""
    import orjson

    try:
        return orjson.dumps(data).decode("utf-8")
    except TypeError:  # orjson's JSONEncodeError too: a big int, a surrogate, a foreign type
        pass
    try:
        return json.dumps(data, ensure_ascii=False).encode("utf-8").decode("utf-8")
    except (TypeError, ValueError, UnicodeEncodeError):
        # what a plugin put in details that JSON has no word for: its repr, all ASCII
        return json.dumps(data, ensure_ascii=True, default=repr)


_ATOMS: frozenset[type] = frozenset((str, int, bool, type(None)))


def _plain(value: Any) -> Any:
    """Turn details into JSON-ready values (tuples to lists, attrs classes to dicts)."""
    kind = type(value)  # the common exact types first: this runs for every value of every row
    if kind in _ATOMS:
        return value
    if kind is float:
        return value if math.isfinite(value) else None
    if kind is dict:
        return {k if type(k) is str else str(k): _plain(v) for k, v in value.items()}
    if kind is list or kind is tuple:
        if _ATOMS.issuperset(map(type, value)):  # (IDs, texts: checked at C speed)
            return list(value)
        return [_plain(v) for v in value]
    if kind is LazyDetails:
        return _plain(value._get())
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if attrs.has(type(value)):
        return _plain(attrs.asdict(value, recurse=False))
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, enum.Enum):
        return value.value
    return value
