"""The prompts of the fact-level metrics (#55): nuggets (TREC RAG's AutoNuggetizer) and claims
(RAGChecker), versioned like :mod:`ctxeval_llm.judges.prompts`.

* :data:`NUGGETS`: the nuggets of the reference material, each labelled vital or okay, in one
  request (the AutoNuggetizer's create-and-score steps in one);
* :data:`NUGGET_SUPPORT_BATCH` / :data:`NUGGET_SUPPORT`: each nugget judged ``support``,
  ``partial_support`` or ``not_support`` against the retrieved context (all of a sample's
  nuggets in one request, or one request per nugget);
* :data:`CLAIMS`: the reference answer's atomic claims (RAGChecker's claim extraction);
* :data:`CLAIM_ENTAILMENT`: each claim ``entailment``, ``neutral`` or ``contradiction`` given
  one retrieved chunk (RAGChecker's checking of the answer's claims against each passage,
  all claims of one passage in one request).
"""

from __future__ import annotations

from typing import Any

from ctxeval.plugin import MalformedOutputError
from ctxeval_llm._ask.prompt import Prompt

from .prompts import _list, _object, _text

__all__ = [
    "CLAIMS",
    "CLAIM_ENTAILMENT",
    "CLAIM_LABELS",
    "IMPORTANCES",
    "NUGGETS",
    "NUGGET_SUPPORT",
    "NUGGET_SUPPORT_BATCH",
    "SUPPORT_LEVELS",
]

IMPORTANCES = ("vital", "okay")
"""A nugget's importance, as the TREC RAG track labels them."""

SUPPORT_LEVELS = ("support", "partial_support", "not_support")
"""A nugget's assignment, as the nuggetizer writes them (3-level support)."""

CLAIM_LABELS = ("entailment", "neutral", "contradiction")
"""A claim's relation to a passage, as RAGChecker's checker labels it."""


def _choice(value: Any, allowed: tuple[str, ...], where: str) -> str:
    if not isinstance(value, str) or value.lower() not in allowed:
        raise MalformedOutputError(f"{where} must be one of {', '.join(allowed)}, got {value!r}")
    return value.lower()


# --- nugget creation (vital / okay) ------------------------------------------------------------


def _check_nuggets(value: Any, expected: int | None) -> list[dict[str, str]]:
    obj = _object(value, ("nuggets",), "the answer")
    out = []
    for i, item in enumerate(_list(obj["nuggets"], "nuggets", None)):
        nugget = _object(item, ("text", "importance"), f"nugget {i}")
        text = _text(nugget["text"], f"nugget {i}'s text").strip()
        if text:
            importance = _choice(nugget["importance"], IMPORTANCES, f"nugget {i}'s importance")
            out.append({"text": text, "importance": importance})
    return out


NUGGETS = Prompt(
    name="nuggets",
    version=1,
    system=(
        "You write the information nuggets of a question's reference material: atomic facts "
        "(1 to 12 words each) that a good answer to the question must or may contain, taken "
        "only from the material given. Leave out what the question does not need and say each "
        "fact once. Label each nugget vital (a good answer must contain it) or okay (worthwhile "
        "but not essential). List at most the number of nuggets asked for, the most important "
        "first."
    ),
    user="Question: {question}\nAt most: {max_nuggets} nuggets\nReference material:\n{material}",
    schema={
        "type": "object",
        "properties": {
            "nuggets": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "text": {"type": "string"},
                        "importance": {"type": "string", "enum": list(IMPORTANCES)},
                    },
                    "required": ["text", "importance"],
                    "additionalProperties": False,
                },
            }
        },
        "required": ["nuggets"],
        "additionalProperties": False,
    },
    examples=(
        (
            {
                "question": "When was the Eiffel Tower built and how tall is it?",
                "max_nuggets": 3,
                "material": "[1] The Eiffel Tower was built from 1887 to 1889 for the World's "
                "Fair. It is 330 metres tall and was designed by Gustave Eiffel's company.",
            },
            {
                "nuggets": [
                    {"text": "built from 1887 to 1889", "importance": "vital"},
                    {"text": "330 metres tall", "importance": "vital"},
                    {"text": "built for the World's Fair", "importance": "okay"},
                ]
            },
        ),
    ),
    check=_check_nuggets,
)


# --- nugget support (3 levels) -----------------------------------------------------------------

_SUPPORT_SYSTEM = (
    "You judge whether information nuggets are captured by the retrieved context of a "
    "question. A nugget fully captured by the context is support; a nugget partly captured "
    "(some of its information is there, not all) is partial_support; a nugget the context "
    "does not capture at all is not_support. Judge only what the context says, not what you "
    "know. Say why in one sentence, then give the label."
)

_SUPPORT_ITEM: dict[str, Any] = {
    "type": "object",
    "properties": {
        "reason": {"type": "string"},
        "support": {"type": "string", "enum": list(SUPPORT_LEVELS)},
    },
    "required": ["reason", "support"],
    "additionalProperties": False,
}


def _check_support(value: Any, expected: int | None) -> dict[str, str]:
    obj = _object(value, ("reason", "support"), "the answer")
    return {
        "reason": _text(obj["reason"], "reason"),
        "support": _choice(obj["support"], SUPPORT_LEVELS, "support"),
    }


