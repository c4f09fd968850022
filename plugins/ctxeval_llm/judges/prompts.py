"""The prompts, as versioned templates with few-shot examples and strict output checks.

Each :class:`~ctxeval_llm._ask.prompt.Prompt` puts its stable part first (instructions, output schema, examples in the
system message) and the sample's text last, so that providers' prompt caching applies. Its
``version`` is part of the cache key: change the text, bump the version.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ctxeval.plugin import MalformedOutputError
from ctxeval_llm._ask.prompt import Prompt

__all__ = [
    "ATTRIBUTION",
    "ATTRIBUTION_GIVEN",
    "ENTITIES",
    "ENTITY_PRESENCE",
    "RELEVANCE",
    "RELEVANCE_BATCH",
    "SUFFICIENCY",
    "SUFFICIENCY_WITH_REFERENCE",
    "TOP_GRADE",
    "USEFULNESS",
    "USEFULNESS_BATCH",
    "Prompt",
]


def _binary(value: Any, where: str) -> int:
    if isinstance(value, bool) or value not in (0, 1) or not isinstance(value, int):
        raise MalformedOutputError(f"{where} must be exactly 0 or 1, got {value!r}")
    return value


def _object(value: Any, keys: tuple[str, ...], where: str) -> Mapping[str, Any]:
    if type(value) is not dict and not isinstance(value, Mapping):  # (an ABC's check: slow)
        raise MalformedOutputError(f"{where} must be a JSON object, got {type(value).__name__}")
    missing = [k for k in keys if k not in value]
    if missing:
        raise MalformedOutputError(f"{where} lacks {', '.join(missing)}")
    return value


def _list(value: Any, where: str, length: int | None) -> list[Any]:
    if not isinstance(value, list):
        raise MalformedOutputError(f"{where} must be a list, got {type(value).__name__}")
    if length is not None and len(value) != length:
        raise MalformedOutputError(f"{where} has {len(value)} items; {length} were asked for")
    return value


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise MalformedOutputError(f"{where} must be a string, got {type(value).__name__}")
    return value


# --- entity extraction ---------------------------------------------------------------------


def _check_entities(value: Any, expected: int | None) -> list[str]:
    obj = _object(value, ("entities",), "the answer")
    entities = _list(obj["entities"], "entities", None)
    return [_text(e, f"entity {i}") for i, e in enumerate(entities)]


ENTITIES = Prompt(
    name="entities",
    version=1,
    system=(
        "You extract named entities from a text: people, places, organisations, works, events, "
        "dates and years, quantities with units, and other proper names. List each distinct "
        "entity once, as it is written in the text, without explanations. Do not list common "
        "nouns or pronouns."
    ),
    user="Text: {text}",
    schema={
        "type": "object",
        "properties": {"entities": {"type": "array", "items": {"type": "string"}}},
        "required": ["entities"],
        "additionalProperties": False,
    },
    examples=(
        (
            {
                "text": "The Eiffel Tower, located in Paris, France, was completed in 1889 for the World's Fair."
            },
            {"entities": ["Eiffel Tower", "Paris", "France", "1889", "World's Fair"]},
        ),
        (
            {
                "text": "Albert Einstein published the theory of general relativity in 1915 in Berlin."
            },
            {"entities": ["Albert Einstein", "general relativity", "1915", "Berlin"]},
        ),
    ),
    check=_check_entities,
)


# --- chunk usefulness (context precision) --------------------------------------------------


def _check_verdict(value: Any, expected: int | None) -> dict[str, Any]:
    obj = _object(value, ("reason", "verdict"), "the answer")
    return {"reason": _text(obj["reason"], "reason"), "verdict": _binary(obj["verdict"], "verdict")}


_USEFULNESS_SYSTEM = (
    "You judge whether a retrieved context was useful in arriving at a given answer to a "
    "question. Say why in one sentence, then give verdict 1 if the context is useful for "
    "arriving at the answer and 0 if it is not."
)

USEFULNESS = Prompt(
    name="usefulness",
    version=1,
    system=_USEFULNESS_SYSTEM,
    user="Question: {question}\nAnswer: {answer}\nContext: {context}",
    schema={
        "type": "object",
        "properties": {
            "reason": {"type": "string"},
            "verdict": {"type": "integer", "enum": [0, 1]},
        },
        "required": ["reason", "verdict"],
        "additionalProperties": False,
    },
    examples=(
        (
            {
                "question": "Who won the 2020 ICC World Cup?",
                "answer": "England won the 2022 ICC Men's T20 World Cup.",
                "context": "The 2022 ICC Men's T20 World Cup was held in Australia; England won it, beating Pakistan by five wickets in the final.",
            },
            {
                "reason": "The context says England won the 2022 T20 World Cup, which is the answer.",
                "verdict": 1,
            },
        ),
        (
            {
                "question": "What is the tallest mountain in the world?",
                "answer": "Mount Everest.",
                "context": "The Andes is the longest continental mountain range in the world.",
            },
            {
                "reason": "The context is about the Andes and says nothing of Mount Everest.",
                "verdict": 0,
            },
        ),
    ),
    check=_check_verdict,
)


def _check_verdicts(value: Any, expected: int | None) -> list[dict[str, Any]]:
    obj = _object(value, ("verdicts",), "the answer")
    items = _list(obj["verdicts"], "verdicts", expected)
    return [_check_verdict(item, None) for item in items]


USEFULNESS_BATCH = Prompt(
    name="usefulness_batch",
    version=1,
    system=_USEFULNESS_SYSTEM
    + " Judge every numbered context on its own and answer with one verdict per context, in "
    "their order.",
    user="Question: {question}\nAnswer: {answer}\nContexts:\n{contexts}",
    schema={
        "type": "object",
        "properties": {
            "verdicts": {
                "type": "array",
                "items": USEFULNESS.schema,
            }
        },
        "required": ["verdicts"],
        "additionalProperties": False,
    },
    examples=(
        (
            {
                "question": "What is the tallest mountain in the world?",
                "answer": "Mount Everest.",
                "contexts": "[1] Mount Everest, at 8,849 m, is Earth's highest mountain above sea level.\n[2] The Andes is the longest continental mountain range in the world.",
            },
            {
                "verdicts": [
                    {"reason": "It names Mount Everest as the highest mountain.", "verdict": 1},
                    {"reason": "It is about the Andes, not the tallest mountain.", "verdict": 0},
                ]
            },
        ),
    ),
    check=_check_verdicts,
)


# --- statement attribution (context recall) -----------------------------------------------


_ATTRIBUTED: dict[str, Any] = {
    "reason": {"type": "string"},
    "attributed": {"type": "integer", "enum": [0, 1]},
}
"""The judgement of one statement (the properties of an answer's item)."""


def _statement_schema(*, with_statement: bool) -> dict[str, Any]:
    properties = {"statement": {"type": "string"}, **_ATTRIBUTED} if with_statement else _ATTRIBUTED
    return {
        "type": "object",
        "properties": dict(properties),
        "required": list(properties),
        "additionalProperties": False,
    }


def _check_attributed(item: Any, i: int, keys: tuple[str, ...], where: str) -> dict[str, Any]:
    """One judged statement of an answer: ``keys`` present, the texts strings, ``attributed``
    exactly 0 or 1."""
    entry = _object(item, keys, f"{where} {i}")
    return {
        key: _binary(entry[key], f"{key} {i}")
        if key == "attributed"
        else _text(entry[key], f"{key} {i}")
        for key in keys
    }


def _check_attribution(value: Any, expected: int | None) -> list[dict[str, Any]]:
    obj = _object(value, ("classifications",), "the answer")
    items = _list(obj["classifications"], "classifications", None)
    if not items:
        raise MalformedOutputError("classifications is empty; the answer has statements")
    keys = ("statement", "reason", "attributed")
    return [_check_attributed(item, i, keys, "classification") for i, item in enumerate(items)]


ATTRIBUTION = Prompt(
    name="attribution",
    version=1,
    system=(
        "Given a question, a context and an answer, split the answer into its statements (one "
        "per sentence or claim) and decide for each whether it can be attributed to the "
        "context: attributed 1 if the context supports it, 0 if it does not. Give a short "
        "reason for each."
    ),
    user="Question: {question}\nContext: {context}\nAnswer: {answer}",
    schema={
        "type": "object",
        "properties": {
            "classifications": {
                "type": "array",
                "items": _statement_schema(with_statement=True),
            }
        },
        "required": ["classifications"],
        "additionalProperties": False,
    },
    examples=(
        (
            {
                "question": "Where is France and what is its capital?",
                "context": "France, in Western Europe, encompasses medieval cities, alpine villages and Mediterranean beaches. The country is also renowned for its wines.",
                "answer": "France is in Western Europe. Its capital is Paris.",
            },
            {
                "classifications": [
                    {
                        "statement": "France is in Western Europe.",
                        "reason": "The context says France is in Western Europe.",
                        "attributed": 1,
                    },
                    {
                        "statement": "Its capital is Paris.",
                        "reason": "The context does not mention the capital.",
                        "attributed": 0,
                    },
                ]
            },
        ),
    ),
    check=_check_attribution,
)


def _check_attribution_given(value: Any, expected: int | None) -> list[dict[str, Any]]:
    obj = _object(value, ("verdicts",), "the answer")
    items = _list(obj["verdicts"], "verdicts", expected)
    keys = ("reason", "attributed")
    return [_check_attributed(item, i, keys, "verdict") for i, item in enumerate(items)]


ATTRIBUTION_GIVEN = Prompt(
    name="attribution_given",
    version=1,
    system=(
        "Given a question, a context and numbered statements, decide for each statement "
        "whether it can be attributed to the context: attributed 1 if the context supports "
        "it, 0 if it does not. Give a short reason for each, one verdict per statement, in "
        "their order."
    ),
    user="Question: {question}\nContext: {context}\nStatements:\n{statements}",
    schema={
        "type": "object",
        "properties": {
            "verdicts": {
                "type": "array",
                "items": _statement_schema(with_statement=False),
            }
        },
        "required": ["verdicts"],
        "additionalProperties": False,
    },
    examples=(
        (
            {
                "question": "Where is France and what is its capital?",
                "context": "France, in Western Europe, encompasses medieval cities, alpine villages and Mediterranean beaches. The country is also renowned for its wines.",
                "statements": "[1] France is in Western Europe.\n[2] Its capital is Paris.",
            },
            {
                "verdicts": [
                    {"reason": "The context says France is in Western Europe.", "attributed": 1},
                    {"reason": "The context does not mention the capital.", "attributed": 0},
                ]
            },
        ),
    ),
    check=_check_attribution_given,
)


# --- entity presence (verification mode of entity recall) ---------------------------------


def _check_presence(value: Any, expected: int | None) -> list[int]:
    obj = _object(value, ("present",), "the answer")
    items = _list(obj["present"], "present", expected)
    return [_binary(v, f"present {i}") for i, v in enumerate(items)]


ENTITY_PRESENCE = Prompt(
    name="entity_presence",
    version=1,
    system=(
        "For each numbered entity, decide whether the context mentions it, under its own name "
        "or an obvious variant (an abbreviation, another spelling, a full or short form): 1 if "
        "it does, 0 if it does not. Answer with one flag per entity, in their order."
    ),
    user="Entities:\n{entities}\nContext: {context}",
    schema={
        "type": "object",
        "properties": {"present": {"type": "array", "items": {"type": "integer", "enum": [0, 1]}}},
        "required": ["present"],
        "additionalProperties": False,
    },
    examples=(
        (
            {
                "entities": "[1] Gustave Eiffel\n[2] Paris\n[3] 1889",
                "context": "The tower in Paris was completed in 1889 and remains a popular landmark.",
            },
            {"present": [0, 1, 1]},
        ),
    ),
    check=_check_presence,
)


# --- graded relevance (context relevance, no reference) ------------------------------------


TOP_GRADE = 3
"""The highest grade of the relevance scale (UMBRELA's 0 to 3)."""


def _grade(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= TOP_GRADE:
        raise MalformedOutputError(
            f"{where} must be a whole number from 0 to {TOP_GRADE}, got {value!r}"
        )
    return value


def _check_grade(value: Any, expected: int | None) -> dict[str, Any]:
    obj = _object(value, ("reason", "grade"), "the answer")
    return {"reason": _text(obj["reason"], "reason"), "grade": _grade(obj["grade"], "grade")}


_RELEVANCE_SYSTEM = (
    "You grade how relevant a passage is to a search query, on a scale of 0 to 3:\n"
    "3 = the passage is dedicated to the query and contains the exact answer;\n"
    "2 = the passage has some answer for the query, but the answer may be a bit unclear, or "
    "hidden among extraneous information;\n"
    "1 = the passage seems related to the query but does not answer it;\n"
    "0 = the passage has nothing to do with the query.\n"
    "Give 1 when the passage is about the topic only in part, 2 when it holds something "
    "important for the whole query along with other material, and 3 when it is only and "
    "entirely about the query; when none of these fits, give 0. Consider the intent behind "
    "the query, how well the passage matches it and how trustworthy the passage is. Judge the "
    "passage by what it says, not by what you know. Say why in one sentence, then give the "
    "grade."
)

_RELEVANCE_ITEM: dict[str, Any] = {
    "type": "object",
    "properties": {
        "reason": {"type": "string"},
        "grade": {"type": "integer", "enum": [0, 1, 2, 3]},
    },
    "required": ["reason", "grade"],
    "additionalProperties": False,
}

_TOWER = "How tall is the Eiffel Tower?"
_GRADED_PASSAGES = (
    (
        "The Eiffel Tower is 330 metres (1,083 ft) tall, antennas included.",
        "It is entirely about the tower's height and gives it exactly.",
        3,
    ),
    (
        "Built for the 1889 World's Fair, the wrought-iron tower on the Champ de Mars drew two "
        "million visitors that year; at 330 m it is still the tallest structure in Paris, and "
        "its restaurants are booked months ahead.",
        "It gives the height, but among unrelated facts about visitors and restaurants.",
        2,
    ),
    (
        "The Eiffel Tower was designed by the engineering firm of Gustave Eiffel.",
        "It is about the tower but does not say how tall it is.",
        1,
    ),
    (
        "The Andes is the longest continental mountain range in the world.",
        "It is about the Andes and has nothing to do with the tower.",
        0,
    ),
)

RELEVANCE = Prompt(
    name="relevance",
    version=1,
    system=_RELEVANCE_SYSTEM,
    user="Query: {question}\nPassage: {context}",
    schema=_RELEVANCE_ITEM,
    examples=tuple(
        ({"question": _TOWER, "context": passage}, {"reason": reason, "grade": grade})
        for passage, reason, grade in _GRADED_PASSAGES
    ),
    check=_check_grade,
)


def _check_grades(value: Any, expected: int | None) -> list[dict[str, Any]]:
    obj = _object(value, ("grades",), "the answer")
    items = _list(obj["grades"], "grades", expected)
    return [_check_grade(item, None) for item in items]


RELEVANCE_BATCH = Prompt(
    name="relevance_batch",
    version=1,
    system=_RELEVANCE_SYSTEM
    + " Judge every numbered passage on its own and answer with one grade per passage, in "
    "their order.",
    user="Query: {question}\nPassages:\n{contexts}",
    schema={
        "type": "object",
        "properties": {"grades": {"type": "array", "items": _RELEVANCE_ITEM}},
        "required": ["grades"],
        "additionalProperties": False,
    },
    examples=(
        (
            {
                "question": _TOWER,
                "contexts": "\n".join(
                    f"[{i}] {passage}" for i, (passage, _, _) in enumerate(_GRADED_PASSAGES, 1)
                ),
            },
            {
                "grades": [
                    {"reason": reason, "grade": grade} for _, reason, grade in _GRADED_PASSAGES
                ]
            },
        ),
    ),
    check=_check_grades,
)


# --- sufficient context (context sufficiency) ----------------------------------------------


def _check_sufficient(value: Any, expected: int | None) -> dict[str, Any]:
    obj = _object(value, ("reason", "sufficient"), "the answer")
    return {
        "reason": _text(obj["reason"], "reason"),
        "sufficient": _binary(obj["sufficient"], "sufficient"),
    }


_SUFFICIENCY_SYSTEM = (
    "You judge whether the retrieved contexts are sufficient to answer a question. They are "
    "sufficient when they hold all the information needed to give a definitive answer: an "
    "answer can be inferred from them alone, possibly by combining several contexts or by "
    "simple reasoning or arithmetic. They are insufficient when some needed information is "
    "missing, or what they say is incomplete, inconclusive or contradictory. Whether an "
    "answer drawn from them is true does not matter, nor what you know yourself: judge only "
    "what the contexts say. List the facts the question needs and check each against the "
    "contexts, say in a few sentences why, then give sufficient 1 if the contexts are "
    "sufficient and 0 if they are not."
)

_SUFFICIENCY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "reason": {"type": "string"},
        "sufficient": {"type": "integer", "enum": [0, 1]},
    },
    "required": ["reason", "sufficient"],
    "additionalProperties": False,
}

