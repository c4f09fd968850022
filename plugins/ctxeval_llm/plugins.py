"""The LLM plugins: an entity extractor, an entity matcher and the three LLM context metrics."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import anyio
import attrs

from ctxeval import MetricResult, RunContext, Sample, Unit, Verdict, policy
from ctxeval.base import BaseMetric, Dependency

from . import prompts
from .client import ask

__all__ = [
    "LLMContextPrecisionWithReference",
    "LLMContextPrecisionWithoutReference",
    "LLMContextRecall",
    "LLMEntityExtractor",
    "LLMEntityMatcher",
]

LLM_EXTRA = "pip install 'ctxeval[llm]'"


def _size(prompt: prompts.Prompt, variables: dict[str, str]) -> int:
    return sum(len(m["content"]) for m in prompt.messages(variables, schema_in_prompt=False))


_NEEDS: tuple[Dependency, ...] = ()  # the direct transport needs nothing beyond the core


@attrs.frozen(kw_only=True)
class LLMEntityExtractor:
    """Extractor ``llm``: named entities by an LLM, one request per text (run concurrently)."""

    registry_name: ClassVar[str] = "llm"
    dependencies: ClassVar[tuple[Dependency, ...]] = _NEEDS
    name: str = "llm"
    llm: Any = attrs.field(default=None, repr=False)

    def estimate_calls(self, texts: Sequence[str]) -> list[int]:
        """The prompt size (characters) of the request each non-empty text needs."""
        return [_size(prompts.ENTITIES, {"text": t}) for t in texts if t.strip()]

    async def extract(self, texts: Sequence[str], ctx: RunContext) -> list[list[Unit]]:
        results: list[list[Unit]] = [[] for _ in texts]

        async def one(index: int, text: str) -> None:
            if not text.strip():
                return
            entities = await ask(ctx, self.llm, prompts.ENTITIES, {"text": text})
            results[index] = [Unit(e, "ENTITY") for e in entities if e.strip()]

        async with anyio.create_task_group() as group:
            for index, text in enumerate(texts):
                group.start_soon(one, index, text)
        return results


@attrs.frozen(kw_only=True)
class LLMEntityMatcher:
    """Matcher ``llm``: an LLM says which entities a context mentions (variants accepted);
    one request per sample."""

    registry_name: ClassVar[str] = "llm"
    dependencies: ClassVar[tuple[Dependency, ...]] = _NEEDS
    name: str = "llm"
    llm: Any = attrs.field(default=None, repr=False)

    def estimate_calls(self, items: Sequence[str], candidates: Sequence[str]) -> list[int]:
        """The prompt size (characters) of the one request, or none without candidates."""
        if not candidates:
            return []
        listing = "\n".join(f"[{i}] {item}" for i, item in enumerate(items, start=1))
        variables = {"entities": listing, "context": "\n".join(candidates)}
        return [_size(prompts.ENTITY_PRESENCE, variables)]

    async def match(
        self, items: Sequence[str], candidates: Sequence[str], ctx: RunContext
    ) -> list[Verdict]:
        if not items:
            return []
        if not candidates:
            return [Verdict(False) for _ in items]
        listing = "\n".join(f"[{i}] {item}" for i, item in enumerate(items, start=1))
        flags = await ask(
            ctx,
            self.llm,
            prompts.ENTITY_PRESENCE,
            {"entities": listing, "context": "\n".join(candidates)},
            expect=len(items),
        )
        return [Verdict(bool(flag), float(flag)) for flag in flags]


@attrs.frozen(kw_only=True)
class _LLMPrecision(BaseMetric):
    """Average precision over an LLM's usefulness verdict on each retrieved chunk."""

    dependencies: ClassVar[tuple[Dependency, ...]] = _NEEDS
    llm: Any = attrs.field(default=None, repr=False)
    """The LLM (default: the run's ``llm=``)."""
    batch: bool = attrs.field(default=False, validator=attrs.validators.instance_of(bool))
    """Judge all chunks of a sample in one request instead of one request per chunk."""

    answer_field: ClassVar[str] = "reference"

    def estimate_calls(self, sample: Sample) -> list[int]:
        """The prompt size (characters) of each request scoring ``sample`` would send."""
        answer = getattr(sample, self.answer_field) or ""
        contexts = sample.retrieved_contexts or ()
        if not answer.strip() or not contexts:
            return []
        question = sample.user_input or ""
        if self.batch:
            listing = "\n".join(f"[{i}] {c}" for i, c in enumerate(contexts, start=1))
            variables = {"question": question, "answer": answer, "contexts": listing}
            return [_size(prompts.USEFULNESS_BATCH, variables)]
        return [
            _size(prompts.USEFULNESS, {"question": question, "answer": answer, "context": c})
            for c in contexts
        ]

    async def ascore(self, sample: Sample, ctx: RunContext) -> MetricResult:
        answer = getattr(sample, self.answer_field) or ""
        contexts = sample.retrieved_contexts or ()
        if not answer.strip():
            return policy.no_reference(f"{self.answer_field} text to judge the chunks against")
        if not contexts:
            return policy.average_precision([])
        question = sample.user_input or ""
        if self.batch:
            listing = "\n".join(f"[{i}] {c}" for i, c in enumerate(contexts, start=1))
            verdicts = await ask(
                ctx,
                self.llm,
                prompts.USEFULNESS_BATCH,
                {"question": question, "answer": answer, "contexts": listing},
                expect=len(contexts),
            )
        else:
            verdicts = [{}] * len(contexts)

            async def one(index: int, context: str) -> None:
                verdicts[index] = await ask(
                    ctx,
                    self.llm,
                    prompts.USEFULNESS,
                    {"question": question, "answer": answer, "context": context},
                )

            async with anyio.create_task_group() as group:
                for index, context in enumerate(contexts):
                    group.start_soon(one, index, context)
        evidence = [
            {"index": i, "verdict": v["verdict"], "reason": v["reason"]}
            for i, v in enumerate(verdicts)
        ]
        return policy.average_precision(
            [v["verdict"] == 1 for v in verdicts], details={"verdicts": evidence}
        )


