"""ctxeval's metrics as a Phoenix evals evaluator, for ``evaluate_dataframe``.

``evaluator("id_based_context_recall")`` is a Phoenix ``Evaluator`` made with Phoenix's own
``create_evaluator``: its input fields are the sample fields the metric requires, each read by
default from the DataFrame column of the same name (``retrieved_context_ids``...). ``fields=``
maps a field to another column or path (``{"retrieved_contexts": "documents"}``); that is
Phoenix's own input mapping (``bind``), so Phoenix's paths and functions work there too. A list
of contexts may hold documents (``page_content`` or ``content``); a NaN cell is a missing value.

The result is a Phoenix ``Score(name=metric, score=..., label=..., explanation=...,
metadata=...)`` in the ``{metric}_score`` column: an ok row has ``label=None``; an undefined row
has ``score=None`` and ``label="undefined"`` (not scored, never 0); an error row (a field
missing, an LLM that never answered) has ``score=None`` and ``label="error"``, its reason in
``explanation``. An error row is a score, not a raised exception, on purpose: Phoenix retries a
raising evaluator (``max_retries``, 10 by default) and stops the frame on the first error
(``exit_on_error``), while ctxeval has already retried what can be retried.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

from phoenix.evals import Evaluator, Score, create_evaluator

import ctxeval
from ctxeval.plugin import Metric
from ctxeval_hosts._outcome import Adapter, Outcome
from ctxeval_hosts._rowmap import FIELDS, Path

__all__ = ["evaluator", "score_of"]

_LABELS = {"ok": None, "undefined": "undefined", "error": "error"}


def score_of(outcome: Outcome) -> Score:
    """One outcome as a Phoenix ``Score``."""
    return Score(
        name=outcome.metric,
        score=outcome.score,
        label=_LABELS[outcome.status],
        explanation=outcome.comment,
        metadata=outcome.metadata,
    )


def evaluator(
    metric: str | Metric,
    *,
    fields: Mapping[str, Path] | None = None,
    session: Any = None,
    llm: Any = None,
    registry: ctxeval.Registry | None = None,
    settings: ctxeval.RunSettings | None = None,
    **overrides: Any,
) -> Evaluator:
    """A Phoenix evaluator of ``metric`` (for ``evaluate_dataframe`` and
    ``async_evaluate_dataframe``).

    Args:
        metric: a ctxeval metric name (or a :func:`ctxeval.get_metric` metric).
        fields: sample field -> the column (or Phoenix path or function) holding it; a field
            not given is read from the column of its own name.
        session: a :class:`ctxeval.Session` to share (else one is built from the rest).
        llm, registry, settings, overrides: as :func:`ctxeval.evaluate` takes them.

    The evaluator's session is ``evaluator.ctxeval_session`` (close it when done).
    """
    given = dict(fields or {})
    adapter = Adapter.for_host(
        "Phoenix evaluator", metric, {field: field for field in FIELDS}, {f: f for f in given},
        one="a Phoenix evaluator made here gives one score", example="COLUMN",
        session=session, llm=llm, registry=registry, settings=settings, overrides=overrides,
    )  # fmt: skip
    inputs = [f for f in FIELDS if f in adapter.required or f in given]

    def score(**row: Any) -> Score:
        [outcome] = adapter.score(dict(row.items()))
        return score_of(outcome)

    score.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(f, inspect.Parameter.KEYWORD_ONLY, default=None) for f in inputs]
    )
    made = create_evaluator(name=adapter.names[0], kind="llm" if adapter.needs_llm else "code")(
        score
    )
    if given:
        made.bind(given)
    made.ctxeval_session = adapter.session  # type: ignore[attr-defined]
    return made
