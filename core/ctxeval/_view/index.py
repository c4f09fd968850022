"""The viewer's index: :func:`ensure_index` returns the SQLite index of one run (or two side
by side), building it once, streaming, when it is missing or older than the run.

The build reads ``results.jsonl`` line by line and the data file sample by sample (both are
in input order, so a sample's texts are found by walking the two files side by side; the
samples the walk misses are looked up by id in a second pass) and writes in batches, in
transactions, with journal and sync off, into a temporary file beside the index, which then
replaces it. Nothing but one batch is held in memory. The index records what it was built
from (each file's size and modification time): :func:`ensure_index` rebuilds it when one
changed.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson

from ctxeval._errors import CtxevalError
from ctxeval._output.explorer import SAMPLE_TEXTS, sample_text, step_words
from ctxeval._output.run_source import RunSource
from ctxeval._view.schema import (
    DIFF_INDEXES,
    INDEXES,
    SCHEMA_VERSION,
    TABLES,
    connect_readonly,
    fts_table,
)
from ctxeval._view.sources import index_location

__all__ = ["BuildStats", "Progress", "build_index", "ensure_index", "signature"]

logger = logging.getLogger(__name__)

Progress = Callable[[int, int, int], None]
"""Called as the build goes: (bytes of results read, bytes in all, rows indexed)."""

BATCH = 10_000
"""Samples written per transaction."""

LABELS = ("A", "B")


class BuildStats(dict[str, Any]):
    """What a build did: ``samples``, ``rows``, ``seconds``, ``texts_missing``, ``path``."""


def signature(runs: Sequence[RunSource]) -> dict[str, str]:
    """What an index of ``runs`` is built from: the schema version, each results file's and
    data file's path, size and modification time. An index whose ``meta`` differs is stale."""
    meta = {"schema": SCHEMA_VERSION, "runs": str(len(runs))}
    for i, run in enumerate(runs):
        stat = run.results.stat()
        meta[f"results{i}"] = f"{run.results}|{stat.st_size}|{stat.st_mtime_ns}"
        if run.data is not None:
            data = run.data.stat()
            meta[f"data{i}"] = f"{run.data}|{data.st_size}|{data.st_mtime_ns}"
        else:
            meta[f"data{i}"] = ""
    return meta


def _is_current(path: Path, wanted: dict[str, str]) -> bool:
    try:
        with contextlib.closing(connect_readonly(path)) as conn:
            found = dict(conn.execute("SELECT key, value FROM meta").fetchall())
    except sqlite3.Error:
        return False
    return all(found.get(key) == value for key, value in wanted.items())


def ensure_index(
    runs: Sequence[RunSource], *, path: Path | None = None, progress: Progress | None = None
) -> Path:
    """The path of an up-to-date index of ``runs`` (one run, or two side by side): the one at
    ``path`` (default :func:`~ctxeval._view.sources.index_location`) when it was built from
    the same files, else a new one built there."""
    path = path if path is not None else index_location(runs)
    if path.exists() and _is_current(path, signature(runs)):
        logger.info("index %s is up to date", path)
        return path
    build_index(runs, path, progress=progress)
    return path


def build_index(
    runs: Sequence[RunSource], path: Path, *, progress: Progress | None = None
) -> BuildStats:
    """Build the index of ``runs`` at ``path`` (mode 0600), replacing what is there at once
    when done. Returns what it did."""
    path.parent.mkdir(parents=True, exist_ok=True)
    meta = signature(runs)
    handle, temp_name = tempfile.mkstemp(dir=path.parent, prefix=".view-index-", suffix=".tmp")
    os.close(handle)
    temp = Path(temp_name)
    try:
        os.chmod(temp, 0o600)
        conn = sqlite3.connect(temp, isolation_level=None)
        try:
            stats = _Builder(conn, runs, progress).build(meta)
        finally:
            conn.close()
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    stats["path"] = str(path)
    return stats


def _sample_texts(data: Path) -> Iterator[tuple[str, str, str]]:
    """Each sample of ``data`` as (sample id, texts as a JSON object, search text), in file
    order; a sample without an id gets its position, as a run gives it."""
    from ctxeval._data.loading import load_samples

    try:
        stream = load_samples(data, strict=False)
        for index, sample in enumerate(stream):
            sample_id = sample.id if sample.id is not None else str(index)
            texts: dict[str, Any] = {}
            words = [sample_id]
            for name in SAMPLE_TEXTS:
                value = sample_text(sample, name)
                if value is None:
                    continue
                texts[name] = value
                if name == "retrieval_steps":
                    words.extend(step_words(value))
                elif isinstance(value, list):
                    words.extend(value)
                else:
                    words.append(value)
            yield sample_id, orjson.dumps(texts).decode("utf-8"), "\n".join(words)
    except CtxevalError as exc:  # the file cannot be read on: the texts read so far are kept
        logger.warning("reading the texts stopped: %s", exc)


