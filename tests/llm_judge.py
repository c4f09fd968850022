"""A scripted judge for the fake OpenAI server: answers each ctxeval prompt by its schema name."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from fakes.openai_server import Reply


def prompt_name(request: Mapping[str, Any]) -> str:
    schema = (request.get("response_format") or {}).get("json_schema") or {}
    if "name" in schema:
        return str(schema["name"])
    system = request["messages"][0]["content"]
    for name, marker in [
        ("relevance_batch", "Judge every numbered passage"),
        ("relevance", "You grade how relevant a passage"),
        ("sufficiency_with_reference", "A reference answer is given as a guide"),
        ("sufficiency", "retrieved contexts are sufficient to answer"),
        ("entities", "You extract named entities"),
        ("usefulness_batch", "Judge every numbered context"),
        ("usefulness", "You judge whether a retrieved context"),
        ("attribution", "split the answer into its statements"),
        ("attribution_given", "numbered statements, decide for each statement"),
        ("entity_presence", "For each numbered entity"),
        ("nugget_support_batch", "Judge every numbered nugget"),
        ("nugget_support", "You judge whether information nuggets"),
        ("nuggets", "You write the information nuggets"),
        ("claims", "You split a text into its atomic claims"),
        ("claim_entailment", "You check claims against one passage"),
    ]:
        if marker in system:
            return name
    raise AssertionError(f"unknown prompt: {system[:80]}")


def user_text(request: Mapping[str, Any]) -> str:
    """The prompt's user message (the first: a repair turn adds one after the answer)."""
    users = [m for m in request["messages"] if m.get("role") == "user"]
    return str(users[0]["content"])


