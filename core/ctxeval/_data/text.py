"""Text normalisation shared by plugins that compare entities or passages."""

from __future__ import annotations

import functools
import re
import reprlib

__all__ = ["brief", "normalize_entity", "normalize_words"]

_PUNCTUATION = re.compile(r"[^\w\s]", re.UNICODE)
_SPACES = re.compile(r"\s+")
_LEADING_THE = re.compile(r"^(the|a|an)\s+")


def normalize_entity(text: str) -> str:
    """The form entities are compared in: case folded, punctuation dropped, spacing folded,
    a leading article removed (``"The  Eiffel-Tower!"`` becomes ``"eiffel tower"``)."""
    folded = _PUNCTUATION.sub(" ", text.casefold().replace("'s ", " ").replace("\u2019s ", " "))
    folded = _SPACES.sub(" ", folded).strip()
    return _LEADING_THE.sub("", folded)


def normalize_words(text: str) -> str:
    """``text`` case folded, with punctuation turned into spaces and spacing folded: the form
    in which an entity is looked for inside a passage."""
    return _SPACES.sub(" ", _PUNCTUATION.sub(" ", text.casefold())).strip()


def brief(value: object, width: int = 60) -> str:
    """``repr(value)`` bounded for a message or a page: strings and other values cut at about
    ``width`` characters, containers at three levels (safe on absurd values: deep nesting,
    huge integers)."""
    return _shortener(width).repr(value)


@functools.cache
def _shortener(width: int) -> reprlib.Repr:
    shortener = reprlib.Repr()
    shortener.maxlevel, shortener.maxstring, shortener.maxother = 3, width, width
    return shortener
