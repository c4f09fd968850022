"""The ``litellm`` transport: ``litellm.acompletion``, the route to every provider litellm knows.

litellm is imported on first use, in a worker thread (it takes seconds), with
``LITELLM_LOCAL_MODEL_COST_MAP=True`` so that it never fetches its price table, and its own
retries are switched off: the scheduler owns retries. Before the first request,
:meth:`LitellmTransport.check_ready` asks litellm whether it knows the model's provider and
whether the provider's key is set, so a run that cannot succeed stops before sending anything.

Answers are cut at ``max_response_bytes`` here too: litellm is handed, with each request, a
client of ctxeval's whose reading is bounded (:mod:`ctxeval_llm._http.litellm_client`; litellm's own
clients read an answer whole, a gzip bomb inflated included): an ``openai.AsyncOpenAI`` on the
``openai/`` route, litellm's ``AsyncHTTPHandler`` on the routes of :data:`HTTP_HANDLER_ROUTES`.
An answer past the bound fails its row at once (:class:`ResponseTooLargeError`, not retried:
the next attempt would be as large), and the other rows go on. A provider litellm serves some
other way (Azure's SDK client, a few older providers) is not bounded: a warning says so once
per run.
"""

from __future__ import annotations

import hashlib
import importlib
import logging
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
from ctxeval_llm._http.errors import ResponseTooLargeError, as_call_error
from ctxeval_llm._local.slots import is_local
from ctxeval_llm._parsing import redact
from ctxeval_llm.config import LLMConfig

__all__ = [
    "HTTP_HANDLER_ROUTES",
    "LLM_EXTRA",
    "LitellmTransport",
    "ResponseTooLargeError",
    "import_litellm",
]

logger = logging.getLogger(__name__)

LLM_EXTRA = "pip install 'ctxeval[llm]'"

HTTP_HANDLER_ROUTES = frozenset(
    {
        "anthropic", "azure_ai", "bedrock", "databricks", "deepseek", "fireworks_ai", "gemini",
        "groq", "hosted_vllm", "huggingface", "mistral", "ollama", "ollama_chat", "openrouter",
        "together_ai", "vertex_ai", "vertex_ai_beta", "watsonx", "xai",
    }
)  # fmt: skip
"""The providers litellm serves through its ``AsyncHTTPHandler`` (an ``client=`` of that type
is used as it is), which therefore get the bounded client."""

_BASE_HANDLER_VARIABLE = "EXPERIMENTAL_OPENAI_BASE_LLM_HTTP_HANDLER"
"""Set, litellm sends the ``openai/`` route through ``AsyncHTTPHandler`` too."""


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
        self._provider: str | None = None
        self._http: Any = None  # the bounded httpx client, made at the first request
        self._client: Any = None  # what litellm is given as ``client=``; None: its own
        self._warned = False

    @staticmethod
    def shared_key(config: LLMConfig) -> str:
        headers = orjson.dumps(sorted(config.extra_headers.items()))
        digest = hashlib.sha256(headers).hexdigest()[:12]
        # (the bound is the client's: two bounds, two clients)
        return f"ctxeval_llm.litellm:{config.resource}:{digest}:{config.max_response_bytes}"

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
            found = litellm.get_llm_provider(config.model, api_base=config.api_base)
            self._provider = str(found[1]) if found and found[1] else None
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
        from ctxeval_llm._http.litellm_client import (  # (httpx: at the first request)
            CURRENT_CALL,
            CallRecord,
        )

        client = self._bounded()
        if client is not None:
            arguments.setdefault("client", client)
        record = CallRecord()
        token = CURRENT_CALL.set(record)
        try:
            response = await self._litellm.acompletion(**arguments)
        except Exception as exc:
            refused = record.refused or _refusal_in(exc)
            if refused is not None:
                raise self._too_large(refused) from None
            raise as_call_error(exc, config) from None
        finally:
            CURRENT_CALL.reset(token)
        if record.requests == 0:  # litellm did not use the client it was given
            self._warn_unbounded()
        try:
            content = response.choices[0].message.content
            usage = getattr(response, "usage", None)
        except (AttributeError, IndexError) as exc:
            raise ServiceError(
                redact(f"litellm returned no completion: {exc}", *config.secrets())
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

    def _bounded(self) -> Any:
        """The client litellm is given for this configuration's requests (made once): one
        whose answers are cut at ``max_response_bytes``; None where litellm would not use it."""
        if self._http is not None:
            return self._client
        from ctxeval_llm._http.litellm_client import bounded_client

        config = self.config
        provider = self._provider
        http = self._http = bounded_client(config.max_response_bytes)
        if provider == "openai" and not _truthy(os.environ.get(_BASE_HANDLER_VARIABLE)):
            self._client = self._openai_client(http)
        elif provider in HTTP_HANDLER_ROUTES or provider == "openai":
            from litellm.llms.custom_httpx.http_handler import AsyncHTTPHandler

            handler = AsyncHTTPHandler(transport=http._transport, follow_redirects=False)
            handler.client = http  # (its setter: litellm will not close or replace it)
            self._client = handler
        else:
            self._warn_unbounded()
        return self._client

    def _warn_unbounded(self) -> None:
        """Say once that this configuration's answers are not cut at the bound."""
        if self._warned:
            return
        self._warned = True
        config = self.config
        logger.warning(
            "litellm sends %s's requests with its own HTTP client: their answers are not cut "
            "at max_response_bytes (%d bytes)%s",
            self._provider or config.model,
            config.max_response_bytes,
            "; an OpenAI-compatible server is bounded with transport='openai'"
            if config.api_base
            else "",
        )

    def _openai_client(self, http: Any) -> Any:
        """An ``openai.AsyncOpenAI`` on ``http``, for the endpoint and key litellm would use
        itself on the ``openai/`` route; None when no key is known (litellm then says so)."""
        import openai

        litellm = self._litellm
        config = self.config
        key = (
            config.api_key
            or ("none" if config.api_base and is_local(config.api_base) else None)
            or getattr(litellm, "api_key", None)
            or getattr(litellm, "openai_key", None)
            or os.environ.get("OPENAI_API_KEY")
        )
        if not key:
            return None
        base = (
            config.api_base
            or getattr(litellm, "api_base", None)
            or os.environ.get("OPENAI_BASE_URL")
            or os.environ.get("OPENAI_API_BASE")
            or "https://api.openai.com/v1"
        )
        return openai.AsyncOpenAI(api_key=key, base_url=base, http_client=http, max_retries=0)

    def _too_large(self, refused: Exception) -> ResponseTooLargeError:
        config = self.config
        return ResponseTooLargeError(redact(f"{config.model} at {refused}", *config.secrets()))

    async def aclose(self) -> None:
        """Close the bounded client (litellm keeps its own clients)."""
        http, self._http, self._client = self._http, None, None
        if http is not None:
            await http.aclose()


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in {"1", "true", "yes", "on"}


def _refusal_in(exc: BaseException) -> Exception | None:
    """The bounded client's refusal somewhere under ``exc`` (litellm and the openai SDK wrap
    it), or None."""
    from ctxeval_llm._http.litellm_client import ResponseTooLarge, UnreadableEncoding

    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ResponseTooLarge | UnreadableEncoding):
            return current
        current = current.__cause__ or current.__context__
    return None
