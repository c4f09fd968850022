"""How far to trust a judge: :func:`judge_trust` and the :class:`JudgeTrust` it reports per metric.

From a run's rows (their ``details``: ``flags``, ``votes``, ``provenance``) and, when given,
people's :class:`~ctxeval._judge.labels.Labels`, each part computed in a module of its own:

* :class:`~ctxeval._judge.agreement.Agreement`: the judge against the people, item by item;
* :class:`~ctxeval._judge.graded.GradedAgreement`: a grading judge (0-3) against people's
  grades: weighted kappas and the confusion matrix per grade;
* :class:`~ctxeval._judge.corrected.CorrectedMean`: the metric's mean corrected with the
  labels (PPI++);
* :class:`~ctxeval._judge.consistency.Repeatability`: flips over repeated judgements;
* :class:`~ctxeval._judge.consistency.Jury`: agreement between judges.

What people should label is drawn by :func:`ctxeval._judge.sheet.label_sheet`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from ctxeval._judge.agreement import Agreement
from ctxeval._judge.consistency import Jury, Repeatability, jury_of, repeatability_of
from ctxeval._judge.corrected import CorrectedMean, against_labels
from ctxeval._judge.evidence import details_of
from ctxeval._judge.graded import GRADED_ROWS, GradedAgreement, graded_against_labels, judge_grades
from ctxeval._judge.labels import Labels
from ctxeval._judge.resolve import resolve_label_metrics
from ctxeval._judge.run import IndexedRun, JudgedRun
from ctxeval._plugins.hooks import HasPipeline
from ctxeval._results.results import MetricResult

if TYPE_CHECKING:
    from ctxeval._judge.formulas import formulas_of
    from ctxeval._judge.sheet import label_sheet
    from ctxeval._plugins.metric_names import MetricNames
    from ctxeval._plugins.registry import Registry

__all__ = [
    "Agreement",
    "CorrectedMean",
    "GradedAgreement",
    "JudgeTrust",
    "Jury",
    "Repeatability",
    "formulas_of",
    "judge_trust",
    "label_sheet",
    "resolve_label_metrics",
]

logger = logging.getLogger(__name__)


@attrs.frozen
class JudgeTrust:
    """What a run tells about the judge of one metric (each part None when it has nothing).

    Attributes:
        metric: the metric's row name.
        agreement: against people's labels.
        corrected: the mean corrected with the labels.
        repeatability: over repeated judgements.
        jury: between judges.
        skipped: labels that could not be used, by reason (with counts).
        graded: a grading judge against people's grades (``grade``/``grades`` labels).
    """

    metric: str
    agreement: Agreement | None = None
    corrected: CorrectedMean | None = None
    repeatability: Repeatability | None = None
    jury: Jury | None = None
    skipped: Mapping[str, int] = attrs.field(factory=dict)
    graded: GradedAgreement | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "agreement": None if self.agreement is None else self.agreement.to_dict(),
            "graded_agreement": None if self.graded is None else self.graded.to_dict(),
            "corrected": None if self.corrected is None else self.corrected.to_dict(),
            "repeatability": None if self.repeatability is None else self.repeatability.to_dict(),
            "jury": None if self.jury is None else self.jury.to_dict(),
            "skipped_labels": dict(self.skipped),
        }


def _names_of(evaluation: JudgedRun, registry: Registry | None) -> MetricNames:
    """The index of ``evaluation``'s metric names: its own, else one of its row names."""
    if isinstance(evaluation, IndexedRun):
        return evaluation.metric_names
    from ctxeval._plugins.metric_names import MetricNames

    return MetricNames(evaluation.metrics, registry=registry)


def judge_trust(
    evaluation: JudgedRun,
    labels: Labels | None = None,
    *,
    formulas: Mapping[str, Any] | None = None,
    registry: Registry | None = None,
) -> dict[str, JudgeTrust]:
    """Per metric with something to say (labels given for it, repeated or jury judgements):
    its :class:`JudgeTrust`.

    Args:
        evaluation: the run.
        labels: people's labels (see :mod:`ctxeval._judge.labels`).
        formulas: each metric's formula by row name (the people's score of a labelled sample
            goes through it); by default the metric of that name from the registry.
    """
    from ctxeval._plugins.registry import default_registry

    if labels is not None:
        labels = resolve_label_metrics(labels, _names_of(evaluation, registry))
    by_metric: dict[str, dict[str, Mapping[int, int]]] = {}
    for (metric, sample_id), items in (labels.items if labels is not None else {}).items():
        by_metric.setdefault(metric, {})[sample_id] = items
    summaries = evaluation.summary()
    out: dict[str, JudgeTrust] = {}
    for metric in evaluation.metrics:
        # rows a judge made (labels are matched against every row of their metric)
        rows = evaluation.rows(metric) if metric in by_metric else evaluation.judged_rows(metric)
        repeatability = repeatability_of(rows)
        jury = jury_of(rows)
        agreement = corrected = graded = None
        skipped: dict[str, int] = {}
        if metric in by_metric and labels is not None and metric in labels.graded:
            graded, skipped = graded_against_labels(rows, by_metric[metric])
        elif metric in by_metric:
            formula = (formulas or {}).get(metric)
            if formula is None:
                built = (registry or default_registry()).get_metric(metric)
                if isinstance(built, HasPipeline):
                    formula = built.pipeline.formula
            rows, labelled, not_binary = _yes_no_rows(rows, by_metric[metric])
            agreement, corrected, skipped = against_labels(
                rows, labelled, formula, summaries[metric].mean
            )
            if not_binary:
                skipped[GRADED_ROWS] = not_binary
        if skipped:
            source = labels.source if labels is not None else "labels"
            for reason, count in skipped.items():
                logger.warning("%s: %d label(s) of %s not used: %s", source, count, metric, reason)
        if agreement or corrected or graded or repeatability or jury or skipped:
            out[metric] = JudgeTrust(
                metric, agreement, corrected, repeatability, jury, skipped, graded=graded
            )
    return out


def _yes_no_rows(
    rows: Sequence[MetricResult], labelled: Mapping[str, Mapping[int, int]]
) -> tuple[list[MetricResult], dict[str, Mapping[int, int]], int]:
    """The rows a yes/no judge made and their 0/1 labels, apart from the rows of a grading
    judge (their labels counted: 0/1 labels cannot be set against grades)."""
    graded_ids = {
        r.sample_id
        for r in rows
        if "flags" not in details_of(r) and judge_grades(details_of(r)) is not None
    }
    if not graded_ids:
        return list(rows), dict(labelled), 0
    kept = [r for r in rows if r.sample_id not in graded_ids]
    count = sum(len(v) for s, v in labelled.items() if s in graded_ids)
    return kept, {s: v for s, v in labelled.items() if s not in graded_ids}, count
