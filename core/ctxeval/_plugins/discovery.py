"""Finding the installed plugins: :func:`installed_entries`, one :class:`Entry` per entry
point of the ctxeval groups.

Entry points are read with :mod:`importlib.metadata` (not the ``entrypoints`` package, which is
in maintenance mode and whose own README sends new code to ``importlib.metadata``). Nothing is
imported here but the metadata: a plugin's module is imported when it is first used.
"""

from __future__ import annotations

from collections.abc import Iterator

from ctxeval._plugins.entries import Entry
from ctxeval._plugins.groups import GROUPS

__all__ = ["installed_entries"]


def installed_entries() -> Iterator[Entry]:
    """Every entry point of the ctxeval groups installed in this environment, group by group,
    each distribution's metadata read once, a distribution found twice on ``sys.path`` once."""
    import importlib.metadata  # imported here: it costs a third of `import ctxeval`

    all_points = importlib.metadata.entry_points()
    seen: set[tuple[str, str, str | None, str]] = set()
    described: dict[int, tuple[str | None, str | None]] = {}  # each METADATA parsed once
    for group in GROUPS:
        for point in all_points.select(group=group):
            dist = getattr(point, "dist", None)
            if dist is None:
                dist_name = version = None
            elif id(dist) in described:
                dist_name, version = described[id(dist)]
            else:
                metadata = dist.metadata
                dist_name, version = metadata["Name"], metadata["Version"]
                described[id(dist)] = (dist_name, version)
            key = (group, point.name, dist_name, point.value)
            if key in seen:  # the same distribution found twice on sys.path
                continue
            seen.add(key)
            yield Entry(
                group=group,
                name=point.name,
                target=point.value,
                distribution=dist_name,
                version=version,
                entry_point=point,
            )
