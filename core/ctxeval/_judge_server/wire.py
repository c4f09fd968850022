"""The OpenAI chat-completion wire shapes the scripted judge answers with (and the project's
test double of an OpenAI-compatible server, ``tests/fakes``, too): one implementation."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

__all__ = ["completion_body", "count_tokens", "error_body", "models_body"]


def count_tokens(text: str) -> int:
    """A rough token count (four characters a token, at least one)."""
    return max(1, len(text) // 4)


def completion_body(request: Mapping[str, Any], content: str, *, number: int, model: str) -> bytes:
    """A ``chat.completion`` answering ``request`` with ``content``, with usage numbers
    (``number`` makes its id; ``model`` is named when the request names none)."""
    messages = request.get("messages")
    prompt = "".join(
        str(m.get("content", "")) for m in (messages if isinstance(messages, list) else [])
        if isinstance(m, Mapping)
    )  # fmt: skip
    prompt_tokens, completion_tokens = count_tokens(prompt), count_tokens(content)
    reply = {
        "id": f"chatcmpl-{number}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.get("model", model),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }
    return json.dumps(reply).encode()


def stream_body(request: Mapping[str, Any], content: str, *, number: int, model: str) -> bytes:
    """The answer of :func:`completion_body` as a stream of server-sent events, as OpenAI
    sends one: the text in one ``chat.completion.chunk``, then one with ``finish_reason``
    (and the usage, when ``stream_options.include_usage`` asks for it), then ``[DONE]``."""
    whole = json.loads(completion_body(request, content, number=number, model=model))
    head = {k: whole[k] for k in ("id", "created", "model")}
    chunks: list[dict[str, Any]] = [
        {
            **head,
            "object": "chat.completion.chunk",
            "choices": [
                {
                    "index": 0,
                    "delta": {"role": "assistant", "content": content},
                    "finish_reason": None,
                }
            ],
        },
        {
            **head,
            "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
        },
    ]
    options = request.get("stream_options")
    if isinstance(options, Mapping) and options.get("include_usage"):
        chunks.append(
            {**head, "object": "chat.completion.chunk", "choices": [], "usage": whole["usage"]}
        )
    events = [f"data: {json.dumps(chunk)}\n\n" for chunk in chunks] + ["data: [DONE]\n\n"]
    return "".join(events).encode()


def error_body(
    message: str, *, kind: str = "invalid_request_error", code: str | None = None
) -> bytes:
    """An OpenAI-shaped error: ``{"error": {"message", "type", "code"}}``."""
    return json.dumps({"error": {"message": message, "type": kind, "code": code}}).encode()


def models_body(models: list[str], *, owner: str) -> bytes:
    """The ``GET /v1/models`` list."""
    data = [{"id": m, "object": "model", "created": 0, "owned_by": owner} for m in models]
    return json.dumps({"object": "list", "data": data}).encode()
