"""Running a local server in the foreground (``ctxeval view``, ``ctxeval serve-judge``): until
Ctrl-C or SIGTERM, then closed."""

from __future__ import annotations

import signal
import threading
from socketserver import BaseServer
from types import FrameType

__all__ = ["serve_until_stopped"]


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
