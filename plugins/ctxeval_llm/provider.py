"""LLM provider ``auto``: how the command line (and anyone with a model name) reaches an LLM.

Registered in the ``ctxeval.llms`` entry-point group. It makes an :class:`LLMConfig` (the
OpenAI-compatible direct transport where it applies, litellm for every other provider) and
prices requests from litellm's bundled price table, read without importing litellm.
"""

from __future__ import annotations

from typing import Any, ClassVar

import attrs

from .config import LLMConfig
from .pricing import cost_usd

__all__ = ["AutoProvider"]


@attrs.frozen(kw_only=True)
class AutoProvider:
    """Provider ``auto``: ``configure(model=..., api_base=..., **settings)`` gives an
    :class:`LLMConfig` (``settings`` are its fields: ``timeout``, ``temperature``,
    ``max_tokens``, ``transport``...)."""

    registry_name: ClassVar[str] = "auto"
    name: str = "auto"

    def configure(self, *, model: str, api_base: str | None = None, **settings: Any) -> LLMConfig:
        return LLMConfig(model=model, api_base=api_base, **settings)

    def estimate_cost(self, model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
        return cost_usd(model, prompt_tokens, completion_tokens)
