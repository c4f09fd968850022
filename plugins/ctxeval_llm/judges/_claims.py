"""Claims (#55): RAGChecker's retriever metrics (Ru et al., NeurIPS 2024 Datasets and
Benchmarks, arXiv 2408.08067; ``ragchecker`` 0.1.9, ``computation.evaluate_retrieval``).

The reference answer is split into claims (:class:`ClaimExtractor`, extractor ``llm_claims``)
and each claim is checked against each retrieved chunk on its own (:class:`ClaimChecker`:
``entailment`` / ``neutral`` / ``contradiction``, all claims of one chunk in one request, as
RAGChecker's checker does with ``merge_psg=False``). Of that claims-by-chunks table of
entailments:

* ``claim_recall`` = the share of claims entailed by at least one chunk (the row maximum);
* ``claim_context_precision`` = the share of chunks that entail at least one claim (the
  column maximum).

Both are pipelines of the same parts (an :class:`~ctxeval.plugin.Extracted` reference, the
retrieved contexts as :class:`~ctxeval.plugin.Items`, the checker as matcher; formulas
``Recall`` and ``Precision``): run together, they share the extraction and every check.
Where RAGChecker writes 0.0 (no claim, nothing retrieved), ctxeval's score policy holds: no
claim is ``undefined``; nothing retrieved is 0 for recall and ``undefined`` for precision.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import attrs

from ctxeval.plugin import (
    Dependency,
    Extracted,
    Items,
    Judgement,
    Pipeline,
    PipelineMetric,
    RunContext,
    Sample,
    Unit,
    Verdict,
    policy,
)
from ctxeval_llm._ask.fanout import at_once

from . import fact_prompts as fp
from ._metrics import _listing, _provenance, _size, _versions
from ._nuggets import _options, _question, shared_ask

__all__ = ["ClaimChecker", "ClaimContextPrecision", "ClaimExtractor", "ClaimRecall"]

_NEEDS: tuple[Dependency, ...] = ()
_BLANK = {"label": "neutral", "reason": "the chunk is blank: nothing to check"}


@attrs.frozen(kw_only=True)
class ClaimExtractor:
    """Extractor ``llm_claims``: the atomic claims of a text, one request per text (the
    sample's question given with it)."""

    registry_name: ClassVar[str] = "llm_claims"
    dependencies: ClassVar[tuple[Dependency, ...]] = _NEEDS
    needs_llm: ClassVar[bool] = True
    name: str = "llm_claims"
    llm: Any = attrs.field(default=None, repr=False)

    @property
    def fingerprint_data(self) -> str:
        return _versions(fp.CLAIMS)

    def provenance(self, ctx: RunContext) -> dict[str, Any]:
        return _provenance(self.llm, ctx, fp.CLAIMS)

    def estimate_calls(self, texts: Sequence[str]) -> list[int]:
        return [_size(fp.CLAIMS, {"question": "", "text": t}) for t in texts if t.strip()]

    async def extract(self, texts: Sequence[str], ctx: RunContext) -> list[list[Unit]]:
        results: list[list[Unit]] = [[] for _ in texts]

        async def one(index: int, text: str) -> None:
            if text.strip():
                variables = {"question": _question(ctx.sample), "text": text}
                claims, _ = await shared_ask(ctx, self.llm, fp.CLAIMS, variables)
                results[index] = [Unit(c, "CLAIM") for c in dict.fromkeys(claims)]

        await at_once(one, list(enumerate(texts)), "ctxeval_llm: claims")
        return results


@attrs.frozen(kw_only=True)
class ClaimChecker:
    """Matcher: RAGChecker's entailment check of claims against chunks, one request per
    chunk (all claims at once). ``judged`` says which side the items are: ``claims`` (a
    claim is matched when some chunk entails it; its ``evidence`` is the first such chunk)
    or ``chunks`` (a chunk is matched when it entails some claim)."""

    dependencies: ClassVar[tuple[Dependency, ...]] = _NEEDS
    needs_llm: ClassVar[bool] = True
    name: str = "llm_claim_entailment"
    judged: str = attrs.field(
        default="claims", validator=attrs.validators.in_(("claims", "chunks"))
    )
    llm: Any = attrs.field(default=None, repr=False)

    @property
    def fingerprint_data(self) -> str:
        return _versions(fp.CLAIM_ENTAILMENT)

    def provenance(self, ctx: RunContext) -> dict[str, Any]:
        return _provenance(self.llm, ctx, fp.CLAIM_ENTAILMENT)

    def _sides(
        self, items: Sequence[str], candidates: Sequence[str]
    ) -> tuple[Sequence[str], Sequence[str]]:
        return (items, candidates) if self.judged == "claims" else (candidates, items)

    def estimate_calls(
        self, items: Sequence[str], candidates: Sequence[str], sample: Sample | None = None
    ) -> list[int]:
        """One request per chunk (the reference text stands in for its claims, which are not
        known before they are extracted)."""
        claims, chunks = self._sides(items, candidates)
        listing = _listing(claims) if claims else (sample.reference if sample else "") or ""
        question = _question(sample)
        return [
            _size(fp.CLAIM_ENTAILMENT, {"question": question, "passage": c, "claims": listing})
            for c in chunks
            if c.strip()
        ]

    async def table(
        self, claims: Sequence[str], chunks: Sequence[str], ctx: RunContext
    ) -> list[list[dict[str, str]]]:
        """The label of each claim given each chunk: ``table[chunk][claim]``."""
        out: list[list[dict[str, str]]] = [[] for _ in chunks]
        listing, question = _listing(claims), _question(ctx.sample)

        async def one(index: int, chunk: str) -> None:
            if not chunk.strip():  # an empty context never reaches a judge
                out[index] = [_BLANK] * len(claims)
                return
            variables = {"question": question, "passage": chunk, "claims": listing}
            out[index], _ = await shared_ask(
                ctx, self.llm, fp.CLAIM_ENTAILMENT, variables, expect=len(claims)
            )

        await at_once(one, list(enumerate(chunks)), "ctxeval_llm: claim entailment")
        return out

    async def match(
        self, items: Sequence[str], candidates: Sequence[str], ctx: RunContext
    ) -> list[Verdict]:
        claims, chunks = self._sides(items, candidates)
        table = await self.table(claims, chunks, ctx)
        entailed = [[c["label"] == "entailment" for c in row] for row in table]
        if self.judged == "claims":
            verdicts = []
            for i in range(len(claims)):
                hits = [j for j, row in enumerate(entailed) if row[i]]
                reason = table[hits[0]][i]["reason"] if hits else "no chunk entails it"
                verdicts.append(_verdict(hits, reason))
            return verdicts
        verdicts = []
        for row, labels in zip(entailed, table, strict=True):
            hits = [i for i, flag in enumerate(row) if flag]
            reason = labels[hits[0]]["reason"] if hits else "it entails no reference claim"
            verdicts.append(_verdict(hits, reason))
        return verdicts


def _verdict(hits: Sequence[int], reason: str) -> Verdict:
    return Verdict(bool(hits), float(bool(hits)), hits[0] if hits else None, reason)


@attrs.frozen(kw_only=True)
class _ClaimMetric(PipelineMetric):
    requires = ("reference", "retrieved_contexts")
    dependencies: ClassVar[tuple[Dependency, ...]] = _NEEDS
    judged: ClassVar[str] = "claims"
    llm: Any = attrs.field(default=None, repr=False)
    """The LLM (default: the run's ``llm=``)."""

    def build(self) -> Pipeline:
        precision = self.judged == "chunks"
        return Pipeline(
            reference=Extracted(
                field="reference",
                extractor=ClaimExtractor(llm=self.llm),
                what="reference claims",
                distinct=str.casefold,
            ),
            retrieved=Items(field="retrieved_contexts", what="retrieved contexts"),
            matcher=ClaimChecker(judged=self.judged, llm=self.llm),
            formula=policy.Precision() if precision else policy.Recall(),
        )

    def shared_calls_key(self) -> tuple[object, ...]:
        """``claim_recall`` and ``claim_context_precision`` of equal options send the same
        requests (one extraction, one check per chunk), once for both."""
        return ("claims", *_options(self, leave_out=("name",)))

    def evidence(self, judgement: Judgement) -> dict[str, Any]:
        if self.judged == "claims":
            return {
                "claims": [
                    {
                        "claim": c,
                        "entailed": int(v.matched),
                        "chunk": v.evidence,
                        "reason": v.reason,
                    }
                    for c, v in zip(judgement.reference, judgement.verdicts, strict=True)
                ]
            }
        return {
            "claims": list(judgement.reference),
            "chunks": [
                {"index": i, "entails": int(v.matched), "claim": v.evidence, "reason": v.reason}
                for i, v in enumerate(judgement.verdicts)
            ],
        }


@attrs.frozen(kw_only=True)
class ClaimRecall(_ClaimMetric):
    """RAGChecker's claim recall: the share of the reference answer's claims that at least one
    retrieved chunk entails."""

    registry_name = "claim_recall"
    judged = "claims"


@attrs.frozen(kw_only=True)
class ClaimContextPrecision(_ClaimMetric):
    """RAGChecker's context precision: the share of the retrieved chunks that entail at least
    one of the reference answer's claims."""

    registry_name = "claim_context_precision"
    judged = "chunks"
