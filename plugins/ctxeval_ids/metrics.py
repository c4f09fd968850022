"""Metrics over context IDs, each a pipeline: the reference IDs and the retrieved IDs (in rank
order), matched by the ``id`` matcher, into a formula of :mod:`ctxeval.policy`.

IDs compare as strings (``1`` and ``"1"`` are the same ID); a retrieved ID that repeats keeps
its first rank, and a repeated reference ID counts once.

=============================  =====================================  ==========  ==========
metric                         formula                                judges      nothing
                                                                                  retrieved
=============================  =====================================  ==========  ==========
``id_based_context_precision`` ``Precision``: relevant / retrieved    retrieved   undefined
``id_based_context_recall``    ``Recall``: found / reference IDs      reference   0.0
``id_precision_at_k``          ``PrecisionAtK`` (trec_eval ``P_k``)   top k       undefined
``id_recall_at_k``             ``RecallAtK`` (``recall_k``)           top k       0.0
``id_hit_rate_at_k``           ``HitRateAtK`` (``success_k``)         top k       0.0
``id_mrr``                     ``ReciprocalRank`` (``recip_rank``)    retrieved   0.0
``id_average_precision``       ``RankedAveragePrecision`` (``map``)   retrieved   0.0
``id_ndcg_at_k``               ``NDCGAtK`` (``ndcg_cut_k``)           top k       0.0
``id_average_precision_at_k``  ``RankedAveragePrecisionAtK``          top k       0.0
                               (``map_cut_k``)
``id_reciprocal_rank_at_k``    ``ReciprocalRankAtK`` (ranx ``mrr@k``) top k       0.0
``id_r_precision``             ``RPrecision`` (``Rprec``)             top R       0.0
``id_f1_at_k``                 ``F1AtK`` (ranx ``f1@k``)              top k       0.0
``id_bpref``                   ``BPref`` (``bpref``)                  retrieved   0.0
``id_judged_at_k``             ``JudgedAtK``: judged IDs in the top   top k       undefined
                               k / IDs in the top k (ir_measures
                               ``Judged@k``)
=============================  =====================================  ==========  ==========

An empty reference makes every one of them ``undefined`` (nothing is relevant), and so does a
reference that judges every document not relevant (each grade below ``relevance_level``), with
a reason that says so (``id_judged_at_k`` aside: such documents are judged). Note that
``id_average_precision`` divides by the number of *reference* IDs, as trec_eval does, while
ragas's context precision (``Precision`` over ranks, the ``AveragePrecision`` formula) divides
by the relevant items *retrieved*.

``id_judged_at_k`` measures the judgements, not the retriever: the share of the top k
retrieved IDs that the reference judges at all, whatever the grade (0, judged not relevant,
counts; a negative grade, in the pool but not judged, does not, as trec_eval reads qrels). With
a plain list of reference IDs, the listed ones are the judged ones. A low value says the other
measures rest on few judgements (unjudged documents count as not relevant).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from itertools import compress
from operator import attrgetter, not_
from typing import Any, ClassVar

import attrs

from ctxeval.plugin import (
    DeterministicPipelineMetric,
    Items,
    Judgement,
    MetricResult,
    Pipeline,
    Sample,
    Status,
    policy,
    validators,
)

from .matcher import IDMatcher

__all__ = [
    "IDMRR",
    "IDAveragePrecision",
    "IDAveragePrecisionAtK",
    "IDBPref",
    "IDBasedContextPrecision",
    "IDBasedContextRecall",
    "IDF1AtK",
    "IDHitRateAtK",
    "IDJudgedAtK",
    "IDNDCGAtK",
    "IDPrecisionAtK",
    "IDRPrecision",
    "IDRecallAtK",
    "IDReciprocalRankAtK",
    "JudgedAtK",
]


def reference_ids(relevance_level: int = 1) -> Items:
    """The reference side: the relevant IDs (grade ``>= relevance_level``), each once."""
    return Items(
        field="reference_context_ids",
        what="reference context IDs",
        dedupe=True,
        min_grade=relevance_level,
    )


REFERENCE_IDS = reference_ids()
RETRIEVED_IDS = Items(field="retrieved_context_ids", what="retrieved context IDs", dedupe=True)
"""The retrieved side: the IDs in rank order, a repeat kept at its first rank."""
_MATCHER = IDMatcher()


@attrs.frozen(kw_only=True)
class _IDMetric(DeterministicPipelineMetric):
    """The ID pipeline; a metric names its formula (:attr:`formula_type`)."""

    requires: ClassVar[tuple[str, ...]] = ("retrieved_context_ids", "reference_context_ids")
    formula_type: ClassVar[type[policy.Formula]] = policy.Formula

    relevance_level: int = attrs.field(default=1, validator=validators.positive_int)
    """For graded reference IDs: the least grade that counts as relevant (trec_eval's ``-l``;
    nDCG uses every grade above 0 as its gain, as trec_eval does)."""
    trec_eval_averaging: bool = attrs.field(default=False, validator=validators.boolean)
    """Score a query with nothing retrieved, or with no relevant reference ID, 0 (so that it
    counts in the mean) instead of ``undefined``: trec_eval's averaging."""

    @property
    def zero_when_empty(self) -> bool:
        return self.trec_eval_averaging

    def formula(self) -> policy.Formula:
        return self.formula_type()

    def build(self) -> Pipeline:
        formula = self.formula()
        level = self.reference_level(formula)
        return Pipeline(
            reference=reference_ids(level), retrieved=RETRIEVED_IDS, matcher=_MATCHER,
            formula=formula,
        )  # fmt: skip

    def reference_level(self, formula: policy.Formula) -> int:
        """The least grade of the reference IDs the matcher sees: a graded formula takes
        every grade above 0 (nDCG's gains), the others the relevance level."""
        return 1 if formula.graded else self.relevance_level

    def score(self, sample: Sample) -> MetricResult:
        """The row, with an ``undefined`` row's reason saying so when the reference does judge
        documents, but none as relevant (not "there are no reference context IDs")."""
        row = super().score(sample)
        if row.status is Status.UNDEFINED:
            why = self.none_relevant(sample)
            if why is not None:
                return MetricResult.undefined(why, details=row.details or None, usage=row.usage)
        return row

    def none_relevant(self, sample: Sample) -> str | None:
        """Why ``sample`` has nothing to recall when its reference names documents but none
        reaches :attr:`relevance_level`; None when it names none or some are relevant."""
        judged = sample.reference_context_ids
        if not judged:
            return None
        level = self.relevance_level
        grades = getattr(judged, "grades", None)  # GradedIDs; a plain list is grade 1
        if grades is None:
            if level <= 1:
                return None
            return (
                "nothing to recall: the reference IDs carry no grades, so each counts as "
                f"grade 1, below relevance_level {level}"
            )
        if any(grade >= level for grade in grades):
            return None
        return (
            "nothing to recall: the reference judges every document not relevant "
            f"(grade below relevance_level {level})"
        )

    def evidence(self, judgement: Judgement) -> dict[str, Any]:
        return {}

    def ranked_edges_shared(self, known: Mapping[str, Collection[object]] | None = None) -> bool:
        """As the base class says, with the ID metrics' own :meth:`score` (its reason reads
        the grades: :meth:`none_relevant`) and evidence (none, or the top k: nothing when
        nothing is retrieved)."""
        if type(self).none_relevant not in _EDGE_REASONS:
            return False
        mine: dict[str, Collection[object]] = {
            "score": (_IDMetric.score,),
            "evidence": _EDGE_EVIDENCE,
        }
        return super().ranked_edges_shared({**mine, **(known or {})})

    def details_batch(
        self, samples: Sequence[Sample], memo: dict[Any, Any] | None = None
    ) -> list[Mapping[str, Any]]:
        """Each sample's row details, equal to ``details_of(pipeline.judge_now(sample))``
        without building a verdict per ID: the ID metrics' evidence reads the two sides and
        the formula's the flags only (a subclass with its own :meth:`evidence` goes the long
        way, which is always right). The sides are read once per chunk for every metric
        reading them (:class:`_Sides`, shared through ``memo``), and so are the flags of each
        side and the evidence of metrics with the same evidence: a few C-level passes per
        sample, no judgement."""
        p = self.pipeline
        kind = type(self).evidence
        if kind not in _SIDES_ONLY or not p.deterministic:  # (a dict: looked up by key)
            return super().details_batch(samples, memo)
        reference_side, retrieved_side = p.reference, p.retrieved
        assert isinstance(reference_side, Items)
        assert isinstance(retrieved_side, Items)
        memo = {} if memo is None else memo
        key = (reference_side, retrieved_side)
        sides = memo.get(key)
        if sides is None:
            sides = memo[key] = _Sides(samples, reference_side, retrieved_side)
        computes = _SIDES_ONLY[kind]
        depth = self.k if isinstance(self, _AtK) else None
        made_key = (computes, key, depth)
        made = memo.get(made_key)
        if made is None:
            made = memo[made_key] = sides.evidence(computes, depth)
        formula, settings = p.formula, {**self.settings(), **self.units.settings()}
        if type(formula).evidence is policy.Formula.evidence:  # it adds nothing
            if not settings:  # (the same dicts as a metric with the same evidence: read-only)
                return list(made)
            return [{**settings, **e} for e in made]
        flags = sides.flags(formula.judged, formula.depth)
        formula_evidence = formula.evidence
        return [
            {**settings, **formula_evidence(these_flags), **these}
            for these_flags, these in zip(flags, made, strict=True)
        ]


