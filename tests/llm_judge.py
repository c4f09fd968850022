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
        ("entities", "You extract named entities"),
        ("usefulness_batch", "Judge every numbered context"),
        ("usefulness", "You judge whether a retrieved context"),
        ("attribution", "split the answer into its statements"),
        ("attribution_given", "numbered statements, decide for each statement"),
        ("entity_presence", "For each numbered entity"),
    ]:
        if marker in system:
            return name
    raise AssertionError(f"unknown prompt: {system[:80]}")


def user_text(request: Mapping[str, Any]) -> str:
    return str(request["messages"][-1]["content"])


class Judge:
    """Answers from tables keyed by the text being judged.

    Attributes:
        entities: text -> entity list.
        verdicts: context -> 0/1 (usefulness).
        attributions: reference -> list of 0/1, one per statement.
        presence: entity -> 0/1.
        statements: statement -> 0/1 (attribution of statements already split).
    """

    def __init__(
        self,
        *,
        entities: Mapping[str, Sequence[str]] | None = None,
        verdicts: Mapping[str, int] | None = None,
        attributions: Mapping[str, Sequence[int]] | None = None,
        presence: Mapping[str, int] | None = None,
        statements: Mapping[str, int] | None = None,
        fallback: Callable[[Mapping[str, Any]], str | Reply] | None = None,
    ) -> None:
        self.entities = dict(entities or {})
        self.verdicts = dict(verdicts or {})
        self.attributions = dict(attributions or {})
        self.presence = dict(presence or {})
        self.statements = dict(statements or {})
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
        raise AssertionError(name)
