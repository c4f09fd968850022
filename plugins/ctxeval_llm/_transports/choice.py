"""Which transport sends a configuration's requests, made once per run and checked before its
first request.

A transport is a :class:`ctxeval.plugin.ChatTransport`: a request in, a
:class:`ctxeval.plugin.Completion` out, ``aclose()`` at the end. The built-in ones:

* ``openai`` (:class:`~ctxeval_llm._transports.openai_compatible.OpenAITransport`): to any
  OpenAI-compatible endpoint, on aiohttp under asyncio and httpx under trio (the client is
  chosen on the run's event loop at its first request:
  :func:`ctxeval_llm._http.choice.choose_client`);
* ``litellm`` (:class:`~ctxeval_llm._transports.via_litellm.LitellmTransport`): every other
  provider;
* :class:`CallableTransport`: a bring-your-own async callable (``llm=my_function``).

A ``ChatTransport`` object of your own (a company gateway's, say) goes in
``LLMConfig(transport=...)``; it is used as it is, and not closed by ctxeval.

:func:`transport_for` keeps one transport per configuration for the whole run
(:meth:`RunContext.shared`), and runs its readiness check once, before the first request:
a missing key, a model no provider serves or a missing package stops the run there, with
nothing sent. A transport of your own may have such a check too: an ``async ready(ctx)``
method, called once per run before its first request.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import anyio

from ctxeval.plugin import (
    CallError,
    ChatTransport,
    Completion,
    MalformedOutputError,
    RunContext,
)
from ctxeval.plugin.hooks import ChecksReady
from ctxeval_llm._http.errors import as_call_error
from ctxeval_llm.config import LLMConfig

from .openai_compatible import OpenAITransport
from .via_litellm import LitellmTransport

__all__ = ["CallableTransport", "transport_for"]


class CallableTransport:
    """A bring-your-own async callable: request dict in, text (or a dict) out."""

    name = "callable"

    def __init__(self, config: LLMConfig) -> None:
        assert config.completion is not None
        self.config = config
        self._func = config.completion

    async def complete(self, ctx: RunContext, request: Mapping[str, Any]) -> Completion:
        try:
            payload = dict(request)
            if self.config.extra_headers:
                payload["extra_headers"] = dict(self.config.extra_headers)
            answer = await self._func(payload)
        except CallError:
            raise
        except Exception as exc:
            raise as_call_error(exc, self.config) from None
        if isinstance(answer, str):
            return Completion(answer)
        if isinstance(answer, Mapping) and isinstance(answer.get("content"), str):
            finish, served = answer.get("finish_reason"), answer.get("model")
            return Completion(
                answer["content"],
                int(answer.get("prompt_tokens") or 0),
                int(answer.get("completion_tokens") or 0),
                finish if isinstance(finish, str) else None,
                served if isinstance(served, str) else None,
            )
        raise MalformedOutputError(
            f"the completion callable returned {type(answer).__name__}; return the answer text "
            "or a dict with 'content'"
        )

    async def aclose(self) -> None:
        """Nothing to close."""


class _Ready:
    """A transport, and whether its readiness check has passed (checked once per run)."""

    def __init__(self, transport: ChatTransport, *, owned: bool = True) -> None:
        self.transport = transport
        self.owned = owned
        self.checked = False
        self._checking: anyio.Event | None = None

    async def check(self, ctx: RunContext) -> ChatTransport:
        """The transport, after its optional ``ready(ctx)`` check has passed once: one request
        checks, the others wait for it and then all go at once (a lock handed from waiter to
        waiter cost every request of a run's start a turn of the event loop, #58); a check
        that fails is made again by the next request."""
        while not self.checked:
            checking = self._checking
            if checking is not None:
                await checking.wait()
                continue
            self._checking = checking = anyio.Event()
            try:
                if isinstance(self.transport, ChecksReady):
                    await self.transport.ready(ctx)
                self.checked = True
            finally:
                self._checking = None
                checking.set()
        return self.transport

    async def aclose(self) -> None:
        if self.owned:
            await self.transport.aclose()


def _kind(config: LLMConfig, ctx: RunContext) -> tuple[str, Callable[[], _Ready]]:
    """The run-wide key of ``config``'s transport and how to make it (one switch for both)."""
    chosen = config.chosen_transport()
    transport = config.transport
    if chosen == "custom":
        assert not isinstance(transport, str)
        return f"ctxeval_llm.custom:{id(transport)}", lambda: _Ready(transport, owned=False)
    if chosen == "callable":
        key = f"ctxeval_llm.callable:{id(config.completion)}"
        return key, lambda: _Ready(CallableTransport(config))
    if chosen == "openai":

        def openai() -> _Ready:  # the pool sized to the resource's concurrency
            size = ctx.limits(config.resource).max_concurrency
            return _Ready(OpenAITransport(config, max_connections=size))

        return OpenAITransport.shared_key(config), openai
    return LitellmTransport.shared_key(config), lambda: _Ready(LitellmTransport(config))


async def transport_for(config: LLMConfig, ctx: RunContext) -> ChatTransport:
    """The run's transport for ``config`` (made on first use), once its readiness check
    (an optional ``async ready(ctx)`` method) has passed; raises what makes every request of
    the run fail (see the module's description)."""
    return await held_transport(config, ctx).check(ctx)


def held_transport(config: LLMConfig, ctx: RunContext) -> _Ready:
    """The run's holder of ``config``'s transport (made on first use): ``await
    holder.check(ctx)`` gives the transport, as :func:`transport_for` does."""
    holder: _Ready = ctx.shared(*_kind(config, ctx))
    return holder
