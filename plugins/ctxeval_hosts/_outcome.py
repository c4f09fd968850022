"""One translation of ctxeval's results for every host, and the session an adapter scores with.

A :class:`~ctxeval.MetricResult` becomes an :class:`Outcome`, which each adapter writes in its
host's type:

* ``ok``: the score (a float in [0, 1]);
* ``undefined``: **no score** (``None``; the host's "not scored", never 0), the reason in the
  comment;
* ``error``: no score, the host's error shape, the reason in the comment.

The translation is the package's one (:mod:`ctxeval_hosts._results`, shared with the MLflow
and DeepEval adapters): the comment is the host's rationale / comment / explanation (the
row's reason, else a one-line account of its evidence); the metadata carries
``ctxeval.status``, ``ctxeval.metric``, the evidence (``ctxeval.verdicts``,
``ctxeval.details``), the judge's provenance (``ctxeval.provenance``) and the usage
(``ctxeval.usage``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

import attrs

import ctxeval
from ctxeval import MetricResult
from ctxeval.plugin import Metric
from ctxeval.plugin.hooks import NeedsLLM
from ctxeval_hosts._results import translate
from ctxeval_hosts._rowmap import (
    FieldError,
    FieldMap,
    Path,
    metric_names,
    metrics_of,
    required_fields,
)
from ctxeval_hosts._shared import SharedSession

__all__ = ["Adapter", "Outcome", "outcome_of", "outcome_of_error"]


@attrs.frozen
class Outcome:
    """One metric's result for one row, as every host adapter writes it."""

    metric: str
    status: str
    """``"ok"``, ``"undefined"`` (not scored) or ``"error"``."""
    score: float | None
    comment: str
    metadata: dict[str, Any]

    @property
    def scored(self) -> bool:
        return self.status == "ok"


def outcome_of(result: MetricResult, metric: str) -> Outcome:
    """``result`` (the row of ``metric``) through the package's one translation
    (:func:`ctxeval_hosts._results.translate`)."""
    host = translate(result.labelled(result.sample_id, metric))
    if host.status == "ok":
        comment = host.rationale or f"{metric} = {host.score:.4g}"
    else:
        comment = host.error or host.rationale or host.status
    return Outcome(metric, host.status, host.score, comment, host.metadata)


def outcome_of_error(metric: str, reason: str) -> Outcome:
    """The error of a row that never reached the metric (a field missing in the host's row)."""
    return outcome_of(MetricResult.error(reason), metric)


