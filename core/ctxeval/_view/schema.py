"""The tables of a viewer index (one SQLite file per run, or per pair of runs side by side).

* ``meta(key, value)``: the schema version, what the index was built from (each results
  file's size and modification time, each data file's path, size and time), counts.
* ``metrics(id, name, base, run)``: one per column the explorer shows; ``name`` is the chip's
  (``context_recall``, or ``context_recall [B]`` for runs side by side), ``base`` the metric's
  own name, ``run`` 0 for the first run, 1 for the second.
* ``samples(pos, id, texts, lo)``: one per sample in input order (``pos``); ``texts`` the
  sample's texts as a JSON object (null when the data file is unknown); ``lo`` its lowest
  score over every row (the sort key when no metric is chosen).
* ``rows(pos, metric, status, score, reason, details)``: one per results row.
* ``diff(pos, base, d)``: runs side by side only: the second run's score minus the first's.
* ``search``: an FTS5 index of each sample's id and texts (rowid = ``pos``; contentless),
  when this SQLite has FTS5.
"""

from __future__ import annotations

import sqlite3
import urllib.parse
from pathlib import Path
from typing import Final

__all__ = [
    "DIFF_INDEXES",
    "INDEXES",
    "SCHEMA_VERSION",
    "TABLES",
    "connect_readonly",
    "fts_table",
]

SCHEMA_VERSION: Final = "1"

TABLES: Final = (
    "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE metrics(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, base TEXT NOT NULL,"
    " run INTEGER NOT NULL)",
    "CREATE TABLE samples(pos INTEGER PRIMARY KEY, id TEXT NOT NULL, texts TEXT, lo REAL)",
    "CREATE UNIQUE INDEX samples_id ON samples(id)",
    "CREATE TABLE rows(pos INTEGER NOT NULL, metric INTEGER NOT NULL, status TEXT NOT NULL,"
    " score REAL, reason TEXT, details TEXT)",
    "CREATE TABLE diff(pos INTEGER NOT NULL, base TEXT NOT NULL, d REAL)",
)
"""The tables, created empty before the rows stream in."""

INDEXES: Final = (
    "CREATE INDEX rows_pos ON rows(pos, metric)",
    "CREATE INDEX rows_asc ON rows(metric, score, pos, status)",
    "CREATE INDEX rows_desc ON rows(metric, score DESC, pos, status)",
    "CREATE INDEX samples_lo_asc ON samples(lo, pos)",
    "CREATE INDEX samples_lo_desc ON samples(lo DESC, pos)",
)
"""The indexes, created once every row is in (faster than keeping them up to date): by sample,
by (metric, score) both ways with ties in input order, by lowest score."""

DIFF_INDEXES: Final = (
    "CREATE INDEX diff_asc ON diff(base, d, pos)",
    "CREATE INDEX diff_desc ON diff(base, d DESC, pos)",
)
"""The indexes of the differences (runs side by side), both ways, ties in input order."""


def fts_table() -> str:
    """The search index: FTS5, contentless (the texts are in ``samples`` already), words folded
    to lower case without diacritics."""
    return (
        "CREATE VIRTUAL TABLE search USING fts5(body, content='', columnsize=0,"
        " tokenize='unicode61 remove_diacritics 2')"
    )


def connect_readonly(path: Path) -> sqlite3.Connection:
    """A read-only connection to the index at ``path`` (``file:...?mode=ro``): nothing done
    through it can change the file. Usable from the thread that opened it only."""
    uri = f"file:{urllib.parse.quote(str(path))}?mode=ro"
    return sqlite3.connect(uri, uri=True)