def _check_supports(value: Any, expected: int | None) -> list[dict[str, str]]:
    obj = _object(value, ("assignments",), "the answer")
    return [_check_support(i, None) for i in _list(obj["assignments"], "assignments", expected)]


_TOWER_CONTEXT = "[1] Built from 1887 to 1889, the tower was the tallest structure of its day."

NUGGET_SUPPORT = Prompt(
    name="nugget_support",
    version=1,
    system=_SUPPORT_SYSTEM,
    user="Question: {question}\nNugget: {nugget}\nContext:\n{context}",
    schema=_SUPPORT_ITEM,
    examples=(
        (
            {
                "question": "When was the Eiffel Tower built?",
                "nugget": "built from 1887 to 1889",
                "context": _TOWER_CONTEXT,
            },
            {"reason": "The context gives both years of the building.", "support": "support"},
        ),
    ),
    check=_check_support,
)

NUGGET_SUPPORT_BATCH = Prompt(
    name="nugget_support_batch",
    version=1,
    system=_SUPPORT_SYSTEM
    + " Judge every numbered nugget on its own and answer with one assignment per nugget, in "
    "their order.",
    user="Question: {question}\nContext:\n{context}\nNuggets:\n{nuggets}",
    schema={
        "type": "object",
        "properties": {"assignments": {"type": "array", "items": _SUPPORT_ITEM}},
        "required": ["assignments"],
        "additionalProperties": False,
    },
    examples=(
        (
            {
                "question": "When was the Eiffel Tower built and how tall is it?",
                "context": _TOWER_CONTEXT,
                "nuggets": "[1] built from 1887 to 1889\n[2] 330 metres tall\n"
                "[3] tallest structure of its day in Paris",
            },
            {
                "assignments": [
                    {"reason": "Both years are given.", "support": "support"},
                    {"reason": "No height is given.", "support": "not_support"},
                    {
                        "reason": "It was the tallest structure; Paris is not said.",
                        "support": "partial_support",
                    },
                ]
            },
        ),
    ),
    check=_check_supports,
)


# --- claims (RAGChecker) -----------------------------------------------------------------------


def _check_claims(value: Any, expected: int | None) -> list[str]:
    obj = _object(value, ("claims",), "the answer")
    claims = _list(obj["claims"], "claims", None)
    return [t for t in (_text(c, f"claim {i}").strip() for i, c in enumerate(claims)) if t]


CLAIMS = Prompt(
    name="claims",
    version=1,
    system=(
        "You split a text into its atomic claims: short, self-contained statements of one fact "
        "each, with pronouns replaced by what they stand for, so that each can be checked on its "
        "own. Keep every fact of the text and add none."
    ),
    user="Question: {question}\nText: {text}",
    schema={
        "type": "object",
        "properties": {"claims": {"type": "array", "items": {"type": "string"}}},
        "required": ["claims"],
        "additionalProperties": False,
    },
    examples=(
        (
            {
                "question": "Who designed the Eiffel Tower?",
                "text": "Gustave Eiffel's company designed it; it opened in 1889.",
            },
            {
                "claims": [
                    "Gustave Eiffel's company designed the Eiffel Tower.",
                    "The Eiffel Tower opened in 1889.",
                ]
            },
        ),
    ),
    check=_check_claims,
)


def _check_entailments(value: Any, expected: int | None) -> list[dict[str, str]]:
    obj = _object(value, ("labels",), "the answer")
    out = []
    for i, item in enumerate(_list(obj["labels"], "labels", expected)):
        label = _object(item, ("reason", "label"), f"label {i}")
        out.append(
            {
                "reason": _text(label["reason"], f"label {i}'s reason"),
                "label": _choice(label["label"], CLAIM_LABELS, f"label {i}"),
            }
        )
    return out


CLAIM_ENTAILMENT = Prompt(
    name="claim_entailment",
    version=1,
    system=(
        "You check claims against one passage retrieved for a question. For each numbered "
        "claim, say in one sentence why, then label it entailment (the passage states or "
        "implies the claim), contradiction (the passage says the opposite) or neutral (the "
        "passage does not settle it). Judge only what the passage says. Answer with one label "
        "per claim, in their order."
    ),
    user="Question: {question}\nPassage: {passage}\nClaims:\n{claims}",
    schema={
        "type": "object",
        "properties": {
            "labels": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "reason": {"type": "string"},
                        "label": {"type": "string", "enum": list(CLAIM_LABELS)},
                    },
                    "required": ["reason", "label"],
                    "additionalProperties": False,
                },
            }
        },
        "required": ["labels"],
        "additionalProperties": False,
    },
    examples=(
        (
            {
                "question": "Who designed the Eiffel Tower?",
                "passage": "The tower, opened in 1887, was designed by Eiffel's engineers.",
                "claims": "[1] Gustave Eiffel's company designed the Eiffel Tower.\n"
                "[2] The Eiffel Tower opened in 1889.\n[3] The Eiffel Tower is in Paris.",
            },
            {
                "labels": [
                    {"reason": "Eiffel's engineers designed it.", "label": "entailment"},
                    {"reason": "The passage says 1887.", "label": "contradiction"},
                    {"reason": "The city is not named.", "label": "neutral"},
                ]
            },
        ),
    ),
    check=_check_entailments,
)
