"""The run folder, written as the rows come: :class:`RunFolder` takes each part of a run's rows
once, in input order, and writes ``results.jsonl``, ``summary.json``, ``report.html``
(:data:`DEFAULT_FORMATS`) and the files of the writers a run asks for, in constant memory:
rows go to disk a part at a time, the numbers come from columns of scores
(:class:`~ctxeval._output.totals.RunTotals`), the report from the samples chosen as they
pass (:class:`~ctxeval._output.selection.ReportSelection`). :func:`write_outputs` writes the
folder of an :class:`~ctxeval.Evaluation` through the same path.
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import json
import logging
import os
import socket
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ctxeval._errors import ConfigError
from ctxeval._output.files import NOFOLLOW, UnwritableFolderError, write_text
from ctxeval._output.lines import forget_evidence
from ctxeval._output.report import SampleLookup, render_page
from ctxeval._output.selection import ReportSelection
from ctxeval._output.summary import summary_dict
from ctxeval._output.totals import RunTotals
from ctxeval._plugins.protocols import RowFile, StreamingWriter, SummaryWriter
from ctxeval._results.columns import RowBlock
from ctxeval._results.evaluation import RunResults
from ctxeval._results.results import MetricResult

__all__ = [
    "DEFAULT_FORMATS",
    "LOCK_FILE",
    "RUN_FILES",
    "FolderInUseError",
    "FolderLock",
    "RunFolder",
    "UnwritableFolderError",
    "claim_folder",
    "write_evaluation",
    "write_outputs",
]

logger = logging.getLogger(__name__)

WRITE_SAMPLES = 256
"""The writers take a deterministic block this many samples at a time: the evidence of a few
hundred samples is made, written and freed, and the memory it took serves the next (a whole
block's at once costs fresh memory, page by page)."""

DEFAULT_FORMATS = ("jsonl", "summary", "html")
"""The writers every run folder gets: ``results.jsonl``, ``summary.json``, ``report.html``."""


@contextlib.contextmanager
def _writing() -> Iterator[None]:
    try:
        yield
    except UnwritableFolderError:
        raise
    except OSError as exc:
        raise UnwritableFolderError(exc.errno, exc.strerror, exc.filename) from exc


# --- one run per folder at a time --------------------------------------------------------------

LOCK_FILE = ".lock"
"""The file in a run folder that the run writing it holds locked (``flock``), with the
holder's pid, host and start time; removed when the run ends."""


class FolderInUseError(ConfigError):
    """Another run is writing the run folder (it holds its lock): two runs writing one folder
    would mix or replace each other's rows. The message names the holder's pid and host.

    Attributes:
        folder: the run folder.
        holder: what the holder wrote in the lock file (``pid``, ``host``, ``since``), as far as
            it could be read.
    """

    def __init__(self, folder: Path, holder: Mapping[str, Any]) -> None:
        self.folder = folder
        self.holder = dict(holder)
        pid, host, since = holder.get("pid"), holder.get("host"), holder.get("since")
        if pid is None:
            who = "another ctxeval run (it is starting: its pid is not written yet)"
        else:
            who = f"another ctxeval run (pid {pid}" + (f" on {host}" if host else "")
            who += f", since {since})" if since else ")"
        super().__init__(
            f"{folder} is being written by {who}: two runs on one folder would replace each "
            "other's rows. Wait for that run to end (or stop it), then run again (--resume "
            "finishes a stopped run); or write this run to another folder (--out)"
        )


class FolderLock:
    """The lock of a run folder, held by the one run writing it: ``flock`` on
    :data:`LOCK_FILE` in the folder, taken at once or refused (:class:`FolderInUseError`).

    The system releases it when its holder exits, however it exits (a crash, ``kill -9``): a
    lock file left behind by a dead run is taken over, never in the way. POSIX only (``flock``);
    where the system or the file system has no ``flock``, the folder is not locked (a warning).
    Take it with :func:`claim_folder`, before looking at what the folder holds.

    Attributes:
        folder: the run folder.
        path: the lock file.
    """

    def __init__(self, folder: Path, descriptor: int | None) -> None:
        self.folder = folder
        self.path = folder / LOCK_FILE
        self._descriptor = descriptor

    @property
    def held(self) -> bool:
        """Whether this lock is held (not released yet; False where locks are not supported)."""
        return self._descriptor is not None

    @classmethod
    def acquire(cls, folder: str | os.PathLike[str]) -> FolderLock:
        """Lock ``folder`` (made, 0700, if it does not exist) for this process.

        Raises:
            FolderInUseError: another run holds it.
            UnwritableFolderError: the folder or its lock file cannot be made.
        """
        target = Path(folder)
        with _writing():
            if not target.exists():
                target.mkdir(parents=True, mode=0o700)  # a user's own folder is kept as it is
            return cls(target, _take_lock(target / LOCK_FILE))

    def release(self) -> None:
        """Release the lock and remove the lock file (again: nothing)."""
        descriptor, self._descriptor = self._descriptor, None
        if descriptor is None:
            return
        try:  # removed while held, and only if it is still this lock's file
            mine = os.fstat(descriptor)
            there = os.stat(self.path, follow_symlinks=False)
            if (there.st_dev, there.st_ino) == (mine.st_dev, mine.st_ino):
                os.unlink(self.path)
        except OSError:
            pass  # (gone, or a read-only folder: the next run takes the lock over)
        finally:
            os.close(descriptor)  # releases the flock

    def __enter__(self) -> FolderLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __del__(self) -> None:
        if self._descriptor is not None:  # (dropped while held: as the system does at exit)
            try:  # noqa: SIM105  (no module global: this may run at interpreter exit)
                self.release()
            except Exception:
                pass

    def __repr__(self) -> str:
        return f"FolderLock({str(self.folder)!r}, held={self.held})"


def claim_folder(folder: str | os.PathLike[str]) -> FolderLock:
    """Lock the run folder ``folder`` for this run (see :class:`FolderLock`): call it before
    looking at what the folder holds (a run to resume or refuse to overwrite), and give it to
    :class:`RunFolder` (``lock=``), which releases it when the run ends.

    Raises:
        FolderInUseError: another run holds it (the message names its pid and host).
        UnwritableFolderError: the folder or its lock file cannot be made.
    """
    return FolderLock.acquire(folder)


def _take_lock(path: Path) -> int | None:
    """The descriptor of ``path``, locked; None where ``flock`` is not supported."""
    try:
        import fcntl
    except ImportError:  # (not POSIX)
        logger.warning("cannot lock %s on this system: runs on one folder are not kept apart", path)
        return None
    while True:
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT | NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(descriptor)
            os.close(descriptor)
            raise FolderInUseError(path.parent, holder) from None
        except OSError as exc:
            os.close(descriptor)
            if exc.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
                logger.warning(
                    "cannot lock %s (%s): runs on one folder are not kept apart",
                    path,
                    exc.strerror,
                )
                return None
            raise
        # its holder may have removed it (ending) between our open and our lock: then this
        # lock is on a file no other run sees; take the one at the name instead
        try:
            there = os.stat(path, follow_symlinks=False)
        except FileNotFoundError:
            os.close(descriptor)
            continue
        mine = os.fstat(descriptor)
        if (there.st_dev, there.st_ino) != (mine.st_dev, mine.st_ino):
            os.close(descriptor)
            continue
        break
    with contextlib.suppress(OSError):  # (another user's file left behind: it stays theirs)
        os.fchmod(descriptor, 0o600)
    holder = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "since": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
    }
    try:  # (what a refused run names; the lock holds without it, e.g. on a full disk)
        os.ftruncate(descriptor, 0)
        os.pwrite(descriptor, (json.dumps(holder) + "\n").encode(), 0)
    except OSError as exc:
        logger.debug("could not write the holder of %s: %s", path, exc)
    return descriptor


