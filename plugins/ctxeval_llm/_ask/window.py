"""The judge's context window: a prompt that cannot fit is an error row that says so.

Before a request is sent, its size is estimated and compared with the judge's context window,
leaving room for the answer (``max_tokens``). The window comes from:

1. the configuration: ``LLMConfig(context_window=N)`` (``--context-window N``, or
   ``context_window`` in a run file's ``[llm]``);
2. the provider's known window: ``max_input_tokens`` in litellm's bundled model table (read
   offline, without importing litellm), for a model reached through litellm or at OpenAI's own
   endpoint with the ``auto`` provider;
3. a local server's own, found with its slots (:mod:`ctxeval_llm._local.slots`): llama.cpp's
   ``n_ctx`` (``GET /props`` or ``GET /slots``), vLLM's ``max_model_len``, Ollama's
   ``context_length`` of the loaded model; it is checked once the server has been asked (at
   the first request not answered from the cache), and before the provider's table (the
   server's setting, not the model's nominal window).

Otherwise the window is unknown and nothing is checked before sending; a server that then
refuses the prompt as too long ("maximum context length", llama.cpp's "exceeds the available
context size", llama-cpp-python's "exceed context window", litellm's
``ContextWindowExceededError``) gets the same clear error, never retried
(:func:`raise_if_overflow`).

Tokens are not counted with the judge's tokenizer (none is downloaded at run time): the
estimate is the prompt's UTF-8 bytes / 3, plus a few tokens per message, which is more than
the tokens of English text for common tokenizers (about 4 characters a token). A prompt near
the edge would therefore be refused although it fits. So a prompt the estimate refuses is
counted by the judge's own tokenizer when the judge is a local server that has one (llama.cpp,
llama-cpp-python, vLLM: :mod:`ctxeval_llm._local.counting`), and refused only if that count says so;
elsewhere the estimate decides, and the message says it is an estimate.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ctxeval.plugin import BadRequestError, CallError, RunContext
from ctxeval_llm._ask.prompt import Prompt
from ctxeval_llm._parsing import whole_number
from ctxeval_llm.config import LLMConfig

if TYPE_CHECKING:
    from ctxeval_llm._local.counting import Counted
    from ctxeval_llm._local.slots import ServerSlots

__all__ = [
    "BYTES_PER_TOKEN",
    "ContextWindowError",
    "check_fits",
    "check_prompt",
    "estimate_fits",
    "estimate_tokens",
    "known_window",
    "raise_if_overflow",
    "served_window",
]

BYTES_PER_TOKEN = 3
"""The estimate: one token per 3 bytes of UTF-8 (a conservative bound for prose)."""
TOKENS_PER_MESSAGE = 4
"""The tokens a chat template adds around each message (role and separators)."""

_SERVER_SAID = 300
"""The characters of a server's refusal quoted in the message."""


class ContextWindowError(BadRequestError):
    """A prompt longer than the judge's context window (estimated before sending, or as the
    server said): a bad request, never retried; its row is an ``error`` that says so."""


