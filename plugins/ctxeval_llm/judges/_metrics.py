"""The LLM plugins: parts (an entity extractor, an entity matcher, a relevance judge, a
statement attributor) and the three LLM context metrics built from them as pipelines.

* ``llm_context_precision_with_reference`` / ``..._without_reference``: the retrieved chunks
  judged by :class:`LLMRelevanceJudge` (a matcher) against the reference / the response, into
  the ``AveragePrecision`` formula;
* ``llm_context_recall``: the reference split into statements and each attributed to the
  retrieved contexts by :class:`StatementAttributor` (one request: the split-and-attribute
  part kind), into the ``Recall`` formula;
* ``context_relevance`` (no reference): each retrieved chunk graded 0 to 3 by an LLM (the
  UMBRELA scale), the grades scored by a measure (mean grade, precision, AP, nDCG) through the
  policy's formulas; the judgements are shared by the run's metrics (:class:`SharedJudgements`);
* ``context_sufficiency`` (no reference needed): whether the contexts are enough to answer the
  question, by :class:`SufficiencyJudge` (a matcher judging the question), into ``Recall``.
"""

from __future__ import annotations

import hashlib
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, ClassVar, Literal

import anyio
import attrs

from ctxeval.plugin import (
    BaseMetric,
    Dependency,
    Items,
    Judgement,
    MetricResult,
    Pipeline,
    PipelineMetric,
    RetrievalUnits,
    RunContext,
    Sample,
    SplitAndAttribute,
    Unit,
    Verdict,
    __version__,
    cache_key,
    judge_part,
    judges_option,
    jury_option,
    normalize_entity,
    normalize_words,
    policy,
    repeats_option,
    temperature_option,
    validators,
)
from ctxeval_llm._ask.client import Mode, ask, bound_llm, request_body
from ctxeval_llm._ask.fanout import at_once
from ctxeval_llm._parsing import redact
from ctxeval_llm.config import LLMConfig

from . import prompts
from ._steps import StepsAsContext, context_option

logger = logging.getLogger("ctxeval_llm.judges")


def _size(prompt: prompts.Prompt, variables: dict[str, str]) -> int:
    return sum(len(m["content"]) for m in prompt.messages(variables, schema_in_prompt=False))


def _versions(*used: prompts.Prompt) -> str:
    return ",".join(f"{p.name}@{p.version}" for p in used)


def _provenance(llm: Any, ctx: RunContext, *used: prompts.Prompt) -> dict[str, Any]:
    """Who answers: the judge model, its endpoint and the prompt versions (a row's
    ``details["provenance"]``), from the run's binding of the setting (one per row: its
    parts worked out once per run, #58)."""
    bound = bound_llm(ctx, llm)
    config, output = bound.config, bound.output
    found = {
        "model": config.model,
        "endpoint": bound.shown_endpoint,
        "prompts": _versions(*used).split(","),
        "temperature": config.temperature,
        "max_tokens": config.max_tokens,
        "output_mode": output.mode,
    }
    served = output.served
    listed = bound.slots.models
    if listed and len(listed) == 1:
        served = listed[0]  # a local server's one model: the file it loaded
    if served is not None:  # a string from an answer: no key reaches a file (redacted)
        served = redact(served, *output.secrets)
    if served is not None and served != config.wire_model:
        found["served_model"] = served  # what answered, when it is not what was asked
    return found


def _question(ctx: RunContext | None, sample: Sample | None = None) -> str:
    sample = sample if sample is not None else (ctx.sample if ctx is not None else None)
    return (sample.user_input if sample is not None else None) or ""


_NEEDS: tuple[Dependency, ...] = ()  # the openai transport (httpx) is in the core


