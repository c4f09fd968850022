"""Convenience base classes for plugins (optional: the protocols are what counts).

* :class:`BaseMetric`: an attrs class with a ``name`` option (rows carry it; it defaults to the
  registry name) and the class attributes the registry reads.
* :class:`BaseDeterministicMetric`: for a metric that needs no I/O; write :meth:`score` and
  get :meth:`ascore` for free.
* :class:`Dependency`: an optional module a plugin needs, with its install command, so that a
  missing extra shows the plugin as *unavailable* instead of failing at import.

Plugins import them from :mod:`ctxeval.plugin`. Example, a complete third-party metric::

    import attrs
    from ctxeval.plugin import BaseDeterministicMetric, MetricResult, Sample

    @attrs.frozen(kw_only=True)
    class ContextCount(BaseDeterministicMetric):
        registry_name = "context_count_at_most"
        requires = ("retrieved_contexts",)
        limit: int = 5

        def score(self, sample: Sample) -> MetricResult:
            n = len(sample.retrieved_contexts or ())
            return MetricResult.ok(1.0 if n <= self.limit else 0.0, details={"count": n})
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Final

import attrs

from ctxeval._plugins.protocols import Verdict
from ctxeval._plugins.validators import text

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from ctxeval._data.sample import Sample
    from ctxeval._plugins.protocols import RunContext
    from ctxeval._results.results import MetricResult

__all__ = [
    "BaseDeterministicMatcher",
    "BaseDeterministicMetric",
    "BaseMetric",
    "Dependency",
    "membership_verdicts",
    "options_of",
]


@attrs.frozen(slots=True)
class Dependency:
    """An optional module a plugin needs, and the command that installs it.

    The registry checks it with :func:`importlib.util.find_spec`, without importing it.
    """

    module: str
    install: str


@attrs.frozen(kw_only=True)
class BaseMetric:
    """Base for metrics built as attrs classes; options are the attrs fields.

    Subclasses set the class attributes :attr:`registry_name` and :attr:`requires`, and may set
    :attr:`dependencies`. The ``name`` option renames the rows, so one evaluation can hold the
    same metric twice with different options.
    """

    registry_name: ClassVar[str] = ""
    """The name the metric is registered under."""
    requires: ClassVar[tuple[str, ...]] = ()
    """The sample fields the metric needs."""
    dependencies: ClassVar[tuple[Dependency, ...]] = ()
    """Optional modules the metric needs at run time."""

    name: str = attrs.field(default="", validator=text)
    """The name the result rows carry (default: the registry name, with its parameters)."""

    def __attrs_post_init__(self) -> None:
        if not self.name:  # computed here: it may depend on options declared after it
            object.__setattr__(self, "name", self.default_name())

    def default_name(self) -> str:
        """The row name when ``name`` is not given; metrics with a parameter add it here."""
        return self.registry_name or type(self).__name__

    async def ascore(self, sample: Sample, ctx: RunContext) -> MetricResult:
        raise NotImplementedError(f"{type(self).__name__} does not implement ascore()")


@attrs.frozen(kw_only=True)
class BaseDeterministicMetric(BaseMetric):
    """Base for metrics that need no I/O: implement :meth:`score`."""

    def score(self, sample: Sample) -> MetricResult:
        raise NotImplementedError(f"{type(self).__name__} does not implement score()")

    async def ascore(self, sample: Sample, ctx: RunContext) -> MetricResult:
        return self.score(sample)


class BaseDeterministicMatcher:
    """Base for matchers that need no I/O: implement :meth:`match_now`; :meth:`match` and the
    batch form :meth:`match_batch` (what the deterministic fast path calls) come from it.

    Override :meth:`match_batch` when a faster bulk form exists; it must give the flags of
    :meth:`match_now`.
    """

    __slots__ = ()

    itemwise: ClassVar[bool] = False
    """Set it to True when an item's verdict depends only on that item and the candidates
    (not on the other items judged with it): the fast path then judges the retrieved items
    once for the metrics of a run that cut them at different depths (P@5, MRR...)."""

    membership: ClassVar[bool] = False
    """Set it to True when an item is matched exactly when it is equal to one of the
    candidates (and then ``itemwise`` too): the fast path then finds the flags of both sides
    itself, with set lookups in one pass, for every metric of a run that uses the matcher
    (precision and recall alike), and does not call :meth:`match_batch` (which must give
    those flags; a subclass that changes what matches sets it back to False).

    A matcher that compares each (reference unit, retrieved item) pair by some relation may
    instead define ``match_both_batch(pairs)`` (for each ``(reference units, retrieved
    items)``: the flags of the reference units and those of the retrieved items, as
    :meth:`match_batch` gives each way) and ``both_sides_key()`` (a hashable value, equal
    for matchers that give equal flags so, whichever side they judge): a run's precision
    and recall then compare each pair once (the ``similarity`` matcher does)."""

    def match_now(self, items: Sequence[str], candidates: Sequence[str]) -> list[Verdict]:
        raise NotImplementedError(f"{type(self).__name__} does not implement match_now()")

    def match_batch(self, pairs: Sequence[tuple[Sequence[str], Sequence[str]]]) -> list[list[bool]]:
        """For each ``(items, candidates)``: :meth:`match_now`'s verdicts, as flags."""
        return [[v.matched for v in self.match_now(items, other)] for items, other in pairs]

    async def match(
        self, items: Sequence[str], candidates: Sequence[str], ctx: RunContext
    ) -> list[Verdict]:
        return self.match_now(items, candidates)


def membership_verdicts(
    items: Sequence[str], candidates: Sequence[str], key: Callable[[str], str] = str
) -> list[Verdict]:
    """One verdict per item: matched when some candidate has the same ``key``; the evidence is
    the first such candidate's index, the score 1.0 or 0.0."""
    first: dict[str, int] = {}
    for index, candidate in enumerate(candidates):
        first.setdefault(key(candidate), index)
    verdicts = []
    for item in items:
        where = first.get(key(item))
        verdicts.append(_MISS if where is None else Verdict(True, 1.0, where))
    return verdicts


_MISS: Final = Verdict(False, 0.0, None)
"""The verdict of an item no candidate has (frozen: one object serves every such item)."""


def options_of(factory: Any) -> list[str] | None:
    """The option names a plugin factory accepts, or None when they cannot be told."""
    if isinstance(factory, type) and attrs.has(factory):
        return [f.alias or f.name for f in attrs.fields(factory) if f.init]
    import inspect

    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):
        return None
    names = []
    for parameter in signature.parameters.values():
        if parameter.kind is parameter.VAR_KEYWORD:
            return None
        if parameter.kind in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY):
            names.append(parameter.name)
    return names
