"""Nuggets (#55): does the *retrieved context* hold the vital facts of the answer?

The parts, as TREC RAG's AutoNuggetizer (arXiv 2411.09607, 2504.15068) has them:

* :class:`NuggetExtractor` (extractor ``llm_nuggets``): one request writes the nuggets of a
  sample's reference material (its reference answer and reference contexts), each labelled
  vital or okay (``Unit.label``), at most ``max_nuggets`` (vital ones kept first, as the
  nuggetizer cuts its list);
* :class:`NuggetSupportJudge` (matcher ``llm_nugget_support``): each nugget judged
  ``support`` / ``partial_support`` / ``not_support`` against the retrieved context, all of a
  sample's nuggets in one request (``batch``, the default) or one request per nugget; a
  verdict's ``score`` is 1, 0.5 or 0 and ``matched`` is full support;

and the metric ``context_nugget_recall`` that scores them with :func:`nugget_scores` (the
``variant``: ``vital_strict``, TREC 2024's primary measure, by default). A sample may carry
its own nuggets (``"nuggets": [{"text", "importance"}]``, kept in its metadata) or the metric
may read a nuggetizer file (``nuggets_file``): then nothing is extracted.

The metrics of a run that judge the same sample with the same judge (several variants, say)
share the requests (:class:`~ctxeval_llm.judges.SharedJudgements`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import attrs

from ctxeval.plugin import (
    BaseMetric,
    DataError,
    Dependency,
    MetricResult,
    RunContext,
    Sample,
    Unit,
    Verdict,
    __version__,
    policy,
    validators,
)
from ctxeval_llm._ask.client import bound_llm
from ctxeval_llm._ask.fanout import at_once
from ctxeval_llm._ask.prompt import Prompt

from . import fact_prompts as fp
from ._metrics import SharedJudgements, _judgement_key, _listing, _provenance, _size, _versions
from .nugget_files import NUGGET_VARIANTS, Nugget, NuggetsFile, nugget_scores, nuggets_of

__all__ = ["ContextNuggetRecall", "NuggetExtractor", "NuggetSupportJudge", "shared_ask"]

_NEEDS: tuple[Dependency, ...] = ()
_CREDIT = {"support": 1.0, "partial_support": 0.5, "not_support": 0.0}
DEFAULT_MAX_NUGGETS = 30
"""The nuggetizer's own cap (``creator_max_nuggets=30``)."""
SOURCES = ("auto", "reference", "reference_contexts")
_NOTHING = "not_support: nothing retrieved"


async def shared_ask(
    ctx: RunContext,
    llm: Any,
    prompt: Prompt,
    variables: dict[str, str],
    expect: int | None = None,
) -> tuple[Any, bool]:
    """The answer to ``prompt``, made once for every metric of the run that asks the same
    judge the same request (and whether it was made for another one)."""
    client = bound_llm(ctx, llm)
    memo: SharedJudgements = ctx.shared("ctxeval_llm.judgements", SharedJudgements)
    make: Callable[[], Awaitable[Any]] = lambda: client.ask(ctx, prompt, variables, expect=expect)  # noqa: E731
    return await memo.get(_judgement_key(client.config, prompt, variables), make)


def _question(sample: Sample | None) -> str:
    return (sample.user_input if sample is not None else None) or ""


@attrs.frozen(kw_only=True)
class NuggetExtractor:
    """Extractor ``llm_nuggets``: the nuggets of a text (a sample's reference material), each
    a :class:`~ctxeval.plugin.Unit` labelled ``vital`` or ``okay``; one request per text, the
    sample's question (``ctx.sample``) given with it.

    Options:
        max_nuggets: at most this many nuggets (vital ones first, then okay, each in the
            judge's order).
        llm: the LLM (default: the run's ``llm=``).
    """

    registry_name: ClassVar[str] = "llm_nuggets"
    dependencies: ClassVar[tuple[Dependency, ...]] = _NEEDS
    needs_llm: ClassVar[bool] = True
    name: str = "llm_nuggets"
    max_nuggets: int = attrs.field(default=DEFAULT_MAX_NUGGETS, validator=validators.positive_int)
    llm: Any = attrs.field(default=None, repr=False)

    @property
    def fingerprint_data(self) -> str:
        return f"{_versions(fp.NUGGETS)},max={self.max_nuggets}"

    def provenance(self, ctx: RunContext) -> dict[str, Any]:
        return _provenance(self.llm, ctx, fp.NUGGETS)

    def variables(self, text: str, sample: Sample | None) -> dict[str, str]:
        return {
            "question": _question(sample),
            "max_nuggets": str(self.max_nuggets),
            "material": text,
        }

    def estimate_calls(self, texts: Sequence[str], sample: Sample | None = None) -> list[int]:
        """The prompt size (characters) of the request each non-empty text needs."""
        return [_size(fp.NUGGETS, self.variables(t, sample)) for t in texts if t.strip()]

    async def extract(self, texts: Sequence[str], ctx: RunContext) -> list[list[Unit]]:
        results: list[list[Unit]] = [[] for _ in texts]

        async def one(index: int, text: str) -> None:
            if text.strip():
                variables = self.variables(text, ctx.sample)
                found, _ = await shared_ask(ctx, self.llm, fp.NUGGETS, variables)
                results[index] = self.cut(found)

        await at_once(one, list(enumerate(texts)), "ctxeval_llm: nuggets")
        return results

    def cut(self, found: Sequence[Mapping[str, str]]) -> list[Unit]:
        """At most :attr:`max_nuggets`, vital ones first (the nuggetizer's order), each text
        once."""
        distinct = list({n["text"].casefold(): n for n in found}.values())
        ranked = sorted(distinct, key=lambda n: n["importance"] != "vital")  # (stable)
        return [Unit(n["text"], n["importance"]) for n in ranked[: self.max_nuggets]]


