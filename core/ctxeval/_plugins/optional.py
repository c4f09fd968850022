"""Optional dependencies: find them without importing them, and say how to install them."""

from __future__ import annotations

import importlib.util

from ctxeval._errors import MissingExtraError

__all__ = ["is_installed", "require_pyarrow", "require_ray"]


def is_installed(module: str) -> bool:
    """True when ``module`` can be imported (checked without importing it)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def require_pyarrow(purpose: str) -> None:
    """Raise :class:`MissingExtraError` unless pyarrow is installed."""
    if not is_installed("pyarrow"):
        raise MissingExtraError(f"{purpose} needs pyarrow", install="pip install pyarrow")


def require_pandas(purpose: str) -> None:
    """Raise :class:`MissingExtraError` unless pandas is installed."""
    if not is_installed("pandas"):
        raise MissingExtraError(f"{purpose} needs pandas", install="pip install pandas")


def require_ray(purpose: str) -> None:
    """Raise :class:`MissingExtraError` unless Ray (with Ray Data) is installed."""
    if not (is_installed("ray") and is_installed("ray.data")):
        raise MissingExtraError(f"{purpose} needs Ray", install="pip install 'ctxeval[ray]'")