class Adapter:
    """The session, the metrics and the field map behind one host adapter object.

    Built once per adapter object (an Inspect scorer, a LangSmith evaluator...) and shared by
    every row the host scores with it, from any thread or loop, so the rows share one budget,
    one cache and one meter. ``session=`` shares a session between adapters (its metrics must
    include these): a :class:`ctxeval.Session` (each call scores all its metrics), or a
    :class:`~ctxeval_hosts.SharedSession` (``SharedSession.build([...])``), whose
    adapters score a row once between them, each taking its own metrics' rows. Otherwise the
    adapter builds its own session from ``llm``, ``registry``, ``settings`` and ``overrides``
    (what :func:`ctxeval.evaluate` takes) and :meth:`close` closes it.
    """

    def __init__(
        self,
        metrics: str | Metric | Sequence[str | Metric],
        fields: FieldMap,
        *,
        session: Any = None,
        llm: Any = None,
        registry: ctxeval.Registry | None = None,
        settings: ctxeval.RunSettings | None = None,
        overrides: Mapping[str, Any] | None = None,
    ) -> None:
        built = metrics_of(metrics, registry)
        self.names = metric_names(built)
        self.required = required_fields(built)
        self.needs_llm = any(isinstance(m, NeedsLLM) and bool(m.needs_llm) for m in built)
        """Whether a metric calls an LLM (the host's "llm" / "code" kind of evaluator)."""
        self.fields = fields
        if session is None:
            session = ctxeval.Session(
                built, llm=llm, registry=registry, settings=settings, **dict(overrides or {})
            )
            self._owned = True
        else:
            if llm is not None or settings is not None or overrides:
                raise ctxeval.ConfigError(
                    f"{fields.host}: give either session= or llm/settings (the session "
                    "already has its own)"
                )
            self._owned = False
        have = tuple(session.metrics)
        missing = [name for name in self.names if name not in have]
        if missing:
            raise ctxeval.ConfigError(
                f"{fields.host}: the session scores {list(have)}, not {missing}: build the "
                "session with these metrics"
            )
        self._at = [have.index(name) for name in self.names]
        self._shared = session if isinstance(session, SharedSession) else None
        if self._shared is not None:
            for name in self.names:
                self._shared.want(name)
            # one row is one sample for every adapter of the table: read what all need
            everything = metrics_of(list(have), registry)
            self.required = required_fields([*built, *everything])
        self.session = session

    @classmethod
    def for_host(
        cls,
        host: str,
        metrics: str | Metric | Sequence[str | Metric],
        defaults: Mapping[str, Path],
        fields: Mapping[str, Path] | None = None,
        *,
        one: str | None = None,
        example: str = "PLACE.KEY",
        json_lists: bool = False,
        session: Any = None,
        llm: Any = None,
        registry: ctxeval.Registry | None = None,
        settings: ctxeval.RunSettings | None = None,
        overrides: Mapping[str, Any] | None = None,
    ) -> Adapter:
        """The adapter of a host's factory: the host's field map (its ``defaults``, the
        user's ``fields`` over them) and the session (shared, or built from ``llm``,
        ``registry``, ``settings`` and ``overrides``).

        Args:
            host: how messages name the host's object ("LangSmith evaluator").
            one: when the host's object gives one score, what its message calls it ("an
                autoevals scorer gives one score"): more than one metric is refused.
            example, json_lists: as :class:`~ctxeval_hosts._rowmap.FieldMap` takes them.

        Raises:
            ConfigError: a field or a metric the host cannot take, or ``session=`` together
                with ``llm`` / ``settings``.
        """
        fieldmap = FieldMap(host, defaults, dict(fields or {}), example, json_lists)
        adapter = cls(
            metrics,
            fieldmap,
            session=session,
            llm=llm,
            registry=registry,
            settings=settings,
            overrides=overrides,
        )
        if one is not None and len(adapter.names) != 1:
            adapter.close()  # (the session it built)
            raise ctxeval.ConfigError(f"{one}: give one metric, not {list(adapter.names)}")
        return adapter

    def sample(self, places: Mapping[str, Any], sample_id: str | None = None) -> dict[str, Any]:
        sample = self.fields.sample(places, self.required)
        if sample_id is not None:
            sample["id"] = sample_id
        return sample

    def _pick(self, results: Sequence[MetricResult]) -> list[Outcome]:
        return [
            outcome_of(results[at], name) for at, name in zip(self._at, self.names, strict=True)
        ]

    def _failed(self, exc: Exception) -> list[Outcome]:
        return [outcome_of_error(name, str(exc)) for name in self.names]

    def score(self, places: Mapping[str, Any], sample_id: str | None = None) -> list[Outcome]:
        """Score one host row (from any thread): one outcome per metric, in order."""
        try:
            sample = self.sample(places, sample_id)
        except FieldError as exc:
            return self._failed(exc)
        try:
            if self._shared is not None:
                made = ctxeval.Sample(**sample)
                return [outcome_of(self._shared.result(made, n), n) for n in self.names]
            return self._pick(self.session.score(sample))
        except ctxeval.DataError as exc:  # the sample itself is malformed: this row's error
            return self._failed(exc)

    async def ascore(
        self, places: Mapping[str, Any], sample_id: str | None = None
    ) -> list[Outcome]:
        """:meth:`score` from a running event loop (asyncio or trio)."""
        try:
            sample = self.sample(places, sample_id)
        except FieldError as exc:
            return self._failed(exc)
        try:
            if self._shared is not None:
                made = ctxeval.Sample(**sample)
                return [outcome_of(await self._shared.aresult(made, n), n) for n in self.names]
            return self._pick(await self.session.ascore(sample))
        except ctxeval.DataError as exc:
            return self._failed(exc)

    def close(self) -> None:
        """Close the session if this adapter built it (a shared session is its owner's)."""
        if self._owned:
            self.session.close()


_Holder = TypeVar("_Holder", bound="HoldsAdapter")


class HoldsAdapter:
    """A host object built on an :class:`Adapter` (a LangSmith evaluator, an autoevals scorer,
    a promptfoo assertion): :meth:`close` closes the session it built, and so does leaving a
    ``with`` block."""

    adapter: Adapter

    def close(self) -> None:
        self.adapter.close()

    def __enter__(self: _Holder) -> _Holder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
