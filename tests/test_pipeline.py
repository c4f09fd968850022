"""The pipeline is a type: every built-in metric is a composition of public parts, bound once,
and a third party composes its own in a few lines."""

from __future__ import annotations

import json
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

import attrs
import pytest

import ctxeval
from ctxeval import plugin
from ctxeval.plugin import (
    Extracted,
    Items,
    Pipeline,
    PipelineMetric,
    RunContext,
    SplitAndAttribute,
    Unit,
    Verdict,
    compose,
    policy,
)

EIFFEL = {
    "id": "eiffel",
    "user_input": "Where is the Eiffel Tower and who designed it?",
    "reference": "The Eiffel Tower in Paris was designed by Gustave Eiffel.",
    "response": "It is in Paris.",
    "retrieved_contexts": ["The Eiffel Tower is located in Paris."],
    "reference_contexts": ["Paris is the capital of France.", "The Eiffel Tower is in Paris."],
    "retrieved_context_ids": ["doc_1", "doc_2", "doc_3", "doc_4"],
    "reference_context_ids": ["doc_1", "doc_4", "doc_5", "doc_6"],
}

BUILT_IN = {
    # name: (formula class, judged side, deterministic)
    "id_based_context_precision": (policy.Precision, "retrieved", True),
    "id_based_context_recall": (policy.Recall, "reference", True),
    "id_precision_at_k": (policy.PrecisionAtK, "retrieved", True),
    "id_recall_at_k": (policy.RecallAtK, "retrieved", True),
    "id_hit_rate_at_k": (policy.HitRateAtK, "retrieved", True),
    "id_mrr": (policy.ReciprocalRank, "retrieved", True),
    "id_average_precision": (policy.RankedAveragePrecision, "retrieved", True),
    "id_ndcg_at_k": (policy.NDCGAtK, "retrieved", True),
    "non_llm_context_precision_with_reference": (policy.AveragePrecision, "retrieved", True),
    "non_llm_context_recall": (policy.Recall, "reference", True),
    "context_entity_recall": (policy.Recall, "reference", False),
    "llm_context_precision_with_reference": (policy.AveragePrecision, "retrieved", False),
    "llm_context_precision_without_reference": (policy.AveragePrecision, "retrieved", False),
    "llm_context_recall": (policy.Recall, "reference", False),
}


@pytest.mark.parametrize("name", sorted(BUILT_IN))
def test_every_built_in_metric_is_a_composition_of_public_parts(name: str) -> None:
    formula_class, judged, deterministic = BUILT_IN[name]
    metric = ctxeval.get_metric(name)
    assert isinstance(metric, PipelineMetric)
    pipeline = metric.pipeline
    assert isinstance(pipeline, Pipeline)
    assert type(pipeline.formula) is formula_class
    assert pipeline.formula.judged == judged
    assert pipeline.deterministic is deterministic
    assert hasattr(metric, "score_batch") is deterministic
    for side in (pipeline.reference, pipeline.retrieved):
        assert isinstance(side, (Items, Extracted, SplitAndAttribute))
    if isinstance(pipeline.reference, SplitAndAttribute):
        assert pipeline.matcher is None
        assert isinstance(pipeline.reference.attributor, plugin.Attributor)
    else:
        assert isinstance(pipeline.matcher, plugin.Matcher)
    if deterministic:
        assert isinstance(pipeline.matcher, plugin.DeterministicMatcher)


def test_parts_are_bound_once_when_the_metric_is_built() -> None:
    metric = ctxeval.get_metric(
        "context_entity_recall", extractor="spacy", matcher="fuzzy",
        matcher_options={"threshold": 0.8},
    )  # fmt: skip
    reference = metric.pipeline.reference
    assert isinstance(reference, Extracted)
    assert reference.extractor.name == "spacy"
    assert metric.pipeline.matcher.name == "fuzzy"
    assert metric.pipeline.matcher.threshold == 0.8  # type: ignore[attr-defined]
    # the same objects on every read: nothing is looked up per sample
    assert metric.pipeline.matcher is metric.pipeline.matcher


@attrs.frozen(kw_only=True)
class Letters:
    """A test extractor: the distinct capitalised words."""

    name: str = "letters"

    async def extract(self, texts: Sequence[str], ctx: RunContext) -> list[list[Unit]]:
        return [[Unit(w) for w in dict.fromkeys(t.split()) if w[:1].isupper()] for t in texts]


def test_parts_resolve_in_the_registry_that_builds_the_metric() -> None:
    registry = ctxeval.default_registry().copy()
    registry.register("ctxeval.extractors", "letters", Letters)
    metric = registry.get_metric("context_entity_recall", extractor="letters")
    assert isinstance(metric.pipeline.reference.extractor, Letters)  # type: ignore[union-attr]
    ev = ctxeval.evaluate([EIFFEL], [metric], registry=registry)
    # The, Eiffel, Tower, Paris, Gustave, Eiffel. -> The Eiffel Tower Paris Gustave "Eiffel."
    row = ev.results[0]
    assert row.status is ctxeval.Status.OK
    assert row.details["missing"] == ["Gustave"]
    # the default registry does not know the extractor
    with pytest.raises(ctxeval.UnknownNameError, match="unknown extractor 'letters'"):
        ctxeval.get_metric("context_entity_recall", extractor="letters")


