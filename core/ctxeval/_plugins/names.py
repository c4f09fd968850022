"""Saying what a name or an option should have been: the "did you mean" of the registry.

:func:`unknown_name` is the error for a plugin name nothing has (with close names), and
:func:`check_options` the one for options a plugin does not take (with the close option and
the list of those it takes).
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Sequence

from ctxeval._errors import ConfigError, UnknownNameError

__all__ = ["check_options", "unknown_name"]


def unknown_name(group: str, name: str, known: Sequence[str]) -> UnknownNameError:
    """The error for ``name``, which nothing in ``group`` has (``known``: what there is)."""
    return UnknownNameError(
        group, name, list(known), difflib.get_close_matches(name, known, n=2, cutoff=0.6)
    )


def check_options(kind: str, name: str, options: Collection[str], accepted: Sequence[str]) -> None:
    """Raise when ``options`` holds one that the plugin ``name`` does not take.

    Raises:
        ConfigError: naming each unknown option (with the close one, if any) and listing the
            ``accepted`` ones.
    """
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        hints = []
        for option in unknown:
            close = difflib.get_close_matches(option, accepted, n=1)
            hints.append(f"{option!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
        raise ConfigError(
            f"{kind} {name!r} has no option {', '.join(hints)}; its options are: "
            f"{', '.join(accepted) or '(none)'}"
        )
