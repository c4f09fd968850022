"""Turning what happened to a sample into its rows: ids, labels and error rows.

Nothing is dropped in a run: a sample that lacks a field a metric requires, a metric that
raises, or one that returns something that is not a :class:`~ctxeval.MetricResult`, each gives
an ``error`` row saying why.
"""

from __future__ import annotations

import difflib
import logging
import operator
from collections.abc import Callable, Container, Mapping, Sequence
from typing import Any

from ctxeval._data.loading import RepeatedIdError
from ctxeval._data.sample import Sample, id_for_message
from ctxeval._errors import CtxevalError, DataError
from ctxeval._plugins.hooks import ScoresColumn
from ctxeval._plugins.protocols import BatchMetric, DeterministicMetric, Metric
from ctxeval._results.results import MetricResult, Status

__all__ = [
    "DUPLICATE_ID_HINT",
    "SET_ASIDE",
    "SampleInput",
    "batch_scorer",
    "checked",
    "failure",
    "identify",
    "lacking",
    "leaves",
    "missing_field_error",
    "repeat_name",
    "sync_scorer",
]

logger = logging.getLogger(__name__)

SampleInput = Sample | Mapping[str, Any]
"""What a run takes as a sample: a :class:`~ctxeval.Sample`, or a dict of its fields."""


def _to_sample(item: SampleInput | DataError, index: int) -> Sample:
    if isinstance(item, Sample):
        return item
    if isinstance(item, DataError):  # a file's row that could not be read (lenient runs)
        raise item
    try:
        return Sample.from_dict(item)
    except DataError as exc:
        sample_id = item.get("id") if isinstance(item, Mapping) else None
        raise exc.located(sample_id=id_for_message(sample_id) or str(index)) from None


DUPLICATE_ID_HINT = (
    "sample ids must be unique, results and resumed runs are keyed by them: give each sample "
    "its own id, or pass --lenient (lenient=True) to set the later ones aside and score the "
    "others"
)
"""What to do about two samples with one id (the run refuses them unless lenient)."""

SET_ASIDE = (
    "an earlier sample has the id {!r} (that one is scored); give each sample its own id, results "
    "and resumed runs are keyed by them"
)
"""Why a lenient run sets a sample aside whose id an earlier one has."""


def identify(item: SampleInput | DataError, index: int, seen_ids: set[str]) -> tuple[Sample, str]:
    """The sample and its id (its position when it has none), refusing an id seen before.

    ``item`` may be the :class:`DataError` of a file's row that could not be read (what
    :meth:`~ctxeval.SampleStream.rows_and_errors` gives in its place): it is raised."""
    sample = _to_sample(item, index)
    sample_id = sample.id if sample.id is not None else str(index)
    if sample_id in seen_ids:
        raise DataError("two samples have this id", sample_id=sample_id, hint=DUPLICATE_ID_HINT)
    seen_ids.add(sample_id)
    return sample, sample_id


def sync_scorer(metric: Metric) -> Callable[[Sample], object] | None:
    """``metric.score`` when it scores synchronously (:class:`~ctxeval.DeterministicMetric`),
    else None."""
    return metric.score if isinstance(metric, DeterministicMetric) else None


def batch_scorer(metric: Metric) -> Callable[[Sequence[Sample]], Sequence[object]] | None:
    """``metric.score_batch`` when it scores a batch at once (:class:`~ctxeval.BatchMetric`),
    else None."""
    return metric.score_batch if isinstance(metric, BatchMetric) else None


def column_scorer(metric: Metric) -> ScoresColumn | None:
    """``metric`` when it scores a chunk as a column (:class:`~ctxeval.plugin.hooks.
    ScoresColumn`), else None."""
    return metric if isinstance(metric, ScoresColumn) else None


def lacking(samples: Sequence[Sample], requires: tuple[str, ...]) -> list[int]:
    """The positions of the samples that lack a field in ``requires``."""
    if not requires:
        return []
    if not any(None in map(operator.attrgetter(name), samples) for name in requires):
        return []  # the usual case, found without a Python loop over the samples
    values = operator.attrgetter(*requires)
    if len(requires) == 1:
        return [i for i, sample in enumerate(samples) if values(sample) is None]
    return [i for i, sample in enumerate(samples) if None in values(sample)]


