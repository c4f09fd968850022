"""How far to trust a judge: :func:`judge_trust` and what it reports per metric.

From a run's rows (their ``details``: ``flags``, ``votes``, ``provenance``) and, when given,
people's :class:`~ctxeval._judge.labels.Labels`:

* :class:`Agreement`: the judge against the people, item by item: the confusion counts,
  accuracy, balanced accuracy, Cohen's kappa with a 95% interval (bootstrap over samples);
* :class:`CorrectedMean`: the metric's mean corrected with the labels by prediction-powered
  inference (PPI++): the judged mean of the many samples nobody labelled, corrected by the
  judge's error measured on the few that were labelled; an honest 95% interval beside the
  uncorrected mean. Only samples whose judged items are *all* labelled count here (their
  score by the people's labels goes through the metric's own formula);
* :class:`Repeatability`: for items judged more than once (``repeats``), how often the
  judgements flip, and the items the judge is unsure about;
* :class:`Jury`: for items judged by two or more judges, how often each pair agrees (with
  kappa), the disagreements, the escalated items, and what each judge spent.

:func:`label_sheet` draws the samples people should label and lists their items.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Mapping, Sequence
from itertools import combinations
from typing import TYPE_CHECKING, Any

import attrs

from ctxeval._errors import ConfigError
from ctxeval._judge.labels import Labels
from ctxeval._pipeline.pipeline import Pipeline
from ctxeval._plugins.protocols import majority
from ctxeval._results.results import LazyDetails, MetricResult, Status, Usage
from ctxeval._results.stats import PPI_METHOD, cohen_kappa, kappa_ci, ppi_mean

if TYPE_CHECKING:
    from ctxeval._plugins.registry import Registry
    from ctxeval._results.evaluation import Evaluation

__all__ = [
    "Agreement",
    "CorrectedMean",
    "JudgeTrust",
    "Jury",
    "Repeatability",
    "formulas_of",
    "judge_trust",
    "label_sheet",
    "resolve_label_metrics",
]

logger = logging.getLogger(__name__)

LISTED = 100
"""Unsure items and disagreements listed per metric in ``summary.json`` (all are counted)."""


def _ratio(part: float, whole: float) -> float | None:
    return part / whole if whole else None


@attrs.frozen
class Agreement:
    """The judge (first rater) against people (the truth), over the labelled items.

    Attributes:
        n_items, n_samples: labelled items compared, and the samples they belong to.
        tp, fp, fn, tn: judge 1 & people 1, judge 1 & people 0, judge 0 & people 1, both 0.
        accuracy: share of items where they agree.
        balanced_accuracy: the mean of the judge's recall on the people's 1s and on their 0s
            (None when the people gave one class only).
        kappa: Cohen's kappa (None when undefined: both gave one same class throughout).
        kappa_ci95: its 95% interval, percentile bootstrap over samples (2000, seed 0).
    """

    n_items: int
    n_samples: int
    tp: int
    fp: int
    fn: int
    tn: int
    accuracy: float | None
    balanced_accuracy: float | None
    kappa: float | None
    kappa_ci95: tuple[float, float] | None

    @classmethod
    def of(cls, counts: Sequence[tuple[int, int, int, int]]) -> Agreement:
        """From per-sample ``(tp, fp, fn, tn)`` counts."""
        tp, fp, fn, tn = (sum(c[i] for c in counts) for i in range(4))
        n = tp + fp + fn + tn
        positives, negatives = tp + fn, fp + tn
        balanced = (tp / positives + tn / negatives) / 2 if positives and negatives else None
        return cls(
            n_items=n,
            n_samples=len(counts),
            tp=tp,
            fp=fp,
            fn=fn,
            tn=tn,
            accuracy=_ratio(tp + tn, n),
            balanced_accuracy=balanced,
            kappa=cohen_kappa(tp, fp, fn, tn),
            kappa_ci95=kappa_ci(counts),
        )

    def to_dict(self) -> dict[str, Any]:
        out = attrs.asdict(self)
        out["kappa_ci95"] = list(self.kappa_ci95) if self.kappa_ci95 else None
        out["confusion"] = {"tp": self.tp, "fp": self.fp, "fn": self.fn, "tn": self.tn}
        for key in ("tp", "fp", "fn", "tn"):
            del out[key]
        return out


@attrs.frozen
class CorrectedMean:
    """The metric's mean corrected with people's labels (PPI++).

    Attributes:
        mean: the corrected mean; ci95: its 95% interval.
        judged_mean: the uncorrected mean (every ``ok`` row, as the summary shows it).
        human_mean: the mean by the people's labels over the labelled samples alone.
        n_labelled: samples whose judged items are all labelled; n_unlabelled: the others.
        weight: the power-tuning weight λ in [0, 1] given to the judge (0: the labelled
            samples alone; 1: classic PPI).
        method: how it was computed, in words.
    """

    mean: float
    ci95: tuple[float, float]
    judged_mean: float | None
    human_mean: float
    n_labelled: int
    n_unlabelled: int
    weight: float
    method: str = PPI_METHOD

    def to_dict(self) -> dict[str, Any]:
        out = attrs.asdict(self)
        out["ci95"] = list(self.ci95)
        return out


@attrs.frozen
class Repeatability:
    """How stable the judge is over repeated judgements of the same item.

    Attributes:
        n_items: items judged more than once by one judge.
        flip_rate: share of them whose judgements did not all agree (the unsure items).
        disagreement: the chance that two judgements of one item differ (pairs of judgements
            that differ / pairs, averaged over items and judges); with independent
            judgements wrong with probability p, it is 2p(1 - p).
        unsure: the unsure items: ``sample_id``, ``index``, each judge's ``votes``.
    """

    n_items: int
    flip_rate: float | None
    disagreement: float | None
    unsure: tuple[Mapping[str, Any], ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "n_items": self.n_items,
            "flip_rate": self.flip_rate,
            "disagreement": self.disagreement,
            "n_unsure": len(self.unsure),
            "unsure": [dict(u) for u in self.unsure[:LISTED]],
        }


@attrs.frozen
class Jury:
    """Two or more judges on the same items.

    Attributes:
        judges: their names, in the panel's order.
        pairs: per pair of judges: ``a``, ``b``, ``n`` (items both judged), ``agreement``
            (share of them with the same verdict), ``kappa``.
        n_items: items judged by two judges or more.
        n_escalated: items sent to the last judge (the ``escalate`` rule).
        disagreements: items where the judges' verdicts differ: ``sample_id``, ``index``,
            each judge's ``votes``.
        usage: what each judge spent, by name.
    """

    judges: tuple[str, ...]
    pairs: tuple[Mapping[str, Any], ...]
    n_items: int
    n_escalated: int
    disagreements: tuple[Mapping[str, Any], ...]
    usage: Mapping[str, Usage]

    def to_dict(self) -> dict[str, Any]:
        return {
            "judges": list(self.judges),
            "pairs": [dict(p) for p in self.pairs],
            "n_items": self.n_items,
            "n_escalated": self.n_escalated,
            "n_disagreements": len(self.disagreements),
            "disagreements": [dict(d) for d in self.disagreements[:LISTED]],
            "usage": {name: u.to_dict() for name, u in self.usage.items()},
        }


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
    """

    metric: str
    agreement: Agreement | None = None
    corrected: CorrectedMean | None = None
    repeatability: Repeatability | None = None
    jury: Jury | None = None
    skipped: Mapping[str, int] = attrs.field(factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "agreement": None if self.agreement is None else self.agreement.to_dict(),
            "corrected": None if self.corrected is None else self.corrected.to_dict(),
            "repeatability": None if self.repeatability is None else self.repeatability.to_dict(),
            "jury": None if self.jury is None else self.jury.to_dict(),
            "skipped_labels": dict(self.skipped),
        }


