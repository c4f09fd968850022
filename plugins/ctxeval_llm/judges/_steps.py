"""The LLM context metrics over a multi-step search (#55): with ``context="steps"`` a metric
judges the union of the sample's ``retrieval_steps`` (each item once, in the order first
returned) as its retrieved context, and needs ``retrieval_steps`` in place of
``retrieved_contexts``.
"""

from __future__ import annotations

from typing import Any, ClassVar

import attrs

from ctxeval.plugin import MetricResult, RunContext, Sample, validators

__all__ = ["CONTEXTS", "StepsAsContext", "context_option"]

CONTEXTS = ("retrieved", "steps")
"""What a metric judges: the sample's ``retrieved_contexts`` (default) or the union of its
``retrieval_steps``."""


def context_option() -> Any:
    """The ``context`` option: ``retrieved`` (default) or ``steps``."""
    return attrs.field(default="retrieved", validator=validators.one_of(*CONTEXTS, what="context"))


class StepsAsContext:
    """A mixin (first among the bases) for a metric with a ``context`` option: the fields it
    needs (:attr:`fields`) and the sample it judges follow the option."""

    __slots__ = ()

    fields: ClassVar[tuple[str, ...]] = ()
    """The sample fields the metric needs when it judges ``retrieved_contexts``."""
    context: str

    @property
    def requires(self) -> tuple[str, ...]:  # (BaseMetric's class attribute, per option here)
        """:attr:`fields`, with ``retrieval_steps`` in place of ``retrieved_contexts`` when
        ``context="steps"``."""
        if self.context != "steps":
            return self.fields
        return tuple("retrieval_steps" if f == "retrieved_contexts" else f for f in self.fields)

    def judged_sample(self, sample: Sample) -> Sample | MetricResult:
        """The sample the metric judges: ``sample``, or with ``context="steps"`` the sample with
        the union of its steps as its retrieved context (an ``error`` row when a step has no
        texts to judge)."""
        if self.context != "steps":
            return sample
        steps = sample.retrieval_steps or ()
        for index, step in enumerate(steps):
            if step.retrieved_contexts is None:
                return MetricResult.error(
                    f"retrieval_steps[{index}] has no retrieved_contexts: context='steps' "
                    "judges the steps' texts (give each step its texts)"
                )
        return sample.with_steps_as_context()

    async def ascore(self, sample: Sample, ctx: RunContext) -> MetricResult:
        judged = self.judged_sample(sample)
        if isinstance(judged, MetricResult):
            return judged
        scored: MetricResult = await super().ascore(judged, ctx)  # type: ignore[misc]
        return scored

    def estimate_calls(self, sample: Sample) -> list[int]:
        judged = self.judged_sample(sample)
        if isinstance(judged, MetricResult):
            return []
        sizes: list[int] = super().estimate_calls(judged)  # type: ignore[misc]
        return sizes

    def estimate_calls_by_model(self, sample: Sample) -> dict[str | None, list[int]]:
        judged = self.judged_sample(sample)
        if isinstance(judged, MetricResult):
            return {}
        parent = getattr(super(), "estimate_calls_by_model", None)
        if parent is None:
            return {None: self.estimate_calls(sample)}
        by_model: dict[str | None, list[int]] = parent(judged)
        return by_model