class _Sides:
    """The two ID sides of a chunk's samples, read once for every ID metric of the chunk
    that reads them (as ``Items.read`` and ``Items.given`` read them), with what the metrics'
    evidence is made of, each computed once when first asked for: which retrieved IDs are in
    the reference, which reference IDs were retrieved, the split and the top k."""

    __slots__ = ("_found", "_hits", "reference", "reference_keys", "retrieved", "retrieved_keys")

    def __init__(self, samples: Sequence[Sample], reference_side: Items, retrieved_side: Items):
        fromkeys = dict.fromkeys
        reference_given = _given_all(reference_side, samples)
        retrieved_given = _given_all(retrieved_side, samples)
        # each sample's IDs in their first order, each once (a set that keeps the order)
        self.reference_keys: list[dict[str, None]] = list(map(fromkeys, reference_given))
        self.retrieved_keys: list[dict[str, None]] = list(map(fromkeys, retrieved_given))
        self.reference: list[list[str]] = list(
            map(list, self.reference_keys if reference_side.dedupe else reference_given)
        )
        self.retrieved: list[list[str]] = list(
            map(list, self.retrieved_keys if retrieved_side.dedupe else retrieved_given)
        )
        self._hits: list[list[bool]] | None = None
        self._found: list[list[bool]] | None = None

    def hits(self) -> list[list[bool]]:
        """Per sample, whether each retrieved ID (as read) is among the reference IDs."""
        if self._hits is None:
            self._hits = [
                list(map(among.__contains__, retrieved))
                for retrieved, among in zip(self.retrieved, self.reference_keys, strict=True)
            ]
        return self._hits

    def found(self) -> list[list[bool]]:
        """Per sample, whether each reference ID (as read) is among the retrieved IDs."""
        if self._found is None:
            self._found = [
                list(map(among.__contains__, reference))
                for reference, among in zip(self.reference, self.retrieved_keys, strict=True)
            ]
        return self._found

    def flags(self, judged: str, depth: int | None) -> list[list[bool]]:
        """The flags a formula judging ``judged`` down to ``depth`` gets (``Pipeline.pairs``:
        the judged side's items, the retrieved ones cut to the depth, among the other's)."""
        if judged == "reference":
            return self.found()
        hits = self.hits()
        return hits if depth is None else [flags[:depth] for flags in hits]

    def evidence(self, computes: str, k: int | None) -> list[dict[str, Any]]:
        """The metric's own evidence of each sample (see :data:`_SIDES_ONLY`)."""
        if computes == "split":
            return [
                {
                    "relevant": list(compress(retrieved, flags)),
                    "irrelevant": list(compress(retrieved, map(not_, flags))),
                    "missing": sorted(among.keys() - retrieved),
                }
                for retrieved, flags, among in zip(
                    self.retrieved, self.hits(), self.reference_keys, strict=True
                )
            ]
        if computes == "top_k":
            return [{"top_k": retrieved[:k]} for retrieved in self.retrieved]
        return [{} for _ in self.retrieved]


