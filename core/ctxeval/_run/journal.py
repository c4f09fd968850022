"""The journal of a run: every finished row, appended and flushed as it completes.

A run given a journal path writes one JSON line per finished row (in completion order, after a
header line naming the metrics and a fingerprint of each), with a digest of the sample it
scored. A later run with ``resume=True`` reads it back: rows that were ``ok`` or ``undefined``
are reused, ``error`` rows are computed again, and so is every row whose setup or sample
changed. A metric's fingerprint covers what changes its rows: its type and options, ctxeval's
version, what its parts report in ``fingerprint_data`` (an LLM part: its prompt versions) and
the judge it calls (model and endpoint); the sample's digest covers its every field. A line cut
short by a crash is ignored. The file is created with mode 0600.
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, Final

import orjson

from ctxeval._data.sample import Sample
from ctxeval._errors import ConfigError, DataError
from ctxeval._output.files import (
    NOFOLLOW,
    UnwritableFolderError,
    check_writable_name,
    write_whole,
)
from ctxeval._plugins.hooks import (
    SpendsResource,
    fingerprint_of,
    llm_model,
    needs_llm,
    own_llm,
    pipeline_parts,
)
from ctxeval._plugins.protocols import Metric
from ctxeval._public import defined_name
from ctxeval._results.results import MetricResult, Status
from ctxeval._version import __version__

__all__ = ["Journal", "Previous", "fingerprint", "sample_digest"]

logger = logging.getLogger(__name__)

FORMAT: Final = 2

Previous = dict[tuple[str, str], tuple[MetricResult, str]]
"""The reusable rows of an earlier run, with the digest of the sample each one scored, keyed by
``(sample_id, metric)``."""


def sample_digest(sample: Sample) -> str:
    """A short hash of every field of ``sample``: a resumed row is reused only for the same
    sample."""
    data = sample.to_dict()
    try:
        text = orjson.dumps(data, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)
    except (TypeError, orjson.JSONEncodeError):  # metadata orjson cannot write: its repr
        text = repr(sorted(data.items(), key=lambda item: item[0])).encode("utf-8", "replace")
    return hashlib.blake2b(text, digest_size=8).hexdigest()


def judge_identity(llm: Any) -> str:
    """Which LLM ``llm`` names (its model and endpoint), for a fingerprint; never its key."""
    if llm is None:
        return ""
    if isinstance(llm, str):
        return llm
    if isinstance(llm, Mapping):
        return f"{llm.get('model')}@{llm.get('api_base')}"
    if isinstance(llm, SpendsResource) and isinstance(llm.resource, str):
        # ctxeval_llm.LLMConfig: model@endpoint, the endpoint as shown (``user:***@host``);
        # the real one too when it differs (only hashed: another account is another judge)
        real = getattr(llm, "endpoint", None)
        if isinstance(real, str) and not llm.resource.endswith(f"@{real}"):
            return f"{llm.resource}\x1f{real}"
        return llm.resource
    model = llm_model(llm)
    if model is not None:
        return model
    kind = llm if callable(llm) and hasattr(llm, "__qualname__") else type(llm)
    return defined_name(kind)


def fingerprint(metric: Metric, llm: Any = None) -> str:
    """A short hash of what makes a metric's rows what they are: its type and options (its
    repr), ctxeval's version, its parts' ``fingerprint_data`` (an LLM part's prompt versions)
    and the judge it calls (its own ``llm``, else the run's ``llm`` when it needs one).

    Only the hash is stored, never the text, so no option value (a key, say) reaches the
    journal. A class is named as it was defined (:func:`~ctxeval._public.defined_name`), not
    as the public module it shows (``ctxeval.plugin.PipelineMetric``): a journal written
    before ctxeval showed it there still resumes.
    """
    kind = type(metric)
    parts = pipeline_parts(metric) or ()
    data = [str(fingerprint_of(p)) for p in (metric, *parts)]
    own = own_llm(metric)
    judge = judge_identity(own) if own is not None else ""
    if not judge and needs_llm(metric):
        judge = judge_identity(llm)
    text = "\x1f".join([__version__, f"{defined_name(kind)}:{metric!r}", *data, judge])
    return hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()[:16]


def _unwritable(target: Path, exc: OSError) -> Exception:
    """The error of a journal that cannot be made at ``target``: a full disk is one
    (:class:`UnwritableFolderError`, as for any run file), else a :class:`ConfigError`
    naming the path and what to do."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return UnwritableFolderError(exc.errno, exc.strerror, str(target))
    return ConfigError(
        f"journal={str(target)!r} cannot be written: {exc.strerror or exc}; give the path of "
        "a file in a folder you can write (or leave journal= out)"
    )


def _open_private(path: Path, mode: str) -> IO[str]:
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if "a" in mode else os.O_TRUNC) | NOFOLLOW
    descriptor = os.open(path, flags, 0o600)
    return os.fdopen(descriptor, mode, encoding="utf-8")


class Journal:
    """An open journal file; :meth:`write` appends a row and flushes it."""

    def __init__(self, path: Path, handle: IO[str]) -> None:
        self.path = path
        self._handle = handle

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        metrics: Sequence[Metric],
        *,
        resume: bool,
        llm: Any = None,
        kept: Previous | None = None,
    ) -> tuple[Journal, Previous]:
        """Open ``path`` for a run of ``metrics`` (with the run's ``llm``).

        Returns the journal and, when resuming, the reusable rows of the earlier run with their
        samples' digests (see :data:`Previous`; ``kept``: those rows as :meth:`previous` read
        them already). Without ``resume`` an existing journal is replaced.
        """
        target = Path(path)
        if target.is_dir():
            raise ConfigError(f"journal={str(target)!r} is a folder: give the journal file's path")
        check_writable_name(target)  # (a FIFO would hang the reading, a device be replaced)
        if target.parent.exists() and not target.parent.is_dir():
            raise ConfigError(
                f"journal={str(target)!r}: {str(target.parent)!r} is a file, not a folder"
            )
        if not target.parent.exists():  # a run folder of its own: its owner's only
            try:
                target.parent.mkdir(parents=True, mode=0o700)
            except OSError as exc:
                raise _unwritable(target, exc) from None
        prints = {m.name: fingerprint(m, llm) for m in metrics}
        if kept is None:
            kept = _read(target, prints) if resume and target.exists() else {}
        # Rewrite: header, then the rows kept (drops stale errors and a torn last line).
        header = json.dumps({"ctxeval_journal": FORMAT, "metrics": prints}) + "\n"

        def rewrite(handle: IO[str]) -> None:
            handle.write(header)
            for row, digest in kept.values():
                handle.write(_line(row, digest))

        try:  # (a new temporary file: never a planted link followed)
            write_whole(target, rewrite)
            handle = _open_private(target, "a")
        except OSError as exc:  # /proc/nope, a read-only disk, no permission
            raise _unwritable(target, exc) from None
        return cls(target, handle), kept

    @staticmethod
    def previous(
        path: str | os.PathLike[str], metrics: Sequence[Metric], *, llm: Any = None
    ) -> Previous:
        """The reusable rows of the journal at ``path`` (none when there is no such file), for
        a run of ``metrics`` with ``llm``: what a resumed run need not score again. Reads only;
        :meth:`open` writes."""
        target = Path(path)
        if not target.exists():
            return {}
        return _read(target, {m.name: fingerprint(m, llm) for m in metrics})

    def write(self, row: MetricResult, digest: str) -> None:
        """Append ``row`` (of the sample with ``digest``) and flush it to the operating
        system."""
        self.write_many((row,), (digest,))

    def write_many(self, rows: Iterable[MetricResult], digests: Iterable[str]) -> None:
        """Append ``rows`` (each with its sample's digest) and flush them.

        Raises:
            UnwritableFolderError: the journal cannot be written (a full disk): the run stops,
                the rows written before are kept.
        """
        try:
            self._handle.write("".join(map(_line, rows, digests)))
            self._handle.flush()
        except OSError as exc:
            raise UnwritableFolderError(exc.errno, exc.strerror, str(self.path)) from exc

    def close(self) -> None:
        """Close the file. Rows it could not write were refused by :meth:`write_many` (the run
        stopped there): failing to flush them again is logged, never raised over that error."""
        try:
            self._handle.close()
        except OSError as exc:
            logger.debug("%s: the journal's last rows could not be written: %s", self.path, exc)


