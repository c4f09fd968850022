"""The normal form entities are compared in (``normalize_entity``, ``normalize_words``): one
test per rule of the table in docs/metrics/entity-recall.md, what is *not* folded, the demo's
q02 (a possessive), and the properties the matchers rely on."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from importlib.resources import files
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ctxeval
from ctxeval.builtin.entities import ENTITY_FORM_VERSION
from ctxeval.plugin import RunContext, Unit, get_matcher, normalize_entity, normalize_words


def same(a: str, b: str) -> bool:
    return normalize_entity(a) == normalize_entity(b)


def found(entity: str, context: str, matcher: str = "containment") -> bool:
    [verdict] = get_matcher(matcher).match_now([entity], [context])  # type: ignore[attr-defined]
    return bool(verdict.matched)


# --- one test per rule ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("variant", "plain"),
    [
        ("Gustave Eiffel's", "Gustave Eiffel"),
        ("Gustave Eiffel\u2019s", "Gustave Eiffel"),  # curly apostrophe
        ("Gustave Eiffel\u02bcs", "Gustave Eiffel"),  # modifier letter apostrophe
        ("Gustave Eiffel\uff07s", "Gustave Eiffel"),  # full-width apostrophe
        ("the Smiths'", "the Smiths"),  # plural possessive
        ("the Smiths\u2019", "Smiths"),
        ("Charles Babbage's engine", "Charles Babbage engine"),  # inside a name
    ],
)
def test_possessives(variant: str, plain: str) -> None:
    assert same(variant, plain)


@pytest.mark.parametrize(
    ("variant", "plain"),
    [("The Eiffel Tower", "Eiffel Tower"), ("the Louvre", "Louvre"), ("A Coruña", "Coruna"),
     ("an Post", "Post")],
)  # fmt: skip
def test_a_leading_article(variant: str, plain: str) -> None:
    assert same(variant, plain)


def test_only_one_leading_article_and_never_the_last_word() -> None:
    assert normalize_entity("The A-Team") == "the a team"  # not "team"
    assert normalize_entity("The") == "the"
    assert normalize_entity("Tower of the Winds") == "tower of the winds"  # not inside


@pytest.mark.parametrize(("variant", "plain"), [("PARIS", "Paris"), ("Straße", "STRASSE")])
def test_case(variant: str, plain: str) -> None:
    assert same(variant, plain)


@pytest.mark.parametrize(
    ("variant", "plain"),
    [
        ("\u201cMona Lisa\u201d", "Mona Lisa"),  # curly double quotes
        ("\u00abMona Lisa\u00bb", "Mona Lisa"),  # guillemets
        ("\u2018Mona Lisa\u2019", "Mona Lisa"),  # curly single quotes
        ("Austria\u2013Hungary", "Austria-Hungary"),  # en dash
        ("Austria \u2014 Hungary", "Austria Hungary"),  # em dash
        ("Austria\u2011Hungary", "Austria Hungary"),  # non-breaking hyphen
        ("Eiffel-Tower", "Eiffel Tower"),
        ("foo_bar", "foo bar"),
    ],
)
def test_quotes_dashes_and_other_punctuation(variant: str, plain: str) -> None:
    assert same(variant, plain)


@pytest.mark.parametrize(
    ("variant", "plain"),
    [("Zürich", "Zurich"), ("São Paulo", "Sao Paulo"), ("Curaçao", "Curacao"),
     ("Łódź", "Lodz"), ("Øresund", "Oresund"), ("Æsop", "Aesop"), ("İstanbul", "Istanbul"),
     ("Ze\u0301lie", "Zélie")],  # decomposed and composed é
)  # fmt: skip
def test_diacritics_on_latin_letters(variant: str, plain: str) -> None:
    assert same(variant, plain)


@pytest.mark.parametrize(
    ("variant", "plain"),
    [
        ("Gustave\u00a0Eiffel", "Gustave Eiffel"),  # non-breaking space
        ("  Gustave \t\n Eiffel ", "Gustave Eiffel"),
        ("Gustave\u2003Eiffel", "Gustave Eiffel"),  # em space
        ("Gustave\u200bEiffel", "Gustave Eiffel"),  # zero-width space: a word break
        ("Eif\u00adfel", "Eiffel"),  # soft hyphen: not one
    ],
)
def test_white_space_and_invisible_characters(variant: str, plain: str) -> None:
    assert same(variant, plain)


@pytest.mark.parametrize("variant", ["Paris.", "Paris!", "Paris,", "(Paris)", "Paris;", "Paris…"])
def test_trailing_and_surrounding_punctuation(variant: str) -> None:
    assert same(variant, "Paris")


@pytest.mark.parametrize(
    ("variant", "plain"),
    [
        ("\uff30\uff41\uff52\uff49\uff53", "Paris"),
        ("ﬁnland", "Finland"),
        ("Ⅻ", "XII"),
    ],  # full-width, ligature
)
def test_compatibility_forms(variant: str, plain: str) -> None:
    assert same(variant, plain)


@pytest.mark.parametrize(
    ("variant", "plain"),
    [("U.S.A.", "USA"), ("U.S.", "US"), ("the U.S. Army", "US Army"), ("Washington, D.C.",
     "Washington DC"), ("U.S", "US")],
)  # fmt: skip
def test_initialisms(variant: str, plain: str) -> None:
    assert same(variant, plain)


@pytest.mark.parametrize(
    ("variant", "plain"),
    [("2,850 kilometres", "2850 kilometres"), ("8\u202f849 metres", "8849 metres"),
     ("1,000,000", "1000000"), ("8\u2009849", "8849")],
)  # fmt: skip
def test_digit_groups(variant: str, plain: str) -> None:
    assert same(variant, plain)


def test_a_decimal_point_or_comma_is_a_separator() -> None:
    assert same("2.5", "2,5")  # "2 5" both: not a digit group of three


def test_ampersand_reads_and() -> None:
    assert same("Johnson & Johnson", "Johnson and Johnson")
    assert same("Procter&Gamble", "Procter and Gamble")


# --- what is not the same ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Smith", "Smiths"),  # a plural is another word
        ("Smith's", "Smiths"),
        ("WiFi", "Wi-Fi"),  # closed up vs hyphenated
        ("USA", "United States"),  # abbreviations and full names
        ("St. Petersburg", "Saint Petersburg"),
        ("J. R. R. Tolkien", "J.R.R. Tolkien"),  # spaced initials stay letters
        ("Peking", "Beijing"),  # other names, transliterations
        ("2.5", "25"),  # a decimal point separates
        ("1.000", "1000"),  # a dot between digit groups: a decimal
        ("850", "2,850"),
        ("Йорк", "Иорк"),  # diacritics outside the Latin script are letters
        ("Αθήνα", "Αθηνα"),
        ("twelve", "12"),
        ("Eiffel", "Gustave Eiffel"),  # part of a name (containment may still find it)
    ],
)
def test_what_is_not_the_same(a: str, b: str) -> None:
    assert not same(a, b)


def test_a_possessive_is_not_a_word_start() -> None:
    assert normalize_entity("'s-Hertogenbosch") == "s hertogenbosch"  # the Dutch city


# --- matchers and both sides --------------------------------------------------------------------


def test_both_sides_are_normalised_for_containment() -> None:
    # the reference's entity has the possessive, the context not
    assert found("Gustave Eiffel's", "designed by the company of Gustave Eiffel and completed")
    # the context has it, the entity not
    assert found("Gustave Eiffel", "It was Gustave Eiffel\u2019s company.")
    assert found("Zurich", "Based in Zürich, Switzerland.")
    assert found("the U.S.", "Apollo 11 was a U.S. mission")
    assert found("2,850 kilometres", "some 2850 kilometres long")
    # whole words only: no match inside a longer word or number
    assert not found("Paris", "Parisian cafés")
    assert not found("850 kilometres", "some 2,850 kilometres long")


def test_fuzzy_and_same_entity_use_the_same_form() -> None:
    assert found("Gustave Eiffel's", "the company of Gustave Eiffel", "fuzzy")
    [verdict] = get_matcher("same_entity").match_now(  # type: ignore[attr-defined]
        ["Gustave Eiffel's"], ["1889", "GUSTAVE EIFFEL"]
    )
    assert (verdict.matched, verdict.evidence) == (True, 1)


def test_the_matchers_and_the_metric_report_the_version_of_the_form() -> None:
    assert ENTITY_FORM_VERSION == "entity-form@2"
    for name in ("containment", "fuzzy", "same_entity"):
        assert get_matcher(name).fingerprint_data == ENTITY_FORM_VERSION  # type: ignore[attr-defined]
    metric = ctxeval.get_metric("context_entity_recall", extractor="spacy")
    assert metric.fingerprint_data == ENTITY_FORM_VERSION  # type: ignore[attr-defined]


@attrs.frozen(kw_only=True)
class Given:
    """A test extractor: the entities listed for each text, no model."""

    entities: Mapping[str, Sequence[str]]
    name: str = "given"

    async def extract(self, texts: Sequence[str], ctx: RunContext) -> list[list[Unit]]:
        return [[Unit(e, "ENTITY") for e in self.entities.get(t, ())] for t in texts]


def demo_sample(sample_id: str) -> dict[str, Any]:
    text = (files("ctxeval") / "data" / "demo.jsonl").read_text(encoding="utf-8")
    return next(r for r in map(json.loads, text.splitlines()) if r["id"] == sample_id)


@pytest.mark.parametrize("mode", ["verify", "intersection"])
def test_demo_q02_possessive_is_found(mode: str) -> None:
    """q02's reference says "Gustave Eiffel's company", chunk 3 "the company of Gustave
    Eiffel": the entity is there, the score 1.0 (it was a false 0.5)."""
    q02 = demo_sample("q02")
    context_entities = {c: ["Gustave Eiffel", "1889"] for c in q02["retrieved_contexts"][2:]}
    registry = ctxeval.default_registry().copy()
    registry.register(
        "ctxeval.extractors",
        "given",
        lambda: Given(entities={q02["reference"]: ["Gustave Eiffel's", "1889"],
                                "\n".join(q02["retrieved_contexts"]): ["Gustave Eiffel", "1889"],
                                **context_entities}),
    )  # fmt: skip
    metric = registry.get_metric("context_entity_recall", extractor="given", mode=mode)
    [row] = ctxeval.evaluate([q02], [metric], registry=registry).results
    assert (row.status, row.score) == (ctxeval.Status.OK, 1.0), row.details
    assert row.details["missing"] == []
    assert row.details["found"] == ["Gustave Eiffel's", "1889"]  # as written in the reference


