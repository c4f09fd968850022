"""Reading what a model or a server answers: tolerant JSON extraction, then strict validation;
whole numbers from a server's JSON."""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

from ctxeval.plugin import MalformedOutputError

__all__ = ["parse_json", "redact", "whole_number"]

_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)
_LONG_NUMBER = re.compile(r"\d{19}")
"""Digits enough for an integer that 64 bits do not hold: such a text is read by json alone."""
_KEY_LIKE = re.compile(r"\b(sk-[A-Za-z0-9_\-]{6,}|(?:key|token)-[A-Za-z0-9_\-]{12,})")


def parse_json(text: str) -> Any:
    """The JSON object in ``text``: as it is, inside a code fence, or with text around it.

    Raises:
        MalformedOutputError: no JSON object can be read (the message shows the start of it).
    """
    if _LONG_NUMBER.search(text) is None:  # (orjson reads an integer past 64 bits as a float)
        try:  # the usual answer: the object alone, read in C as json reads it (#58)
            value = orjson.loads(text)
        except orjson.JSONDecodeError:  # (NaN, 1e400, lone surrogates, text around: below)
            pass
        else:
            if type(value) is dict:
                return value
    candidates = [text.strip()]
    candidates += [m.strip() for m in _FENCE.findall(text)]
    start, end = text.find("{"), text.rfind("}")
    if 0 <= start < end:
        candidates.append(text[start : end + 1])
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except (json.JSONDecodeError, ValueError):
            continue
    snippet = text.strip().replace("\n", " ")[:120]
    raise MalformedOutputError(f"the model's answer is not JSON: {snippet!r}")


def redact(text: str, *secrets: str | None) -> str:
    """``text`` with every given secret, and anything shaped like an API key, masked."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "***")
    return _KEY_LIKE.sub("***", text)


def whole_number(value: Any, *, least: int = 1) -> int | None:
    """``value`` when a server's JSON gave an integer of at least ``least`` (a bool is not
    one), else None."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= least:
        return value
    return None