def in_text(entities: Sequence[str], text: str) -> list[Unit]:
    """The ``entities`` an LLM listed that ``text`` holds (compared as entities are: case,
    possessives, punctuation folded; word for word). A model may list what is not there (the
    prompt's own example, say): those are left out, and logged."""
    words = f" {normalize_words(text)} "
    kept: list[str] = []
    invented: list[str] = []
    for entity in entities:
        key = normalize_entity(entity)
        if not key:
            continue
        (kept if f" {key} " in words else invented).append(entity)
    if invented:
        logger.info("the LLM listed entities the text does not hold, left out: %s", invented)
    return [Unit(e, "ENTITY") for e in kept]


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
            results[index] = in_text(entities, text)

        await at_once(one, list(enumerate(texts)), "ctxeval_llm: entities")
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

            await at_once(one, list(enumerate(items)), "ctxeval_llm: usefulness")
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
class _LLMPrecision(StepsAsContext, PipelineMetric):  # type: ignore[override]
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
    context: str = context_option()
    """``retrieved`` (default): judge ``retrieved_contexts``; ``steps``: judge the union of
    the sample's ``retrieval_steps`` (each item once, in the order first returned)."""

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
    """Average precision of the retrieved chunks an LLM judges useful for arriving at the
    reference answer.

    Alias ``context_precision``.
    """

    registry_name = "llm_context_precision_with_reference"
    fields = ("user_input", "reference", "retrieved_contexts")
    answer_field = "reference"


@attrs.frozen(kw_only=True)
class LLMContextPrecisionWithoutReference(_LLMPrecision):
    """Average precision of the retrieved chunks an LLM judges useful for arriving at the
    system's own response.

    Alias ``context_utilization``.
    """

    registry_name = "llm_context_precision_without_reference"
    fields = ("user_input", "response", "retrieved_contexts")
    answer_field = "response"


@attrs.frozen(kw_only=True)
class LLMContextRecall(StepsAsContext, PipelineMetric):  # type: ignore[override]
    """Share of the reference's statements an LLM attributes to the retrieved contexts; one
    request per sample.

    Alias ``context_recall``.
    """

    registry_name = "llm_context_recall"
    fields = ("user_input", "reference", "retrieved_contexts")
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
    context: str = context_option()
    """``retrieved`` (default): judge ``retrieved_contexts``; ``steps``: judge the union of
    the sample's ``retrieval_steps`` (each item once, in the order first returned)."""

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


# --- judging retrieval without a reference -------------------------------------------------

RELEVANCE_MEASURES = ("mean", "precision", "ap", "ndcg")
"""The measures ``context_relevance`` computes from the chunks' grades."""

DEFAULT_MIN_GRADE = 1
"""The least grade that counts as relevant for ``precision`` and ``ap``: 1, as trec_eval's
default relevance level (``-l 1``) and the ID metrics' ``relevance_level``, so that
``context_relevance`` and the IR measures on its written qrels agree (#57). UMBRELA's "has
some answer" (TREC DL's ``-l 2``) is ``min_grade=2`` here and ``relevance_level=2`` there."""

_MEMO_SIZE = 4096
"""Finished judgements a run keeps in memory for its other metrics (the oldest go first)."""


def doc_id_of(text: str) -> str:
    """The ID of a chunk that has none: ``sha1:`` and the first 16 hex digits of the SHA-1 of
    its UTF-8 text (``details["qrels"]`` of ``context_relevance``)."""
    return "sha1:" + hashlib.sha1(text.encode("utf-8")).hexdigest()[:16]


def relevance_score(
    grades: Sequence[int],
    measure: str = "mean",
    *,
    k: int | None = None,
    min_grade: int = DEFAULT_MIN_GRADE,
) -> float:
    """The score of the chunks' grades (0 to 3, in retrieved order) by ``measure``:

    * ``mean``: the mean grade / 3 (over the first ``k`` ranks, an empty rank grade 0);
    * ``precision``: the share of chunks graded ``min_grade`` or more (``policy.Precision``;
      with ``k``, those in the top k / k, trec_eval's ``P_k``);
    * ``ap``: average precision, relevant = graded ``min_grade`` or more, the relevant items
      being the relevant chunks judged (trec_eval's ``map``; with ``k``, ``map_cut_k``);
    * ``ndcg``: nDCG with gain = grade, the ideal ranking made of the judged chunks' grades
      (trec_eval's ``ndcg_cut_k``; without ``k``, over the whole list): ``policy.NDCGAtK``.

    A list where no chunk is relevant scores 0 (as trec_eval scores it; the metric makes
    that row ``undefined`` unless ``trec_eval_averaging``, as the ID metrics do).
    """
    if not grades:
        raise ValueError("no grades: a score needs at least one judged chunk")
    if measure not in RELEVANCE_MEASURES:
        raise ValueError(f"measure must be one of {', '.join(RELEVANCE_MEASURES)}, got {measure!r}")
    flags = [g >= min_grade for g in grades]
    if measure == "mean":
        top = grades[:k] if k is not None else grades
        # integers: all 3s give exactly 1.0
        return sum(top) / (prompts.TOP_GRADE * (k if k is not None else len(grades)))
    if measure == "precision":
        at: policy.Formula = policy.PrecisionAtK(k=k) if k is not None else policy.Precision()
        return at.value(flags, 1)
    if measure == "ap":
        ranked: policy.Formula = (
            policy.RankedAveragePrecisionAtK(k=k)
            if k is not None
            else policy.RankedAveragePrecision()
        )
        return ranked.value(flags, sum(flags))  # 0.0 when none is relevant
    ndcg = policy.NDCGAtK(k=k if k is not None else len(grades))
    return ndcg.graded_value(list(grades), list(grades))