def test_compose_a_deterministic_metric_in_a_few_lines() -> None:
    metric = compose(
        "top2_hits",
        reference=Items(field="reference_context_ids", what="reference IDs", dedupe=True),
        retrieved=Items(field="retrieved_context_ids", what="retrieved IDs", dedupe=True),
        matcher=ctxeval.default_registry().get_matcher("id"),
        formula=policy.PrecisionAtK(k=2),
    )
    assert metric.requires == ("reference_context_ids", "retrieved_context_ids")
    assert hasattr(metric, "score_batch")
    rows = [{k: v for k, v in EIFFEL.items() if k != "id"}] * 3000
    ev = ctxeval.evaluate(rows, [metric])  # through the batch path
    assert {r.score for r in ev.results} == {0.5}
    details = ev.results[0].details
    assert (details["k"], details["relevant_ranks"]) == (2, [1])
    assert [v["matched"] for v in details["verdicts"]] == [True, False]


@attrs.frozen(kw_only=True)
class Halves:
    """A test attributor: each sentence is a unit, attributed when a candidate holds its first
    word."""

    name: str = "halves"

    async def attribute(
        self, text: str, candidates: Sequence[str], ctx: RunContext
    ) -> list[tuple[Unit, Verdict]]:
        assert ctx.sample is not None  # the run context carries the sample being scored
        words = {w.strip(".").lower() for c in candidates for w in c.split()}
        out = []
        for sentence in filter(None, (s.strip() for s in text.split("."))):
            hit = sentence.split()[0].lower() in words
            out.append((Unit(sentence), Verdict(hit, reason=ctx.sample.user_input)))
        return out