def _given_all(side: Items, samples: Sequence[Sample]) -> list[Sequence[str]]:
    """``side.given(sample)`` of each of ``samples``: a plain tuple of IDs (the usual case) as
    it is, the others (graded IDs, a text, a cut at a grade) through ``given``."""
    values: list[Any] = list(map(attrgetter(side.field), samples))
    given = side.given
    for i, value in enumerate(values):
        if type(value) is not tuple or side.min_grade > 1:  # (GradedIDs: a subclass)
            values[i] = given(samples[i])
    return values


def _split(judgement: Judgement) -> dict[str, Any]:
    """Which retrieved IDs are relevant, which are not, which reference IDs are missed."""
    return _split_of(judgement.reference, judgement.retrieved)


def _split_of(reference_ids: Sequence[str], retrieved: Sequence[str]) -> dict[str, Any]:
    """:func:`_split` of the two sides."""
    reference = frozenset(reference_ids)
    return {
        "relevant": [i for i in retrieved if i in reference],
        "irrelevant": [i for i in retrieved if i not in reference],
        "missing": sorted(reference.difference(retrieved)),
    }


@attrs.frozen(kw_only=True)
class IDBasedContextPrecision(_IDMetric):
    """Share of the retrieved IDs that are in the reference: relevant retrieved IDs / retrieved
    IDs, rank ignored (ragas's IDBasedContextPrecision)."""

    registry_name = "id_based_context_precision"

    formula_type = policy.Precision

    def evidence(self, judgement: Judgement) -> dict[str, Any]:
        return _split(judgement)


