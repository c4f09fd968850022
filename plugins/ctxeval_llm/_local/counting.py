"""A local server's own count of a prompt's tokens, for a prompt the estimate says is too long.

Before a request is sent, its size is estimated (:mod:`ctxeval_llm._ask.window`: UTF-8 bytes / 3),
which is more than the tokens of English text for common tokenizers. A prompt near the edge of
the judge's window would therefore be refused although it fits. When the judge is a local
server with a tokenizer endpoint, such a prompt is counted by the server itself, and refused
only when the count says so:

* llama.cpp's ``llama-server``: ``POST /apply-template`` (the chat template, applied to the
  request's messages, as the server applies it to a chat request) and ``POST /tokenize`` of the
  prompt it gives (with the special tokens: exact); a server older than ``/apply-template``
  (January 2025) has its messages' text tokenized, plus :data:`TEMPLATE_TOKENS` a message;
* llama-cpp-python's server: ``POST /extras/tokenize/count`` of the messages' text, plus
  :data:`TEMPLATE_TOKENS` a message (it has no endpoint for its chat template). Its one model
  is behind one lock, and a request that waits for it interrupts a streamed answer in progress:
  the count is asked while the run holds the server's one slot (:mod:`ctxeval_llm._local.slots`);
* vLLM: ``POST /tokenize`` with the messages (``add_generation_prompt``): exact, its chat
  template applied.

Ollama has no such endpoint (and cuts a prompt longer than its ``num_ctx`` silently rather than
refusing it): the estimate stays the rule there, as for any other server. A count that fails
(an error, no answer within the request timeout) leaves the estimate's verdict. Counts are asked
only for prompts the estimate refuses, one request each (two for llama.cpp).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import anyio
import attrs

from ctxeval_llm._http.choice import LoopClient
from ctxeval_llm._parsing import whole_number

from .slots import ServerAPI, ServerSlots, as_is, server_urls

__all__ = ["COUNTING_SERVERS", "TEMPLATE_TOKENS", "Counted", "TokenCounter", "can_count"]

logger = logging.getLogger(__name__)

TEMPLATE_TOKENS = 8
"""Tokens a chat template adds around one message, where the server's count is of the text
alone: ChatML's, Llama 3's and Gemma's templates add about 5 (and the answer's opening a few
once), so 8 leaves room to spare."""

COUNTING_SERVERS = frozenset({"llama.cpp", "llama-cpp-python", "vllm"})
"""The servers (:attr:`ServerSlots.kind`) whose tokenizer ctxeval asks."""

_ANSWER_LIMIT = 64 * 1024 * 1024  # bytes: /tokenize lists every token (a long prompt's many)
_CONNECTIONS = 4  # counts in flight at once (only prompts near the window's edge are counted)


@attrs.frozen
class Counted:
    """A prompt's tokens as the server counted them, and how."""

    tokens: int
    """The prompt's tokens (with :data:`TEMPLATE_TOKENS` a message where the server counted
    the text alone)."""
    source: str
    """Where the count comes from, for messages: ``"counted by the server (POST /tokenize)"``."""


def can_count(slots: ServerSlots) -> bool:
    """Whether the server behind ``slots`` (found by its probe) has a tokenizer endpoint."""
    return slots.kind in COUNTING_SERVERS


class TokenCounter:
    """Asks one local server for counts: run-wide (``ctx.shared``), its connection pool made at
    the first count and closed with the run (``aclose``)."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self._pool = LoopClient(endpoint, max_connections=_CONNECTIONS, http2=False, say=as_is)

    async def count(
        self,
        slots: ServerSlots,
        request: Mapping[str, Any],
        headers: Mapping[str, str] | None,
        *,
        timeout: float | None,
    ) -> Counted | None:
        """The tokens of ``request``'s messages as the server behind ``slots`` counts them, or
        None (a server without a tokenizer endpoint, an error, no answer within ``timeout``
        seconds: the run's request timeout; None waits as long as a request would)."""
        if not can_count(slots):
            return None
        base, root = server_urls(self.endpoint)
        messages: Sequence[Mapping[str, Any]] = request.get("messages") or ()
        with anyio.move_on_after(timeout):
            client = self._pool.here() or await self._pool.get()
            api = ServerAPI(client, headers or {}, limit=_ANSWER_LIMIT)
            if slots.kind == "vllm":
                return await _vllm(api, root, request.get("model"), messages)
            if slots.kind == "llama.cpp":
                return await _llama_cpp(api, root, messages)
            return await _llama_cpp_python(api, root, messages)
        logger.info("%s did not count a prompt within %s s: the estimate decides", base, timeout)
        return None

    async def aclose(self) -> None:
        """Close the connection pool, if one was made."""
        await self._pool.aclose()


async def _vllm(
    api: ServerAPI, root: str, model: Any, messages: Sequence[Mapping[str, Any]]
) -> Counted | None:
    body: dict[str, Any] = {"messages": list(messages), "add_generation_prompt": True}
    if isinstance(model, str):
        body["model"] = model
    answer = await api.post(f"{root}/tokenize", body)
    count = whole_number(answer.get("count") if isinstance(answer, dict) else None, least=0)
    if count is None:
        return None
    return Counted(
        count, "counted by the server's tokenizer, chat template applied (POST /tokenize)"
    )


async def _llama_cpp(
    api: ServerAPI, root: str, messages: Sequence[Mapping[str, Any]]
) -> Counted | None:
    templated = await api.post(f"{root}/apply-template", {"messages": list(messages)})
    prompt = templated.get("prompt") if isinstance(templated, dict) else None
    if isinstance(prompt, str):
        answer = await api.post(
            f"{root}/tokenize", {"content": prompt, "add_special": True, "parse_special": True}
        )
        count = _listed(answer)
        if count is not None:
            return Counted(
                count,
                "counted by the server's tokenizer, chat template applied "
                "(POST /apply-template, /tokenize)",
            )
        return None
    text = _text(messages)
    answer = await api.post(f"{root}/tokenize", {"content": text, "add_special": True})
    count = _listed(answer)
    if count is None:
        return None
    return Counted(
        count + TEMPLATE_TOKENS * len(messages),
        f"counted by the server's tokenizer (POST /tokenize), plus {TEMPLATE_TOKENS} a message "
        "for the chat template",
    )


async def _llama_cpp_python(
    api: ServerAPI, root: str, messages: Sequence[Mapping[str, Any]]
) -> Counted | None:
    answer = await api.post(f"{root}/extras/tokenize/count", {"input": _text(messages)})
    count = whole_number(answer.get("count") if isinstance(answer, dict) else None, least=0)
    if count is None:
        return None
    return Counted(
        count + TEMPLATE_TOKENS * len(messages),
        "counted by the server's tokenizer (POST /extras/tokenize/count), plus "
        f"{TEMPLATE_TOKENS} a message for the chat template",
    )


def _text(messages: Sequence[Mapping[str, Any]]) -> str:
    return "\n".join(str(m.get("content") or "") for m in messages)


def _listed(answer: Any) -> int | None:
    tokens = answer.get("tokens") if isinstance(answer, dict) else None
    return len(tokens) if isinstance(tokens, list) else None
