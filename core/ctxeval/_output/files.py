"""Run files readable by their owner only: :func:`private_open`, :func:`write_whole`,
:func:`write_text`.

Every file of a run folder holds the data and the judge's reasons, so the writers and the report
open them 0600 through here. A file is never written through a symbolic link ctxeval did not
make (one planted at a file's name is replaced, its target untouched), and a text file is
written whole or not at all: under a new temporary name in the same folder (created with
``O_CREAT | O_EXCL | O_NOFOLLOW``: nothing planted at that name is followed or reused), then
renamed. A name held by something that is not a regular file or a link (a device, a FIFO, a
socket) is refused, never replaced.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any

from ctxeval._errors import ConfigError

if TYPE_CHECKING:
    from pathlib import Path

__all__ = [
    "NOFOLLOW",
    "AtomicFile",
    "UnwritableFolderError",
    "check_writable_name",
    "new_temporary",
    "private_open",
    "write_text",
    "write_whole",
]

NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
"""``open`` refuses a symbolic link at the name (where the system has the flag)."""

_KINDS = {stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
          stat.S_IFIFO: "a FIFO (named pipe)", stat.S_IFSOCK: "a socket"}  # fmt: skip


class UnwritableFolderError(OSError):
    """A file of the run folder (or the journal) could not be written (a full disk, a planted
    link, no permission): the ``OSError`` it came from (its ``errno``, ``strerror`` and
    ``filename``), told apart from an error reading the input."""


def check_writable_name(path: Path) -> None:
    """Refuse ``path`` when what holds its name is not a regular file, a link or a folder (a
    device such as ``/dev/full``, a FIFO, a socket): replacing it would destroy it.

    Raises:
        ConfigError: what is there, and what to do.
    """
    try:
        mode = os.lstat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return
    kind = _KINDS.get(stat.S_IFMT(mode))
    if kind is not None:
        raise ConfigError(
            f"{path} is {kind}, not a regular file: ctxeval writes a file whole under a "
            "temporary name and renames it into place, which would replace it; give the path "
            "of a regular file"
        )


def private_open(path: Path, *, newline: str | None = None) -> IO[str]:
    """``path`` opened for writing text, readable by its owner only (0600): run files hold the
    data and the judge's reasons. A symbolic link at ``path`` is refused (OSError), never
    followed."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | NOFOLLOW, 0o600)
    os.fchmod(descriptor, 0o600)  # also when the file was there already
    # a lone surrogate a plugin let through is written as \ud800 text, never a crash
    return os.fdopen(descriptor, "w", encoding="utf-8", errors="backslashreplace", newline=newline)


def new_temporary(path: Path, suffix: str = ".tmp") -> tuple[Path, IO[str]]:
    """A new empty file beside ``path`` (``.NAME.RANDOM.tmp``, 0600), open for writing text:
    created with ``O_CREAT | O_EXCL | O_NOFOLLOW``, so a file or link planted at a
    predictable name is never followed, truncated or reused."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW
    for _ in range(100):
        temporary = path.with_name(f".{path.name}.{secrets.token_hex(6)}{suffix}")
        try:
            descriptor = os.open(temporary, flags, 0o600)
        except FileExistsError:
            continue
        handle = os.fdopen(descriptor, "w", encoding="utf-8", errors="backslashreplace")
        return temporary, handle
    raise FileExistsError(errno.EEXIST, "no free temporary name", str(path))


class AtomicFile:
    """A file written under a temporary name and given its name when whole, so that what is
    found at ``path`` is whole or not there: ctxeval's one atomic write, streamed (a run
    folder's files, written as the rows come) or at once (:func:`write_whole`).

    Attributes:
        path: the name the file takes when finished.
        temporary: where it is written meanwhile.
        handle: the open file, text or binary.
    """

    def __init__(self, path: Path, temporary: Path, handle: IO[Any]) -> None:
        self.path = path
        self.temporary = temporary
        self.handle = handle

    def finish(self, *, replace: bool = True) -> Path:
        """Put the file on disk, close it and give it its name: renamed over ``path`` (a link
        there is replaced, its target left as it was) or, without ``replace``, linked to it,
        never over a file that is there (:class:`FileExistsError`, even when it appeared
        meanwhile)."""
        self.handle.flush()
        os.fsync(self.handle.fileno())  # on disk before it takes the name (a crash, a power cut)
        self.handle.close()
        if replace:
            os.replace(self.temporary, self.path)
        else:
            _link_new(self.temporary, self.path)
            self.temporary.unlink(missing_ok=True)
        return self.path

    def abort(self) -> None:
        """Close the file and remove it; ``path`` is as it was."""
        try:
            self.handle.close()  # (flushing may fail again: a full disk)
        except OSError:
            pass
        finally:
            self.temporary.unlink(missing_ok=True)


def write_whole(path: Path, write: Callable[[IO[str]], object], *, replace: bool = True) -> Path:
    """Write ``path`` (UTF-8 text, 0600) whole or not at all: ``write`` fills a new temporary
    file beside it (:func:`new_temporary`), which is finished as an :class:`AtomicFile`
    (renamed over ``path`` or, without ``replace``, linked to it, never over a file that is
    there). On failure the temporary file is removed and ``path`` is as it was.

    Raises:
        ConfigError: ``path`` names a device, a FIFO or a socket (:func:`check_writable_name`).
    """
    check_writable_name(path)
    file = AtomicFile(path, *new_temporary(path))
    try:
        write(file.handle)
        return file.finish(replace=replace)
    except BaseException:
        file.abort()
        raise


def _link_new(temporary: Path, path: Path) -> None:
    try:
        os.link(temporary, path)  # (fails when the name is taken: nothing is replaced)
    except FileExistsError:
        raise
    except OSError:  # a file system without hard links: the name was free a moment ago
        if os.path.lexists(path):
            raise FileExistsError(errno.EEXIST, "File exists", str(path)) from None
        os.replace(temporary, path)


def write_text(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` (UTF-8, 0600) whole or not at all (:func:`write_whole`)."""
    return write_whole(path, lambda handle: handle.write(text))
