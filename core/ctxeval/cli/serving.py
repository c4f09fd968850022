"""Running a local server in the foreground (``ctxeval view``, ``ctxeval serve-judge``): made
on its address (:func:`listening`), served until Ctrl-C or SIGTERM, then closed."""

from __future__ import annotations

import errno
import signal
import threading
from collections.abc import Callable
from socketserver import BaseServer
from types import FrameType
from typing import TypeVar

from ctxeval.cli.render import UsageError

__all__ = ["listening", "serve_until_stopped"]

S = TypeVar("S")


def listening(make_server: Callable[[], S], host: str, port: int) -> S:
    """``make_server()``, listening on ``host:port``; an address it cannot take is a
    :class:`UsageError` saying what to do (a port in use: another, or 0 for a free one)."""
    try:
        return make_server()
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise UsageError(
                f"port {port} is in use: give another with --port, or --port 0 for a free one"
            ) from None
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


def serve_until_stopped(server: BaseServer) -> None:
    """Serve until Ctrl-C (SIGINT) or SIGTERM, then close the server's socket."""

    def stop(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, stop)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
