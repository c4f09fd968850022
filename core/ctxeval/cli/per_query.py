"""``ctxeval evaluate --per-query``: every query's value of every metric, as ``trec_eval -q``
prints them (#57).

The rows are written to a file as they come (constant memory), one line per query and metric::

    metric<TAB>query<TAB>value

``value`` being the score as Python writes a float (``repr``: exact to the last bit), or
``undefined`` / ``error``; the first line names the columns. The terminal gets a table of the
first :data:`SHOWN` queries, one column per metric, at the terminal's width (80 columns fit
the query and four metrics); the file holds them all.

:func:`averaging_hint` says, under the summary of a ``--qrels/--run`` run, why its means differ
from trec_eval's (queries left out as ``undefined``) and which option gives trec_eval's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, Final

from ctxeval._output.files import private_open
from ctxeval._results.results import MetricResult, Status

__all__ = ["SHOWN", "PerQueryFile", "averaging_hint", "per_query_table"]

SHOWN: Final = 50
"""Queries the terminal's table shows (the file has every one)."""

HEADER: Final = "metric\tquery\tvalue\n"


def _value(row: MetricResult) -> str:
    if row.status is Status.OK and row.score is not None:
        return repr(float(row.score))
    return row.status.value


class PerQueryFile:
    """The per-query file, written as the rows come: :meth:`feeding` wraps a run's
    ``consume``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._handle: IO[str] | None = private_open(path)
        self._handle.write(HEADER)

    def add(self, part: Sequence[MetricResult]) -> None:
        assert self._handle is not None
        self._handle.writelines(f"{row.metric}\t{row.sample_id}\t{_value(row)}\n" for row in part)

    def feeding(
        self, consume: Callable[[Sequence[MetricResult]], None]
    ) -> Callable[[Sequence[MetricResult]], None]:
        """``consume`` with each part's rows written here first."""

        def both(part: Sequence[MetricResult]) -> None:
            self.add(part)
            consume(part)

        return both

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None


def _read(path: Path) -> Iterator[tuple[str, str, str]]:
    with path.open(encoding="utf-8") as lines:
        next(lines, None)  # (the header)
        for line in lines:
            metric, query, value = line.rstrip("\n").split("\t")
            yield metric, query, value


def _shown(value: str) -> str:
    if value in ("undefined", "error"):
        return "undef" if value == "undefined" else "error"
    return f"{float(value):.4f}"


def per_query_table(path: Path, metrics: Sequence[str], *, limit: int = SHOWN) -> Any:
    """A rich table of the first ``limit`` queries of the file at ``path``: the query, then
    each metric's value to four decimals (as trec_eval prints them), ``undef`` or ``error``;
    and how many queries the file holds."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    by_query: dict[str, dict[str, str]] = {}
    queries = 0
    for metric, query, value in _read(path):
        if query not in by_query:
            queries += 1
            if len(by_query) >= limit:
                continue
            by_query[query] = {}
        if query in by_query:
            by_query[query][metric] = _shown(value)
    shown = min(queries, limit)
    title = f"per query ({shown} of {queries})" if shown < queries else "per query"
    table = Table(
        title=title, box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True
    )
    table.add_column("query", overflow="fold")
    for metric in metrics:
        table.add_column(metric, justify="right", overflow="fold", min_width=6)
    for query, values in by_query.items():
        table.add_row(Text(query), *(values.get(m, "") for m in metrics))
    return table, queries


def averaging_hint(summary: Mapping[str, Any], averaged: bool) -> str | None:
    """Why the means of a ``--qrels/--run`` run differ from trec_eval's, when they can: some
    queries are ``undefined`` (nothing relevant in the qrels, or nothing retrieved) and left
    out of ctxeval's means, where trec_eval scores them 0 and averages over every query;
    None when no query is, or trec_eval's averaging is on already."""
    if averaged:
        return None
    undefined = {
        name: int(entry.get("n_undefined", 0))
        for name, entry in summary.get("metrics", {}).items()
        if int(entry.get("n_undefined", 0))
    }
    if not undefined:
        return None
    most = max(undefined.values())
    return (
        f"note: {most} quer{'y is' if most == 1 else 'ies are'} undefined (nothing relevant "
        "in the qrels, or nothing retrieved) and left out of the means above; trec_eval scores "
        "them 0 and averages over every query: --trec-eval-averaging gives trec_eval's means"
    )