# --- from rows ---------------------------------------------------------------------------------


def _details(row: MetricResult) -> Mapping[str, Any]:
    """The row's details, or nothing for a row of the deterministic fast path: its evidence
    is computed only when read (no judge, no votes), and reading every row of a large run
    would cost seconds."""
    details = row.details
    if isinstance(details, LazyDetails) or not details:
        return {}
    return details


def _votes_of(entry: Mapping[str, Any]) -> dict[str, list[int]]:
    judges = entry.get("judges") or {}
    return {str(k): [int(v) for v in vs] for k, vs in judges.items()}


def _repeatability(rows: Sequence[MetricResult]) -> Repeatability | None:
    items = 0
    flipped: list[Mapping[str, Any]] = []
    shares: list[float] = []
    for row in rows:
        for entry in _details(row).get("votes") or ():
            votes = _votes_of(entry)
            repeated = {name: v for name, v in votes.items() if len(v) > 1}
            if not repeated:
                continue
            items += 1
            for v in repeated.values():
                ones = sum(v)
                pairs = len(v) * (len(v) - 1) / 2
                shares.append(ones * (len(v) - ones) / pairs)
            if any(len(set(v)) > 1 for v in repeated.values()):
                flipped.append(
                    {"sample_id": row.sample_id, "index": entry["index"], "votes": votes}
                )
    if not items:
        return None
    return Repeatability(
        n_items=items,
        flip_rate=len(flipped) / items,
        disagreement=math.fsum(shares) / len(shares),
        unsure=tuple(flipped),
    )