@attrs.frozen(kw_only=True)
class NuggetSupportJudge:
    """Matcher ``llm_nugget_support``: each item (a nugget) judged ``support``,
    ``partial_support`` or ``not_support`` against the candidates (the retrieved contexts),
    given the sample's question. A verdict is matched on full support; its ``score`` is 1,
    0.5 or 0 and its ``reason`` starts with the label.

    Options:
        batch: all nuggets of a sample in one request (default), or one request per nugget.
        llm: the LLM (default: the run's ``llm=``).
    """

    registry_name: ClassVar[str] = "llm_nugget_support"
    dependencies: ClassVar[tuple[Dependency, ...]] = _NEEDS
    needs_llm: ClassVar[bool] = True
    name: str = "llm_nugget_support"
    batch: bool = attrs.field(default=True, validator=validators.boolean)
    llm: Any = attrs.field(default=None, repr=False)

    @property
    def prompt(self) -> Prompt:
        return fp.NUGGET_SUPPORT_BATCH if self.batch else fp.NUGGET_SUPPORT

    @property
    def fingerprint_data(self) -> str:
        return _versions(self.prompt)

    def provenance(self, ctx: RunContext) -> dict[str, Any]:
        return _provenance(self.llm, ctx, self.prompt)

    def requests(
        self, items: Sequence[str], candidates: Sequence[str], sample: Sample | None
    ) -> list[dict[str, str]]:
        """The variables of each request judging ``items``."""
        context = _listing([c for c in candidates if c.strip()])  # (blank chunks: not sent)
        base = {"question": _question(sample), "context": context}
        if self.batch:
            return [{**base, "nuggets": _listing(items)}] if items else []
        return [{**base, "nugget": item} for item in items]

    def estimate_calls(
        self, items: Sequence[str], candidates: Sequence[str], sample: Sample | None = None
    ) -> list[int]:
        """The prompt size (characters) of each request judging ``items``; none without
        candidates (nothing retrieved: every nugget is not supported)."""
        if not any(c.strip() for c in candidates):
            return []
        return [_size(self.prompt, v) for v in self.requests(items, candidates, sample)]

    async def match(
        self, items: Sequence[str], candidates: Sequence[str], ctx: RunContext
    ) -> list[Verdict]:
        return [v for v, _ in await self.judge(items, candidates, ctx)]

    async def judge(
        self, items: Sequence[str], candidates: Sequence[str], ctx: RunContext
    ) -> list[tuple[Verdict, bool]]:
        """Each item's verdict and whether its judgement was made for another metric."""
        if not items:
            return []
        if not [c for c in candidates if c.strip()]:
            no = Verdict(False, 0.0, None, _NOTHING)
            return [(no, False)] * len(items)
        requests = self.requests(items, candidates, ctx.sample)
        if self.batch:
            answers, shared = await shared_ask(
                ctx, self.llm, self.prompt, requests[0], expect=len(items)
            )
            return [(_verdict(a), shared) for a in answers]
        judged: list[tuple[Verdict, bool]] = [(Verdict(False), False)] * len(items)

        async def one(index: int, variables: dict[str, str]) -> None:
            answer, shared = await shared_ask(ctx, self.llm, self.prompt, variables)
            judged[index] = (_verdict(answer), shared)

        await at_once(one, list(enumerate(requests)), "ctxeval_llm: nugget support")
        return judged


