"""String similarity: the measures, bulk matrices, and chunks of unequal size."""

from __future__ import annotations

import pytest

import ctxeval
from ctxeval._calls.scheduler import Scheduler
from ctxeval.builtin.similarity import MEASURES, SimilarityMatcher, similarity_matrix

PASSAGE = "The Eiffel Tower is one of the most famous landmarks in Paris."
BIG_CHUNK = (
    "Opening hours vary by season and tickets can be bought online or at the gate. "
    + PASSAGE
    + " Queues are shortest early in the morning, and the summit closes in high wind."
)


def recall(measure: str, retrieved: list[str], reference: list[str]) -> float | None:
    metric = ctxeval.get_metric("non_llm_context_recall", measure=measure)
    return (
        ctxeval.evaluate(
            [{"retrieved_contexts": retrieved, "reference_contexts": reference}], metrics=[metric]
        )
        .results[0]
        .score
    )


def test_levenshtein_misses_a_chunk_that_holds_the_passage_plus_other_text() -> None:
    # ragas's default measure: the size difference alone pushes similarity under 0.5.
    assert recall("levenshtein", [BIG_CHUNK], [PASSAGE]) == 0.0


def test_containment_finds_the_passage_inside_a_bigger_chunk() -> None:
    assert recall("containment", [BIG_CHUNK], [PASSAGE]) == 1.0
    matrix = similarity_matrix([PASSAGE], [BIG_CHUNK], measure="containment")
    assert matrix[0, 0] == 1.0


def test_containment_is_asymmetric_a_fragment_does_not_recall_a_passage() -> None:
    fragment = "most famous landmarks"
    [[score]] = similarity_matrix([PASSAGE], [fragment], measure="containment").tolist()
    assert score <= len(fragment) / len(PASSAGE) + 1e-12
    assert recall("containment", [fragment], [PASSAGE]) == 0.0
    assert recall("partial", [fragment], [PASSAGE]) == 1.0  # partial_ratio is symmetric


@pytest.mark.parametrize("measure", MEASURES)
def test_every_measure_gives_values_in_0_1_and_one_for_equal_texts(measure: str) -> None:
    texts = ["", "a", "Paris", PASSAGE, BIG_CHUNK]
    matrix = similarity_matrix(texts, texts, measure=measure)
    assert matrix.shape == (5, 5)
    assert ((matrix >= 0.0) & (matrix <= 1.0)).all()
    for i in range(1, 5):
        assert matrix[i, i] == 1.0


def test_normalize_folds_case_and_punctuation() -> None:
    strict = similarity_matrix(["PARIS, FRANCE!"], ["paris france"], measure="levenshtein")
    folded = similarity_matrix(
        ["PARIS, FRANCE!"], ["paris france"], measure="levenshtein", normalize=True
    )
    assert strict[0, 0] < 0.5
    assert folded[0, 0] == 1.0


def test_matrix_of_empty_sides() -> None:
    assert similarity_matrix([], ["a"]).shape == (0, 1)
    assert similarity_matrix(["a"], []).shape == (1, 0)


def test_precision_verdicts_carry_evidence() -> None:
    metric = ctxeval.get_metric("non_llm_context_precision_with_reference", measure="containment")
    [row] = ctxeval.evaluate(
        [
            {
                "retrieved_contexts": ["unrelated text about cooking", BIG_CHUNK],
                "reference_contexts": ["x" * 5, PASSAGE],
            }
        ],
        metrics=[metric],
    ).results
    assert row.score == 0.5  # relevant only at rank 2
    verdicts = row.details["verdicts"]
    assert [v["matched"] for v in verdicts] == [False, True]
    assert verdicts[1]["evidence"] == 1
    assert verdicts[1]["similarity"] == 1.0
    assert row.details["measure"] == "containment"
    assert row.details["threshold"] == 0.5


@pytest.mark.anyio
async def test_similarity_matcher_plugin(anyio_backend: str) -> None:
    matcher = ctxeval.default_registry().get_matcher(
        "similarity", measure="containment", threshold=0.9
    )
    assert isinstance(matcher, SimilarityMatcher)
    ctx = Scheduler(ctxeval.default_registry()).context()
    verdicts = await matcher.match([PASSAGE, "Mount Everest"], [BIG_CHUNK], ctx)
    assert [v.matched for v in verdicts] == [True, False]
    assert verdicts[0].evidence == 0


@pytest.mark.anyio
async def test_id_matcher_plugin(anyio_backend: str) -> None:
    matcher = ctxeval.default_registry().get_matcher("id")
    ctx = Scheduler(ctxeval.default_registry()).context()
    verdicts = await matcher.match(["b", "z"], ["a", "b", "b"], ctx)
    assert [(v.matched, v.evidence) for v in verdicts] == [(True, 1), (False, None)]


@pytest.mark.parametrize(
    ("measure", "size"), [("containment", 31_200), ("partial", 6_000), ("levenshtein", 1_000_000)]
)
def test_a_pair_past_a_measures_size_is_an_error_row_at_once(measure: str, size: int) -> None:
    """30 KB against 30 KB with containment used to run for minutes, a 1 MB pair with
    levenshtein 70 s: now an error row that says why, and the other samples are scored."""

    big = ("lorem ipsum " * (size // 12 + 1))[:size]
    samples = [
        {"reference_contexts": [big], "retrieved_contexts": [big]},
        {"reference_contexts": ["abc"], "retrieved_contexts": ["abc"]},
    ]
    metric = ctxeval.get_metric("non_llm_context_recall", measure=measure)
    big_row, small_row = ctxeval.evaluate(samples, [metric]).results
    assert big_row.status is ctxeval.Status.ERROR
    assert "TextTooLargeError" in (big_row.reason or "")
    assert "split the passages" in (big_row.reason or "")
    assert small_row.score == 1.0


def test_pairs_within_the_limits_are_scored_as_before() -> None:
    from ctxeval.builtin.similarity import MAX_PARTIAL_CHARS, pair_similarity

    text = "a" * MAX_PARTIAL_CHARS
    assert pair_similarity("containment")(text, text) == 1.0
    assert pair_similarity("levenshtein")("x" * 50_000, "x" * 50_000) == 1.0
    assert pair_similarity("hamming")("x" * 1_000_000, "x" * 1_000_000) == 1.0  # linear: no cap
