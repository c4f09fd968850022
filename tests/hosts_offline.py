"""The host harnesses (MLflow, DeepEval) kept offline in tests: their telemetry and update
checks off, and every connection to an address outside the loopback refused and recorded, so
that a test can assert the host tried none."""

from __future__ import annotations

import ipaddress
import os
import socket
from typing import Any

import pytest

OFFLINE_ENV = {
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "DO_NOT_TRACK": "true",
    "DEEPEVAL_TELEMETRY_OPT_OUT": "YES",
    "DEEPEVAL_UPDATE_WARNING_OPT_IN": "NO",
    "DEEPEVAL_DISABLE_DOTENV": "1",
    "DEEPEVAL_GRPC_LOGGING": "NO",
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
}


def set_offline_environment() -> None:
    """Set before the host is imported (both read their settings on import)."""
    for name, value in OFFLINE_ENV.items():
        os.environ.setdefault(name, value)


def _loopback(address: Any) -> bool:
    if isinstance(address, tuple) and address:
        host = str(address[0])
        if host == "localhost":
            return True
        try:
            return ipaddress.ip_address(host).is_loopback
        except ValueError:
            return False
    return True  # a Unix socket


def refuse_network(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Refuse (and record) every connection outside 127.0.0.0/8 and ::1."""
    tried: list[str] = []
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex

    def connect(self: socket.socket, address: Any) -> None:
        if not _loopback(address):
            tried.append(repr(address))
            raise OSError(f"test: no network ({address!r})")
        real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        if not _loopback(address):
            tried.append(repr(address))
            return 111
        return real_connect_ex(self, address)

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host not in (None, "localhost") and not _loopback((host,)):
            tried.append(f"dns {host!r}")
            raise socket.gaierror(f"test: no network ({host!r})")
        return real_getaddrinfo(host, *args, **kwargs)

    real_getaddrinfo = socket.getaddrinfo
    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return tried