def _verdict(answer: Mapping[str, str]) -> Verdict:
    label = answer["support"]
    return Verdict(label == "support", _CREDIT[label], None, f"{label}: {answer['reason']}")


def label_of(verdict: Verdict) -> str:
    """A support verdict's label (``support``, ``partial_support``, ``not_support``)."""
    if verdict.matched:
        return "support"
    return "partial_support" if verdict.score == 0.5 else "not_support"


@attrs.frozen(kw_only=True)
class ContextNuggetRecall(BaseMetric):
    """How much of the reference material's nuggets the retrieved context holds, scored as
    the TREC RAG track scores an answer's nuggets (by default the vital nuggets fully
    supported / the vital nuggets; ``variant`` gives the others, see ``nugget_scores``).

    The nuggets come from the sample (``"nuggets"``), else from ``nuggets_file`` (a
    nuggetizer JSON-lines file, by sample id), else an LLM writes them from the reference
    answer and reference contexts (``source``). Every row's details hold each nugget with its
    importance, support label and reason, and the scores of every variant.
    """

    registry_name = "context_nugget_recall"
    requires = ("retrieved_contexts",)
    dependencies: ClassVar[tuple[Dependency, ...]] = _NEEDS

    variant: str = attrs.field(
        default="vital_strict", validator=validators.one_of(*NUGGET_VARIANTS, what="variant")
    )
    """``vital_strict`` (TREC 2024's primary measure: vital nuggets fully supported / vital
    nuggets), ``vital`` (partial support counts 0.5), ``all_strict``, ``all`` (over every
    nugget), ``weighted_strict``, ``weighted`` (a vital nugget weighs 1, an okay one 0.5)."""
    max_nuggets: int = attrs.field(default=DEFAULT_MAX_NUGGETS, validator=validators.positive_int)
    """At most this many nuggets are written for a sample (vital ones kept first); nuggets a
    sample or file gives are all used."""
    batch: bool = attrs.field(default=True, validator=validators.boolean)
    """Judge all nuggets of a sample in one request (default) or one request per nugget."""
    source: str = attrs.field(default="auto", validator=validators.one_of(*SOURCES, what="source"))
    """What the nuggets are written from: ``reference`` (the reference answer),
    ``reference_contexts``, or ``auto`` (both, when the sample has them)."""
    nuggets_file: str | None = attrs.field(default=None)
    """A nuggetizer JSON-lines file (``{"qid", "nuggets": [{"text", "importance"}]}``): the
    nuggets of each sample, by sample id (TREC's, or your own); nothing is written then."""
    llm: Any = attrs.field(default=None, repr=False)
    """The LLM (default: the run's ``llm=``)."""
    _given: NuggetsFile | None = attrs.field(init=False, default=None, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        if self.nuggets_file is not None:
            if not isinstance(self.nuggets_file, str | Path):
                raise ValueError(f"nuggets_file must be a path, got {self.nuggets_file!r}")
            object.__setattr__(self, "_given", NuggetsFile.index(self.nuggets_file))

    # --- what the run reads ------------------------------------------------------------------

    @property
    def needs_llm(self) -> bool:
        return self.llm is None

    @property
    def extractor(self) -> NuggetExtractor:
        return NuggetExtractor(max_nuggets=self.max_nuggets, llm=self.llm)

    @property
    def judge(self) -> NuggetSupportJudge:
        return NuggetSupportJudge(batch=self.batch, llm=self.llm)

    @property
    def fingerprint_data(self) -> str:
        """The prompt versions (and a hash of the nuggets file: a resumed run with other
        nuggets recomputes its rows)."""
        given = f",nuggets={self._given.digest}" if self._given is not None else ""
        return f"{self.extractor.fingerprint_data},{self.judge.fingerprint_data}{given}"

    def shared_calls_key(self) -> tuple[object, ...]:
        """The variants of equal other options send the same requests, once for all."""
        return ("nuggets", *_options(self, leave_out=("name", "variant")))

    def default_name(self) -> str:
        if self.variant == "vital_strict":
            return self.registry_name
        return f"{self.registry_name}_{self.variant}"

    def settings(self) -> dict[str, Any]:
        return {"variant": self.variant}

    def provenance(self, ctx: RunContext, extracted: bool = True) -> dict[str, Any]:
        """Who judged a row: the nugget writer (when it wrote them) and the support judge."""
        judges = [self.judge.provenance(ctx)]
        if extracted:
            judges.insert(0, self.extractor.provenance(ctx))
        return {"ctxeval": __version__, "judges": judges}

    def material(self, sample: Sample) -> str:
        """The reference material the nuggets are written from (blank: none)."""
        parts: list[str] = []
        if self.source in ("auto", "reference") and (sample.reference or "").strip():
            parts.append(sample.reference or "")
        if self.source in ("auto", "reference_contexts"):
            parts.extend(c for c in sample.reference_contexts or () if c.strip())
        return parts[0] if len(parts) == 1 else _listing(parts)

    def given(self, sample: Sample, sample_id: str | None) -> tuple[Nugget, ...] | None:
        """The nuggets the sample or the file gives, None when they are to be written."""
        if "nuggets" in sample.metadata:
            return nuggets_of(sample.metadata["nuggets"], sample_id=sample_id)
        if self._given is None:
            return None
        if sample_id is None:
            raise DataError(
                f"the sample has no id, so its line of {self.nuggets_file} cannot be found",
                field="id",
                hint="give each sample an id: the qid of its nuggets",
            )
        found = self._given.get(sample_id)
        if found is None:
            raise DataError(
                f"the nuggets file {self.nuggets_file} has no line for this sample",
                sample_id=sample_id,
                hint="give each sample's nuggets (qid = the sample id) or leave nuggets_file out",
            )
        return found

    def estimate_calls(self, sample: Sample) -> list[int]:
        """The prompt sizes (characters) of the requests scoring ``sample`` would send: the
        nuggets written (unless given), and their support (the material stands in for the
        nuggets, which are not known before they are written)."""
        retrieved = list(sample.retrieved_contexts or ())
        if not retrieved:
            return []
        try:
            given = self.given(sample, sample.id)
        except DataError:
            return []
        if given is not None:
            return self.judge.estimate_calls([n.text for n in given], retrieved, sample)
        material = self.material(sample)
        if not material.strip():
            return []
        sizes = self.extractor.estimate_calls([material], sample)
        return sizes + self.judge.estimate_calls([material], retrieved, sample)

    # --- scoring -------------------------------------------------------------------------------

    async def ascore(self, sample: Sample, ctx: RunContext) -> MetricResult:
        settings = self.settings()
        try:
            nuggets = self.given(sample, sample.id)
        except DataError as exc:
            return MetricResult.error(str(exc), details=settings)
        extracted = nuggets is None
        if nuggets is None:
            material = self.material(sample)
            if not material.strip():
                return MetricResult.undefined(
                    "nothing to recall: no nuggets given and no reference material "
                    f"({self.source}) to write them from",
                    details=settings,
                )
            if not any(c.strip() for c in sample.retrieved_contexts or ()):
                # decided without the judge, as the other recall metrics decide it
                return MetricResult.ok(0.0, details={**settings, "nothing_retrieved": True})
            [units] = await self.extractor.extract([material], ctx)
            nuggets = tuple(Nugget(u.text, u.label or "vital") for u in units)
        if not nuggets:
            return MetricResult.undefined(
                "nothing to recall: the reference material gave no nuggets", details=settings
            )
        judged = await self.judge.judge(
            [n.text for n in nuggets], list(sample.retrieved_contexts or ()), ctx
        )
        return self.row(nuggets, judged, extracted, ctx)

    def row(
        self,
        nuggets: Sequence[Nugget],
        judged: Sequence[tuple[Verdict, bool]],
        extracted: bool,
        ctx: RunContext,
    ) -> MetricResult:
        labels = [label_of(v) for v, _ in judged]
        scores = nugget_scores([n.importance for n in nuggets], labels)
        details: dict[str, Any] = {
            **self.settings(),
            "nuggets_from": "extracted" if extracted else "given",
            "nuggets": [
                {**n.as_dict(), "assignment": label, "reason": v.reason}
                for n, label, (v, _) in zip(nuggets, labels, judged, strict=True)
            ],
            "scores": scores,
        }
        shared = sum(s for _, s in judged)
        if shared:
            details["shared"] = shared
        if ctx.sample is not None and ctx.sample.user_input:
            details["query"] = ctx.sample.user_input
        if extracted or any(v.reason != _NOTHING for v, _ in judged):
            details["provenance"] = self.provenance(ctx, extracted)
        score = scores[self.variant]
        if score is None:
            return policy.no_reference("vital nuggets", details=details)
        return MetricResult.ok(score, details=details)


def _options(metric: Any, *, leave_out: tuple[str, ...]) -> list[tuple[str, str]]:
    """``metric``'s options (an attrs class's init fields) but ``leave_out``, as text."""
    return [
        (f.name, repr(getattr(metric, f.name)))
        for f in attrs.fields(type(metric))
        if f.init and f.name not in leave_out
    ]
