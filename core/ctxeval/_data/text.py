"""Text normalisation shared by plugins that compare entities or passages.

Entities are compared in one normal form, the same on both sides: the reference's entities and
the retrieved contexts (or their entities) go through the same steps, so that what a reader
would call the same entity compares equal (``"Gustave Eiffel's"``, ``"GUSTAVE EIFFEL"`` and
``"Gustave Eiffel"``; ``"Zürich"`` and ``"Zurich"``; ``"U.S."`` and ``"US"``). The table of
what is and is not treated as the same is in ``docs/metrics/entity-recall.md``; a change of
these rules bumps ``ENTITY_FORM_VERSION`` in :mod:`ctxeval.builtin.entities` (so that resumed
runs score their entity rows again).
"""

from __future__ import annotations

import functools
import re
import reprlib
import unicodedata

__all__ = ["brief", "normalize_entity", "normalize_words"]

_APOSTROPHES = str.maketrans(dict.fromkeys("\u2019\u2018\u201b\u02bc\u02b9\u00b4\u2032\uff07", "'"))
"""Characters written for an apostrophe (curly and modifier apostrophes, acute accent, prime,
full-width apostrophe): all become ``'``."""
_INVISIBLE = re.compile("[\u00ad\u2060\ufeff]")
"""Soft hyphen, word joiner, byte order mark: never a word break, dropped."""
_DIGIT_GROUP = re.compile(r"(?<=\d)[,\u2009\u202f](?=\d{3}(?!\d))")
"""A comma or thin space between digit groups (``2,850`` and ``2 850`` are ``2850``)."""
_LATIN_MARKS = re.compile("(?<=[a-z])[\u0300-\u036f]+")
"""Combining diacritics on a Latin letter (after NFKD): dropped (``é`` is ``e``)."""
_LETTERS = str.maketrans(
    {"ø": "o", "ł": "l", "đ": "d", "ħ": "h", "\u0131": "i", "æ": "ae", "œ": "oe", "&": " and "}
)
"""Latin letters with no decomposition folded by hand, and ``&`` read as ``and``."""
_INITIALISM = re.compile(r"(?<![\w.])[^\W\d_](?:\.[^\W\d_])+\.?(?!\w)")
"""Single letters joined by dots (``u.s.a.``, ``d.c.``): written without the dots."""
_POSSESSIVE = re.compile(r"(?<=\w)'s(?!\w)")
"""A possessive ``'s`` at the end of a word: dropped (the ``'`` of ``Smiths'`` goes with the
punctuation)."""
_SEPARATORS = re.compile(r"[^\w\s]|_", re.UNICODE)
_SPACES = re.compile(r"\s+")
_LEADING_ARTICLE = re.compile(r"^(?:the|a|an)\s+(?!(?:the|a|an)\s)")
"""One leading article, unless another follows (``"the a team"`` stays whole)."""


def _fold(text: str) -> str:
    """``text`` with the Unicode variants folded (see :func:`normalize_words`), case folded."""
    text = _DIGIT_GROUP.sub("", text)
    if text.isascii():
        return text.casefold().replace("&", " and ")
    text = _INVISIBLE.sub("", text.translate(_APOSTROPHES))
    text = _DIGIT_GROUP.sub("", text)  # again: an invisible character may have split a group
    text = unicodedata.normalize("NFKD", text).casefold()
    text = unicodedata.normalize("NFC", _LATIN_MARKS.sub("", text))
    return text.translate(_LETTERS)


def normalize_words(text: str) -> str:
    """``text`` in the form in which entities are compared and looked for in a passage.

    In order: digit groups joined (``2,850`` is ``2850``); curly and other apostrophes read as
    ``'``; soft hyphens dropped; compatibility forms folded (full-width letters, ligatures,
    non-breaking spaces); case folded; diacritics on Latin letters dropped (``Zürich`` is
    ``zurich``; also ``ø``, ``ł``, ``đ``, ``æ``, ``œ``); ``&`` read as ``and``; initialisms
    closed up (``U.S.A.`` is ``usa``); a possessive ``'s`` dropped (``Eiffel's`` is
    ``eiffel``); every other punctuation mark, dash, quote and underscore turned into a space;
    runs of white space folded into one space, none at the ends.
    """
    folded = _fold(text)
    folded = _INITIALISM.sub(lambda m: m.group().replace(".", ""), folded)
    folded = _SEPARATORS.sub(" ", _POSSESSIVE.sub("", folded))
    return _SPACES.sub(" ", folded).strip()


def normalize_entity(text: str) -> str:
    """The form entities are compared in: :func:`normalize_words`, then a leading ``the``,
    ``a`` or ``an`` removed (``"The  Eiffel-Tower's!"`` becomes ``"eiffel tower"``).
    Normalising twice gives the same as normalising once."""
    return _LEADING_ARTICLE.sub("", normalize_words(text))


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