def _line(row: MetricResult, digest: str) -> str:
    text = row.to_json()
    return f'{text[:-1]},"sample_digest":"{digest}"}}\n'


def _header(line: str) -> dict[str, str] | None:
    """The metric fingerprints of a journal's header line, or None when it is not one."""
    try:
        header: Any = json.loads(line)
        prints = header["metrics"]
    except (ValueError, KeyError, TypeError):
        return None
    if header.get("ctxeval_journal") not in (1, FORMAT) or not isinstance(prints, dict):
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


def _read(path: Path, prints: Mapping[str, str]) -> Previous:
    kept: Previous = {}
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
                "%s: the setup of %s changed since the journal was written (options, judge, "
                "prompt versions or ctxeval's version); recomputing their rows",
                path, ", ".join(changed),
            )  # fmt: skip
        usable = {n for n in prints if old_prints.get(n) == prints[n]}
        torn = 0
        for line in handle:
            try:
                data = json.loads(line)
                row = MetricResult.from_dict(data)
                digest = str(data.get("sample_digest") or "")
            except Exception:
                torn += 1
                continue
            if row.metric in usable and row.status is not Status.ERROR:
                kept[row.sample_id, row.metric] = (row, digest)
            else:
                kept.pop((row.sample_id, row.metric), None)
        if torn:
            logger.warning("%s: ignored %d unreadable line(s) (a run cut short)", path, torn)
    return kept
