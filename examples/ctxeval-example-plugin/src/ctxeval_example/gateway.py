"""An LLM provider for a company gateway, as a third-party package: provider ``example-gateway``.

The gateway speaks the OpenAI chat-completions API but wants its own token header
(``X-Gateway-Token``, from ``EXAMPLE_GATEWAY_TOKEN``) instead of a bearer key. The provider,
registered in the ``ctxeval.llms`` entry-point group, is what ``ctxeval evaluate --provider
example-gateway --model NAME --api-base URL`` calls; it returns the run's ``llm=`` with a
:class:`~ctxeval.plugin.ChatTransport` of its own. Everything comes from
:mod:`ctxeval.plugin` (and httpx).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, ClassVar

import attrs
import httpx

from ctxeval.plugin import (
    Completion,
    ConnectionFailedError,
    MissingCredentialsError,
    RunContext,
    ServiceError,
    error_for_status,
    retry_after_of,
)

__all__ = ["GatewayProvider", "GatewayTransport"]

TOKEN = "EXAMPLE_GATEWAY_TOKEN"


class GatewayTransport:
    """POST ``{base_url}/chat/completions`` with the gateway's token header."""

    name = "example-gateway"

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url.rstrip("/")

    async def ready(self, ctx: RunContext) -> None:
        """Checked once per run, before the first request: no token, no run."""
        if not os.environ.get(TOKEN):
            raise MissingCredentialsError(
                f"the example gateway at {self.base_url} needs a token: export {TOKEN}=..."
            )

    def _client(self, ctx: RunContext) -> httpx.AsyncClient:
        # one client per run, closed by the run when it ends (ctx.shared objects with aclose)
        return ctx.shared(
            f"example-gateway:{self.base_url}",
            lambda: httpx.AsyncClient(headers={"X-Gateway-Token": os.environ.get(TOKEN, "")}),
        )

    async def complete(self, ctx: RunContext, request: Mapping[str, Any]) -> Completion:
        url = f"{self.base_url}/chat/completions"
        try:
            response = await self._client(ctx).post(url, json=dict(request))
        except httpx.ConnectError as exc:
            raise ConnectionFailedError(f"cannot connect to {url}: {exc}") from None
        except httpx.TransportError as exc:
            raise ServiceError(f"{url}: {type(exc).__name__}") from None
        if response.status_code != 200:
            raise error_for_status(
                response.status_code,
                f"HTTP {response.status_code} from the gateway: {response.text[:200]}",
                retry_after=retry_after_of(response),
                hint=f" (check {TOKEN})",
            )
        body = response.json()
        usage = body.get("usage") or {}
        return Completion(
            body["choices"][0]["message"]["content"],
            int(usage.get("prompt_tokens") or 0),
            int(usage.get("completion_tokens") or 0),
        )

    async def aclose(self) -> None:
        """Nothing to close: the client belongs to the run (see :meth:`_client`)."""


@attrs.frozen
class GatewayProvider:
    """Provider ``example-gateway``: ``--model NAME --api-base URL`` to the run's ``llm=``."""

    registry_name: ClassVar[str] = "example-gateway"
    name: str = "example-gateway"

    def configure(self, *, model: str, api_base: str | None = None, **settings: Any) -> Any:
        if not api_base:
            raise ValueError("the example gateway needs --api-base (its URL)")
        return {"model": model, "transport": GatewayTransport(api_base), **settings}

    def estimate_cost(self, model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
        return None  # the gateway bills internally