class _Pending:
    """A judgement being made: what the metrics that want it too wait for."""

    __slots__ = ("done", "error", "event", "value")

    def __init__(self) -> None:
        self.event = anyio.Event()
        self.done = False
        self.value: Any = None
        self.error: Exception | None = None


class SharedJudgements:
    """The judgements of one run, shared by its metrics: a judgement asked for while the same
    one is being made waits for it, and the last :data:`_MEMO_SIZE` finished ones are kept.

    Keyed by everything that makes the answer (the grader's model, endpoint and request, the
    prompt and its version), so two metrics share a judgement exactly when they would send the
    same request. A judgement that fails fails for the metrics waiting on it too; one whose
    maker was cancelled is made again by the next that wants it.
    """

    def __init__(self, size: int = _MEMO_SIZE) -> None:
        self.size = size
        self._done: OrderedDict[str, Any] = OrderedDict()
        self._pending: dict[str, _Pending] = {}

    async def get(self, key: str, make: Callable[[], Awaitable[Any]]) -> tuple[Any, bool]:
        """The judgement under ``key`` and whether it was shared (made by another metric), or
        made now by ``make()``."""
        while True:
            if key in self._done:
                self._done.move_to_end(key)
                return self._done[key], True
            pending = self._pending.get(key)
            if pending is None:
                break
            await pending.event.wait()
            if pending.error is not None:
                raise pending.error
            if pending.done:
                return pending.value, True
            # its maker was cancelled: make it here
        pending = self._pending[key] = _Pending()
        try:
            value = await make()
        except Exception as exc:
            pending.error = exc
            raise
        else:
            pending.value, pending.done = value, True
            self._done[key] = value
            while len(self._done) > self.size:
                self._done.popitem(last=False)
            return value, False
        finally:  # (cancelled: neither done nor failed, the next waiter makes it)
            del self._pending[key]
            pending.event.set()


def _judgement_key(config: LLMConfig, prompt: prompts.Prompt, variables: dict[str, str]) -> str:
    """What makes a judgement: the grader and the request it sends (never its key)."""
    own = None if isinstance(config.transport, str) else id(config.transport)
    mode: Mode = "json_schema" if config.json_schema else "prompt"  # as first sent
    return cache_key(
        resource=config.resource,
        request=request_body(config, prompt, variables, mode),
        prompt=f"{prompt.name}@{prompt.version}",
        completion=None if config.completion is None else id(config.completion),
        transport=own,
    )


def _listing(texts: Sequence[str]) -> str:
    return "\n".join(f"[{i}] {text}" for i, text in enumerate(texts, start=1))


_BLANK_CHUNK = {"grade": 0, "reason": "the chunk is blank: nothing to judge"}


