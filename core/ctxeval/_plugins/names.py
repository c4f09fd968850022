"""Saying what a name or an option should have been: the "did you mean" of the registry.

:func:`unknown_name` is the error for a plugin name nothing has (with close names), and
:func:`check_options` the one for options a plugin does not take (with the close option and
the list of those it takes).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Collection, Iterable, Sequence

from ctxeval._data.measure_names import IR_NAMES, IR_SPELLINGS
from ctxeval._errors import ConfigError, UnknownNameError

__all__ = ["check_options", "one_by_case", "suggest_metric_names", "unknown_name"]

_CUT = re.compile(r"^(?P<stem>.*?)(?P<cut>(?:@|_)\d+)?$")


def unknown_name(
    group: str, name: str, known: Sequence[str], close: Sequence[str] | None = None
) -> UnknownNameError:
    """The error for ``name``, which nothing in ``group`` has (``known``: what there is;
    ``close``: the names to suggest, by default the closest of ``known``)."""
    if close is None:
        close = difflib.get_close_matches(name, known, n=2, cutoff=0.6)
    return UnknownNameError(group, name, list(known), list(close))


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


def one_by_case(name: str, known: Iterable[str]) -> str | None:
    """The one name of ``known`` that is ``name`` in another case (None: none, or several).

    The rule every metric name follows after its exact spelling: the registry's registered
    names (:meth:`ctxeval.Registry.get_metric`) and a run's row names
    (:class:`~ctxeval._plugins.metric_names.MetricNames`)."""
    folded = name.casefold()
    found = [n for n in known if n.casefold() == folded]
    return found[0] if len(found) == 1 else None


def suggest_metric_names(name: str, registered: Iterable[str]) -> list[str]:
    """The metric names closest to ``name``, which nothing has: registered names, and IR
    spellings with ``name``'s cut-off kept (``ndgc@10`` gives ``nDCG@10``)."""
    known = list(registered)
    match = _CUT.match(name)
    stem: str = match["stem"] if match else name
    cut: str = (match["cut"] if match else None) or ""
    measures = [m for m, (plain, with_cut) in IR_NAMES.items() if (with_cut if cut else plain)]
    ir = [
        IR_SPELLINGS.get(measure, measure) + cut
        for measure in difflib.get_close_matches(stem.lower(), measures, n=1, cutoff=0.6)
    ]
    registered_close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
    # a name's family first (``id_context_precision``: ``id_based_context_precision`` before
    # ``claim_context_precision``), then the closest
    family = name.split("_", 1)[0] + "_"
    registered_close.sort(key=lambda known_name: not known_name.startswith(family))
    # a name with a cut-off is most likely an IR name; another, a registered one
    found: list[str] = ir + registered_close if cut else registered_close or ir
    return list(dict.fromkeys(found))[:2]
