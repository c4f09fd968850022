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

import hashlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from ctxeval._errors import CacheError

__all__ = ["Cache", "MemoryCache", "SQLiteCache", "cache_key"]


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
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path).expanduser()
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        if not self.path.exists():
            os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o600))
        os.chmod(self.path, 0o600)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(
            self.path, check_same_thread=False, isolation_level=None, timeout=BUSY_TIMEOUT
        )
        # Runs starting at the same moment contend for the switch to WAL, which SQLite may
        # refuse at once ("database is locked") without waiting: try again for a while.
        _with_retries(lambda: self._db.execute("PRAGMA journal_mode=WAL"), self.path)
        self._db.execute("PRAGMA synchronous=NORMAL")
        _with_retries(
            lambda: self._db.execute(
                "CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
            ),
            self.path,
        )
        for suffix in ("-wal", "-shm"):
            sidecar = self.path.with_name(self.path.name + suffix)
            if sidecar.exists():
                os.chmod(sidecar, 0o600)

    def get(self, key: str) -> Any | None:
        with self._lock:
            row = self._db.execute("SELECT value FROM answers WHERE key = ?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])

    def set(self, key: str, value: Any) -> None:
        text = json.dumps(value, ensure_ascii=False)
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO answers (key, value) VALUES (?, ?)", (key, text)
            )

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM answers").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()