@attrs.frozen(kw_only=True)
class ContextRelevance(StepsAsContext, BaseMetric):  # type: ignore[override]
    """How relevant the retrieved chunks are to the question, with no reference: an LLM grades
    each chunk 0 to 3 (the UMBRELA scale) and the grades give the score (``measure``).

    Each (question, chunk) is judged once per grader: the metrics of a run that use the same
    LLM and mode share the judgements (``-m context_relevance -m
    context_relevance:measure=ndcg,k=5`` sends one request per chunk), and the cache keeps
    them for the next run. ``details["qrels"]`` lists ``[doc_id, grade]`` per document: the
    sample's ``retrieved_context_ids`` when it has them, else ``sha1:`` of the chunk's text.
    """

    registry_name = "context_relevance"
    fields = ("user_input", "retrieved_contexts")
    dependencies: ClassVar[tuple[Dependency, ...]] = _NEEDS

    measure: str = attrs.field(
        default="mean", validator=validators.one_of(*RELEVANCE_MEASURES, what="measure")
    )
    """``mean`` (mean grade / 3), ``precision`` (share of chunks graded ``min_grade`` or
    more), ``ap`` (average precision at ``min_grade``) or ``ndcg`` (gain = grade)."""
    k: int | None = attrs.field(
        default=None, validator=validators.optional(validators.positive_int)
    )
    """Score the top k chunks only (every chunk is still judged: the ideal of ``ndcg`` and the
    relevant chunks of ``ap`` count them all, as trec_eval counts its qrels)."""
    min_grade: int | None = attrs.field(default=None)
    """The least grade that counts as relevant for ``precision`` and ``ap`` (default 1, the
    ID metrics' ``relevance_level``)."""
    trec_eval_averaging: bool = attrs.field(default=False, validator=validators.boolean)
    """A question with no chunk graded relevant (``min_grade`` or more; for ``ndcg``, above 0)
    scores 0 with ``precision``, ``ap`` and ``ndcg`` (trec_eval's averaging) instead of
    ``undefined``: the rule of the ID metrics on the written qrels (#57)."""
    batch: bool = attrs.field(default=False, validator=validators.boolean)
    """Grade all chunks of a sample in one request instead of one request per chunk."""
    llm: Any = attrs.field(default=None, repr=False)
    """The LLM (default: the run's ``llm=``)."""
    context: str = context_option()
    """``retrieved`` (default): judge ``retrieved_contexts``; ``steps``: judge the union of
    the sample's ``retrieval_steps`` (each item once, in the order first returned)."""
    unit: str = attrs.field(default="chunk")
    """``"chunk"`` (default) or ``"document"``: each document once, graded as its best chunk,
    at its first chunk's rank (see docs/metrics/units.md)."""
    doc_id_separator: str | None = attrs.field(default=None)
    """For chunk IDs that name their document (``doc#segment``): the separator."""
    duplicates: float | None = attrs.field(default=None)
    """Drop near-duplicate chunks (at least this similar; 1.0: identical) before grading."""
    units: RetrievalUnits = attrs.field(init=False, repr=False, eq=False)
    """The three options above, applied as every context metric applies them."""

    def __attrs_post_init__(self) -> None:
        RetrievalUnits.bind(self, super().__attrs_post_init__)

    def prepared(self, sample: Sample) -> Sample | MetricResult:
        """``sample`` as the metric grades it (duplicates dropped, documents named), or the
        error row saying why it cannot be."""
        try:
            return self.units.prepare(sample, self.fields)
        except ValueError as exc:  # (a DataError)
            return MetricResult.error(str(exc), details=self.settings())

    def by_document(self, sample: Sample, grades: list[int]) -> list[int]:
        """The grades the score reads: each chunk's, or at document level each document's
        (its best chunk's, at its first rank)."""
        sources = sample.retrieved_context_sources
        if not self.units.by_document or sources is None or len(sources) != len(grades):
            return grades
        return [max(grades[i] for i in group) for group in self.units.groups(sources)]

    @min_grade.validator
    def _check_min_grade(self, attribute: attrs.Attribute[Any], value: Any) -> None:
        if value is None:
            return
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 3:
            raise ValueError(f"min_grade must be 1, 2 or 3, got {value!r}")
        if self.measure not in ("precision", "ap"):
            raise ValueError(
                f"min_grade applies to measure='precision' or 'ap', not {self.measure!r} "
                "(which use the grades themselves)"
            )

    # --- what the run reads ------------------------------------------------------------------

    @property
    def needs_llm(self) -> bool:
        """True when it has no ``llm`` of its own (it uses the run's)."""
        return self.llm is None

    @property
    def threshold(self) -> int:
        """The least grade that counts as relevant."""
        return self.min_grade if self.min_grade is not None else DEFAULT_MIN_GRADE

    @property
    def prompt(self) -> prompts.Prompt:
        return prompts.RELEVANCE_BATCH if self.batch else prompts.RELEVANCE

    @property
    def fingerprint_data(self) -> str:
        """The prompt version (a resumed run recomputes rows when it changes)."""
        return _versions(self.prompt)

    def default_name(self) -> str:
        if self.measure == "mean" and self.k is None:
            return self.registry_name
        name = f"{self.registry_name}_{self.measure}"
        if self.k is not None:
            name += f"_at_{self.k}"
        if self.min_grade is not None and self.min_grade != DEFAULT_MIN_GRADE:
            name += f"_min{self.min_grade}"
        return name

    def settings(self) -> dict[str, Any]:
        """The options that change the score (every row carries them)."""
        out: dict[str, Any] = {"measure": self.measure}
        if self.k is not None:
            out["k"] = self.k
        if self.measure in ("precision", "ap"):
            out["min_grade"] = self.threshold
        if self.trec_eval_averaging:
            out["trec_eval_averaging"] = True
        return {**out, **self.units.settings()}

    def provenance(self, ctx: RunContext) -> dict[str, Any]:
        """Who grades: ctxeval's version, the judge's model, endpoint and prompt version."""
        return {"ctxeval": __version__, "judges": [_provenance(self.llm, ctx, self.prompt)]}

    def estimate_calls(self, sample: Sample) -> list[int]:
        """The prompt sizes (characters) of the requests scoring ``sample`` would send (one per
        distinct chunk, or one per sample with ``batch``; none when it is decided at once)."""
        given = self.judged_sample(sample)
        if isinstance(given, MetricResult):
            return []
        prepared = self.prepared(given)
        if isinstance(prepared, MetricResult):
            return []
        sample = prepared
        question = sample.user_input or ""
        chunks = self._distinct(sample.retrieved_contexts or ())
        if not question.strip() or not chunks or self._ids_problem(sample) is not None:
            return []
        if self.batch:
            variables = {"question": question, "contexts": _listing(chunks)}
            return [_size(prompts.RELEVANCE_BATCH, variables)]
        return [_size(prompts.RELEVANCE, {"question": question, "context": c}) for c in chunks]

    # --- scoring -------------------------------------------------------------------------------

    @staticmethod
    def _distinct(chunks: Sequence[str]) -> list[str]:
        """The chunks to ask about: each text once, blank ones left out (graded 0)."""
        return list(dict.fromkeys(c for c in chunks if c.strip()))

    @staticmethod
    def _ids_problem(sample: Sample) -> str | None:
        ids, chunks = sample.retrieved_context_ids, sample.retrieved_contexts or ()
        if ids is not None and len(ids) != len(chunks):
            return (
                f"retrieved_context_ids has {len(ids)} IDs for {len(chunks)} retrieved "
                "contexts: the chunks cannot be named (give one ID per context, or none)"
            )
        return None

    async def ascore(self, sample: Sample, ctx: RunContext) -> MetricResult:
        given = self.judged_sample(sample)
        if isinstance(given, MetricResult):
            return given
        prepared = self.prepared(given)
        if isinstance(prepared, MetricResult):
            return prepared
        sample = prepared
        settings = self.settings()
        question = sample.user_input or ""
        chunks = list(sample.retrieved_contexts or ())
        if not question.strip():
            return MetricResult.undefined(
                "no question: user_input is empty, nothing to judge the chunks against",
                details=settings,
            )
        if not chunks:
            return policy.nothing_retrieved("retrieved contexts", details=settings)
        problem = self._ids_problem(sample)
        if problem is not None:
            return MetricResult.error(problem, details=settings)
        asked = self._distinct(chunks)
        judged, shared = await self._grade(question, asked, ctx) if asked else ({}, 0)
        ids = sample.retrieved_context_sources if self.units.by_document else None
        ids = ids or sample.retrieved_context_ids
        per_chunk: list[dict[str, Any]] = []
        grades: list[int] = []
        qrels: dict[str, int] = {}
        for index, chunk in enumerate(chunks):
            found = judged.get(chunk, _BLANK_CHUNK)
            doc_id = ids[index] if ids is not None else doc_id_of(chunk)
            grade = int(found["grade"])
            grades.append(grade)
            qrels[doc_id] = max(grade, qrels.get(doc_id, 0))  # a document: its best chunk
            per_chunk.append(
                {"index": index, "doc_id": doc_id, "grade": grade, "reason": found["reason"]}
            )
        details: dict[str, Any] = {
            **settings,
            "chunks": per_chunk,
            "qrels": [[doc_id, grade] for doc_id, grade in qrels.items()],
        }
        if shared:
            details["shared"] = shared  # judgements made for another row of the run
        if asked:
            details["provenance"] = self.provenance(ctx)
        grades = self.by_document(sample, grades)
        why = self.none_relevant(grades)
        if why is not None:
            return MetricResult.undefined(why, details=details)
        score = relevance_score(grades, self.measure, k=self.k, min_grade=self.threshold)
        return MetricResult.ok(score, details=details)

    def none_relevant(self, grades: Sequence[int]) -> str | None:
        """Why the row is ``undefined``: no chunk is relevant (graded :attr:`threshold` or
        more; for ``ndcg``, above 0), as the ID metrics find a query whose qrels judge nothing
        relevant; None when some is, for ``mean``, or with :attr:`trec_eval_averaging`."""
        if self.measure == "mean" or self.trec_eval_averaging:
            return None
        level = 1 if self.measure == "ndcg" else self.threshold
        if any(grade >= level for grade in grades):
            return None
        return (
            f"nothing relevant: no chunk graded {level} or more, so there is nothing to rank "
            "(as the IR measures find it on the written qrels; trec_eval_averaging=True "
            "scores it 0)"
        )

    async def _grade(
        self, question: str, chunks: Sequence[str], ctx: RunContext
    ) -> tuple[dict[str, dict[str, Any]], int]:
        """Each chunk's ``{grade, reason}`` (``chunks`` distinct and not blank), and how many
        of the judgements were made for another row of the run (another metric, or the same
        question and chunk in another sample)."""
        client = bound_llm(ctx, self.llm)  # (the run's binding: not a new one for each row)
        config = client.config
        memo: SharedJudgements = ctx.shared("ctxeval_llm.judgements", SharedJudgements)
        if self.batch:
            batch_vars = {"question": question, "contexts": _listing(chunks)}
            graded, shared = await memo.get(
                _judgement_key(config, prompts.RELEVANCE_BATCH, batch_vars),
                lambda: client.ask(ctx, prompts.RELEVANCE_BATCH, batch_vars, expect=len(chunks)),
            )
            return dict(zip(chunks, graded, strict=True)), int(shared)
        judged: dict[str, dict[str, Any]] = {}
        shared_count = 0

        async def one(chunk: str) -> None:
            nonlocal shared_count
            variables = {"question": question, "context": chunk}
            answer, shared = await memo.get(
                _judgement_key(config, prompts.RELEVANCE, variables),
                lambda: client.ask(ctx, prompts.RELEVANCE, variables),
            )
            judged[chunk] = answer
            shared_count += shared

        await at_once(one, [(chunk,) for chunk in chunks], "ctxeval_llm: relevance")
        return judged, shared_count


