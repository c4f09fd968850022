"""Optional dependencies: find them without importing them, and say how to install them."""

from __future__ import annotations

import importlib.util

from ctxeval._errors import MissingExtraError

__all__ = [
    "PRICE_TABLE_INSTALL",
    "is_installed",
    "price_table_missing",
    "require_pyarrow",
    "require_ray",
]


def is_installed(module: str) -> bool:
    """True when ``module`` can be imported (checked without importing it)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


PRICE_TABLE_INSTALL = 'pip install "ctxeval[llm]"'
"""What brings the price table of the LLM models (litellm's, read without importing it)."""


def price_table_missing() -> str | None:
    """Why no model has a known price, when that is so: the price table comes with litellm
    (``ctxeval[llm]``), which the plain install lacks (#57); None when it is installed."""
    if is_installed("litellm"):
        return None
    return (
        f"no price table is installed: it comes with ctxeval[llm] ({PRICE_TABLE_INSTALL}); "
        "or give the price yourself"
    )


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
