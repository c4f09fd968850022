"""A view of the explorer (:class:`View`: metric, status, score range, search, one sample,
sort) and the SQL that lists its samples (:func:`plan`), as the report's explorer does it in
the page:

* a sample is shown when it has a row (of the chosen metric, or any) with the chosen status
  and a score in the range, when its id and texts hold the search, and when it is the one
  sample asked for (``id``);
* sorted by the chosen metric's score (with no metric: the sample's lowest score), or by the
  difference of the second run's score minus the first's (runs side by side); samples
  without that score come last, ties in input order.

Search: every word of the query, in that order (the last one may be the start of a word),
among the words of the sample's id and texts (case and diacritics ignored); ``doc_12`` finds
``doc_12``, ``doc_123`` and ``Doc 12``. Without FTS5 in SQLite: the query as a substring.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["SORTS", "STATUSES", "Catalog", "Part", "View", "fts_phrase", "plan"]

SORTS = ("input", "asc", "desc", "diff-asc", "diff-desc")
STATUSES = ("", "ok", "undefined", "error")
_WORD = re.compile(r"[^\W_]+")


@dataclass(frozen=True)
class Catalog:
    """What a query needs to know of the index: each column's id and metric (``names``:
    chip name -> (id, metric)), the metrics both runs have (``bases``, runs side by side
    only), whether FTS5 search is there."""

    names: Mapping[str, tuple[int, str]]
    bases: tuple[str, ...]
    fts: bool


@dataclass(frozen=True)
class View:
    """What the explorer shows (the address's ``#`` of the report): every field optional."""

    metric: str = ""
    status: str = ""
    low: float | None = None
    high: float | None = None
    q: str = ""
    sample_id: str | None = None
    sort: str = "input"

    @classmethod
    def from_params(cls, params: Mapping[str, str]) -> View:
        """The view of a request's parameters (``metric``, ``status``, ``min``, ``max``,
        ``q``, ``id``, ``sort``).

        Raises:
            ValueError: a parameter is not one the explorer can ask (the message says which).
        """
        status = params.get("status", "")
        if status not in STATUSES:
            raise ValueError(f"status: one of ok, undefined, error (got {status!r})")
        sort = params.get("sort", "") or "input"
        if sort not in SORTS:
            raise ValueError(f"sort: one of {', '.join(SORTS)} (got {sort!r})")
        return cls(
            metric=params.get("metric", ""),
            status=status,
            low=_number(params, "min"),
            high=_number(params, "max"),
            q=params.get("q", "").strip(),
            sample_id=params.get("id"),
            sort=sort,
        )


def _number(params: Mapping[str, str], name: str) -> float | None:
    text = params.get(name, "").strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{name}: a number (got {text!r})") from None
    if math.isnan(value):
        raise ValueError(f"{name}: a number (got {text!r})")
    return value


@dataclass(frozen=True)
class Part:
    """One ordered part of a listing: ``SELECT {column} FROM {source} ORDER BY {order}``."""

    column: str
    source: str
    order: str
    params: tuple[object, ...]


def fts_phrase(q: str) -> str | None:
    """The FTS5 query of the search ``q``: its words as one phrase, the last one a prefix;
    None when ``q`` has no word."""
    words = _WORD.findall(q.lower())
    if not words:
        return None
    return '"' + " ".join(words) + '"*'


def _sample_filters(view: View, column: str, catalog: Catalog) -> tuple[list[str], list[object]]:
    """The conditions on the sample (its position is ``column``): its id, the search."""
    conditions: list[str] = []
    params: list[object] = []
    if view.sample_id is not None:
        conditions.append(f"{column} = (SELECT pos FROM samples WHERE id = ?)")
        params.append(view.sample_id)
    if view.q:
        phrase = fts_phrase(view.q) if catalog.fts else None
        if phrase is not None:
            conditions.append(f"{column} IN (SELECT rowid FROM search WHERE search MATCH ?)")
            params.append(phrase)
        else:
            conditions.append(
                f"{column} IN (SELECT pos FROM samples WHERE "
                "instr(lower(id || char(10) || coalesce(texts, '')), ?) > 0)"
            )
            params.append(view.q.lower())
    return conditions, params


def _row_filters(view: View, alias: str, catalog: Catalog) -> tuple[list[str], list[object]]:
    """The conditions on a row (table alias ``alias``): metric, status, score range."""
    conditions: list[str] = []
    params: list[object] = []
    if view.metric:
        conditions.append(f"{alias}.metric = ?")
        params.append(catalog.names[view.metric][0] if view.metric in catalog.names else -1)
    if view.status:
        conditions.append(f"{alias}.status = ?")
        params.append(view.status)
    if view.low is not None:
        conditions.append(f"{alias}.score >= ?")
        params.append(view.low)
    if view.high is not None:
        conditions.append(f"{alias}.score <= ?")
        params.append(view.high)
    return conditions, params


def _where(conditions: list[str]) -> str:
    return " WHERE " + " AND ".join(conditions) if conditions else ""


def _exists_row(view: View, column: str, catalog: Catalog) -> tuple[list[str], list[object]]:
    conditions, params = _row_filters(view, "r", catalog)
    if not conditions:
        return [], []
    return [f"EXISTS (SELECT 1 FROM rows r WHERE r.pos = {column} AND "
            + " AND ".join(conditions) + ")"], params  # fmt: skip


def count_source(view: View, catalog: Catalog) -> tuple[str, tuple[object, ...]] | None:
    """``FROM ... WHERE ...`` whose ``count(*)`` is the number of samples ``view`` shows;
    None when it shows every sample."""
    sample, sample_params = _sample_filters(view, "s.pos", catalog)
    if view.metric and not sample:  # a sample has one row of a metric at most
        rows, params = _row_filters(view, "r", catalog)
        return "rows r" + _where(rows), tuple(params)
    rows, params = _exists_row(view, "s.pos", catalog)
    if not sample and not rows:
        return None
    return "samples s" + _where(sample + rows), (*sample_params, *params)


def plan(view: View, catalog: Catalog) -> list[Part]:
    """The parts whose concatenation lists the samples ``view`` shows, in its order.

    Raises:
        ValueError: a sort by difference without runs side by side.
    """
    direction = "DESC" if view.sort.endswith("desc") else "ASC"
    if view.sort.startswith("diff"):
        if not catalog.bases:
            raise ValueError("sort: a difference needs two runs side by side (ctxeval view A B)")
        base = catalog.names[view.metric][1] if view.metric in catalog.names else catalog.bases[0]
        sample, sample_params = _sample_filters(view, "d.pos", catalog)
        rows, row_params = _exists_row(view, "d.pos", catalog)
        conditions = ["d.base = ?", *sample, *rows]
        params = (base, *sample_params, *row_params)
        return [
            Part("d.pos", "diff d" + _where([*conditions, "d.d IS NOT NULL"]),
                 f"d.d {direction}, d.pos", params),
            Part("d.pos", "diff d" + _where([*conditions, "d.d IS NULL"]), "d.pos", params),
        ]  # fmt: skip
    if view.sort in ("asc", "desc") and view.metric:
        sample, sample_params = _sample_filters(view, "r.pos", catalog)
        rows, row_params = _row_filters(view, "r", catalog)
        conditions = [*rows, *sample]
        params = (*row_params, *sample_params)
        parts = [Part("r.pos", "rows r" + _where([*conditions, "r.score IS NOT NULL"]),
                      f"r.score {direction}, r.pos", params)]  # fmt: skip
        if view.low is None and view.high is None:
            parts.append(
                Part("r.pos", "rows r" + _where([*conditions, "r.score IS NULL"]), "r.pos", params)
            )
        return parts
    sample, sample_params = _sample_filters(view, "s.pos", catalog)
    rows, row_params = _exists_row(view, "s.pos", catalog)
    conditions = [*sample, *rows]
    params = (*sample_params, *row_params)
    if view.sort in ("asc", "desc"):
        return [
            Part("s.pos", "samples s" + _where([*conditions, "s.lo IS NOT NULL"]),
                 f"s.lo {direction}, s.pos", params),
            Part("s.pos", "samples s" + _where([*conditions, "s.lo IS NULL"]), "s.pos", params),
        ]  # fmt: skip
    return [Part("s.pos", "samples s" + _where(conditions), "s.pos", params)]