@attrs.frozen(kw_only=True)
class SufficiencyJudge:
    """Matcher: an LLM says whether the candidates (the retrieved contexts) are sufficient to
    answer the item (the question), in one request; with ``with_reference``, the sample's
    reference answer (when it has one) is shown to the judge as a guide."""

    dependencies: ClassVar[tuple[Dependency, ...]] = _NEEDS
    needs_llm: ClassVar[bool] = True
    name: str = "llm_sufficiency"
    with_reference: bool = attrs.field(default=False, validator=validators.boolean)
    llm: Any = attrs.field(default=None, repr=False)

    @property
    def fingerprint_data(self) -> str:
        if self.with_reference:
            return _versions(prompts.SUFFICIENCY, prompts.SUFFICIENCY_WITH_REFERENCE)
        return _versions(prompts.SUFFICIENCY)

    def _reference(self, sample: Sample | None) -> str:
        reference = sample.reference if self.with_reference and sample is not None else None
        return reference if reference is not None and reference.strip() else ""

    def _request(
        self, question: str, contexts: Sequence[str], sample: Sample | None
    ) -> tuple[prompts.Prompt, dict[str, str]]:
        variables = {"question": question, "contexts": _listing(contexts)}
        reference = self._reference(sample)
        if reference:
            return prompts.SUFFICIENCY_WITH_REFERENCE, {**variables, "reference": reference}
        return prompts.SUFFICIENCY, variables

    def provenance(self, ctx: RunContext) -> dict[str, Any]:
        used = (
            prompts.SUFFICIENCY_WITH_REFERENCE
            if self._reference(ctx.sample)
            else prompts.SUFFICIENCY
        )
        return _provenance(self.llm, ctx, used)

    def estimate_calls(
        self, items: Sequence[str], candidates: Sequence[str], sample: Sample | None = None
    ) -> list[int]:
        """The prompt size (characters) of the one request per question, or none when the
        contexts are empty or blank."""
        contexts = [c for c in candidates if c.strip()]
        if not contexts:
            return []
        return [_size(*self._request(item, contexts, sample)) for item in items if item.strip()]

    async def match(
        self, items: Sequence[str], candidates: Sequence[str], ctx: RunContext
    ) -> list[Verdict]:
        contexts = [c for c in candidates if c.strip()]
        if not contexts:
            return [Verdict(False, 0.0, None, "the retrieved contexts are blank") for _ in items]
        verdicts = []
        for question in items:
            prompt, variables = self._request(question, contexts, ctx.sample)
            judged = await ask(ctx, self.llm, prompt, variables)
            flag = judged["sufficient"]
            verdicts.append(Verdict(flag == 1, float(flag), None, judged["reason"]))
        return verdicts


