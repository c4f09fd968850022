"""Sending one chat-completion request: through litellm, directly, or through your callable.

* :class:`DirectTransport`: a lean HTTP/1.1 POST (:mod:`ctxeval_llm.http`) to an
  OpenAI-compatible ``/chat/completions`` (OpenAI, vLLM, Ollama, llama.cpp server, TGI), with
  one keep-alive pool per run. It sends the same request body litellm sends for
  ``openai/<model>``.
* :class:`LitellmTransport`: ``litellm.acompletion``, the route to every other provider.
  litellm is imported on first use (off the event loop) with
  ``LITELLM_LOCAL_MODEL_COST_MAP=True``, and its own retries are switched off: the scheduler
  owns retries.
* :class:`CallableTransport`: a bring-your-own async callable.

Every failure becomes a :class:`ctxeval.CallError` subclass the scheduler can classify, with
any API key masked out of its message.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
from collections.abc import Mapping
from typing import Any

import attrs

from ctxeval.plugin import (
    AuthenticationError,
    BadRequestError,
    CallError,
    CallTimeoutError,
    MalformedOutputError,
    RateLimitError,
    RunContext,
    ServiceError,
    Usage,
    classify,
    retry_after_of,
    status_of,
)

from .config import LLMConfig
from .http import HTTPError, HTTPPool, Response
from .parsing import redact

__all__ = [
    "CallableTransport",
    "Completion",
    "DirectTransport",
    "LitellmTransport",
    "transport_for",
]


@attrs.frozen
class Completion:
    """The answer of one request."""

    content: str
    prompt_tokens: int = 0
    completion_tokens: int = 0


def as_call_error(exc: BaseException, config: LLMConfig) -> CallError:
    """``exc`` as the ctxeval call error of its kind, with secrets masked in the message."""
    if isinstance(exc, CallError):
        return exc
    message = redact(f"{type(exc).__name__}: {exc}", config.api_key, config.key_for_direct())
    status = status_of(exc)
    kind = classify(exc)
    if kind == "rate_limit":
        return RateLimitError(message, retry_after=retry_after_of(exc), status_code=status or 429)
    if kind == "malformed":
        return MalformedOutputError(message)
    if kind == "transient":
        if isinstance(exc, TimeoutError) or "Timeout" in type(exc).__name__:
            return CallTimeoutError(message)
        return ServiceError(message, status_code=status)
    if status in (401, 403) or "Authentication" in message or "PermissionDenied" in message:
        return AuthenticationError(
            message + " (check the API key: llm api_key= or the provider's environment variable)",
            status_code=status,
        )
    return BadRequestError(message, status_code=status)


class DirectTransport:
    """POST to ``{api_base}/chat/completions`` over a lean keep-alive HTTP/1.1 client."""

    def __init__(self, config: LLMConfig) -> None:
        self.config = config
        self.url = config.endpoint.rstrip("/") + "/chat/completions"
        headers = {}
        key = config.key_for_direct()
        if key:
            headers["Authorization"] = f"Bearer {key}"
        self._headers = headers

    def _pool(self, ctx: RunContext) -> HTTPPool:
        key = hashlib.sha256((self.config.key_for_direct() or "").encode()).hexdigest()[:12]
        return ctx.shared(
            f"ctxeval_llm.direct:{self.config.endpoint}:{key}",
            lambda: HTTPPool(self.config.endpoint, headers=self._headers),
        )

    async def complete(self, ctx: RunContext, request: Mapping[str, Any]) -> Completion:
        pool = self._pool(ctx)
        body = json.dumps(request, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        try:
            response = await pool.post("/chat/completions", body)
        except HTTPError as exc:
            if exc.sends > 1:  # sent again on another connection: each one counts
                ctx.add_usage(Usage(requests=exc.sends - 1))
            raise ServiceError(redact(f"{self.url}: {exc}", self._key)) from None
        if response.sends > 1:
            ctx.add_usage(Usage(requests=response.sends - 1))
        status = response.status
        if status != 200:
            raise self._http_error(status, response)
        try:
            reply = json.loads(response.body)
            content = reply["choices"][0]["message"]["content"]
            usage = reply.get("usage") or {}
        except (ValueError, KeyError, IndexError, TypeError):
            raise ServiceError(f"{self.url}: the reply is not a chat completion") from None
        if not isinstance(content, str):
            raise MalformedOutputError("the model's answer has no text content")
        return Completion(
            content,
            int(usage.get("prompt_tokens") or 0),
            int(usage.get("completion_tokens") or 0),
        )

    @property
    def _key(self) -> str | None:
        return self.config.key_for_direct()

    def _http_error(self, status: int, response: Response) -> CallError:
        text = response.body.decode("utf-8", "replace")
        try:
            detail = json.loads(text).get("error", {}).get("message") or text
        except (ValueError, AttributeError):
            detail = text
        message = redact(f"HTTP {status} from {self.url}: {str(detail)[:300]}", self._key)
        if status == 429:
            return RateLimitError(message, retry_after=retry_after_of(response))
        if status in (401, 403):
            return AuthenticationError(
                message + " (check the API key: llm api_key= or OPENAI_API_KEY)", status_code=status
            )
        if status == 408 or status >= 500:
            return ServiceError(message, status_code=status)
        return BadRequestError(message, status_code=status)


class LitellmTransport:
    """``litellm.acompletion``; litellm is imported once, in a worker thread."""

    def __init__(self, config: LLMConfig) -> None:
        self.config = config

    async def _litellm(self, ctx: RunContext) -> Any:
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        module: Any = await ctx.run_cpu(importlib.import_module, "litellm")
        module.suppress_debug_info = True
        module.telemetry = False
        return module

    async def complete(self, ctx: RunContext, request: Mapping[str, Any]) -> Completion:
        litellm = await self._litellm(ctx)
        config = self.config
        arguments = dict(request)
        arguments["model"] = config.model
        if config.api_base:
            arguments["api_base"] = config.api_base
        if config.api_key:
            arguments["api_key"] = config.api_key
        arguments.setdefault("max_retries", 0)
        arguments.setdefault("num_retries", 0)
        try:
            response = await litellm.acompletion(**arguments)
        except Exception as exc:
            raise as_call_error(exc, config) from None
        try:
            content = response.choices[0].message.content
            usage = getattr(response, "usage", None)
        except (AttributeError, IndexError) as exc:
            raise ServiceError(f"litellm returned no completion: {exc}") from None
        if not isinstance(content, str):
            raise MalformedOutputError("the model's answer has no text content")
        return Completion(
            content,
            int(getattr(usage, "prompt_tokens", 0) or 0),
            int(getattr(usage, "completion_tokens", 0) or 0),
        )


class CallableTransport:
    """A bring-your-own async callable: request dict in, text (or a dict) out."""

    def __init__(self, config: LLMConfig) -> None:
        assert config.completion is not None
        self.config = config
        self._func = config.completion

    async def complete(self, ctx: RunContext, request: Mapping[str, Any]) -> Completion:
        try:
            answer = await self._func(dict(request))
        except CallError:
            raise
        except Exception as exc:
            raise as_call_error(exc, self.config) from None
        if isinstance(answer, str):
            return Completion(answer)
        if isinstance(answer, Mapping) and isinstance(answer.get("content"), str):
            return Completion(
                answer["content"],
                int(answer.get("prompt_tokens") or 0),
                int(answer.get("completion_tokens") or 0),
            )
        raise MalformedOutputError(
            f"the completion callable returned {type(answer).__name__}; return the answer text "
            "or a dict with 'content'"
        )


def transport_for(config: LLMConfig) -> DirectTransport | LitellmTransport | CallableTransport:
    """The transport ``config`` asks for (see :meth:`LLMConfig.chosen_transport`)."""
    chosen = config.chosen_transport()
    if chosen == "callable":
        return CallableTransport(config)
    if chosen == "direct":
        return DirectTransport(config)
    return LitellmTransport(config)
