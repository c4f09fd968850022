"""Ask the LLM one prompt: cache, scheduler, transport, parsing, validation, usage and cost."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ctxeval.plugin import RunContext, Usage, cache_key

from .config import LLMConfig, resolve_llm
from .parsing import parse_json
from .pricing import cost_usd
from .prompts import Prompt
from .transport import transport_for

__all__ = ["ask", "client_for"]


class LLMClient:
    """One LLM configuration with its transport."""

    def __init__(self, config: LLMConfig) -> None:
        self.config = config
        self.transport = transport_for(config)

    def request(self, prompt: Prompt, variables: Mapping[str, Any]) -> dict[str, Any]:
        """The chat-completion request body for ``prompt`` filled with ``variables``."""
        config = self.config
        body: dict[str, Any] = {
            "model": config.wire_model,
            "messages": prompt.messages(variables, schema_in_prompt=not config.json_schema),
            "temperature": config.temperature,
            "max_tokens": config.max_tokens,
        }
        if config.json_schema:
            body["response_format"] = prompt.response_format()
        body.update(config.extra)
        return body

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
        request = self.request(prompt, variables)
        cache = ctx.cache
        key = None
        if cache is not None:
            key = cache_key(
                model=config.model,
                endpoint=config.endpoint,
                messages=request["messages"],
                params={k: v for k, v in request.items() if k not in ("messages", "model")},
                schema=prompt.schema,
                prompt=f"{prompt.name}@{prompt.version}",
            )
            hit = cache.get(key)
            if hit is not None:
                ctx.add_usage(Usage(cache_hits=1))
                return prompt.check(hit, expect)
        estimate = sum(len(m["content"]) for m in request["messages"]) / 4 + config.max_tokens

        async def attempt() -> Any:
            completion = await self.transport.complete(ctx, request)
            ctx.add_usage(
                Usage(
                    prompt_tokens=completion.prompt_tokens,
                    completion_tokens=completion.completion_tokens,
                    cost_usd=cost_usd(
                        config.model, completion.prompt_tokens, completion.completion_tokens
                    ),
                )
            )
            raw = parse_json(completion.content)
            return raw, prompt.check(raw, expect)

        raw, answer = await ctx.call(
            attempt, resource=config.resource, tokens=estimate, timeout=config.timeout
        )
        if cache is not None and key is not None:
            cache.set(key, raw)  # the answer as the model gave it; checked again when read
        return answer


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