def test_split_and_attribute_is_a_part_kind_third_parties_use() -> None:
    metric = compose(
        "statement_recall",
        reference=SplitAndAttribute(field="reference", attributor=Halves(), what="statements"),
        retrieved=Items(field="retrieved_contexts", what="retrieved contexts"),
        formula=policy.Recall(),
    )
    sample = {**EIFFEL, "reference": "Paris is nice. Rome is old."}
    [row] = ctxeval.evaluate([sample], [metric]).results
    assert row.score == 0.5
    assert row.details == {
        "found": ["Paris is nice"],
        "missing": ["Rome is old"],
        "flags": [1, 0],  # what every judged row gives: each unit's verdict, in order
    }
    # degenerate inputs are decided without calling the part
    blank, empty = ctxeval.evaluate(
        [{**EIFFEL, "id": "a", "reference": " "}, {**EIFFEL, "id": "b", "retrieved_contexts": []}],
        [metric],
    ).results
    assert blank.status is ctxeval.Status.UNDEFINED
    assert blank.reason == "nothing to recall: there are no statements (the reference is empty)"
    assert (empty.score, empty.details) == (0.0, {"nothing_retrieved": True})


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        (
            {"reference": SplitAndAttribute(field="reference", attributor=Halves(), what="s"),
             "formula": policy.Precision()},
            ValueError, "judges the retrieved items",
        ),
        (
            {"reference": SplitAndAttribute(field="reference", attributor=Halves(), what="s"),
             "matcher": "MATCHER", "formula": policy.Recall()},
            ValueError, "no matcher",
        ),
        ({"formula": policy.Recall()}, TypeError, "needs a matcher"),
        ({"matcher": "MATCHER", "formula": "recall"}, TypeError, "ctxeval.policy.Formula"),
    ],
)  # fmt: skip
def test_a_pipeline_refuses_parts_that_do_not_fit(
    kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    parts: dict[str, Any] = {
        "reference": Items(field="reference_context_ids", what="IDs"),
        "retrieved": Items(field="retrieved_context_ids", what="IDs"),
        **kwargs,
    }
    if parts.get("matcher") == "MATCHER":
        parts["matcher"] = ctxeval.default_registry().get_matcher("id")
    with pytest.raises(error, match=message):
        Pipeline(**parts)


def test_a_deterministic_metric_needs_deterministic_parts() -> None:
    @attrs.frozen(kw_only=True)
    class Slow(plugin.DeterministicPipelineMetric):
        def build(self) -> Pipeline:
            return Pipeline(
                reference=Extracted(field="reference", extractor=Letters(), what="words"),
                retrieved=Items(field="retrieved_contexts", what="contexts"),
                matcher=ctxeval.default_registry().get_matcher("containment"),
                formula=policy.Recall(),
            )

    with pytest.raises(TypeError, match="needs Items on both sides"):
        Slow(name="slow")


def test_formulas_apply_the_score_policy() -> None:
    recall, ap = policy.Recall(), policy.AveragePrecision()
    kw = {"reference": "reference things", "retrieved": "retrieved things"}
    assert (
        recall.result([], 0, 3, **kw).reason == "nothing to recall: there are no reference things"
    )
    assert recall.result([False, False], 2, 0, **kw).score == 0.0
    assert ap.result([], 2, 0, **kw).reason == "nothing retrieved: there are no retrieved things"
    assert ap.result([True, False, True], 2, 3, **kw).score == float(Fraction(5, 6))
    assert policy.NDCGAtK(k=3).depth == 3
    with pytest.raises(ValueError, match="k must be a whole number >= 1"):
        policy.PrecisionAtK(k=0)


def test_llm_parts_say_they_need_an_llm_and_others_do_not() -> None:
    assert ctxeval.get_metric("context_precision").needs_llm
    assert ctxeval.get_metric("context_recall").needs_llm
    assert ctxeval.get_metric("context_entity_recall").needs_llm  # the llm extractor
    assert not ctxeval.get_metric("context_entity_recall", extractor="spacy").needs_llm
    assert not ctxeval.get_metric("context_precision", llm="openai/m").needs_llm  # has its own
    assert not ctxeval.get_metric("id_mrr").needs_llm


def test_run_settings_are_one_validated_value() -> None:
    settings = ctxeval.RunSettings(max_concurrency=4, timeout=30)
    assert settings.resource_limits == {"default": ctxeval.Limits(max_concurrency=4)}
    assert ctxeval.RunSettings.build(settings, timeout=5).timeout == 5
    assert ctxeval.RunSettings.build(settings).max_concurrency == 4
    with pytest.raises(ctxeval.ConfigError, match="'max_concurency' \\(did you mean"):
        ctxeval.RunSettings.build(max_concurency=3)
    for bad, message in [
        ({"timeout": -5}, "timeout must be None or a positive number, got -5"),
        ({"max_concurrency": 0}, "max_concurrency must be a whole number >= 1"),
        ({"max_cost_usd": float("nan")}, "max_cost_usd must be a number >= 0"),
        ({"samples_in_flight": 0}, "samples_in_flight must be a whole number >= 1"),
        ({"resume": True}, "resume=True needs journal="),
        ({"limits": ctxeval.Limits(), "max_concurrency": 2}, "either limits= or max_concurrency="),
        ({"resume": "yes", "journal": "j"}, "resume must be true or false"),
    ]:
        with pytest.raises(ctxeval.ConfigError, match=message):
            ctxeval.RunSettings(**bad)


def test_evaluate_takes_settings_or_the_same_fields_as_keywords(tmp_path: Path) -> None:
    settings = ctxeval.RunSettings(journal=tmp_path / "j.jsonl", max_concurrency=2)
    a = ctxeval.evaluate([EIFFEL], ["id_mrr"], settings=settings)
    b = ctxeval.evaluate([EIFFEL], ["id_mrr"], max_concurrency=2)
    assert a.results == b.results
    assert (tmp_path / "j.jsonl").exists()
    with pytest.raises(ctxeval.ConfigError, match="unknown run setting 'journl'"):
        ctxeval.evaluate([EIFFEL], ["id_mrr"], journl="x")


def test_one_summary_for_the_api_and_the_files(tmp_path: Path) -> None:
    from ctxeval.cli import main

    rows = [
        {**EIFFEL, "id": str(i), "retrieved_context_ids": [f"doc_{j}" for j in range(i % 5 + 1)]}
        for i in range(40)
    ]
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["evaluate", str(data), "-m", "id_mrr", "--out", str(tmp_path / "run"), "-q"]) == 0
    written = json.loads((tmp_path / "run" / "summary.json").read_text())["metrics"]["id_mrr"]
    summary = ctxeval.evaluate(rows, ["id_mrr"]).summary()["id_mrr"]
    assert summary.ci95 is not None
    assert written["ci95"] == list(summary.ci95)
    assert (
        written["ci95_method"]
        == summary.ci95_method
        == ("percentile bootstrap, 2000 resamples, seed 0")
    )
    assert written["mean"] == summary.mean


@attrs.frozen(kw_only=True)
class SlowIDs:
    """An I/O-style matcher (only the async form): the pipeline takes its slow path."""

    name: str = "slow_ids"

    async def match(
        self, items: Sequence[str], candidates: Sequence[str], ctx: RunContext
    ) -> list[Verdict]:
        return plugin.membership_verdicts(items, candidates)


def test_graded_relevance_takes_the_same_way_through_the_async_path() -> None:
    graded = {**EIFFEL, "reference_context_ids": {"doc_1": 3, "doc_4": 1, "doc_5": 2, "doc_2": 0}}
    slow = compose(
        "slow_ndcg",
        reference=Items(field="reference_context_ids", what="reference IDs", dedupe=True),
        retrieved=Items(field="retrieved_context_ids", what="retrieved IDs", dedupe=True),
        matcher=SlowIDs(),
        formula=policy.NDCGAtK(k=4),
    )
    assert not hasattr(slow, "score")
    slow_row, fast_row = ctxeval.evaluate([graded], [slow, "nDCG@4"]).results
    assert slow_row.score == fast_row.score
    assert fast_row.score != ctxeval.evaluate([EIFFEL], ["nDCG@4"]).results[0].score
