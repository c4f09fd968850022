"""The ``litellm`` transport: ``litellm.acompletion``, the route to every provider litellm knows.

litellm is imported on first use, in a worker thread (it takes seconds), with
``LITELLM_LOCAL_MODEL_COST_MAP=True`` so that it never fetches its price table, and its own
retries are switched off: the scheduler owns retries. Before the first request,
:meth:`LitellmTransport.check_ready` asks litellm whether it knows the model's provider and
whether the provider's key is set, so a run that cannot succeed stops before sending anything.
"""

from __future__ import annotations

import hashlib
import importlib
import os
from collections.abc import Mapping
from typing import Any

import orjson

from ctxeval.plugin import (
    Completion,
    MalformedOutputError,
    MissingCredentialsError,
    MissingExtraError,
    ModelNotFoundError,
    RunContext,
    ServiceError,
)

from .config import LLMConfig
from .errors import as_call_error
from .parsing import redact
from .slots import is_local

__all__ = ["LLM_EXTRA", "LitellmTransport", "import_litellm"]

LLM_EXTRA = "pip install 'ctxeval[llm]'"


def import_litellm() -> Any:
    """litellm, imported offline and quiet; :class:`ctxeval.MissingExtraError` when missing."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        module: Any = importlib.import_module("litellm")
    except ImportError as exc:
        raise MissingExtraError(
            f"this model goes through litellm, which is not installed ({exc})", install=LLM_EXTRA
        ) from None
    module.suppress_debug_info = True
    module.telemetry = False
    return module


class LitellmTransport:
    """``litellm.acompletion`` for ``config``; litellm is imported once, in a worker thread."""

    name = "litellm"

    def __init__(self, config: LLMConfig) -> None:
        self.config = config
        self._litellm: Any = None

    @staticmethod
    def shared_key(config: LLMConfig) -> str:
        headers = orjson.dumps(sorted(config.extra_headers.items()))
        return f"ctxeval_llm.litellm:{config.resource}:{hashlib.sha256(headers).hexdigest()[:12]}"

    async def ready(self, ctx: RunContext) -> None:
        """Import litellm and check the model's provider and key (before any request)."""
        if self._litellm is None:
            self._litellm = await ctx.run_cpu(import_litellm)
        self.check_ready(self._litellm)

    def check_ready(self, litellm: Any) -> None:
        """Raise :class:`ctxeval.ModelNotFoundError` when litellm knows no provider for the
        model, :class:`ctxeval.MissingCredentialsError` when the provider's key is not set."""
        config = self.config
        try:
            litellm.get_llm_provider(config.model, api_base=config.api_base)
        except Exception as exc:
            raise ModelNotFoundError(
                f"litellm does not know which provider serves model {config.model!r}: name it "
                "as 'provider/model' (e.g. 'anthropic/claude-3-5-haiku-latest', "
                "'ollama/llama3.1', 'openai/<name>' with api_base for an OpenAI-compatible "
                f"server); see https://docs.litellm.ai/docs/providers ({type(exc).__name__})"
            ) from None
        if config.api_key or (config.api_base and is_local(config.api_base)):
            return  # (a server on this machine or the local network needs no key)
        try:
            found = litellm.validate_environment(model=config.model, api_base=config.api_base)
        except Exception:  # litellm could not tell: let the first request say
            return
        missing = [str(k) for k in (found or {}).get("missing_keys") or []]
        if missing:
            raise MissingCredentialsError(
                f"model {config.model!r} needs {', '.join(missing)}, which "
                f"{'is' if len(missing) == 1 else 'are'} not set: export "
                + " and ".join(f"{k}=..." for k in missing)
                + " (or pass LLMConfig(api_key=...))"
            )

    async def complete(self, ctx: RunContext, request: Mapping[str, Any]) -> Completion:
        if self._litellm is None:
            await self.ready(ctx)
        config = self.config
        arguments = dict(request)
        arguments["model"] = config.model
        if config.api_base:
            arguments["api_base"] = config.api_base
        if config.api_key:
            arguments["api_key"] = config.api_key
        elif config.api_base and is_local(config.api_base):
            arguments["api_key"] = "none"  # litellm's openai route wants one; a local server not
        if config.extra_headers:
            arguments["extra_headers"] = {
                **(arguments.get("extra_headers") or {}),
                **config.extra_headers,
            }
        arguments.setdefault("max_retries", 0)
        arguments.setdefault("num_retries", 0)
        try:
            response = await self._litellm.acompletion(**arguments)
        except Exception as exc:
            raise as_call_error(exc, config) from None
        try:
            content = response.choices[0].message.content
            usage = getattr(response, "usage", None)
        except (AttributeError, IndexError) as exc:
            raise ServiceError(
                redact(f"litellm returned no completion: {exc}", config.api_key)
            ) from None
        if not isinstance(content, str):
            raise MalformedOutputError("the model's answer has no text content")
        finish = getattr(response.choices[0], "finish_reason", None)
        served = getattr(response, "model", None)
        return Completion(
            content,
            int(getattr(usage, "prompt_tokens", 0) or 0),
            int(getattr(usage, "completion_tokens", 0) or 0),
            finish if isinstance(finish, str) else None,
            served if isinstance(served, str) else None,
        )

    async def aclose(self) -> None:
        """Nothing to close: litellm keeps its own clients."""