def _jury(rows: Sequence[MetricResult]) -> Jury | None:
    names: dict[str, None] = {}
    pair_counts: dict[tuple[str, str], list[int]] = {}  # (a, b) -> tp, fp, fn, tn
    n_items = escalated = 0
    disagreements: list[Mapping[str, Any]] = []
    usage: dict[str, Usage] = {}
    for row in rows:
        details = _details(row)
        for judge in (details.get("provenance") or {}).get("judges") or ():
            if isinstance(judge, Mapping) and "judge" in judge and judge.get("usage"):
                spent = Usage.from_dict(judge["usage"])
                name = str(judge["judge"])
                usage[name] = usage[name] + spent if name in usage else spent
        for entry in details.get("votes") or ():
            votes = _votes_of(entry)
            for name in votes:
                names.setdefault(name)
            if len(votes) < 2:
                continue
            n_items += 1
            escalated += bool(entry.get("escalated"))
            verdicts = {name: majority(v) for name, v in votes.items()}
            if len(set(verdicts.values())) > 1:
                disagreements.append(
                    {"sample_id": row.sample_id, "index": entry["index"], "votes": votes}
                )
            for a, b in combinations(votes, 2):
                counts = pair_counts.setdefault((a, b), [0, 0, 0, 0])
                va, vb = verdicts[a], verdicts[b]
                counts[0 if va and vb else 1 if va else 2 if vb else 3] += 1
    if not n_items:
        return None
    pairs = []
    for (a, b), (tp, fp, fn, tn) in pair_counts.items():
        n = tp + fp + fn + tn
        pairs.append(
            {
                "a": a,
                "b": b,
                "n": n,
                "agreement": _ratio(tp + tn, n),
                "kappa": cohen_kappa(tp, fp, fn, tn),
            }
        )
    return Jury(
        judges=tuple(names),
        pairs=tuple(pairs),
        n_items=n_items,
        n_escalated=escalated,
        disagreements=tuple(disagreements),
        usage=usage,
    )


