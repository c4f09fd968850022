"""LLM provider ``auto``: how the command line (and anyone with a model name) reaches an LLM.

Registered in the ``ctxeval.llms`` entry-point group. It makes an :class:`LLMConfig` (the
OpenAI-compatible direct transport where it applies, litellm for every other provider) and
prices requests from litellm's bundled price table, read without importing litellm.
"""

from __future__ import annotations

from typing import Any, ClassVar

import attrs

from ctxeval.plugin import Price

from ._pricing import price_of
from .config import LLMConfig

__all__ = ["AutoProvider"]


@attrs.frozen(kw_only=True)
class AutoProvider:
    """Provider ``auto``: ``configure(model=..., api_base=..., **settings)`` gives an
    :class:`LLMConfig` (``settings`` are its fields: ``timeout``, ``temperature``,
    ``max_tokens``, ``transport``, ``price_per_million_tokens``...); the configuration it makes
    is priced by :meth:`price` unless it was given a price of its own."""

    registry_name: ClassVar[str] = "auto"
    name: str = "auto"

    def configure(self, *, model: str, api_base: str | None = None, **settings: Any) -> LLMConfig:
        return LLMConfig(model=model, api_base=api_base, provider=self, **settings)

    def price(self, model: str) -> Price | None:
        """``model``'s price from litellm's bundled table (None when it is not there)."""
        return price_of(model)

    def estimate_cost(self, model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
        price = self.price(model)
        return None if price is None else price.cost(prompt_tokens, completion_tokens)
