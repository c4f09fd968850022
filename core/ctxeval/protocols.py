"""The three kinds of plugin, as protocols: :class:`Extractor`, :class:`Matcher`, :class:`Metric`.

Every metric of the seeds is one formula over two steps: reference *units* (extracted from a
text, or given as reference contexts or IDs) are *matched* against the retrieved items, and
the verdicts go into a recall fraction, a precision fraction or an average precision
(:mod:`ctxeval.policy`).

* An :class:`Extractor` turns many texts into units at once (batch-first, so that spaCy can
  run ``nlp.pipe`` and an LLM can share a prompt).
* A :class:`Matcher` decides, for each item, whether it is supported by (or relevant to) a
  list of candidates, returning one :class:`Verdict` per item.
* A :class:`Metric` declares the sample fields it requires and scores one sample through a
  :class:`RunContext`, which gives it the scheduler's services. A :class:`DeterministicMetric`
  (no I/O) also scores synchronously, and a :class:`BatchMetric` many samples per call.

A plugin is any object with these attributes; it does not have to inherit from anything.
:mod:`ctxeval.base` has convenience base classes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

import attrs

if TYPE_CHECKING:
    from .registry import Registry
    from .results import MetricResult, Usage
    from .sample import Sample

__all__ = [
    "BatchMetric",
    "DeterministicMetric",
    "Extractor",
    "Matcher",
    "Metric",
    "RunContext",
    "Unit",
    "Verdict",
]

T = TypeVar("T")


@attrs.frozen(slots=True)
class Unit:
    """One thing extracted from a text: an entity, a sentence or a statement.

    Attributes:
        text: the unit as it appears (or as the extractor phrased it).
        label: its kind, e.g. ``PERSON`` or ``DATE`` for an entity; None when not typed.
        key: the normalised form units are compared by (case, spacing, punctuation folded);
            defaults to ``text``.
    """

    text: str
    label: str | None = None
    key: str = attrs.field(default=attrs.Factory(lambda self: self.text, takes_self=True))


@attrs.frozen(slots=True)
class Verdict:
    """A matcher's decision for one item.

    Attributes:
        matched: whether the item is supported by / relevant to the candidates.
        score: the similarity or confidence behind the decision, in [0, 1], when there is one.
        evidence: index of the candidate that supports the item (the best one), if any.
        reason: the matcher's explanation, when it gives one (an LLM judge does).
    """

    matched: bool
    score: float | None = None
    evidence: int | None = None
    reason: str | None = None


@runtime_checkable
class RunContext(Protocol):
    """The services a run gives to the plugins it calls (one context per metric and sample).

    A plugin never owns a semaphore or a retry loop: it passes each request to a shared
    resource to :meth:`call` and its blocking work to :meth:`run_cpu`, and the run applies its
    limits, timeouts, retries and accounting.
    """

    @property
    def registry(self) -> Registry:
        """The registry this run resolves plugin names in."""
        ...

    @property
    def llm(self) -> Any:
        """The run's LLM configuration (``llm=`` of :func:`ctxeval.evaluate`), or None."""
        ...

    @property
    def cache(self) -> Any:
        """The run's cache, or None."""
        ...

    async def call(
        self,
        func: Callable[[], Awaitable[T]],
        *,
        resource: str = "default",
        tokens: float = 0.0,
        timeout: float | None = None,
    ) -> T:
        """Await ``func()`` (one request) under the shared limits of ``resource``.

        Transient failures (429, 5xx, timeouts, malformed answers up to a cap) are retried with
        backoff by calling ``func`` again; fatal ones (authentication, bad request) are raised
        at once.
        """
        ...

    async def run_cpu(self, func: Callable[..., T], *args: Any) -> T:
        """Run blocking ``func(*args)`` off the event loop, under the run's CPU limit."""
        ...

    def add_usage(self, usage: Usage) -> None:
        """Count tokens, cost and cache hits against the current row (requests are counted
        by :meth:`call`)."""
        ...

    def shared(self, key: str, factory: Callable[[], T]) -> T:
        """A run-wide object (an HTTP client, a loaded model), made once by ``factory``;
        objects with ``aclose()`` are closed when the run ends."""
        ...


@runtime_checkable
class Extractor(Protocol):
    """Turns texts into units, many texts at a time."""

    name: str

    async def extract(self, texts: Sequence[str], ctx: RunContext) -> list[list[Unit]]:
        """Return the units of each text, one list per text, in the order of ``texts``."""
        ...


@runtime_checkable
class Matcher(Protocol):
    """Decides, for each item, whether the candidates support it."""

    name: str

    async def match(
        self, items: Sequence[str], candidates: Sequence[str], ctx: RunContext
    ) -> list[Verdict]:
        """Return one verdict per item, in the order of ``items``."""
        ...


@runtime_checkable
class Metric(Protocol):
    """Scores one sample.

    Attributes:
        name: the name its rows carry in the results (unique within one evaluation).
        requires: the :class:`~ctxeval.Sample` fields it needs; a sample lacking one gets an
            ``error`` row without the metric being called.
    """

    name: str
    requires: tuple[str, ...]

    async def ascore(self, sample: Sample, ctx: RunContext) -> MetricResult:
        """Score ``sample``; return a :class:`~ctxeval.MetricResult` (never raise for bad data)."""
        ...


@runtime_checkable
class DeterministicMetric(Metric, Protocol):
    """A metric that needs no I/O: it also scores synchronously, without a run context.

    The runner calls :meth:`score` directly, which saves a task per sample on large inputs.
    """

    def score(self, sample: Sample) -> MetricResult:
        """Score ``sample`` at once."""
        ...


@runtime_checkable
class BatchMetric(DeterministicMetric, Protocol):
    """A deterministic metric that also scores many samples in one call (optional, for speed).

    When every metric of a run is deterministic, the runner hands them samples in chunks and
    calls :meth:`score_batch` where a metric has it, which saves the per-call overhead on large
    inputs (the built-in ID and string metrics have it).
    """

    def score_batch(self, samples: Sequence[Sample]) -> Sequence[MetricResult]:
        """Score ``samples`` (each has every field in ``requires``): one result per sample, in
        order, each as :meth:`score` would give it.

        If it raises, or returns a different number of results, the runner scores the chunk
        again sample by sample with :meth:`score`, so that a failure stays with its sample.
        """
        ...