def _against_labels(
    rows: Sequence[MetricResult],
    labelled: Mapping[str, Mapping[int, int]],
    formula: Any,
    judged_mean: float | None,
) -> tuple[Agreement | None, CorrectedMean | None, dict[str, int]]:
    skipped: dict[str, int] = {}

    def skip(reason: str, count: int = 1) -> None:
        skipped[reason] = skipped.get(reason, 0) + count

    by_id = {row.sample_id: row for row in rows}
    for sample_id, items in labelled.items():
        if sample_id not in by_id:
            skip("sample not in the run", len(items))
    counts: list[tuple[int, int, int, int]] = []
    human: list[float] = []
    judged: list[float] = []
    unlabelled: list[float] = []
    for row in rows:
        given = _details(row).get("flags")
        flags: list[int] = given if isinstance(given, list) else []
        ok = row.status is Status.OK and row.score is not None and isinstance(given, list)
        items = labelled.get(row.sample_id) or {}
        if not items:
            if ok:
                unlabelled.append(float(row.score))  # type: ignore[arg-type]
            continue
        if not ok:
            skip(f"row {row.status.value}, nothing judged", len(items))
            continue
        beyond = [i for i in items if i >= len(flags)]
        if beyond:
            skip("index beyond the judged items", len(beyond))
        tp = fp = fn = tn = 0
        for index, truth in items.items():
            if index >= len(flags):
                continue
            said = int(flags[index])
            tp += said and truth
            fp += said and not truth
            fn += truth and not said
            tn += not said and not truth
        if tp + fp + fn + tn:
            counts.append((tp, fp, fn, tn))
        if all(i in items for i in range(len(flags))) and formula is not None:
            people = [bool(items[i]) for i in range(len(flags))]
            n_reference = _details(row).get("n_reference", len(flags))
            human.append(float(formula.value(people, n_reference)))
            judged.append(float(row.score))  # type: ignore[arg-type]
        elif tp + fp + fn + tn:
            skip("sample partly labelled (agreement only, not the corrected mean)")
    agreement = Agreement.of(counts) if counts else None
    corrected = None
    estimate = ppi_mean(human, judged, unlabelled)
    if estimate is not None:
        corrected = CorrectedMean(
            mean=estimate["mean"],
            ci95=(estimate["ci95_low"], estimate["ci95_high"]),
            judged_mean=judged_mean,
            human_mean=math.fsum(human) / len(human),
            n_labelled=len(human),
            n_unlabelled=len(unlabelled),
            weight=estimate["lambda"],
        )
    return agreement, corrected, skipped


def formulas_of(metrics: Sequence[Any]) -> dict[str, Any]:
    """Each pipeline metric's formula by row name (people's labels are scored through it)."""
    formulas = {}
    for metric in metrics:
        pipeline = getattr(metric, "pipeline", None)
        if isinstance(pipeline, Pipeline):
            formulas[metric.name] = pipeline.formula
    return formulas


def resolve_label_metrics(
    labels: Labels | str | os.PathLike[str],
    metrics: Sequence[str],
    registry: Registry | None = None,
) -> Labels:
    """``labels`` (read first when a file) with each metric name as the run's rows name it
    (an alias such as ``context_precision`` becomes ``llm_context_precision_with_reference``).

    Raises:
        DataError: the labels file is malformed (file, line and field named).
        ConfigError: labels for a metric the run does not score.
    """
    from ctxeval._plugins.registry import default_registry

    if not isinstance(labels, Labels):
        labels = Labels.load(labels)
    registry = registry or default_registry()
    names: dict[str, str] = {}
    for name in labels.metrics:
        if name in metrics:
            continue
        try:
            canonical = registry.get_metric(name).name
        except Exception:  # an unknown name: said below
            canonical = name
        if canonical not in metrics:
            raise ConfigError(
                f"{labels.source}: labels for metric {name!r}, which this run does not score; "
                f"it scores: {', '.join(metrics)}"
            )
        names[name] = canonical
    return labels.renamed(names) if names else labels


