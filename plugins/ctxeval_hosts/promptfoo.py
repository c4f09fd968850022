"""ctxeval's metrics as a promptfoo python assertion: ``get_assert(output, context)``.

promptfoo runs ``assert: [{type: python, value: "file://ctx_assert.py:get_assert"}]`` once
per test case. Two ways to give the metrics:

* in Python (one session for every case the worker scores; the usual way)::

      # ctx_assert.py
      from ctxeval_hosts.promptfoo import assertion
      get_assert = assertion(["id_based_context_recall"], threshold=0.8)

* in the YAML, with ``value: "file://ctx_assert.py:get_assert"`` where ``ctx_assert.py`` is
  ``from ctxeval_hosts.promptfoo import get_assert`` and the assertion's ``config:`` holds
  ``metrics`` (a list of names), optionally ``threshold`` and ``fields`` (a session per case).

Where the fields are by default (``fields=`` maps any other path, see docs/hosts/callables.md):
the provider's ``output`` is the ``response``; every other field is the test's variable of its
own name, ``vars.user_input``, ``vars.retrieved_contexts``, ``vars.reference_context_ids``...
(promptfoo's own context metrics read ``vars.context``: ``fields={"retrieved_contexts":
"vars.context"}``). A list travels as JSON text in a var (a YAML list var makes promptfoo run
one test case per item): a list field's var holding a JSON list is that list; any other text is
one context (contexts) or an error (IDs).

The answer is a promptfoo grading result ``{pass, score, reason, componentResults,
namedScores}`` with one component per metric. There is **no default threshold** (promptfoo's
built-in context metrics default to 0, so every case passed): without ``threshold`` a metric
passes when it could be scored (status ok), with it when its score is at least the threshold.
An undefined metric does not pass and has no named score (not scored, never 0); an error
metric does not pass. The top-level ``score`` is the mean of the scored metrics; when none was
scored it is 0.0 (promptfoo needs a number there) and ``pass`` is false, the reason saying so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import ctxeval
from ctxeval.plugin import Metric
from ctxeval_hosts._outcome import Adapter, HoldsAdapter, Outcome
from ctxeval_hosts._rowmap import Path

__all__ = ["DEFAULT_FIELDS", "Assertion", "assertion", "get_assert"]

DEFAULT_FIELDS: Mapping[str, Path] = {
    "user_input": "vars.user_input",
    "response": "output",
    "retrieved_contexts": "vars.retrieved_contexts",
    "retrieved_context_ids": "vars.retrieved_context_ids",
    "reference": "vars.reference",
    "reference_contexts": "vars.reference_contexts",
    "reference_context_ids": "vars.reference_context_ids",
}


def _threshold(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ctxeval.ConfigError(
            f"promptfoo assertion: threshold must be in [0, 1], got {value!r}"
        )
    return float(value)


def _component(outcome: Outcome, threshold: float | None) -> dict[str, Any]:
    if outcome.score is None:
        passed = False
    else:
        passed = threshold is None or outcome.score >= threshold
    reason = outcome.comment
    if outcome.score is not None and threshold is not None:
        reason += f" ({'>=' if passed else '<'} threshold {threshold:g})"
    component: dict[str, Any] = {
        "pass": passed,
        "score": outcome.score if outcome.score is not None else 0.0,
        "reason": reason,
        "metadata": outcome.metadata,
    }
    if outcome.score is None:
        component["metadata"] = {**outcome.metadata, "not_scored": True}
    return component


def grading_result(outcomes: Sequence[Outcome], threshold: float | None) -> dict[str, Any]:
    """The outcomes of one test case as a promptfoo grading result."""
    components = [_component(outcome, threshold) for outcome in outcomes]
    scored = [outcome.score for outcome in outcomes if outcome.score is not None]
    passed = all(component["pass"] for component in components)
    if scored:
        reason = "; ".join(component["reason"] for component in components)
    else:
        reason = "not scored: " + "; ".join(outcome.comment for outcome in outcomes)
    return {
        "pass": passed,
        "score": sum(scored) / len(scored) if scored else 0.0,
        "reason": reason,
        "componentResults": components,
        "namedScores": {o.metric: o.score for o in outcomes if o.score is not None},
    }


class Assertion(HoldsAdapter):
    """A promptfoo ``get_assert(output, context)``; build it with :func:`assertion`."""

    def __init__(self, adapter: Adapter, threshold: float | None) -> None:
        self.adapter = adapter
        self.threshold = threshold

    @property
    def session(self) -> Any:
        """The :class:`ctxeval.Session` the cases are scored with."""
        return self.adapter.session

    def __call__(self, output: Any, context: Mapping[str, Any]) -> dict[str, Any]:
        test = context.get("test") or {}
        places = {
            "output": output,
            "vars": context.get("vars") or {},
            "test": test,
            "metadata": test.get("metadata") or {} if isinstance(test, Mapping) else {},
        }
        return grading_result(self.adapter.score(places), self.threshold)


def assertion(
    metrics: str | Metric | Sequence[str | Metric],
    *,
    threshold: float | None = None,
    fields: Mapping[str, Path] | None = None,
    session: Any = None,
    llm: Any = None,
    registry: ctxeval.Registry | None = None,
    settings: ctxeval.RunSettings | None = None,
    **overrides: Any,
) -> Assertion:
    """A promptfoo python assertion scoring ``metrics``.

    Args:
        metrics: ctxeval metric names (or :func:`ctxeval.get_metric` metrics).
        threshold: the score each metric needs to pass, in [0, 1]; None (the default): a
            metric passes when it was scored at all. Never a silent 0.
        fields: sample field -> path, in place of :data:`DEFAULT_FIELDS` for those fields
            (places: ``output``, ``vars``, ``test``, ``metadata``, the test's metadata).
        session: a :class:`ctxeval.Session` to share (else one is built from the rest).
        llm, registry, settings, overrides: as :func:`ctxeval.evaluate` takes them.
    """
    adapter = Adapter.for_host(
        "promptfoo assertion", metrics, DEFAULT_FIELDS, fields,
        example="vars.NAME", json_lists=True,
        session=session, llm=llm, registry=registry, settings=settings, overrides=overrides,
    )  # fmt: skip
    return Assertion(adapter, _threshold(threshold))


def get_assert(output: Any, context: Mapping[str, Any]) -> dict[str, Any]:
    """The assertion configured in promptfoo's YAML: the assertion's ``config:`` holds
    ``metrics`` (required), ``threshold`` and ``fields`` (paths only); ``llm`` a model name.

    A session is built for this one case and closed after it; for many cases (and one LLM
    budget), build an :func:`assertion` in Python instead.
    """
    config = context.get("config") or {}
    if not isinstance(config, Mapping) or not config.get("metrics"):
        raise ctxeval.ConfigError(
            "promptfoo assertion: the assertion's config: needs 'metrics' (a list of ctxeval "
            "metric names), e.g. config: {metrics: [id_based_context_recall], threshold: 0.8}"
        )
    unknown = sorted(set(config) - {"metrics", "threshold", "fields", "llm"})
    if unknown:
        raise ctxeval.ConfigError(
            f"promptfoo assertion: config has unknown keys {unknown}; it takes metrics, "
            "threshold, fields and llm"
        )
    with assertion(
        list(config["metrics"]),
        threshold=config.get("threshold"),
        fields=config.get("fields"),
        llm=config.get("llm"),
    ) as once:
        return once(output, context)