def _row_of(line: bytes) -> dict[str, Any] | str:
    """The row of a line of results.jsonl, or what is wrong with it (not JSON, not an object,
    no ``sample_id`` or ``metric``, a score that is not a number)."""
    try:
        row = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        return f"not JSON ({exc})"
    if not isinstance(row, dict):
        return "not a JSON object"
    for field in ("sample_id", "metric"):
        value = row.get(field)
        if not isinstance(value, (str, int)) or isinstance(value, bool):
            return f"no {field!r}"
    score = row.get("score")
    if score is not None and (not isinstance(score, (int, float)) or isinstance(score, bool)):
        return "its 'score' is not a number"
    return row


class _Builder:
    """One build: the connection, the batches, the metrics seen, the counters."""

    def __init__(
        self, conn: sqlite3.Connection, runs: Sequence[RunSource], progress: Progress | None
    ) -> None:
        self.conn = conn
        self.runs = runs
        self.progress = progress
        self.pair = len(runs) > 1
        self.metric_ids: dict[tuple[int, str], int] = {}
        self.next_pos = 1
        self.pending: dict[str, int] = {}  # ids in the batch not written yet -> pos
        self.samples: list[tuple[int, str, str | None, float | None]] = []
        self.search: list[tuple[int, str]] = []
        self.rows: list[tuple[int, int, str, float | None, str | None, str]] = []
        self.row_count = 0
        self.bytes_read = 0
        self.bytes_total = sum(run.results.stat().st_size for run in runs)
        self.fts = False
        self.recompute_lo = self.pair
        self.started = time.perf_counter()

    def build(self, meta: dict[str, str]) -> BuildStats:
        conn = self.conn
        for pragma in ("journal_mode=OFF", "synchronous=OFF", "cache_size=-131072",
                       "locking_mode=EXCLUSIVE"):  # fmt: skip
            conn.execute(f"PRAGMA {pragma}")
        for statement in TABLES:
            conn.execute(statement)
        try:
            conn.execute(fts_table())
            self.fts = True
        except sqlite3.OperationalError:  # no FTS5 in this SQLite: search with LIKE
            logger.info("no FTS5 in SQLite %s: search scans the texts", sqlite3.sqlite_version)
        logger.info("indexing %s (%d bytes of results)", self.runs[0].folder, self.bytes_total)
        conn.execute("BEGIN")
        for number, run in enumerate(self.runs):
            missed = self._read_run(number, run)
            if missed and run.data is not None:
                self._flush()
                self._find_texts(run.data)
        self._flush()
        if self.fts:  # samples without texts: searchable by id
            conn.execute("INSERT INTO search(rowid, body) SELECT pos, id FROM samples "
                         "WHERE texts IS NULL")  # fmt: skip
        conn.execute("COMMIT")
        logger.info("creating the indexes")
        conn.execute("BEGIN")
        for statement in INDEXES[:1]:
            conn.execute(statement)
        if self.recompute_lo:
            conn.execute("UPDATE samples SET lo = (SELECT min(score) FROM rows "
                         "WHERE rows.pos = samples.pos)")  # fmt: skip
        for statement in INDEXES[1:]:
            conn.execute(statement)
        if self.pair:
            conn.execute(
                "INSERT INTO diff(pos, base, d) SELECT s.pos, a.base, "
                "(SELECT score FROM rows WHERE pos = s.pos AND metric = b.id) - "
                "(SELECT score FROM rows WHERE pos = s.pos AND metric = a.id) "
                "FROM metrics a JOIN metrics b ON b.base = a.base AND b.run = 1, samples s "
                "WHERE a.run = 0 ORDER BY a.id, s.pos"
            )
            for statement in DIFF_INDEXES:
                conn.execute(statement)
        conn.execute("PRAGMA analysis_limit=1000")
        conn.execute("ANALYZE")
        samples = self.next_pos - 1
        missing = conn.execute("SELECT count(*) FROM samples WHERE texts IS NULL").fetchone()[0]
        meta.update(samples=str(samples), rows=str(self.row_count), fts=str(int(self.fts)),
                    texts_missing=str(missing), built=str(time.time()))  # fmt: skip
        conn.executemany("INSERT INTO meta(key, value) VALUES (?, ?)", meta.items())
        conn.execute("COMMIT")
        seconds = time.perf_counter() - self.started
        logger.info("indexed %d samples, %d rows in %.1f s (%.0f rows/s)", samples,
                    self.row_count, seconds, self.row_count / max(seconds, 1e-9))  # fmt: skip
        return BuildStats(samples=samples, rows=self.row_count, seconds=seconds,
                          texts_missing=missing)  # fmt: skip

    def _metric(self, run: int, name: str) -> int:
        key = (run, name)
        found = self.metric_ids.get(key)
        if found is None:
            found = len(self.metric_ids) + 1
            chip = f"{name} [{LABELS[run]}]" if self.pair else name
            self.conn.execute("INSERT INTO metrics(id, name, base, run) VALUES (?, ?, ?, ?)",
                              (found, chip, name, run))  # fmt: skip
            self.metric_ids[key] = found
        return found

    def _read_run(self, number: int, run: RunSource) -> int:
        """Stream the rows of ``run``; the number of its samples whose texts the walk beside
        the data file missed."""
        texts = _sample_texts(run.data) if run.data is not None else iter(())
        head = next(texts, None)
        missed = 0
        group: list[dict[str, Any]] = []
        group_id: str | None = None
        skipped: list[str] = []
        with run.results.open("rb") as handle:
            for number_of_line, line in enumerate(handle, 1):
                self.bytes_read += len(line)
                if not line.strip():
                    continue
                row = _row_of(line)
                if isinstance(row, str):  # (a torn last line, a line that is no row)
                    skipped.append(f"{run.results}:{number_of_line}: {row}")
                    continue
                sample_id = str(row["sample_id"])
                if sample_id != group_id and group:
                    assert group_id is not None
                    if head is not None and head[0] == group_id:
                        self._add(number, group_id, group, head)
                        head = next(texts, None)
                    else:
                        missed += self._add(number, group_id, group, None)
                    group = []
                group_id = sample_id
                group.append(row)
            if group:
                assert group_id is not None
                matched = head is not None and head[0] == group_id
                missed += self._add(number, group_id, group, head if matched else None)
        close = getattr(texts, "close", None)
        if close is not None:
            close()
        if skipped:
            logger.warning(
                "%d line(s) of %s are not rows of results.jsonl and are not shown (the first: "
                "%s); the other rows are; a run stopped while writing leaves a torn last line: "
                "finish it with ctxeval evaluate --resume",
                len(skipped), run.results, skipped[0],
            )  # fmt: skip
        return missed if run.data is not None else 0

    def _add(
        self,
        run: int,
        sample_id: str,
        group: list[dict[str, Any]],
        texts: tuple[str, str, str] | None,
    ) -> int:
        """Add one sample's rows (and the sample, when new); 1 when it is new and has no
        texts yet, else 0."""
        pos = self.pending.get(sample_id)
        if pos is None:
            found = self.conn.execute(
                "SELECT pos FROM samples WHERE id = ?", (sample_id,)
            ).fetchone()
            pos = None if found is None else int(found[0])
        missed = 0
        if pos is None:
            pos = self.next_pos
            self.next_pos += 1
            self.pending[sample_id] = pos
            scores = [r["score"] for r in group if r.get("score") is not None]
            lo = float(min(scores)) if scores else None
            self.samples.append((pos, sample_id, None if texts is None else texts[1], lo))
            if texts is not None:
                self.search.append((pos, texts[2]))
            else:
                missed = 1
        else:
            self.recompute_lo = True  # rows added to a sample seen before
        for row in group:
            score = row.get("score")
            reason = row.get("reason")
            self.rows.append((
                pos,
                self._metric(run, str(row["metric"])),
                str(row.get("status")),
                None if score is None else float(score),
                None if reason is None else str(reason),
                orjson.dumps(row.get("details") or {}).decode("utf-8"),
            ))  # fmt: skip
        self.row_count += len(group)
        if len(self.samples) >= BATCH:
            self._flush()
        return missed

    def _flush(self) -> None:
        conn = self.conn
        conn.executemany("INSERT INTO samples(pos, id, texts, lo) VALUES (?, ?, ?, ?)",
                         self.samples)  # fmt: skip
        if self.fts:
            conn.executemany("INSERT INTO search(rowid, body) VALUES (?, ?)", self.search)
        conn.executemany("INSERT INTO rows(pos, metric, status, score, reason, details) "
                         "VALUES (?, ?, ?, ?, ?, ?)", self.rows)  # fmt: skip
        conn.execute("COMMIT")
        conn.execute("BEGIN")
        self.samples.clear()
        self.search.clear()
        self.rows.clear()
        self.pending.clear()
        if self.progress is not None:
            self.progress(self.bytes_read, self.bytes_total, self.row_count)
        else:
            logger.debug("%d rows indexed", self.row_count)

    def _find_texts(self, data: Path) -> None:
        """The second pass: the texts of the samples the walk missed, by id."""
        logger.info("looking up the texts of samples out of order in %s", data)
        for sample_id, texts, body in _sample_texts(data):
            found = self.conn.execute(
                "UPDATE samples SET texts = ? WHERE id = ? AND texts IS NULL RETURNING pos",
                (texts, sample_id),
            ).fetchone()
            if found is not None and self.fts:
                self.search.append((int(found[0]), body))
                if len(self.search) >= BATCH:
                    self._flush()
        self._flush()
