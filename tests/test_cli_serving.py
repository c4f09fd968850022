"""The local servers of the command line (``ctxeval view``, ``ctxeval serve-judge``) say one
thing when they cannot take their address: a port in use, and what to do."""

from __future__ import annotations

import socket

import pytest

from ctxeval.cli.render import UsageError
from ctxeval.cli.serving import listening


def test_a_port_in_use_says_to_choose_another() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]

        def make() -> socket.socket:
            other = socket.socket()
            try:
                other.bind(("127.0.0.1", port))
            except OSError:
                other.close()
                raise
            return other

        with pytest.raises(UsageError, match=rf"port {port} is in use: .*--port 0 for a free one"):
            listening(make, "127.0.0.1", port)


def test_another_address_error_names_the_address() -> None:
    def make() -> object:
        raise PermissionError(13, "Permission denied")

    with pytest.raises(UsageError, match=r"cannot listen on 10\.0\.0\.1:80: Permission denied"):
        listening(make, "10.0.0.1", 80)


def test_a_server_made_is_handed_back() -> None:
    made = object()
    assert listening(lambda: made, "127.0.0.1", 0) is made