@attrs.frozen(kw_only=True)
class IDBasedContextRecall(_IDMetric):
    """Share of the reference IDs that were retrieved: relevant IDs retrieved / relevant IDs
    (ragas's IDBasedContextRecall)."""

    registry_name = "id_based_context_recall"

    formula_type = policy.Recall

    def evidence(self, judgement: Judgement) -> dict[str, Any]:
        return _split(judgement)


@attrs.frozen(kw_only=True)
class _AtK(_IDMetric):
    k: int = attrs.field(default=10, validator=validators.positive_int)
    """The cut-off rank (default 10)."""

    def default_name(self) -> str:
        return self.registry_name.replace("_at_k", f"_at_{self.k}")

    def formula(self) -> policy.Formula:
        return self.formula_type(k=self.k)  # type: ignore[call-arg]

    def evidence(self, judgement: Judgement) -> dict[str, Any]:
        return {"top_k": list(judgement.retrieved[: self.k])}


_SIDES_ONLY: dict[Any, str] = {
    _IDMetric.evidence: "none",
    IDBasedContextPrecision.evidence: "split",
    IDBasedContextRecall.evidence: "split",
    _AtK.evidence: "top_k",
}
"""The :meth:`~_IDMetric.evidence` methods that read a judgement's two sides only (not its
verdicts), by what they compute (equal names, equal evidence of equal sides):
:meth:`_IDMetric.details_batch` may give them a judgement without verdicts."""

_EDGE_EVIDENCE: frozenset[Any] = frozenset((_IDMetric.evidence, _AtK.evidence))
"""The :meth:`~_IDMetric.evidence` methods that read no ID of a judgement with nothing
retrieved (:meth:`_IDMetric.ranked_edges_shared`)."""


@attrs.frozen(kw_only=True)
class IDPrecisionAtK(_AtK):
    """Relevant IDs in the top k, divided by k (trec_eval ``P_k``)."""

    registry_name = "id_precision_at_k"

    formula_type = policy.PrecisionAtK


@attrs.frozen(kw_only=True)
class IDRecallAtK(_AtK):
    """Relevant IDs in the top k, divided by the reference IDs (trec_eval ``recall_k``)."""

    registry_name = "id_recall_at_k"

    formula_type = policy.RecallAtK


@attrs.frozen(kw_only=True)
class IDHitRateAtK(_AtK):
    """1.0 when any relevant ID is in the top k, else 0.0 (trec_eval ``success_k``)."""

    registry_name = "id_hit_rate_at_k"

    formula_type = policy.HitRateAtK


@attrs.frozen(kw_only=True)
class IDNDCGAtK(_AtK):
    """Normalised DCG at k, the reference's grades as gains (1 for a plain list), as
    trec_eval's ``ndcg_cut_k`` computes it."""

    registry_name = "id_ndcg_at_k"

    formula_type = policy.NDCGAtK


@attrs.frozen(kw_only=True)
class IDMRR(_IDMetric):
    """Reciprocal rank of the first relevant ID; 0.0 when none is retrieved (``recip_rank``)."""

    registry_name = "id_mrr"

    formula_type = policy.ReciprocalRank


