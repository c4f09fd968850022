"""The journal of a run: every finished row, appended and flushed as it completes.

A run given a journal path writes one JSON line per finished row (in completion order, after a
header line naming the metrics and a fingerprint of each one's options). A later run with
``resume=True`` reads it back: rows that were ``ok`` or ``undefined`` are reused as they are,
``error`` rows are computed again, and rows of a metric whose options changed are dropped. A
line cut short by a crash is ignored. The file is created with mode 0600.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, Final

from .errors import DataError
from .protocols import Metric
from .results import MetricResult, Status

__all__ = ["Journal", "fingerprint"]

logger = logging.getLogger(__name__)

FORMAT: Final = 1


def fingerprint(metric: Metric) -> str:
    """A short hash of a metric's type and options (its repr), to tell if a setup changed.

    Only the hash is stored, never the repr itself, so no option value (a key, say) reaches the
    journal.
    """
    kind = type(metric)
    text = f"{kind.__module__}.{kind.__qualname__}:{metric!r}"
    return hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()[:16]


def _open_private(path: Path, mode: str) -> IO[str]:
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if "a" in mode else os.O_TRUNC)
    descriptor = os.open(path, flags, 0o600)
    return os.fdopen(descriptor, mode, encoding="utf-8")


class Journal:
    """An open journal file; :meth:`write` appends a row and flushes it."""

    def __init__(self, path: Path, handle: IO[str]) -> None:
        self.path = path
        self._handle = handle

    @classmethod
    def open(
        cls, path: str | os.PathLike[str], metrics: Sequence[Metric], *, resume: bool
    ) -> tuple[Journal, dict[tuple[str, str], MetricResult]]:
        """Open ``path`` for a run of ``metrics``.

        Returns the journal and, when resuming, the reusable rows of the earlier run keyed by
        ``(sample_id, metric)``. Without ``resume`` an existing journal is replaced.
        """
        target = Path(path)
        if not target.parent.exists():  # a run folder of its own: its owner's only
            target.parent.mkdir(parents=True, mode=0o700)
        prints = {m.name: fingerprint(m) for m in metrics}
        kept: dict[tuple[str, str], MetricResult] = {}
        if resume and target.exists():
            kept = _read(target, prints)
        # Rewrite: header, then the rows kept (drops stale errors and a torn last line).
        temporary = target.with_name(target.name + ".tmp")
        with _open_private(temporary, "w") as handle:
            handle.write(json.dumps({"ctxeval_journal": FORMAT, "metrics": prints}) + "\n")
            for row in kept.values():
                handle.write(row.to_json() + "\n")
        os.replace(temporary, target)
        os.chmod(target, 0o600)
        return cls(target, _open_private(target, "a")), kept

    def write(self, row: MetricResult) -> None:
        """Append ``row`` and flush it to the operating system."""
        self.write_many((row,))

    def write_many(self, rows: Iterable[MetricResult]) -> None:
        """Append ``rows`` and flush them to the operating system."""
        self._handle.write("".join(row.to_json() + "\n" for row in rows))
        self._handle.flush()

    def close(self) -> None:
        self._handle.close()


def _header(line: str) -> dict[str, str] | None:
    """The metric fingerprints of a journal's header line, or None when it is not one."""
    try:
        header: Any = json.loads(line)
        prints = header["metrics"]
    except (ValueError, KeyError, TypeError):
        return None
    if header.get("ctxeval_journal") != FORMAT or not isinstance(prints, dict):
        return None
    return prints


def recorded_metrics(path: str | os.PathLike[str]) -> list[str] | None:
    """The metric row names the journal at ``path`` was written for, or None when it cannot
    be read as a journal (opening it with ``resume=True`` then says why)."""
    try:
        with Path(path).open(encoding="utf-8", errors="replace") as handle:
            prints = _header(handle.readline())
    except OSError:
        return None
    return None if prints is None else list(prints)


def _read(path: Path, prints: Mapping[str, str]) -> dict[tuple[str, str], MetricResult]:
    kept: dict[tuple[str, str], MetricResult] = {}
    with path.open(encoding="utf-8", errors="replace") as handle:
        old_prints = _header(handle.readline())
        if old_prints is None:
            raise DataError(
                "not a ctxeval journal (bad header line)",
                path=str(path),
                line=1,
                hint="point the run at another folder, or run without resume",
            )
        changed = sorted(n for n in prints if n in old_prints and old_prints[n] != prints[n])
        if changed:
            logger.warning(
                "%s: options of %s changed since the journal was written; recomputing them",
                path, ", ".join(changed),
            )  # fmt: skip
        usable = {n for n in prints if old_prints.get(n) == prints[n]}
        torn = 0
        for line in handle:
            try:
                row = MetricResult.from_dict(json.loads(line))
            except Exception:
                torn += 1
                continue
            if row.metric in usable and row.status is not Status.ERROR:
                kept[row.sample_id, row.metric] = row
            else:
                kept.pop((row.sample_id, row.metric), None)
        if torn:
            logger.warning("%s: ignored %d unreadable line(s) (a run cut short)", path, torn)
    return kept
