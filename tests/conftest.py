"""Shared fixtures. Async tests run on both asyncio and trio (anyio's pytest plugin)."""

from __future__ import annotations

import pytest

import ctxeval


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def registry() -> ctxeval.Registry:
    """A writable copy of the installed plugins, private to one test."""
    return ctxeval.default_registry().copy()
