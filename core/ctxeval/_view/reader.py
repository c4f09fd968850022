"""Reading the index: :class:`Reader` answers the explorer's questions (one page of samples
with their rows and the count, one sample, what the index holds) through one read-only
connection; :class:`CountCache` keeps the counts, shared by the readers of every thread (a
count walks every matching sample; a page does not).
"""

from __future__ import annotations

import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

import orjson

from ctxeval._view.query import Catalog, Part, View, count_source, plan

__all__ = ["CountCache", "Reader"]


class CountCache:
    """Counts by key, shared between threads, the oldest forgotten past ``size``."""

    def __init__(self, size: int = 1024) -> None:
        self._size = size
        self._counts: OrderedDict[Hashable, int] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable, count: Callable[[], int]) -> int:
        """The count of ``key``, counted with ``count`` the first time."""
        with self._lock:
            found = self._counts.get(key)
        if found is not None:
            return found
        value = count()
        with self._lock:
            self._counts[key] = value
            while len(self._counts) > self._size:
                self._counts.popitem(last=False)
        return value


def _fragment(text: str | None) -> Any:
    return None if text is None else orjson.Fragment(text)


class Reader:
    """The explorer's questions, answered from the index through ``conn`` (read-only)."""

    def __init__(self, conn: sqlite3.Connection, counts: CountCache) -> None:
        self.conn = conn
        self.counts = counts
        self.meta: dict[str, str] = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        metrics = conn.execute("SELECT id, name, base, run FROM metrics ORDER BY id").fetchall()
        self.metrics: list[str] = [name for _, name, _, _ in metrics]
        by_run: dict[int, list[str]] = {}
        for _, _, base, run in metrics:
            by_run.setdefault(run, []).append(base)
        bases = tuple(b for b in by_run.get(0, []) if b in by_run.get(1, []))
        self.catalog = Catalog(
            names={name: (id_, base) for id_, name, base, _ in metrics},
            bases=bases,
            fts=self.meta.get("fts") == "1",
        )
        self.samples = int(self.meta.get("samples", "0"))

    def _count(self, source: str, params: tuple[object, ...]) -> int:
        row = self.conn.execute(f"SELECT count(*) FROM {source}", params).fetchone()
        return int(row[0])

    def total(self, view: View) -> int:
        """How many samples ``view`` shows."""
        found = count_source(view, self.catalog)
        if found is None:
            return self.samples
        source, params = found
        return self.counts.get(("count", source, params), lambda: self._count(source, params))

    def positions(self, view: View, offset: int, limit: int) -> list[int]:
        """The positions of the samples ``view`` shows from ``offset`` on, ``limit`` at most."""
        parts: list[Part] = plan(view, self.catalog)
        found: list[int] = []
        skip = offset
        for number, part in enumerate(parts):
            need = limit - len(found)
            if need <= 0:
                break
            got = self.conn.execute(
                f"SELECT {part.column} FROM {part.source} ORDER BY {part.order} LIMIT ? OFFSET ?",
                (*part.params, need, skip),
            ).fetchall()
            found.extend(int(pos) for (pos,) in got)
            if len(got) < need and number < len(parts) - 1:
                size = self.counts.get(
                    ("count", part.source, part.params),
                    lambda part=part: self._count(part.source, part.params),  # type: ignore[misc]
                )
                skip = max(0, skip - size)
        return found

    def page(self, view: View, offset: int, limit: int) -> dict[str, Any]:
        """One page of ``view``: ``total`` (samples shown), ``all`` (samples in the run),
        ``offset``, ``samples`` (id and texts) and ``rows`` (by sample id, by column: status,
        score, reason, details), as the explorer renders them."""
        positions = self.positions(view, offset, limit)
        page = self.load(positions)
        page.update(total=self.total(view), all=self.samples, offset=offset)
        return page

    def load(self, positions: list[int]) -> dict[str, Any]:
        """The samples at ``positions`` (in that order) with their rows."""
        if not positions:
            return {"samples": [], "rows": {}}
        marks = ",".join("?" * len(positions))
        by_pos = {
            pos: (sample_id, texts)
            for pos, sample_id, texts in self.conn.execute(
                f"SELECT pos, id, texts FROM samples WHERE pos IN ({marks})", positions
            )
        }
        names = {pos: by_pos[pos][0] for pos in by_pos}
        rows: dict[str, dict[str, Any]] = {}
        for pos, name, status, score, reason, details in self.conn.execute(
            "SELECT r.pos, m.name, r.status, r.score, r.reason, r.details FROM rows r "
            f"JOIN metrics m ON m.id = r.metric WHERE r.pos IN ({marks}) ORDER BY r.pos, r.metric",
            positions,
        ):
            rows.setdefault(names[pos], {})[name] = {
                "status": status,
                "score": score,
                "reason": reason,
                "details": _fragment(details),
            }
        samples = [
            {"id": by_pos[pos][0], "texts": _fragment(by_pos[pos][1])}
            for pos in positions
            if pos in by_pos
        ]
        return {"samples": samples, "rows": rows}

    def sample(self, sample_id: str) -> dict[str, Any] | None:
        """One sample (id and texts) with every row, or None when the index has no such id."""
        found = self.conn.execute("SELECT pos FROM samples WHERE id = ?", (sample_id,)).fetchone()
        if found is None:
            return None
        page = self.load([int(found[0])])
        sample: dict[str, Any] = page["samples"][0]
        sample["rows"] = page["rows"].get(sample_id, {})
        return sample