def judge_trust(
    evaluation: Evaluation,
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
        labels = resolve_label_metrics(labels, evaluation.metrics, registry)
    by_metric: dict[str, dict[str, Mapping[int, int]]] = {}
    for (metric, sample_id), items in (labels.items if labels is not None else {}).items():
        by_metric.setdefault(metric, {})[sample_id] = items
    summaries = evaluation.summary()
    out: dict[str, JudgeTrust] = {}
    for metric in evaluation.metrics:
        rows = evaluation.rows(metric)
        repeatability = _repeatability(rows)
        jury = _jury(rows)
        agreement = corrected = None
        skipped: dict[str, int] = {}
        if metric in by_metric:
            formula = (formulas or {}).get(metric)
            if formula is None:
                built = (registry or default_registry()).get_metric(metric)
                formula = getattr(getattr(built, "pipeline", None), "formula", None)
            agreement, corrected, skipped = _against_labels(
                rows, by_metric[metric], formula, summaries[metric].mean
            )
            source = labels.source if labels is not None else "labels"
            for reason, count in skipped.items():
                logger.warning("%s: %d label(s) of %s not used: %s", source, count, metric, reason)
        if agreement or corrected or repeatability or jury or skipped:
            out[metric] = JudgeTrust(metric, agreement, corrected, repeatability, jury, skipped)
    return out


# --- what people label ----------------------------------------------------------------------


def _item_texts(row: MetricResult, sample: Any) -> list[str | None]:
    """The text of each item the row's judge judged, in ``flags`` order, where it is known:
    the statements or entities the details list, else (for a formula over the retrieved
    items) the sample's retrieved contexts."""
    details = _details(row)
    flags = details.get("flags") or []
    statements = details.get("statements")
    if isinstance(statements, list) and len(statements) == len(flags):
        return [str(s.get("statement")) for s in statements]
    entities = details.get("reference_entities")
    if isinstance(entities, list) and len(entities) == len(flags):
        return [str(e) for e in entities]
    contexts = getattr(sample, "retrieved_contexts", None) if sample is not None else None
    if "n_reference" in details and contexts:
        return [contexts[i] if i < len(contexts) else None for i in range(len(flags))]
    return [None] * len(flags)


def label_sheet(
    evaluation: Evaluation,
    metric: str,
    *,
    samples: Mapping[str, Any] | None = None,
    n: int = 150,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """A sheet for people to fill in: every judged item of ``n`` samples drawn at random
    (seeded) among the metric's judged ``ok`` rows, one record per item, ``label`` null.

    Each record has ``sample_id``, ``metric``, ``index``, ``label`` (None, to fill with 0 or
    1), and to help the person: ``item`` (the chunk, statement or entity judged; None where
    the text is not known), ``question``, ``reference`` and, for precision without reference,
    ``response``. The judge's own verdict is left out, so as not to sway the person. A filled
    sheet is a labels file (:meth:`ctxeval.Labels.load`).

    Args:
        samples: the samples by id (for the chunks' texts and the questions); by default those
            the evaluation kept.

    Raises:
        ConfigError: the run has no such metric, or no judged row for it.
    """
    import random

    rows = [
        r
        for r in evaluation.rows(metric)
        if r.status is Status.OK and isinstance(_details(r).get("flags"), list)
    ]
    if not rows:
        raise ConfigError(f"{metric}: no judged ok row to label (are its rows LLM-judged?)")
    known = samples if samples is not None else evaluation.samples
    drawn = random.Random(seed).sample(rows, min(n, len(rows)))
    sheet: list[dict[str, Any]] = []
    for row in drawn:
        sample = known.get(row.sample_id)
        context = {
            key: getattr(sample, key, None)
            for key in ("user_input", "reference", "response")
            if sample is not None and getattr(sample, key, None)
        }
        for index, text in enumerate(_item_texts(row, sample)):
            sheet.append(
                {
                    "sample_id": row.sample_id,
                    "metric": metric,
                    "index": index,
                    "item": text,
                    **{("question" if k == "user_input" else k): v for k, v in context.items()},
                    "label": None,
                }
            )
    return sheet