@attrs.frozen(kw_only=True)
class IDAveragePrecision(_IDMetric):
    """Average precision over the reference IDs, as trec_eval's ``map`` computes it."""

    registry_name = "id_average_precision"

    formula_type = policy.RankedAveragePrecision


@attrs.frozen(kw_only=True)
class IDAveragePrecisionAtK(_AtK):
    """Average precision over the top k, divided by all reference IDs (trec_eval
    ``map_cut_k``, ir_measures ``AP@k``)."""

    registry_name = "id_average_precision_at_k"
    formula_type = policy.RankedAveragePrecisionAtK


@attrs.frozen(kw_only=True)
class IDReciprocalRankAtK(_AtK):
    """Reciprocal rank of the first relevant ID within the top k (ir_measures ``RR@k``)."""

    registry_name = "id_reciprocal_rank_at_k"
    formula_type = policy.ReciprocalRankAtK


@attrs.frozen(kw_only=True)
class IDF1AtK(_AtK):
    """Harmonic mean of precision@k and recall@k (ranx ``f1@k``)."""

    registry_name = "id_f1_at_k"
    formula_type = policy.F1AtK


@attrs.frozen(kw_only=True)
class IDRPrecision(_IDMetric):
    """Relevant IDs in the top R, divided by R, the number of reference IDs (trec_eval
    ``Rprec``)."""

    registry_name = "id_r_precision"
    formula_type = policy.RPrecision


@attrs.frozen(kw_only=True)
class IDBPref(_IDMetric):
    """Binary preference (trec_eval ``bpref``): needs graded reference IDs to know the documents
    judged not relevant (grade below ``relevance_level``); with a plain list it is the
    recall."""

    registry_name = "id_bpref"

    def formula(self) -> policy.Formula:
        return policy.BPref(relevance_level=self.relevance_level)

    def reference_level(self, formula: policy.Formula) -> int:
        return 0  # every judged document: bpref counts the non-relevant ones too


@attrs.frozen(kw_only=True)
class JudgedAtK(policy.Formula):
    """Judged items in the top k / items in the top k (``min(k, retrieved)``), as
    ir_measures' ``Judged@k`` computes it; ``undefined`` when nothing is retrieved. Each
    verdict says whether a retrieved item is among the judged ones (the reference side)."""

    undefined_when_nothing_retrieved: ClassVar[bool] = True
    k: int = attrs.field(default=10, validator=validators.positive_int)
    """The cut-off rank."""

    @property
    def depth(self) -> int | None:
        return self.k

    def value(self, flags: Sequence[bool], n_reference: int) -> float:
        top = flags[: self.k]
        return sum(top) / len(top) if top else 0.0  # (nothing retrieved is undefined first)

    def evidence(self, flags: Sequence[bool]) -> dict[str, Any]:
        return {"k": self.k, "judged_ranks": policy.relevant_ranks(flags[: self.k])}


@attrs.frozen(kw_only=True)
class IDJudgedAtK(_AtK):
    """Share of the top k retrieved IDs that the reference judges, whatever the grade
    (ir_measures ``Judged@k``): judged IDs in the top k / IDs in the top k. Grade 0 (judged
    not relevant) counts as judged; a negative grade (in the pool, not judged) does not.
    With a plain list of reference IDs, the listed ones are the judged ones."""

    registry_name = "id_judged_at_k"
    formula_type = JudgedAtK

    relevance_level: int = attrs.field(default=1, init=False)
    """(Not an option: every grade from 0 counts as judged.)"""

    def reference_level(self, formula: policy.Formula) -> int:
        return 0  # every judged document, those judged not relevant too

    def none_relevant(self, sample: Sample) -> str | None:
        """Why ``sample`` is ``undefined`` when its reference judges no document (rather than
        "nothing to recall"); None when it judges some (then nothing was retrieved)."""
        judged = sample.reference_context_ids
        if not judged:
            return "no judgements: there are no reference context IDs, so none can be judged"
        grades = getattr(judged, "grades", None)
        if grades is None or any(grade >= 0 for grade in grades):
            return None
        return "no judgements: every reference ID has a negative grade (in the pool, not judged)"


_EDGE_REASONS: frozenset[Any] = frozenset((_IDMetric.none_relevant, IDJudgedAtK.none_relevant))
"""The :meth:`~_IDMetric.none_relevant` methods that read the judged grades only."""