_SPLIT_CONTEXTS = (
    "[1] The Eiffel Tower was completed in March 1889.\n"
    "[2] The Statue of Liberty was dedicated in October 1886."
)

SUFFICIENCY = Prompt(
    name="sufficiency",
    version=1,
    system=_SUFFICIENCY_SYSTEM,
    user="Question: {question}\nRetrieved contexts:\n{contexts}",
    schema=_SUFFICIENCY_SCHEMA,
    examples=(
        (
            {
                "question": "Which was finished first, the Eiffel Tower or the Statue of Liberty?",
                "contexts": _SPLIT_CONTEXTS,
            },
            {
                "reason": "The question needs both dates: context 1 gives 1889 for the tower, "
                "context 2 gives 1886 for the statue, so the statue came first.",
                "sufficient": 1,
            },
        ),
        (
            {"question": "Who designed the Statue of Liberty?", "contexts": _SPLIT_CONTEXTS},
            {
                "reason": "The question needs the statue's designer; the contexts give only "
                "dates, and no designer.",
                "sufficient": 0,
            },
        ),
    ),
    check=_check_sufficient,
)

SUFFICIENCY_WITH_REFERENCE = Prompt(
    name="sufficiency_with_reference",
    version=1,
    system=_SUFFICIENCY_SYSTEM
    + " A reference answer is given as a guide to what the question asks: the contexts need "
    "not repeat its words, but they must support a definitive answer on their own.",
    user="Question: {question}\nReference answer: {reference}\nRetrieved contexts:\n{contexts}",
    schema=_SUFFICIENCY_SCHEMA,
    examples=(
        (
            {
                "question": "Which was finished first, the Eiffel Tower or the Statue of Liberty?",
                "reference": "The Statue of Liberty (1886), three years before the tower (1889).",
                "contexts": _SPLIT_CONTEXTS,
            },
            {
                "reason": "Context 1 dates the tower to 1889 and context 2 the statue to 1886, "
                "which is what the reference answer rests on.",
                "sufficient": 1,
            },
        ),
        (
            {
                "question": "Who designed the Statue of Liberty?",
                "reference": "Frédéric Auguste Bartholdi.",
                "contexts": _SPLIT_CONTEXTS,
            },
            {
                "reason": "The contexts give only dates; nothing names the designer.",
                "sufficient": 0,
            },
        ),
    ),
    check=_check_sufficient,
)
