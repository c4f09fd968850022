"""The LLM plugins: parts (an entity extractor, an entity matcher, a relevance judge, a
statement attributor) and the three LLM context metrics built from them as pipelines.

* ``llm_context_precision_with_reference`` / ``..._without_reference``: the retrieved chunks
  judged by :class:`LLMRelevanceJudge` (a matcher) against the reference / the response, into
  the ``AveragePrecision`` formula;
* ``llm_context_recall``: the reference split into statements and each attributed to the
  retrieved contexts by :class:`StatementAttributor` (one request: the split-and-attribute
  part kind), into the ``Recall`` formula.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Literal

import anyio
import attrs

from ctxeval.plugin import (
    Dependency,
    Items,
    Judgement,
    Pipeline,
    PipelineMetric,
    RunContext,
    Sample,
    SplitAndAttribute,
    Unit,
    Verdict,
    judge_part,
    judges_option,
    jury_option,
    policy,
    repeats_option,
    temperature_option,
    validators,
)

from . import prompts
from .client import ask
from .config import resolve_llm

__all__ = [
    "LLMContextPrecisionWithReference",
    "LLMContextPrecisionWithoutReference",
    "LLMContextRecall",
    "LLMEntityExtractor",
    "LLMEntityMatcher",
    "LLMRelevanceJudge",
    "StatementAttributor",
]


def _size(prompt: prompts.Prompt, variables: dict[str, str]) -> int:
    return sum(len(m["content"]) for m in prompt.messages(variables, schema_in_prompt=False))


def _versions(*used: prompts.Prompt) -> str:
    return ",".join(f"{p.name}@{p.version}" for p in used)


def _provenance(llm: Any, ctx: RunContext, *used: prompts.Prompt) -> dict[str, Any]:
    """Who answers: the judge model, its endpoint and the prompt versions (a row's
    ``details["provenance"]``)."""
    config = resolve_llm(llm if llm is not None else ctx.llm)
    return {
        "model": config.model,
        "endpoint": config.endpoint,
        "prompts": _versions(*used).split(","),
    }


def _question(ctx: RunContext | None, sample: Sample | None = None) -> str:
    sample = sample if sample is not None else (ctx.sample if ctx is not None else None)
    return (sample.user_input if sample is not None else None) or ""


_NEEDS: tuple[Dependency, ...] = ()  # the openai transport (httpx) is in the core


@attrs.frozen(kw_only=True)
class LLMEntityExtractor:
    """Extractor ``llm``: named entities by an LLM, one request per text (run concurrently)."""

    registry_name: ClassVar[str] = "llm"
    dependencies: ClassVar[tuple[Dependency, ...]] = _NEEDS
    needs_llm: ClassVar[bool] = True
    name: str = "llm"
    llm: Any = attrs.field(default=None, repr=False)

    @property
    def fingerprint_data(self) -> str:
        """The prompt version (a resumed run recomputes rows when it changes)."""
        return _versions(prompts.ENTITIES)

    def provenance(self, ctx: RunContext) -> dict[str, Any]:
        return _provenance(self.llm, ctx, prompts.ENTITIES)

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
    needs_llm: ClassVar[bool] = True
    name: str = "llm"
    llm: Any = attrs.field(default=None, repr=False)

    @property
    def fingerprint_data(self) -> str:
        return _versions(prompts.ENTITY_PRESENCE)

    def provenance(self, ctx: RunContext) -> dict[str, Any]:
        return _provenance(self.llm, ctx, prompts.ENTITY_PRESENCE)

    def estimate_calls(
        self, items: Sequence[str], candidates: Sequence[str], sample: Sample | None = None
    ) -> list[int]:
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
class LLMRelevanceJudge:
    """Matcher ``llm_relevance``: an LLM judges each item (a retrieved chunk) useful or not for
    arriving at the candidate answer text, given the sample's question (``ctx.sample``).

    Options:
        batch: judge all chunks of a sample in one request instead of one request per chunk.
        llm: the LLM (default: the run's ``llm=``).
    """

    registry_name: ClassVar[str] = "llm_relevance"
    dependencies: ClassVar[tuple[Dependency, ...]] = _NEEDS
    needs_llm: ClassVar[bool] = True
    name: str = "llm_relevance"
    batch: bool = attrs.field(default=False, validator=validators.boolean)
    llm: Any = attrs.field(default=None, repr=False)

    @property
    def fingerprint_data(self) -> str:
        return _versions(prompts.USEFULNESS_BATCH if self.batch else prompts.USEFULNESS)

    def provenance(self, ctx: RunContext) -> dict[str, Any]:
        used = prompts.USEFULNESS_BATCH if self.batch else prompts.USEFULNESS
        return _provenance(self.llm, ctx, used)

    def estimate_calls(
        self, items: Sequence[str], candidates: Sequence[str], sample: Sample | None = None
    ) -> list[int]:
        """The prompt size (characters) of each request judging ``items`` would send."""
        if not items or not candidates:
            return []
        question, answer = _question(None, sample), "\n".join(candidates)
        if self.batch:
            listing = "\n".join(f"[{i}] {c}" for i, c in enumerate(items, start=1))
            variables = {"question": question, "answer": answer, "contexts": listing}
            return [_size(prompts.USEFULNESS_BATCH, variables)]
        return [
            _size(prompts.USEFULNESS, {"question": question, "answer": answer, "context": c})
            for c in items
        ]

    async def match(
        self, items: Sequence[str], candidates: Sequence[str], ctx: RunContext
    ) -> list[Verdict]:
        question, answer = _question(ctx), "\n".join(candidates)
        if self.batch:
            listing = "\n".join(f"[{i}] {c}" for i, c in enumerate(items, start=1))
            judged = await ask(
                ctx,
                self.llm,
                prompts.USEFULNESS_BATCH,
                {"question": question, "answer": answer, "contexts": listing},
                expect=len(items),
            )
        else:
            judged = [{}] * len(items)

            async def one(index: int, context: str) -> None:
                judged[index] = await ask(
                    ctx,
                    self.llm,
                    prompts.USEFULNESS,
                    {"question": question, "answer": answer, "context": context},
                )

            async with anyio.create_task_group() as group:
                for index, context in enumerate(items):
                    group.start_soon(one, index, context)
        return [Verdict(v["verdict"] == 1, float(v["verdict"]), None, v["reason"]) for v in judged]


@attrs.frozen(kw_only=True)
class StatementAttributor:
    """Attributor (split-and-attribute): one request splits a text into its statements and
    decides for each whether the candidates (the retrieved contexts) support it, given the
    sample's question."""

    needs_llm: ClassVar[bool] = True
    name: str = "llm_statements"
    llm: Any = attrs.field(default=None, repr=False)

    @property
    def fingerprint_data(self) -> str:
        return _versions(prompts.ATTRIBUTION, prompts.ATTRIBUTION_GIVEN)

    def provenance(self, ctx: RunContext) -> dict[str, Any]:
        return _provenance(self.llm, ctx, prompts.ATTRIBUTION)

    def estimate_calls(
        self, text: str, candidates: Sequence[str], sample: Sample | None = None
    ) -> list[int]:
        """The prompt size (characters) of the one request."""
        variables = {
            "question": _question(None, sample),
            "context": "\n".join(candidates),
            "answer": text,
        }
        return [_size(prompts.ATTRIBUTION, variables)]

    async def match(
        self, items: Sequence[str], candidates: Sequence[str], ctx: RunContext
    ) -> list[Verdict]:
        """Judge statements already split (a panel's further judgements of the statements
        its first judge split): one request for all of them."""
        if not items:
            return []
        listing = "\n".join(f"[{i}] {s}" for i, s in enumerate(items, start=1))
        verdicts = await ask(
            ctx,
            self.llm,
            prompts.ATTRIBUTION_GIVEN,
            {"question": _question(ctx), "context": "\n".join(candidates), "statements": listing},
            expect=len(items),
        )
        return [Verdict(v["attributed"] == 1, None, None, v["reason"]) for v in verdicts]

    async def attribute(
        self, text: str, candidates: Sequence[str], ctx: RunContext
    ) -> list[tuple[Unit, Verdict]]:
        classifications = await ask(
            ctx,
            self.llm,
            prompts.ATTRIBUTION,
            {"question": _question(ctx), "context": "\n".join(candidates), "answer": text},
        )
        return [
            (
                Unit(c["statement"], "STATEMENT"),
                Verdict(c["attributed"] == 1, None, None, c["reason"]),
            )
            for c in classifications
        ]


@attrs.frozen(kw_only=True)
class _LLMPrecision(PipelineMetric):
    """Average precision over an LLM's usefulness verdict on each retrieved chunk."""

    dependencies: ClassVar[tuple[Dependency, ...]] = _NEEDS
    answer_field: ClassVar[Literal["reference", "response"]] = "reference"

    llm: Any = attrs.field(default=None, repr=False)
    """The LLM (default: the run's ``llm=``)."""
    batch: bool = attrs.field(default=False, validator=validators.boolean)
    """Judge all chunks of a sample in one request instead of one request per chunk."""
    judges: tuple[Any, ...] = judges_option()
    """A jury: two or more LLMs (model strings, settings or callables) in place of ``llm``."""
    repeats: int = repeats_option()
    """Judgements per judge and chunk (the majority verdict is used; flips are reported)."""
    jury: str = jury_option()
    """How a jury's verdicts combine: ``majority`` or ``escalate`` (the last judge only where
    the first ones are unsure or disagree)."""
    repeat_temperature: float = temperature_option()
    """The temperature of repeated judgements (``repeats`` > 1)."""

    def build(self) -> Pipeline:
        return Pipeline(
            reference=Items(
                field=self.answer_field,
                what=f"{self.answer_field} text to judge the chunks against",
            ),
            retrieved=Items(field="retrieved_contexts", what="retrieved contexts"),
            matcher=judge_part(
                lambda llm: LLMRelevanceJudge(batch=self.batch, llm=llm),
                llm=self.llm,
                judges=self.judges,
                repeats=self.repeats,
                rule=self.jury,
                temperature=self.repeat_temperature,
            ),
            formula=policy.AveragePrecision(),
        )

    def evidence(self, judgement: Judgement) -> dict[str, Any]:
        return {
            "judged": "retrieved",
            "verdicts": [
                {"index": i, "verdict": int(v.matched), "reason": v.reason}
                for i, v in enumerate(judgement.verdicts)
            ],
        }


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
class LLMContextRecall(PipelineMetric):
    """``llm_context_recall`` (alias ``context_recall``): the share of the reference's
    statements an LLM attributes to the retrieved contexts; one request per sample."""

    registry_name = "llm_context_recall"
    requires = ("user_input", "reference", "retrieved_contexts")
    dependencies: ClassVar[tuple[Dependency, ...]] = _NEEDS
    llm: Any = attrs.field(default=None, repr=False)
    """The LLM (default: the run's ``llm=``)."""
    judges: tuple[Any, ...] = judges_option()
    """A jury: two or more LLMs in place of ``llm``; the first splits the reference."""
    repeats: int = repeats_option()
    """Judgements per judge and statement (the majority verdict is used)."""
    jury: str = jury_option()
    """How a jury's verdicts combine: ``majority`` or ``escalate``."""
    repeat_temperature: float = temperature_option()
    """The temperature of repeated judgements (``repeats`` > 1)."""

    def build(self) -> Pipeline:
        return Pipeline(
            reference=SplitAndAttribute(
                field="reference",
                attributor=judge_part(
                    lambda llm: StatementAttributor(llm=llm),
                    llm=self.llm,
                    judges=self.judges,
                    repeats=self.repeats,
                    rule=self.jury,
                    temperature=self.repeat_temperature,
                ),
                what="reference statements",
            ),
            retrieved=Items(field="retrieved_contexts", what="retrieved contexts"),
            formula=policy.Recall(),
        )

    def evidence(self, judgement: Judgement) -> dict[str, Any]:
        return {
            "statements": [
                {"statement": u.text, "reason": v.reason, "attributed": int(v.matched)}
                for u, v in zip(judgement.units, judgement.verdicts, strict=True)
            ]
        }
