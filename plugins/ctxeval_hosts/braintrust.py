"""ctxeval's metrics as an autoevals ``Scorer``, for Braintrust's ``Eval(scores=[...])``.

Braintrust calls a scorer per row as ``scorer(input=..., output=..., expected=...,
metadata=...)`` (autoevals' ``Scorer.eval`` / ``eval_async``). Where the fields are by default
(``fields=`` maps any other path, see docs/hosts/callables.md):

=========================  ===================================================
sample field               default path
=========================  ===================================================
``user_input``             ``input`` (the row's input, a string)
``response``               ``output`` (the task's output, a string)
``retrieved_contexts``     ``output.retrieved_contexts`` (an output dict's key)
``retrieved_context_ids``  ``output.retrieved_context_ids``
``reference``              ``expected`` (a string)
``reference_contexts``     ``expected.reference_contexts``
``reference_context_ids``  ``expected.reference_context_ids``
=========================  ===================================================

Any other keyword argument Braintrust passes (``metadata``, autoevals' ``context``) is a place
too: ``fields={"retrieved_contexts": "context"}`` reads autoevals' own RAGAS convention.

The result is an autoevals ``Score(name=metric, score=..., metadata=...)``: an undefined row is
``score=None``, which autoevals and Braintrust count as *skipped* (never 0), with the reason in
``metadata["comment"]``; an error row raises :class:`ctxeval.CtxevalError` with the reason
(autoevals "propagates errors to the caller": Braintrust records it as the scorer's error for
that row).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from autoevals.score import Score, Scorer  # type: ignore[import-untyped]

import ctxeval
from ctxeval.plugin import Metric
from ctxeval_hosts._outcome import Adapter, HoldsAdapter, Outcome
from ctxeval_hosts._rowmap import Path

__all__ = ["DEFAULT_FIELDS", "CtxevalScorer", "scorer"]

DEFAULT_FIELDS: Mapping[str, Path] = {
    "user_input": "input",
    "response": "output",
    "retrieved_contexts": "output.retrieved_contexts",
    "retrieved_context_ids": "output.retrieved_context_ids",
    "reference": "expected",
    "reference_contexts": "expected.reference_contexts",
    "reference_context_ids": "expected.reference_context_ids",
}


class ScoringError(ctxeval.CtxevalError):
    """A ctxeval error row, raised as autoevals expects a scorer's failure to be."""


def score_of(outcome: Outcome) -> Score:
    """One outcome as an autoevals ``Score`` (an error row raises :class:`ScoringError`)."""
    if outcome.status == "error":
        raise ScoringError(outcome.comment)
    return Score(
        name=outcome.metric,
        score=outcome.score,
        metadata={**outcome.metadata, "comment": outcome.comment},
    )


class CtxevalScorer(Scorer, HoldsAdapter):  # type: ignore[misc]
    """An autoevals scorer of one ctxeval metric; build it with :func:`scorer`."""

    def __init__(self, adapter: Adapter) -> None:
        self.adapter = adapter

    @property
    def session(self) -> Any:
        """The :class:`ctxeval.Session` the rows are scored with."""
        return self.adapter.session

    def _name(self) -> str:
        return self.adapter.names[0]

    def _places(self, output: Any, expected: Any, kwargs: Mapping[str, Any]) -> dict[str, Any]:
        return {"input": None, "metadata": {}, **kwargs, "output": output, "expected": expected}

    def _run_eval_sync(self, output: Any, expected: Any = None, **kwargs: Any) -> Score:
        [outcome] = self.adapter.score(self._places(output, expected, kwargs))
        return score_of(outcome)

    async def _run_eval_async(self, output: Any, expected: Any = None, **kwargs: Any) -> Score:
        [outcome] = await self.adapter.ascore(self._places(output, expected, kwargs))
        return score_of(outcome)


def scorer(
    metric: str | Metric,
    *,
    fields: Mapping[str, Path] | None = None,
    session: Any = None,
    llm: Any = None,
    registry: ctxeval.Registry | None = None,
    settings: ctxeval.RunSettings | None = None,
    **overrides: Any,
) -> CtxevalScorer:
    """An autoevals ``Scorer`` of ``metric``.

    Args:
        metric: a ctxeval metric name (or a :func:`ctxeval.get_metric` metric).
        fields: sample field -> path, in place of :data:`DEFAULT_FIELDS` for those fields,
            or a function of the row's places (``input``, ``output``, ``expected``,
            ``metadata`` and any other keyword argument).
        session: a :class:`ctxeval.Session` to share (else one is built from the rest).
        llm, registry, settings, overrides: as :func:`ctxeval.evaluate` takes them.
    """
    adapter = Adapter.for_host(
        "Braintrust scorer", metric, DEFAULT_FIELDS, fields,
        one="an autoevals scorer gives one score",
        session=session, llm=llm, registry=registry, settings=settings, overrides=overrides,
    )  # fmt: skip
    return CtxevalScorer(adapter)
