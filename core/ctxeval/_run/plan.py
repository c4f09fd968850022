"""The run plan: everything a runner needs to score a run, decided once, before any row.

Every entry point (:func:`ctxeval.evaluate`, :func:`~ctxeval.aevaluate`,
:func:`~ctxeval.stream`, the command line) builds one :class:`RunPlan` with
:meth:`RunPlan.build` and hands it to a runner (:mod:`ctxeval.runners`). Building it
validates the settings, resolves the metrics once (presets such as ``@ids``, IR names,
duplicate names, required fields), reads and binds people's labels, and reads what an
interrupted run left in its journal (the rows a resume reuses). A wrong argument raises
:class:`~ctxeval.ConfigError` here, before any row.

A plan is a frozen value. :meth:`RunPlan.for_workers` gives the picklable plan a runner sends
to other processes or machines: the same metrics, options and LLM, without what only the
driving process holds (the journal, the progress callback, the cache object).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from ctxeval._data.sample import Sample
from ctxeval._judge.formulas import formulas_of
from ctxeval._judge.labels import Labels
from ctxeval._judge.resolve import resolve_label_metrics
from ctxeval._plugins.metric_names import MetricNames
from ctxeval._plugins.protocols import DeterministicMetric, Metric
from ctxeval._plugins.registry import Registry, default_registry
from ctxeval._results.results import MetricResult
from ctxeval._run.checks import check_metrics_have_llm
from ctxeval._run.journal import Journal, Previous, sample_digest
from ctxeval._run.resolve import resolve_metrics
from ctxeval._run.settings import RunSettings

__all__ = ["RunPlan"]


@attrs.frozen(kw_only=True)
class RunPlan:
    """What a run scores and how: built once by core, executed by a runner.

    Attributes:
        metrics: the run's metrics, resolved and checked, in the order of its rows.
        llm: the LLM of the metrics that need one (None when none does).
        settings: the run's validated :class:`~ctxeval.RunSettings`.
        labels: people's labels, their metric names bound to the run's row names (or None).
        previous: the rows of an interrupted run that a resume reuses, with the digest of
            the sample each scored, by ``(sample_id, metric)`` (empty unless resuming).
        registry: where plugin names are resolved during the run (None: the default
            registry; a plan sent to other processes carries None, and each process uses its
            own default registry).
        metric_names: the index of the metrics' names, built with the plan: labels, gates,
            :func:`~ctxeval.testing.assert_metric`, compare and trust find a metric by any of
            its names there (carried by the run's :class:`~ctxeval.Evaluation`).
    """

    metrics: tuple[Metric, ...]
    llm: Any = None
    settings: RunSettings = attrs.field(factory=RunSettings)
    labels: Labels | None = None
    previous: Mapping[tuple[str, str], tuple[MetricResult, str]] = attrs.field(
        factory=dict, eq=False, repr=False
    )
    registry: Registry | None = attrs.field(default=None, eq=False, repr=False)
    metric_names: MetricNames = attrs.field(
        default=attrs.Factory(lambda plan: MetricNames.of(plan.metrics), takes_self=True),
        eq=False,
        repr=False,
    )

    @classmethod
    def build(
        cls,
        metrics: Sequence[str | Metric],
        *,
        llm: Any = None,
        registry: Registry | None = None,
        settings: RunSettings | None = None,
        labels: Labels | str | os.PathLike[str] | None = None,
        **overrides: Any,
    ) -> RunPlan:
        """The plan of a run of ``metrics``: the arguments of :func:`ctxeval.aevaluate`,
        checked.

        Raises:
            ConfigError: an unknown or misconfigured metric, a name given twice, a bad or
                unknown setting, an LLM metric without an LLM.
            DataError: the labels file or the journal to resume is malformed.
        """
        run_settings = RunSettings.build(settings, **overrides)
        resolved = resolve_metrics(metrics, registry or default_registry())
        check_metrics_have_llm(
            resolved, llm, max_cost_usd=run_settings.max_cost_usd, registry=registry
        )
        names = MetricNames.of(resolved, registry)
        bound = None if labels is None else resolve_label_metrics(labels, names)
        previous: Previous = {}
        if run_settings.journal is not None and run_settings.resume:
            previous = Journal.previous(run_settings.journal, resolved, llm=llm)
        return cls(
            metrics=tuple(resolved),
            llm=llm,
            settings=run_settings,
            labels=bound,
            previous=previous,
            registry=registry,
            metric_names=names,
        )

    @property
    def names(self) -> tuple[str, ...]:
        """The metrics' row names, in order."""
        return tuple(m.name for m in self.metrics)

    @property
    def journaled(self) -> frozenset[str]:
        """The row names of the metrics whose rows the journal keeps: those that call out (an
        LLM, an endpoint), costly to score again. A deterministic metric's rows are scored
        again on resume (the same rows, at no cost), so the journal never holds a copy of
        what ``results.jsonl`` holds."""
        return frozenset(m.name for m in self.metrics if not isinstance(m, DeterministicMetric))

    @property
    def formulas(self) -> dict[str, Any]:
        """Each pipeline metric's formula by row name (people's labels are scored through
        it)."""
        return formulas_of(self.metrics)

    @property
    def resolved_registry(self) -> Registry:
        """The registry of the run: :attr:`registry`, or the default one."""
        return self.registry or default_registry()

    @staticmethod
    def digest(sample: Sample) -> str:
        """A short hash of every field of ``sample``, journaled with its rows: a resume reuses
        a row only for the same sample (give it to :meth:`RowSink.put
        <ctxeval.runners.RowSink.put>` with the rows)."""
        return sample_digest(sample)

    def reusable(self, sample_id: str, metric: str, digest: str) -> MetricResult | None:
        """The row of an interrupted run that a resume reuses for this sample and metric
        (None: score it)."""
        earlier = self.previous.get((sample_id, metric)) if self.previous else None
        return earlier[0] if earlier is not None and earlier[1] == digest else None

    def for_workers(self, **settings: Any) -> RunPlan:
        """This plan as it goes to other processes (picklable): no journal, resume, progress
        callback, cache object or registry, and ``settings`` (any
        :class:`~ctxeval.RunSettings` field, e.g. ``shared_limits=``) in place of the same
        settings. The rows of an interrupted run go along, so a worker reuses them too."""
        worker_settings = attrs.evolve(
            self.settings,
            **{
                "journal": None,
                "resume": False,
                "on_progress": None,
                "cache": None,
                **settings,
            },
        )
        return attrs.evolve(self, settings=worker_settings, registry=None)
