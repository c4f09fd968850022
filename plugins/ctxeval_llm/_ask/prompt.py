"""A versioned prompt: the template the ask path fills and checks; the texts are
:mod:`ctxeval_llm.judges.prompts`.

A prompt puts its stable part first (instructions, output schema, examples in the system
message) and the sample's text last, so that providers' prompt caching applies. Its
``version`` is part of the cache key: change the text, bump the version.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import attrs

__all__ = ["Prompt"]


@attrs.frozen
class Prompt:
    """A versioned prompt: system text with schema and examples, a user template, a checker."""

    name: str
    version: int
    system: str
    user: str
    schema: Mapping[str, Any]
    examples: tuple[tuple[Mapping[str, Any], Mapping[str, Any]], ...]
    check: Callable[[Any, int | None], Any]
    _texts: dict[object, str] = attrs.field(init=False, factory=dict, eq=False, repr=False)
    """The parts that do not change from request to request, made at first use: the system
    message (with and without the schema) and the schema's JSON."""

    @property
    def schema_json(self) -> str:
        """The schema as canonical JSON (sorted keys), as it appears in the prompt."""
        text = self._texts.get("schema")
        if text is None:
            text = self._texts["schema"] = json.dumps(self.schema, sort_keys=True)
        return text

    def messages(
        self, variables: Mapping[str, Any], *, schema_in_prompt: bool
    ) -> list[dict[str, str]]:
        system = self._texts.get(schema_in_prompt)
        if system is None:
            system = self._texts[schema_in_prompt] = self._system_text(schema_in_prompt)
        return [
            {"role": "system", "content": system},
            {"role": "user", "content": self.user.format(**variables)},
        ]

    def _system_text(self, schema_in_prompt: bool) -> str:
        parts = [self.system.strip()]
        if schema_in_prompt:
            parts.append(
                "Answer with one JSON object and nothing else, following this JSON schema:\n"
                + self.schema_json
            )
        for number, (given, answer) in enumerate(self.examples, start=1):
            parts.append(
                f"Example {number}\nInput:\n{self.user.format(**given)}\nOutput:\n"
                + json.dumps(answer, ensure_ascii=False)
            )
        return "\n\n".join(parts)

    def response_format(self) -> dict[str, Any]:
        return {
            "type": "json_schema",
            "json_schema": {"name": self.name, "schema": dict(self.schema), "strict": True},
        }