@attrs.frozen(kw_only=True)
class ContextSufficiency(StepsAsContext, PipelineMetric):  # type: ignore[override]
    """Whether the retrieved contexts are enough to answer the question (1) or not (0), as an
    LLM judges it from the question and the contexts alone: "sufficient context" as Joren et
    al. (ICLR 2025) define it. One request per sample.
    """

    registry_name = "context_sufficiency"
    fields = ("user_input", "retrieved_contexts")
    dependencies: ClassVar[tuple[Dependency, ...]] = _NEEDS
    llm: Any = attrs.field(default=None, repr=False)
    """The LLM (default: the run's ``llm=``)."""
    with_reference: bool = attrs.field(default=False, validator=validators.boolean)
    """Show the judge the sample's reference answer too, when it has one."""
    judges: tuple[Any, ...] = judges_option()
    """A jury: two or more LLMs in place of ``llm``."""
    repeats: int = repeats_option()
    """Judgements per judge and sample (the majority verdict is used)."""
    jury: str = jury_option()
    """How a jury's verdicts combine: ``majority`` or ``escalate``."""
    repeat_temperature: float = temperature_option()
    """The temperature of repeated judgements (``repeats`` > 1)."""
    context: str = context_option()
    """``retrieved`` (default): judge ``retrieved_contexts``; ``steps``: judge the union of
    the sample's ``retrieval_steps`` (each item once, in the order first returned)."""

    def default_name(self) -> str:
        return f"{self.registry_name}_with_reference" if self.with_reference else self.registry_name

    def build(self) -> Pipeline:
        return Pipeline(
            reference=Items(field="user_input", what="questions"),
            retrieved=Items(field="retrieved_contexts", what="retrieved contexts"),
            matcher=judge_part(
                lambda llm: SufficiencyJudge(with_reference=self.with_reference, llm=llm),
                llm=self.llm,
                judges=self.judges,
                repeats=self.repeats,
                rule=self.jury,
                temperature=self.repeat_temperature,
            ),
            formula=policy.Recall(),
        )

    def settings(self) -> dict[str, Any]:
        return {"with_reference": True} if self.with_reference else {}

    def evidence(self, judgement: Judgement) -> dict[str, Any]:
        if not judgement.verdicts:
            return {}
        verdict = judgement.verdicts[0]
        reason = verdict.reason
        if reason is None and not judgement.retrieved:
            reason = "nothing retrieved"
        return {"sufficient": int(verdict.matched), "reason": reason}

    async def ascore(self, sample: Sample, ctx: RunContext) -> MetricResult:
        if not (sample.user_input or "").strip():
            return MetricResult.undefined(
                "no question: user_input is empty, nothing to judge the contexts against",
                details=self.settings() or None,
            )
        return await super().ascore(sample, ctx)
