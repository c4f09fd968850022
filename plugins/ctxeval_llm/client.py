"""Ask the LLM one prompt: cache, scheduler, transport, parsing, validation, usage and cost.

Structured output: the answer's JSON schema goes as ``response_format`` (``json_schema``).
A server that rejects it (400/422 naming ``response_format`` or ``json_schema``, or a 500 naming
``response_format``, as some llama.cpp builds answer) gets JSON mode
with the schema in the prompt instead, and one that rejects JSON mode too gets the schema in
the prompt only; each step is taken once per run and endpoint, logged once, and the answer is
validated strictly against the schema whatever the mode.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Literal

import attrs

from ctxeval.plugin import (
    BadRequestError,
    CallError,
    MalformedOutputError,
    RepeatedJudgement,
    RunContext,
    ServiceError,
    UnusableLLMError,
    Usage,
    cache_key,
)

from .batch import Batcher
from .config import LLMConfig, resolve_llm
from .openai_http import OpenAITransport
from .parsing import parse_json, redact
from .prompts import Prompt
from .transport import transport_for

__all__ = ["LLMClient", "OutputMode", "ask", "client_for"]

logger = logging.getLogger(__name__)

Mode = Literal["json_schema", "json_object", "prompt"]
_NEXT: dict[Mode, Mode] = {"json_schema": "json_object", "json_object": "prompt"}
_REJECTION_WORDS = ("response_format", "json_schema", "json_object", "structured output")


class OutputMode:
    """How a run asks one endpoint for structured output (shared by every request to it)."""

    def __init__(self, config: LLMConfig) -> None:
        self.mode: Mode = "json_schema" if config.json_schema else "prompt"

    def step_down(self, exc: CallError, resource: str) -> bool:
        """After ``exc``: whether it rejected the output mode, which is then stepped down."""
        text = str(exc).lower()
        words = _REJECTION_WORDS if isinstance(exc, BadRequestError) else ("response_format",)
        if self.mode not in _NEXT or not any(word in text for word in words):
            return False  # (some llama.cpp builds refuse json_schema with a 500)
        old, self.mode = self.mode, _NEXT[self.mode]
        logger.warning(
            "%s rejected response_format %s (%s); using %s for the rest of the run",
            resource, old, exc, "JSON mode with the schema in the prompt"
            if self.mode == "json_object" else "the schema in the prompt only",
        )  # fmt: skip
        return True


def request_body(
    config: LLMConfig, prompt: Prompt, variables: Mapping[str, Any], mode: Mode
) -> dict[str, Any]:
    """The chat-completion request body for ``prompt`` filled with ``variables``."""
    body: dict[str, Any] = {
        "model": config.wire_model,
        "messages": prompt.messages(variables, schema_in_prompt=mode != "json_schema"),
        "temperature": config.temperature,
        "max_tokens": config.max_tokens,
    }
    if mode == "json_schema":
        body["response_format"] = prompt.response_format()
    elif mode == "json_object":
        body["response_format"] = {"type": "json_object"}
    body.update(config.extra)
    return body


class LLMClient:
    """One LLM configuration, asked through the run's transport for it."""

    def __init__(self, config: LLMConfig) -> None:
        self.config = config

    def request(self, prompt: Prompt, variables: Mapping[str, Any]) -> dict[str, Any]:
        """The request body as first sent (the configured output mode)."""
        return request_body(self.config, prompt, variables, OutputMode(self.config).mode)

    async def ask(
        self,
        ctx: RunContext,
        prompt: Prompt,
        variables: Mapping[str, Any],
        *,
        expect: int | None = None,
    ) -> Any:
        """The checked answer to ``prompt`` (from the cache when it has one).

        ``expect`` is the number of items the answer must list, where the prompt asks for one
        per item. A malformed answer raises :class:`ctxeval.MalformedOutputError`, which the
        scheduler retries a few times.
        """
        config = self.config
        # a panel's repeated judgement (ctxeval.plugin.JudgeContext): its own temperature and
        # its own cache entry (and, in a batch, its own line)
        repeat: int = 0
        temperature: float | None = None
        if isinstance(ctx, RepeatedJudgement):
            repeat, temperature = ctx.repeat, ctx.temperature
        if temperature is not None and temperature != config.temperature:
            config = attrs.evolve(config, temperature=temperature)
        canonical = request_body(config, prompt, variables, OutputMode(config).mode)
        cache = ctx.cache
        key = None
        if cache is not None:
            parts: dict[str, Any] = {
                "model": config.model,
                "endpoint": config.endpoint,
                "messages": canonical["messages"],
                "params": {k: v for k, v in canonical.items() if k not in ("messages", "model")},
                "schema": prompt.schema,
                "prompt": f"{prompt.name}@{prompt.version}",
            }
            if repeat:
                parts["repeat"] = repeat
            key = cache_key(**parts)
            hit = cache.get(key)
            if hit is not None:
                ctx.add_usage(Usage(cache_hits=1))
                return prompt.check(hit, expect)
        transport = await transport_for(config, ctx)
        if config.batch and isinstance(transport, OpenAITransport):
            line = {**canonical, "seed": repeat} if repeat else canonical
            answered = await self._from_batch(ctx, transport, prompt, line, expect)
            if answered is not None:
                raw, answer = answered
                if cache is not None and key is not None:
                    cache.set(key, raw)
                return answer
        output = ctx.shared(
            f"ctxeval_llm.output_mode:{config.resource}", lambda: OutputMode(config)
        )
        estimate = sum(len(m["content"]) for m in canonical["messages"]) / 4 + config.max_tokens

        async def attempt() -> Any:
            while True:
                request = request_body(config, prompt, variables, output.mode)
                try:
                    completion = await transport.complete(ctx, request)
                except (BadRequestError, ServiceError) as exc:
                    if output.step_down(exc, config.resource):
                        ctx.add_usage(Usage(requests=1))  # the refused request was sent too
                        continue
                    raise
                break
            ctx.add_usage(
                Usage(
                    prompt_tokens=completion.prompt_tokens,
                    completion_tokens=completion.completion_tokens,
                    cost_usd=_cost(config, completion.prompt_tokens, completion.completion_tokens),
                )
            )
            try:
                raw = parse_json(completion.content)
                return raw, prompt.check(raw, expect)
            except MalformedOutputError as exc:  # it may quote the answer: no secret in it
                raise MalformedOutputError(
                    redact(str(exc), config.api_key, config.openai_key())
                ) from None

        raw, answer = await ctx.call(
            attempt, resource=config.resource, tokens=estimate, timeout=config.timeout
        )
        if cache is not None and key is not None:
            cache.set(key, raw)  # the answer as the model gave it; checked again when read
        return answer

    async def _from_batch(
        self,
        ctx: RunContext,
        transport: OpenAITransport,
        prompt: Prompt,
        request: Mapping[str, Any],
        expect: int | None,
    ) -> tuple[Any, Any] | None:
        """The raw and checked answer from the run's batches, or None when the batch could
        not give one (the request is then sent the normal way)."""
        config = self.config
        batcher = ctx.shared(
            f"ctxeval_llm.batch:{config.resource}",
            lambda: Batcher(config, transport, ctx.run_folder),
        )
        try:
            completion = await batcher.complete(ctx, request)
            raw = parse_json(completion.content)
            answer = prompt.check(raw, expect)
        except UnusableLLMError:
            raise
        except CallError as exc:
            logger.debug("%s; sending it the normal way", exc)
            return None
        price = _cost(config, completion.prompt_tokens, completion.completion_tokens)
        ctx.add_usage(
            Usage(
                requests=1,
                prompt_tokens=completion.prompt_tokens,
                completion_tokens=completion.completion_tokens,
                cost_usd=None if price is None else price * BATCH_PRICE,
            )
        )
        return raw, answer


def _cost(config: LLMConfig, prompt_tokens: int, completion_tokens: int) -> float | None:
    """The price of one request: the user's price, else the provider's (None: unknown)."""
    price = config.price()
    return None if price is None else price.cost(prompt_tokens, completion_tokens)


BATCH_PRICE = 0.5
"""The share of the normal price a batch request costs (OpenAI's Batch API: half)."""


def client_for(llm: Any, ctx: RunContext) -> LLMClient:
    """The client for a plugin's ``llm`` option, or else the run's ``llm=``."""
    return LLMClient(resolve_llm(llm if llm is not None else ctx.llm))


async def ask(
    ctx: RunContext,
    llm: Any,
    prompt: Prompt,
    variables: Mapping[str, Any],
    *,
    expect: int | None = None,
) -> Any:
    """Shortcut: ``client_for(llm, ctx).ask(ctx, prompt, variables, expect=expect)``."""
    return await client_for(llm, ctx).ask(ctx, prompt, variables, expect=expect)
