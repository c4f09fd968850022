"""ctxeval's metrics as a LangSmith evaluator: ``(inputs, outputs, reference_outputs) -> dict``.

``langsmith.evaluate(target, data=..., evaluators=[evaluator("id_based_context_recall")])``
calls the evaluator once per example with the example's ``inputs``, the run's ``outputs`` and
the example's ``outputs`` as ``reference_outputs``. Where the fields are by default (each a
key named like the ctxeval field; ``fields=`` maps any other key, see docs/hosts/callables.md):

=========================  ==========================================
sample field               default path
=========================  ==========================================
``user_input``             ``inputs.user_input``
``response``               ``outputs.response``
``retrieved_contexts``     ``outputs.retrieved_contexts``
``retrieved_context_ids``  ``outputs.retrieved_context_ids``
``reference``              ``reference_outputs.reference``
``reference_contexts``     ``reference_outputs.reference_contexts``
``reference_context_ids``  ``reference_outputs.reference_context_ids``
=========================  ==========================================

The result is LangSmith feedback: ``{"key": metric, "score": float, "comment": ...,
"metadata": {...}}``; an undefined row is ``"score": None`` (feedback without a score: not
scored, never 0) with the reason in the comment; an error row is what LangSmith itself records
for an evaluator that raised (``"score": None``, the reason in the comment,
``"extra": {"error": True}``) without a stack trace. Several metrics give
``{"results": [...]}``, one feedback each.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import ctxeval
from ctxeval.plugin import Metric
from ctxeval_hosts._outcome import Adapter, HoldsAdapter, Outcome
from ctxeval_hosts._rowmap import Path

__all__ = ["DEFAULT_FIELDS", "Evaluator", "evaluator"]

DEFAULT_FIELDS: Mapping[str, Path] = {
    "user_input": "inputs.user_input",
    "response": "outputs.response",
    "retrieved_contexts": "outputs.retrieved_contexts",
    "retrieved_context_ids": "outputs.retrieved_context_ids",
    "reference": "reference_outputs.reference",
    "reference_contexts": "reference_outputs.reference_contexts",
    "reference_context_ids": "reference_outputs.reference_context_ids",
}


def feedback(outcome: Outcome) -> dict[str, Any]:
    """One outcome as a LangSmith feedback dict."""
    out: dict[str, Any] = {
        "key": outcome.metric,
        "score": outcome.score,
        "comment": outcome.comment,
        "metadata": outcome.metadata,
    }
    if outcome.status == "error":
        out["extra"] = {"error": True}
    return out


class Evaluator(HoldsAdapter):
    """A LangSmith evaluator function (an object with the signature LangSmith reads).

    Build it with :func:`evaluator`. Call :meth:`close` (or use it as a context manager) when
    the experiment is over, to close its session.
    """

    def __init__(self, adapter: Adapter) -> None:
        self.adapter = adapter
        self.__name__ = "ctxeval_" + "_".join(adapter.names)

    @property
    def session(self) -> Any:
        """The :class:`ctxeval.Session` the rows are scored with (``session.evaluation()``)."""
        return self.adapter.session

    def _answer(self, outcomes: list[Outcome]) -> dict[str, Any]:
        if len(outcomes) == 1:
            return feedback(outcomes[0])
        return {"results": [feedback(outcome) for outcome in outcomes]}

    def __call__(
        self,
        inputs: Mapping[str, Any],
        outputs: Mapping[str, Any],
        reference_outputs: Mapping[str, Any],
    ) -> dict[str, Any]:
        places = {"inputs": inputs, "outputs": outputs, "reference_outputs": reference_outputs}
        return self._answer(self.adapter.score(places))


def evaluator(
    metrics: str | Metric | Sequence[str | Metric],
    *,
    fields: Mapping[str, Path] | None = None,
    session: Any = None,
    llm: Any = None,
    registry: ctxeval.Registry | None = None,
    settings: ctxeval.RunSettings | None = None,
    **overrides: Any,
) -> Evaluator:
    """A LangSmith evaluator scoring ``metrics`` (a name, a metric, or several).

    Args:
        metrics: ctxeval metric names (or :func:`ctxeval.get_metric` metrics).
        fields: sample field -> path, in place of :data:`DEFAULT_FIELDS` for those fields
            (e.g. ``{"retrieved_contexts": "outputs.documents"}``), or a function of
            ``{"inputs", "outputs", "reference_outputs"}``.
        session: a :class:`ctxeval.Session` to share (else one is built from the rest).
        llm, registry, settings, overrides: as :func:`ctxeval.evaluate` takes them.
    """
    adapter = Adapter.for_host(
        "LangSmith evaluator", metrics, DEFAULT_FIELDS, fields,
        session=session, llm=llm, registry=registry, settings=settings, overrides=overrides,
    )  # fmt: skip
    return Evaluator(adapter)