@attrs.frozen(kw_only=True)
class LLMContextPrecisionWithReference(_LLMPrecision):
    """``llm_context_precision_with_reference`` (alias ``context_precision``): each chunk is
    judged useful or not for arriving at the reference answer."""

    registry_name = "llm_context_precision_with_reference"
    requires = ("user_input", "reference", "retrieved_contexts")
    answer_field = "reference"


@attrs.frozen(kw_only=True)
class LLMContextPrecisionWithoutReference(_LLMPrecision):
    """``llm_context_precision_without_reference`` (alias ``context_utilization``): each chunk
    is judged useful or not for arriving at the system's own response."""

    registry_name = "llm_context_precision_without_reference"
    requires = ("user_input", "response", "retrieved_contexts")
    answer_field = "response"


@attrs.frozen(kw_only=True)
class LLMContextRecall(BaseMetric):
    """``llm_context_recall`` (alias ``context_recall``): the share of the reference's
    statements an LLM attributes to the retrieved contexts; one request per sample."""

    registry_name = "llm_context_recall"
    requires = ("user_input", "reference", "retrieved_contexts")
    dependencies: ClassVar[tuple[Dependency, ...]] = _NEEDS
    llm: Any = attrs.field(default=None, repr=False)

    def estimate_calls(self, sample: Sample) -> list[int]:
        """The prompt size (characters) of the request scoring ``sample`` would send."""
        reference = sample.reference or ""
        contexts = sample.retrieved_contexts or ()
        if not reference.strip() or not contexts:
            return []
        variables = {
            "question": sample.user_input or "",
            "context": "\n".join(contexts),
            "answer": reference,
        }
        return [_size(prompts.ATTRIBUTION, variables)]

    async def ascore(self, sample: Sample, ctx: RunContext) -> MetricResult:
        reference = sample.reference or ""
        contexts = sample.retrieved_contexts or ()
        if not reference.strip():
            return policy.no_reference("reference statements (the reference is empty)")
        if not contexts:
            return MetricResult.ok(0.0, details={"nothing_retrieved": True})
        classifications = await ask(
            ctx,
            self.llm,
            prompts.ATTRIBUTION,
            {
                "question": sample.user_input or "",
                "context": "\n".join(contexts),
                "answer": reference,
            },
        )
        attributed = sum(c["attributed"] for c in classifications)
        return policy.recall(
            attributed,
            len(classifications),
            what="reference statements",
            details={"statements": classifications},
        )