def _holder(descriptor: int) -> dict[str, Any]:
    """What the holder of a lock file wrote in it ({} when nothing readable)."""
    try:
        found = json.loads(os.pread(descriptor, 4096, 0).decode("utf-8"))
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


class RunFolder:
    """A run folder being written: :meth:`add` each part of the rows (whole samples, in input
    order) as it comes, then :meth:`finish` with the summary (or :meth:`abort`; leaving a
    ``with`` block on an exception aborts).

    Example::

        async with ctxeval.stream(samples, metrics) as rows:
            with ctxeval.RunFolder("run", rows.metrics, title="nightly") as folder:
                async for part in rows.parts():
                    folder.add(part)
                paths = folder.finish()

    Rows are written as they come by the writers that stream (``results.jsonl``, and
    ``results.csv`` / ``results.parquet`` when asked); a writer plugin without ``open`` is
    given, at the end, an :class:`~ctxeval.Evaluation` read back from ``results.jsonl``.

    One run writes a folder at a time: the folder's lock (:class:`FolderLock`) is taken when
    the folder is opened (or given, ``lock=``, by the caller that took it with
    :func:`claim_folder` before looking at the folder), and released by :meth:`finish`,
    :meth:`abort` or the end of the ``with`` block. A second run on a locked folder gets
    :class:`FolderInUseError`.

    Attributes:
        path: the folder.
        totals: the run's numbers so far (summaries, usage, errors, the judge's trust).
        selection: the samples the report will show.
    """

    def __init__(
        self,
        folder: str | os.PathLike[str],
        metrics: Sequence[str],
        *,
        title: str,
        formats: Sequence[str] = (),
        totals: RunTotals | None = None,
        lookup: SampleLookup | None = None,
        lock: FolderLock | None = None,
    ) -> None:
        from ctxeval._plugins.registry import default_registry

        registry = default_registry()
        self.path = Path(folder)
        self._lock = lock if lock is not None else FolderLock.acquire(self.path)
        self.title = title
        self.metrics = list(metrics)
        self.totals = totals if totals is not None else RunTotals(metrics)
        self.selection = ReportSelection(metrics)
        self.lookup = lookup
        writers = [registry.get_writer(n) for n in dict.fromkeys((*DEFAULT_FORMATS, *formats))]
        self._later: list[Any] = []  # writers given the whole rows at the end
        self._files: dict[str, RowFile] = {}
        self._html = None
        try:
            with _writing():  # (mkdir too: a folder that cannot be made is as unwritable)
                if not self.path.exists():
                    self.path.mkdir(parents=True, mode=0o700)  # a user's own folder is kept
                for writer in writers:
                    if writer.name == "html" and type(writer).__module__.startswith("ctxeval."):
                        self._html = writer
                    elif isinstance(writer, StreamingWriter):
                        self._files[writer.name] = writer.open(
                            self.path, title=title, metrics=self.metrics
                        )
                    else:
                        self._later.append(writer)
        except BaseException:
            self.abort()
            raise

    def __enter__(self) -> RunFolder:
        return self

    def __exit__(self, kind: type[BaseException] | None, *rest: object) -> None:
        """A failure inside the block removes the files begun (see :meth:`abort`); the
        folder's lock is released either way."""
        if kind is not None:
            self.abort()
        self._lock.release()

    def add(self, part: Sequence[MetricResult]) -> None:
        """Write ``part``'s rows and count them."""
        self.totals.add(part)
        self.selection.add(part)
        pieces = part.split(WRITE_SAMPLES) if isinstance(part, RowBlock) else (part,)
        for piece in pieces:
            try:
                with _writing():
                    for file in self._files.values():
                        file.add(piece)
            finally:
                forget_evidence(piece)  # (computed once for every writer)

    def summary(self, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """``summary.json``'s content for the rows added (with ``extra`` keys)."""
        return summary_dict(self.totals, extra=extra)

    def finish(self, summary: Mapping[str, Any] | None = None) -> dict[str, Path]:
        """Finish every file (``summary``: :meth:`summary`'s output when the caller has it);
        each file's path by writer name (the default three also as ``results``, ``summary``
        and ``report``)."""
        if summary is None:
            summary = self.summary()
        paths: dict[str, Path] = {}
        try:
            with _writing():
                for name, file in list(self._files.items()):
                    paths[name] = file.finish()
                    del self._files[name]
        except BaseException:
            self.abort()
            raise
        try:
            with _writing():
                self._finish_summaries(summary, paths)
        finally:
            self._lock.release()
        paths.update(results=paths["jsonl"], report=paths["html"])
        return paths

    def _finish_summaries(self, summary: Mapping[str, Any], paths: dict[str, Path]) -> None:
        """The files made at the end: the report, the summaries, writers without ``open``."""
        if self._html is not None:
            page = render_page(
                self.selection,
                summary,
                title=self.title,
                scores=self.totals.scores,
                lookup=self.lookup,
                folder=str(self.path),
            )
            paths[self._html.name] = write_text(self.path / self._html.filename, page)
        rows: RunResults | None = None
        writer: Any
        for writer in self._later:
            writer_name: str = writer.name
            if isinstance(writer, SummaryWriter):
                paths[writer_name] = writer.write_summary(summary, self.path, title=self.title)
                continue
            if rows is None:
                logger.info(
                    "writer %s has no open(): reading every row back from results.jsonl for it",
                    writer_name,
                )
                rows = RunResults.from_jsonl(paths["jsonl"])
            paths[writer_name] = writer.write(rows, summary, self.path, title=self.title)

    def abort(self) -> None:
        """The run failed: remove the files begun (the folder's finished files are kept) and
        release the folder's lock."""
        try:
            for file in self._files.values():
                try:
                    file.abort()
                except OSError as exc:  # (a full disk, say: the first failure is the one to tell)
                    logger.warning("could not remove a partial file in %s: %s", self.path, exc)
            self._files.clear()
        finally:
            self._lock.release()


def write_outputs(
    evaluation: RunResults,
    folder: str | os.PathLike[str],
    *,
    title: str,
    summary: Mapping[str, Any] | None = None,
    formats: Sequence[str] = (),
    lookup: Callable[..., Any] | None = None,
    lock: FolderLock | None = None,
) -> dict[str, Path]:
    """Write the run folder of ``evaluation``: ``results.jsonl``, ``summary.json``,
    ``report.html`` and the files of the writers named in ``formats`` (entry-point group
    ``ctxeval.writers``), through :class:`RunFolder`.

    ``summary`` is :func:`summary_dict`'s output when the caller has it already (its bootstrap
    intervals are not computed twice). ``lock``: the folder's lock when the caller took it
    (:func:`claim_folder`). Returns each file's path by writer name (the default three also as
    ``results``, ``summary`` and ``report``).
    """
    known = evaluation.samples
    with RunFolder(
        folder,
        evaluation.metrics,
        title=title,
        formats=formats,
        lookup=lookup or (lambda ids: {i: known[i] for i in ids if i in known}),
        lock=lock,
    ) as run:
        for part in evaluation.parts:
            run.add(part)
        return run.finish(summary if summary is not None else summary_dict(evaluation))


RUN_FILES = ("results.jsonl", "journal.jsonl", "summary.json")
"""The files that make a folder hold a run already (the command line's ``--out`` check)."""

_FORMAT_ALIASES = {"report": "html", "results": "jsonl"}
"""Names :meth:`Evaluation.write <ctxeval.Evaluation.write>` also takes for a writer (the
keys of the paths it returns)."""


def write_evaluation(
    evaluation: RunResults,
    folder: str | os.PathLike[str],
    *,
    formats: Sequence[str] = (),
    overwrite: bool = False,
    title: str | None = None,
    data: Any = None,
) -> dict[str, Path]:
    """:meth:`Evaluation.write <ctxeval.Evaluation.write>`: the run folder of ``evaluation``
    through :func:`write_outputs` (so :class:`RunFolder`, as ``ctxeval evaluate --out``),
    refused when ``folder`` holds a run already unless ``overwrite``. ``data``: the samples
    scored or their file, where the report finds texts the rows do not carry (a file is named
    in ``summary.json``, as the command line names it)."""
    target = Path(folder)
    data_file = Path(data) if isinstance(data, (str, os.PathLike)) else None
    if data_file is not None and not data_file.is_file():
        from ctxeval._errors import DataError

        raise DataError(
            "no such file", path=str(data_file), hint="data= is the samples scored, or their file"
        )
    from ctxeval._plugins.registry import default_registry

    for name in formats:  # an unknown writer is refused before the folder is made
        default_registry().get_writer(_FORMAT_ALIASES.get(name, name))
    existed = target.exists()
    lock = claim_folder(target)  # before looking: a run ending now is seen, not overwritten
    try:
        held = [name for name in RUN_FILES if (target / name).exists()]
        if held and not overwrite:
            raise FileExistsError(
                f"{target} holds a run already ({', '.join(held)}): pass overwrite=True to "
                "replace it, or choose another folder"
            )
        return _write_evaluation(evaluation, target, formats, title, data, data_file, lock)
    except BaseException:
        lock.release()
        if not existed:
            with contextlib.suppress(OSError):
                target.rmdir()  # made for this write and left empty: gone again
        raise
    finally:
        lock.release()


SAMPLES_FILE = "samples.jsonl"
"""The samples' texts of a run written from memory (``write(folder, data=df)``), in the run
folder: ``ctxeval view`` and ``ctxeval report`` find them there."""

SAMPLES_KEY = "samples_file"
"""The key of ``summary.json`` that names :data:`SAMPLES_FILE` (a name in the folder)."""


def _write_samples(target: Path, data: Any) -> str:
    """Write the samples of ``data`` (held in memory) to ``target/samples.jsonl``, one JSON
    object per sample, as they are read (a sample without an id gets its position, the key
    the rows know it by; one that cannot be read is left out); returns the file's name."""
    import orjson

    from ctxeval._output.files import private_open
    from ctxeval._output.rebuild import samples_in_memory

    with private_open(target / SAMPLES_FILE) as handle:
        for position, sample in enumerate(samples_in_memory(data)):
            if sample is None:
                continue
            fields = sample.to_dict()
            fields.setdefault("id", str(position))
            handle.write(orjson.dumps(fields, default=str).decode() + "\n")
    return SAMPLES_FILE


def _write_evaluation(
    evaluation: RunResults,
    target: Path,
    formats: Sequence[str],
    title: str | None,
    data: Any,
    data_file: Path | None,
    lock: FolderLock,
) -> dict[str, Path]:
    from ctxeval._output.rebuild import file_lookup
    from ctxeval._version import __version__

    names = [_FORMAT_ALIASES.get(name, name) for name in formats]
    if title is None:
        named = data_file if data_file is not None else target.resolve()
        title = f"ctxeval: {named.name}"
    known = evaluation.samples
    given = file_lookup(data) if data is not None else None

    def lookup(ids: Sequence[str]) -> Mapping[str, Any]:
        found = {i: known[i] for i in ids if i in known}
        missing = [i for i in ids if i not in found]
        if missing and given is not None:
            found.update(given(missing))
        return found

    extra: dict[str, Any] = {"ctxeval": __version__}
    if data_file is not None:
        extra["data"] = str(data_file)
    elif data is not None:  # in memory (a DataFrame...): its texts kept beside the rows (#57)
        extra[SAMPLES_KEY] = _write_samples(target, data)
    return write_outputs(
        evaluation,
        target,
        title=title,
        summary=summary_dict(evaluation, extra=extra),
        formats=[name for name in dict.fromkeys(names) if name not in DEFAULT_FORMATS],
        lookup=lookup,
        lock=lock,
    )
