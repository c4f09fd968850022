"""An on-disk cache of LLM answers: SQLite, JSON values, files readable by their owner only.

The key is a SHA-256 of everything that decides an answer: model, endpoint, messages,
parameters, output schema and prompt version (:func:`cache_key`); never the API key. Values are
JSON, never pickles. A re-run of the same evaluation is served from the cache and sends no
request.

::

    cache = SQLiteCache("~/.cache/ctxeval/llm.sqlite")
    ctxeval.evaluate(samples, metrics, llm="openai/gpt-4o-mini", cache=cache)
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from ctxeval._errors import CacheError

__all__ = ["Cache", "MemoryCache", "SQLiteCache", "cache_key"]

logger = logging.getLogger(__name__)


@runtime_checkable
class Cache(Protocol):
    """What a run needs of a cache: JSON values by string key."""

    def get(self, key: str) -> Any | None:
        """The value stored under ``key``, or None."""
        ...

    def set(self, key: str, value: Any) -> None:
        """Store a JSON-serialisable ``value`` under ``key``."""
        ...


def cache_key(**parts: Any) -> str:
    """A stable key for ``parts`` (canonical JSON, hashed). Never pass a secret in ``parts``."""
    text = json.dumps(parts, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class MemoryCache:
    """A cache in memory, for tests and short-lived harnesses."""

    def __init__(self) -> None:
        self._data: dict[str, str] = {}

    def get(self, key: str) -> Any | None:
        text = self._data.get(key)
        return None if text is None else json.loads(text)

    def set(self, key: str, value: Any) -> None:
        self._data[key] = json.dumps(value)

    def __len__(self) -> int:
        return len(self._data)


BUSY_TIMEOUT = 30.0
"""Seconds a cache operation waits for another process's lock before failing."""


def _with_retries(statement: Callable[[], object], path: Path) -> None:
    """Run ``statement``, again while the database is locked, for up to ``BUSY_TIMEOUT``."""
    deadline = time.monotonic() + BUSY_TIMEOUT
    pause = 0.005
    while True:
        try:
            statement()
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
            if time.monotonic() >= deadline:
                raise CacheError(
                    f"the LLM cache {path} stayed locked by another process for "
                    f"{BUSY_TIMEOUT:g} s; close the other run or use --no-cache"
                ) from exc
            time.sleep(pause)
            pause = min(pause * 2, 0.2)


class SQLiteCache:
    """A cache in one SQLite file (created with mode 0600, its folder with 0700).

    Safe to share between the threads of one process; writes are committed at once.

    A cache is never the reason a run fails or an answer is lost: a cache that cannot be
    opened (a full disk, a read-only or unreadable file, a file that is not a database, another
    process holding it locked for :data:`BUSY_TIMEOUT`), or that can no longer be written or
    read during the run ("database or disk is full", a read-only file system, an I/O error),
    logs one warning and is off from then on (:attr:`enabled` False, :attr:`problem` says
    why): every later ``get`` misses and every ``set`` is skipped, and the answer in hand is
    still used. Pass ``required=True`` to have a cache that cannot be opened raise
    :class:`~ctxeval.CacheError` (one line) instead.

    Attributes:
        path: the file.
        problem: why the cache is off (None while it works).
    """

    def __init__(self, path: str | os.PathLike[str], *, required: bool = False) -> None:
        self.path = Path(path).expanduser()
        self.problem: str | None = None
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self._unstorable = False
        try:
            self._db = self._open()
        except (sqlite3.Error, OSError, CacheError) as exc:
            if required:
                raise CacheError(_cannot("open", self.path, exc)) from None
            self._turn_off("open", exc)

    @property
    def enabled(self) -> bool:
        """Whether the cache is in use (False once it could not be opened, written or read)."""
        return self._db is not None

    def _open(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        if not self.path.exists():
            os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o600))
        os.chmod(self.path, 0o600)
        db = sqlite3.connect(
            self.path, check_same_thread=False, isolation_level=None, timeout=BUSY_TIMEOUT
        )
        try:
            # Runs starting at the same moment contend for the switch to WAL, which SQLite may
            # refuse at once ("database is locked") without waiting: try again for a while.
            _with_retries(lambda: db.execute("PRAGMA journal_mode=WAL"), self.path)
            db.execute("PRAGMA synchronous=NORMAL")
            _with_retries(
                lambda: db.execute(
                    "CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
                ),
                self.path,
            )
            for suffix in ("-wal", "-shm"):
                sidecar = self.path.with_name(self.path.name + suffix)
                if sidecar.exists():
                    os.chmod(sidecar, 0o600)
        except BaseException:
            db.close()
            raise
        return db

    def _turn_off(self, doing: str, exc: BaseException) -> None:
        """Log why the cache cannot be used (once) and stop using it. Called with ``_lock``
        held, or before the cache is shared."""
        db, self._db = self._db, None
        if db is not None:
            with contextlib.suppress(sqlite3.Error):
                db.close()
        if self.problem is None:
            self.problem = _cannot(doing, self.path, exc)
            logger.warning(
                "%s; the run goes on without the cache (every answer is still used; later "
                "ones are not kept for a re-run)",
                self.problem,
            )

    def get(self, key: str) -> Any | None:
        with self._lock:
            if self._db is None:
                return None
            try:
                row = self._db.execute("SELECT value FROM answers WHERE key = ?", (key,)).fetchone()
            except sqlite3.Error as exc:
                self._turn_off("read", exc)
                return None
        if row is None:
            return None
        try:
            return json.loads(row[0])
        except ValueError:  # (a value changed by hand: a miss, and the answer is asked again)
            return None

    def set(self, key: str, value: Any) -> None:
        try:
            text = json.dumps(value, ensure_ascii=False)
            text.encode("utf-8")  # a lone surrogate (an answer can hold one): escape it
        except UnicodeEncodeError:
            text = json.dumps(value)
        except (TypeError, ValueError) as exc:  # not JSON: this value is not kept, the run is
            if not self._unstorable:
                self._unstorable = True
                logger.warning("the LLM cache cannot store a value (%s); it is not kept", exc)
            return
        with self._lock:
            if self._db is None:
                return
            try:
                self._db.execute(
                    "INSERT OR REPLACE INTO answers (key, value) VALUES (?, ?)", (key, text)
                )
            except sqlite3.Error as exc:
                self._turn_off("write", exc)

    def __len__(self) -> int:
        with self._lock:
            if self._db is None:
                return 0
            return int(self._db.execute("SELECT COUNT(*) FROM answers").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            db, self._db = self._db, None
            if db is not None:
                db.close()


def _cannot(doing: str, path: Path, exc: BaseException) -> str:
    """One line: the cache at ``path`` cannot be opened/written/read, why, and what to do."""
    if isinstance(exc, CacheError):
        return str(exc)
    reason = (exc.strerror if isinstance(exc, OSError) else None) or str(exc) or type(exc).__name__
    text = f"{reason} {getattr(exc, 'sqlite_errorname', '')}".lower()
    if "full" in text or "no space" in text or "quota" in text:
        fix = "free some space"
    elif "readonly" in text or "read-only" in text or "permission" in text or "denied" in text:
        fix = "make it writable"
    elif "not a database" in text or "malformed" in text or "corrupt" in text:
        fix = "move it away and a new one is made"
    else:
        fix = "check the disk and the file"
    done = {"open": "opened", "write": "written", "read": "read"}[doing]
    return f"the LLM cache {path} cannot be {done}: {reason} ({fix}, or run with --no-cache)"