def test_demo_q02_with_spacy() -> None:
    pytest.importorskip("spacy")
    q02 = demo_sample("q02")
    metric = ctxeval.get_metric("context_entity_recall", extractor="spacy")
    [row] = ctxeval.evaluate([q02], [metric]).results
    assert row.score == 1.0, row.details
    assert row.details["missing"] == []


def test_the_seed_example_is_unchanged() -> None:
    """Gustave Eiffel is still missing from "The tower in Paris was completed in 1889...":
    2/3."""
    registry = ctxeval.default_registry().copy()
    reference = "Gustave Eiffel designed the tower in Paris in 1889."
    registry.register(
        "ctxeval.extractors",
        "given",
        lambda: Given(entities={reference: ["Gustave Eiffel", "Paris", "1889"]}),
    )
    sample = {
        "reference": reference,
        "retrieved_contexts": [
            "The tower in Paris was completed in 1889 and remains a popular landmark."
        ],
    }
    metric = registry.get_metric("context_entity_recall", extractor="given")
    [row] = ctxeval.evaluate([sample], [metric], registry=registry).results
    assert row.score == 2 / 3
    assert row.details["missing"] == ["Gustave Eiffel"]


# --- properties -------------------------------------------------------------------------------

PIECES = st.sampled_from(
    [*"aAsSeEtT n'\u2019.,-&_09", "é", "Ü", "ø", "Ł", "\u0131", "İ", "ß", "ﬁ", "\u00ad", "\u202f",
     "\u201c", "\uff30", "the ", "a ", "an ", "'s", "\u2019s ", "s' ", "U.S.", "2,850"]
)  # fmt: skip
TEXTS = st.lists(PIECES, max_size=30).map("".join)
WORDS = st.lists(
    st.sampled_from(["Gustave", "Eiffel's", "Zürich", "U.S.", "2,850", "Tower", "Smiths'", "São"]),
    min_size=1,
    max_size=4,
).map(" ".join)


@settings(max_examples=500, deadline=None)
@given(TEXTS)
def test_normalising_twice_is_normalising_once(text: str) -> None:
    assert normalize_entity(normalize_entity(text)) == normalize_entity(text)
    assert normalize_words(normalize_words(text)) == normalize_words(text)


@settings(max_examples=300, deadline=None)
@given(TEXTS)
def test_an_entity_is_its_words_without_a_leading_article(text: str) -> None:
    words = normalize_words(text)
    assert normalize_entity(text) in (words, words.split(" ", 1)[-1])


@settings(max_examples=300, deadline=None)
@given(WORDS, st.sampled_from(["", "the ", "The "]), st.sampled_from(["", ".", "!", ","]))
def test_an_entity_written_in_a_passage_is_found(entity: str, article: str, end: str) -> None:
    passage = f"It was said that {article}{entity}{end} was there."
    assert found(article + entity, passage)
    assert found(entity, passage, "fuzzy")