def estimate_tokens(messages: Sequence[Mapping[str, Any]], schema: Any = None) -> int:
    """The estimated prompt tokens of ``messages`` (and of ``schema``, sent alongside as
    ``response_format``; given as an object or as its JSON text): UTF-8 bytes /
    :data:`BYTES_PER_TOKEN`, rounded up, plus :data:`TOKENS_PER_MESSAGE` per message."""
    size = 0
    for message in messages:
        content = str(message.get("content") or "")
        size += len(content) if content.isascii() else len(content.encode("utf-8"))
    if schema is not None:
        text = schema if isinstance(schema, str) else json.dumps(schema, sort_keys=True)
        size += len(text) if text.isascii() else len(text.encode("utf-8"))
    return -(-size // BYTES_PER_TOKEN) + TOKENS_PER_MESSAGE * len(messages)


def known_window(config: LLMConfig) -> tuple[int, str] | None:
    """The window known without asking a server, and where it comes from: the configured
    ``context_window``, else ``max_input_tokens`` in litellm's model table (for models reached
    through litellm, or OpenAI's own endpoint, priced by the ``auto`` provider)."""
    if config.context_window is not None:
        return config.context_window, "context_window, as configured"
    if not _provider_table_applies(config):
        return None
    from ctxeval_llm._pricing import table_entry

    for name in (config.model, config.model.split("/", 1)[-1]):
        entry = table_entry(name)
        tokens = whole_number(entry.get("max_input_tokens") if isinstance(entry, dict) else None)
        if tokens is not None:
            return tokens, f"max_input_tokens of {name!r} in litellm's model table"
    return None


def _provider_table_applies(config: LLMConfig) -> bool:
    from ctxeval_llm.provider import AutoProvider

    if config.provider is not None and not isinstance(config.provider, AutoProvider):
        return False  # another provider (a gateway): litellm's table may not be its models'
    chosen = config.chosen_transport()
    return chosen == "litellm" or (chosen == "openai" and config.is_openai_default_endpoint)


_SERVER_SOURCES = {
    "llama.cpp": "n_ctx of the server's /props or /slots",
    "vllm": "max_model_len of the server's /v1/models",
    "ollama": "context_length of the loaded model at the server's /api/ps",
}


def served_window(slots: ServerSlots) -> tuple[int, str] | None:
    """A local server's own window and where it was found, from its
    :class:`~ctxeval_llm._local.slots.ServerSlots` (``context_window``: llama.cpp's ``n_ctx``,
    vLLM's ``max_model_len``, Ollama's ``context_length``), or None when it did not say."""
    size = whole_number(slots.context_window)
    if size is None:
        return None
    kind = slots.kind
    source = _SERVER_SOURCES.get(kind) if isinstance(kind, str) else None
    return size, source or "as the server said"


def check_prompt(
    ctx: RunContext,
    config: LLMConfig,
    prompt: Prompt,
    request: Mapping[str, Any],
    served: tuple[int, str] | None = None,
) -> None:
    """Raise :class:`ContextWindowError` when ``request`` (``prompt``'s body) and its answer
    cannot fit in the judge's window: the configured one, else ``served`` (a local server's
    own, :func:`served_window`), else the provider's table (:func:`known_window`). Nothing is
    checked when no window is known."""
    window = served if served is not None and config.context_window is None else None
    if window is None:
        window = known_window(config)
    if window is not None:
        check_fits(ctx, config, prompt, request, window)


def estimate_fits(
    config: LLMConfig, prompt: Prompt, request: Mapping[str, Any], window: tuple[int, str]
) -> bool:
    """Whether ``request`` (``prompt``'s body) and its answer fit in ``window`` by the
    estimate (:func:`estimate_tokens`, which errs on the long side)."""
    tokens = estimate_tokens(request.get("messages") or (), prompt.schema_json)
    return tokens + (request.get("max_tokens") or config.max_tokens) <= window[0]


def check_fits(
    ctx: RunContext,
    config: LLMConfig,
    prompt: Prompt,
    request: Mapping[str, Any],
    window: tuple[int, str],
    counted: Counted | None = None,
) -> None:
    """:func:`check_prompt` against ``window`` (its size in tokens, and where it comes from);
    by the server's own count of the prompt when given one
    (:meth:`ctxeval_llm._local.counting.TokenCounter.count`), else by the estimate."""
    size, source = window
    if counted is None:
        tokens = estimate_tokens(request.get("messages") or (), prompt.schema_json)
        how = f"~{tokens:,} tokens (an estimate: UTF-8 bytes / {BYTES_PER_TOKEN})"
    else:
        tokens = counted.tokens
        how = f"{tokens:,} tokens ({counted.source})"
    budget = request.get("max_tokens") or config.max_tokens
    if tokens + budget <= size:
        return
    raise ContextWindowError(
        f"{_where(ctx)}the {prompt.name!r} prompt (v{prompt.version}) is {how}, and with up "
        f"to {budget:,} for the answer (max_tokens) it exceeds the judge's context window of "
        f"{size:,} tokens ({source}); it was not sent. "
        f"{_advice(prompt, configured=config.context_window)}"
    )


_OVERFLOW = re.compile(
    r"context.length|context.window|context.size|maximum context|"
    r"exceed_context_size|context_length_exceeded|ContextWindowExceeded|"
    r"prompt is too long|input is too long|too many tokens",
    re.IGNORECASE,
)
_WINDOW_SAID = (
    re.compile(r"maximum context length is (\d[\d,]*)", re.IGNORECASE),  # OpenAI, vLLM
    re.compile(r"context (?:window|size) of (\d[\d,]*)", re.IGNORECASE),  # llama-cpp-python
    re.compile(r"available context size \((\d[\d,]*) tokens\)", re.IGNORECASE),  # llama.cpp
    re.compile(r"\bn_ctx\D{0,4}(\d[\d,]*)", re.IGNORECASE),
)


def raise_if_overflow(
    exc: CallError,
    ctx: RunContext,
    config: LLMConfig,
    prompt: Prompt,
    request: Mapping[str, Any],
) -> None:
    """Raise :class:`ContextWindowError` when ``exc`` (a server's refusal of ``request``) says
    the prompt is longer than the judge's context window (a 400, or a 500 from some local
    servers, which would otherwise be retried); otherwise return."""
    if isinstance(exc, ContextWindowError):
        raise exc
    said = str(exc)
    if exc.status_code not in (None, 400, 413, 422, 500) or not _OVERFLOW.search(said):
        return
    window = next((m.group(1) for p in _WINDOW_SAID if (m := p.search(said))), None)
    size = f"{window} tokens, as the server said; " if window else ""
    tokens = estimate_tokens(request.get("messages") or (), prompt.schema_json)
    budget = request.get("max_tokens") or config.max_tokens
    raise ContextWindowError(
        f"{_where(ctx)}the judge refused the {prompt.name!r} prompt (v{prompt.version}) as "
        f"longer than its context window ({size}the prompt is ~{tokens:,} tokens, an estimate: "
        f"UTF-8 bytes / {BYTES_PER_TOKEN}, plus up to {budget:,} for the answer, max_tokens); "
        f"not retried. The server said: {said[:_SERVER_SAID]}. "
        f"{_advice(prompt, configured=config.context_window)} With the window given, such "
        "prompts are refused before they are sent."
    ) from None


def _where(ctx: RunContext) -> str:
    sample = ctx.sample
    sample_id = sample.id if sample is not None else None
    return f"sample {sample_id!r}: " if sample_id is not None else ""


def _advice(prompt: Prompt, *, configured: int | None) -> str:
    steps = ["use shorter chunks", "a judge with a larger context window"]
    if prompt.name.endswith("_batch"):
        steps.append(
            "turn the batch mode off (batch=false: context_relevance and context precision "
            "then send one chunk per request)"
        )
    if configured is not None:
        steps.append("a larger --context-window if the judge's window is larger")
    else:
        steps.append("--context-window N (LLMConfig(context_window=N)) if you know the judge's "
                     "window is larger")  # fmt: skip
    return "What to do: " + ", or ".join(steps) + "."
