"""Option validators, in the shape attrs expects: ``validator(instance, attribute, value)``.

Every option of every built-in plugin and of the run settings is checked with one of these when
the object is built, so a bad value fails at once with a message naming the option::

    import attrs
    from ctxeval.plugin import validators

    @attrs.frozen(kw_only=True)
    class MyMatcher:
        threshold: float = attrs.field(default=0.8, validator=validators.unit_interval)
        k: int = attrs.field(default=10, validator=validators.positive_int)

Numbers are checked strictly: ``True`` is not a number here (it is an ``int`` to Python), and NaN
fails every range. The ``optional_`` forms also accept ``None``.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable
from typing import Any

import attrs

__all__ = [
    "Validator",
    "boolean",
    "non_negative_int",
    "non_negative_number",
    "one_of",
    "optional",
    "optional_positive_number",
    "positive_int",
    "positive_number",
    "text",
    "unit_interval",
]

Validator = Callable[[Any, "attrs.Attribute[Any]", Any], None]
"""The attrs validator signature: ``(instance, attribute, value) -> None``, raising ValueError."""


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def positive_int(instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    """A whole number of at least 1 (e.g. ``k``, ``max_concurrency``)."""
    if not _is_int(value) or value < 1:
        raise ValueError(f"{attribute.name} must be a whole number >= 1, got {value!r}")


def non_negative_int(instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    """A whole number of at least 0."""
    if not _is_int(value) or value < 0:
        raise ValueError(f"{attribute.name} must be a whole number >= 0, got {value!r}")


def positive_number(instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    """A finite number above 0 (e.g. a timeout in seconds)."""
    if not _is_number(value) or not 0 < value < math.inf:
        raise ValueError(f"{attribute.name} must be a positive number, got {value!r}")


def non_negative_number(instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    """A finite number of at least 0."""
    if not _is_number(value) or not 0 <= value < math.inf:
        raise ValueError(f"{attribute.name} must be a number >= 0, got {value!r}")


def optional_positive_number(instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    """None, or a finite number above 0."""
    if value is not None and (not _is_number(value) or not 0 < value < math.inf):
        raise ValueError(f"{attribute.name} must be None or a positive number, got {value!r}")


def unit_interval(instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    """A number in [0, 1] (a threshold, a probability)."""
    if not _is_number(value) or not 0.0 <= value <= 1.0:
        raise ValueError(f"{attribute.name} must be a number in [0, 1], got {value!r}")


def boolean(instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    """True or False (not 0, 1 or a string)."""
    if not isinstance(value, bool):
        raise ValueError(f"{attribute.name} must be true or false, got {value!r}")


def text(instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    """A string."""
    if not isinstance(value, str):
        raise ValueError(f"{attribute.name} must be a string, got {type(value).__name__}")


def one_of(*choices: str, what: str | None = None) -> Validator:
    """One of ``choices``; the message suggests the closest one.

    Args:
        what: what a choice is, for the message (``"similarity measure"``).
    """

    def check(instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
        if value not in choices:
            close = difflib.get_close_matches(str(value), choices, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            noun = f"a {what}" if what else "one of the choices"
            raise ValueError(
                f"{attribute.name}={value!r} is not {noun}{hint} (choose from {', '.join(choices)})"
            )

    return check


def optional(validator: Validator) -> Validator:
    """``validator``, or None."""

    def check(instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
        if value is not None:
            validator(instance, attribute, value)

    return check