def missing_field_error(sample: Sample, metric: Metric, missing: list[str]) -> MetricResult:
    """The error row of a sample that lacks fields ``metric`` requires (with a hint when the
    sample has a field of a close name)."""
    reason = (
        f"the sample has no {', '.join(repr(f) for f in missing)}, which {metric.name} requires"
    )
    typos = [
        f"{key!r} (did you mean {close[0]!r}?)"
        for key in sample.metadata
        for close in [difflib.get_close_matches(key, missing, n=1, cutoff=0.75)]
        if close
    ]
    if typos:
        reason += f"; the sample has a field {', '.join(typos)}"
    return MetricResult.error(reason, details={"missing_fields": missing})


def checked(result: object, metric: Metric, sample_id: str) -> MetricResult:
    """The row for ``result``: labelled with sample and metric, or an error if it is no result."""
    if not isinstance(result, MetricResult):
        result = MetricResult.error(
            f"metric {metric.name!r} returned {type(result).__name__}, not a MetricResult"
        )
    elif not _still_valid(result):  # checked when built, then changed behind attrs' back
        result = MetricResult.error(
            f"metric {metric.name!r} returned a result changed after it was built "
            f"(status {result.status.value}, score {result.score!r}); results are immutable"
        )
    elif result.sample_id == sample_id and result.metric == metric.name:
        return result  # a batch scorer labelled it already
    return result.labelled(sample_id, metric.name)


def _still_valid(result: MetricResult) -> bool:
    """The score policy, checked again: an ``ok`` row has a finite score in [0, 1], the
    others none."""
    score = result.score
    if result.status is Status.OK:
        return isinstance(score, float) and 0.0 <= score <= 1.0  # (NaN fails both)
    return score is None


def leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside (nested) exception groups, or ``[exc]``."""
    inner = getattr(exc, "exceptions", None)
    if isinstance(exc, Exception) and isinstance(inner, tuple) and inner:
        return [leaf for sub in inner for leaf in leaves(sub)]
    return [exc]


def failure(exc: BaseException, metric: Metric) -> MetricResult:
    """The error row for a metric that raised (the first failure inside a task group)."""
    logger.debug("metric %s failed", metric.name, exc_info=exc)
    found = leaves(exc)
    first = found[0]
    kind = type(first).__name__
    more = f" (and {len(found) - 1} more failure(s))" if len(found) > 1 else ""
    if isinstance(first, CtxevalError):
        return MetricResult.error(f"{kind}: {first}{more}")
    return MetricResult.error(f"{kind} in metric {metric.name!r}: {first}{more}")


def repeat_name(given: str, repeats: dict[str, int], *taken: Container[str | None]) -> str:
    """A new id for a repeat of the id ``given``: ``given#`` the first time, then ``given#2``,
    ``given#3``... (``repeats`` counts them per id: linear time, short ids), past any id in
    ``taken`` (a real id that looks like a renamed one keeps the names unique)."""
    count = repeats.get(given, 0)
    while True:
        count += 1
        name = f"{given}#" if count == 1 else f"{given}#{count}"
        if not any(name in ids for ids in taken):
            repeats[given] = count
            return name


def unreadable(
    exc: DataError,
    index: int,
    seen_ids: set[str],
    repeats: dict[str, int],
    metrics: Sequence[Metric],
) -> list[MetricResult]:
    """The error rows (one per metric) of a sample that could not be read (lenient runs): its
    own id when it has a usable one, else its position; an id seen before is renamed by
    :func:`repeat_name` (the second sample of id ``a`` is ``a#``, the third ``a#2``)."""
    given = exc.sample_id
    usable = given is not None and id_for_message(given) == given  # valid text, short
    sample_id = given if usable and given is not None else str(index)
    if sample_id in seen_ids:
        sample_id = repeat_name(sample_id, repeats, seen_ids)
    seen_ids.add(sample_id)
    if exc.hint is DUPLICATE_ID_HINT:  # (the run is lenient: the hint would say to be so)
        reason = f"set aside: {SET_ASIDE.format(given)}"
    elif isinstance(exc, RepeatedIdError):  # found by a file's reader: located at its line
        reason = f"set aside: {exc}"
    else:
        reason = f"the sample could not be read: {exc}"
    return [MetricResult.error(reason).labelled(sample_id, m.name) for m in metrics]