class Judge:
    """Answers from tables keyed by the text being judged.

    Attributes:
        entities: text -> entity list.
        verdicts: context -> 0/1 (usefulness).
        attributions: reference -> list of 0/1, one per statement.
        presence: entity -> 0/1.
        statements: statement -> 0/1 (attribution of statements already split).
        grades: chunk -> 0..3 (graded relevance; a chunk not listed is graded 0).
        sufficient: question -> 0/1 (context sufficiency; a question not listed gets 0).
        nuggets: reference material -> [(text, importance)] (a text not listed: no nugget).
        support: nugget -> support label (a nugget not listed: ``not_support``).
        claims: reference -> claims (a text not listed: no claim).
        entails: retrieved chunk -> the claims it entails (others: ``neutral``).
    """

    def __init__(
        self,
        *,
        entities: Mapping[str, Sequence[str]] | None = None,
        verdicts: Mapping[str, int] | None = None,
        attributions: Mapping[str, Sequence[int]] | None = None,
        presence: Mapping[str, int] | None = None,
        statements: Mapping[str, int] | None = None,
        grades: Mapping[str, int] | None = None,
        sufficient: Mapping[str, int] | None = None,
        fallback: Callable[[Mapping[str, Any]], str | Reply] | None = None,
        nuggets: Mapping[str, Sequence[tuple[str, str]]] | None = None,
        support: Mapping[str, str] | None = None,
        claims: Mapping[str, Sequence[str]] | None = None,
        entails: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        self.nuggets = dict(nuggets or {})
        self.support = dict(support or {})
        self.claims = dict(claims or {})
        self.entails = dict(entails or {})
        self.entities = dict(entities or {})
        self.verdicts = dict(verdicts or {})
        self.attributions = dict(attributions or {})
        self.presence = dict(presence or {})
        self.statements = dict(statements or {})
        self.grades = dict(grades or {})
        self.sufficient = dict(sufficient or {})
        self.fallback = fallback

    def __call__(self, request: dict[str, Any]) -> str | Reply:
        if self.fallback is not None:
            answer = self.fallback(request)
            if answer is not None:
                return answer
        name = prompt_name(request)
        text = user_text(request)
        if name == "entities":
            body = text.removeprefix("Text: ")
            return json.dumps({"entities": list(self.entities.get(body, []))})
        if name == "usefulness":
            context = text.split("\nContext: ", 1)[1]
            verdict = self.verdicts.get(context, 0)
            return json.dumps({"reason": f"scripted {verdict}", "verdict": verdict})
        if name == "usefulness_batch":
            listing = text.split("\nContexts:\n", 1)[1]
            contexts = [re.sub(r"^\[\d+\] ", "", line) for line in listing.split("\n")]
            return json.dumps(
                {
                    "verdicts": [
                        {"reason": "scripted", "verdict": self.verdicts.get(c, 0)} for c in contexts
                    ]
                }
            )
        if name == "attribution":
            reference = text.split("\nAnswer: ", 1)[1]
            flags = self.attributions.get(reference, [1])
            return json.dumps(
                {
                    "classifications": [
                        {"statement": f"s{i}", "reason": "scripted", "attributed": f}
                        for i, f in enumerate(flags)
                    ]
                }
            )
        if name == "attribution_given":
            listing = text.split("\nStatements:\n", 1)[1]
            statements = [re.sub(r"^\[\d+\] ", "", line) for line in listing.split("\n")]
            return json.dumps(
                {
                    "verdicts": [
                        {"reason": "scripted", "attributed": self.statements.get(s, 1)}
                        for s in statements
                    ]
                }
            )
        if name == "entity_presence":
            listing = text.split("\nContext: ", 1)[0].removeprefix("Entities:\n")
            names = [re.sub(r"^\[\d+\] ", "", line) for line in listing.split("\n")]
            return json.dumps({"present": [self.presence.get(n, 0) for n in names]})
        if name == "relevance":
            passage = text.split("\nPassage: ", 1)[1]
            grade = self.grades.get(passage, 0)
            return json.dumps({"reason": f"scripted {grade}", "grade": grade})
        if name == "relevance_batch":
            listing = text.split("\nPassages:\n", 1)[1]
            passages = [re.sub(r"^\[\d+\] ", "", line) for line in listing.split("\n")]
            return json.dumps(
                {
                    "grades": [
                        {
                            "reason": f"scripted {self.grades.get(p, 0)}",
                            "grade": self.grades.get(p, 0),
                        }
                        for p in passages
                    ]
                }
            )
        if name in _FACTS:
            return self.facts(name, text)
        if name in ("sufficiency", "sufficiency_with_reference"):
            question = text.split("\n", 1)[0].removeprefix("Question: ")
            flag = self.sufficient.get(question, 0)
            return json.dumps({"reason": f"scripted {flag}", "sufficient": flag})
        raise AssertionError(name)

    def facts(self, name: str, text: str) -> str:
        """The nugget and claim prompts (#55)."""
        if name == "nuggets":
            material = text.split("\nReference material:\n", 1)[1]
            found = [{"text": t, "importance": i} for t, i in self.nuggets.get(material, [])]
            return json.dumps({"nuggets": found})
        if name == "nugget_support":
            nugget = text.split("\nNugget: ", 1)[1].split("\nContext:\n", 1)[0]
            label = self.support.get(nugget, "not_support")
            return json.dumps({"reason": f"scripted {label}", "support": label})
        if name == "nugget_support_batch":
            listing = text.split("\nNuggets:\n", 1)[1]
            labels = [self.support.get(n, "not_support") for n in _numbered(listing)]
            return json.dumps(
                {"assignments": [{"reason": f"scripted {x}", "support": x} for x in labels]}
            )
        if name == "claims":
            reference = text.split("\nText: ", 1)[1]
            return json.dumps({"claims": list(self.claims.get(reference, []))})
        passage, listing = text.split("\nPassage: ", 1)[1].split("\nClaims:\n", 1)
        held = self.entails.get(passage, ())
        labels = ["entailment" if c in held else "neutral" for c in _numbered(listing)]
        return json.dumps({"labels": [{"reason": f"scripted {x}", "label": x} for x in labels]})


_FACTS = ("nuggets", "nugget_support", "nugget_support_batch", "claims", "claim_entailment")


def _numbered(listing: str) -> list[str]:
    return [re.sub(r"^\[\d+\] ", "", line) for line in listing.split("\n")]
