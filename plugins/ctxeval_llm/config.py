"""How to reach an LLM: :class:`LLMConfig`, built from whatever ``llm=`` was given."""

from __future__ import annotations

import os
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal
from urllib.parse import unquote

import attrs

from ctxeval.plugin import ChatTransport, ConfigError, Price, PricedLLMProvider, validators

from ._pricing import price_of

__all__ = ["LLMConfig", "public_endpoint", "resolve_llm", "userinfo_secrets"]

TransportName = Literal["auto", "openai", "litellm"]
_TRANSPORT_NAMES = ("auto", "openai", "litellm")
DEFAULT_MAX_RESPONSE_BYTES = 8 * 1024 * 1024

_OPENAI_NATIVE = ("gpt-", "o1", "o3", "o4", "chatgpt-")
OPENAI_BASE = "https://api.openai.com/v1"


def _userinfo(url: str) -> tuple[str, str, str] | None:
    """``url`` cut around its userinfo (``scheme://``, ``user:password``, ``@host/path...``),
    or None when it has none."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return None
    end = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
    userinfo, at, _ = rest[:end].rpartition("@")
    if not at:
        return None
    return f"{scheme}://", userinfo, rest[len(userinfo) :]


def public_endpoint(url: str) -> str:
    """``url`` as it may be stored or shown: its userinfo masked (``user:KEY@host`` becomes
    ``user:***@host``, a lone ``KEY@host`` becomes ``***@host``). Every endpoint a run records
    (provenance, error messages, resource names, logs) goes through here; requests go to the
    real one."""
    cut = _userinfo(url)
    if cut is None:
        return url
    start, userinfo, rest = cut
    user, colon, _ = userinfo.partition(":")
    return f"{start}{user + ':***' if colon else '***'}{rest}"


def userinfo_secrets(url: str | None) -> tuple[str, ...]:
    """The secrets in ``url``'s userinfo (the password; a lone user name, which may be a
    token), as they are and percent-decoded: what no message or answer may carry."""
    cut = _userinfo(url or "")
    if cut is None:
        return ()
    user, colon, password = cut[1].partition(":")
    secret = password if colon else user
    return tuple(s for s in dict.fromkeys((secret, unquote(secret))) if s)


def _transport_name(value: Any) -> Any:
    return "openai" if value == "direct" else value  # "direct": the former name of "openai"


def _to_price(value: Any) -> Any:
    """A :class:`Price` from ``(input, output)`` USD per million tokens (or a Price, or None)."""
    if value is None or isinstance(value, Price):
        return value
    if (
        isinstance(value, (tuple, list))
        and len(value) == 2
        and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)
    ):
        try:
            return Price.per_million(*value)
        except ValueError as exc:
            raise ConfigError(f"price_per_million_tokens: {exc}") from None
    raise ConfigError(
        "price_per_million_tokens must be a pair (input, output) of USD per million prompt and "
        f"completion tokens, e.g. (0.15, 0.60), or a ctxeval.plugin.Price; got {value!r}"
    )


_STREAM_WORDS = {"auto": "auto", "true": True, "yes": True, "on": True, "1": True,
                 "false": False, "no": False, "off": False, "0": False}  # fmt: skip


def _to_stream(value: Any) -> Any:
    """``stream`` as ``"auto"``, True or False (the words of a run file too)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _STREAM_WORDS:
        return _STREAM_WORDS[value.strip().lower()]
    raise ConfigError(f"stream must be 'auto', true or false; got {value!r}")


def no_secret(value: object) -> str:
    """A secret field's repr: ``'***'`` (``None`` when unset); the embedder's too."""
    return "None" if value is None else "'***'"


def shown_url(value: object) -> str:
    """The repr of an endpoint, its userinfo masked (:func:`public_endpoint`)."""
    return repr(public_endpoint(value) if isinstance(value, str) else value)


_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


def to_headers(value: Any) -> Any:
    """``extra_headers`` as a dict of str to str (None: no header), each name a valid HTTP
    header name and each value printable ASCII on one line; the embedder's too."""
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and k and isinstance(v, str) for k, v in value.items()
    ):
        raise ConfigError(
            "extra_headers must be a mapping of header names to str values, e.g. "
            f"{{'X-Route': 'blue'}}; got {type(value).__name__}"
        )
    for name, text in value.items():
        if not _HEADER_NAME.fullmatch(name):
            raise ConfigError(f"extra_headers: {name!r} is not a valid HTTP header name")
        if not (text.isascii() and text.isprintable()):  # (no CR, no LF: one header each)
            raise ConfigError(
                f"extra_headers: the value of {name!r} must be printable ASCII on one line"
            )
    return dict(value)


@attrs.frozen(kw_only=True)
class LLMConfig:
    """The LLM a run's judges and extractors call.

    Attributes:
        model: a litellm model string, e.g. ``"openai/gpt-4o-mini"``, ``"anthropic/claude-..."``,
            or ``"openai/<name>"`` with ``api_base`` for any OpenAI-compatible server (vLLM,
            Ollama, llama.cpp server, TGI).
        api_base: the endpoint, when not the provider's default.
        api_key: the key; default: the provider's usual environment variable
            (``OPENAI_API_KEY``...). Never shown in reprs, logs, results or the cache.
        temperature: 0 for reproducible judgements.
        max_tokens: the longest answer.
        context_window: the judge's context window in tokens (prompt and answer). A prompt
            that would not fit (estimated: UTF-8 bytes / 3, plus ``max_tokens``) is not sent:
            its row is an ``error`` that says so. Default: the provider's known window
            (litellm's model table; a local llama.cpp server's ``n_ctx``), else unknown (not
            checked before sending): see :mod:`ctxeval_llm._ask.window`.
        timeout: seconds one request may take (default: the run's ``timeout``).
        transport: ``"openai"`` (httpx, to an OpenAI-compatible endpoint: OpenAI, vLLM,
            Ollama, llama.cpp, LM Studio, a gateway), ``"litellm"`` (any provider litellm
            knows), ``"auto"`` (``openai`` for OpenAI-compatible models, else ``litellm``), or
            your own :class:`ctxeval.plugin.ChatTransport` object (not closed by ctxeval).
            ``"direct"``, the former name of ``"openai"``, is still accepted.
        json_schema: send the output schema as ``response_format`` (True), or only describe it
            in the prompt (False); the answer is validated strictly either way. A server that
            rejects ``json_schema`` gets JSON mode with the schema in the prompt instead, once,
            remembered for the rest of the run.
        http2: use HTTP/2 on the ``openai`` transport (needs the ``h2`` package:
            ``pip install 'httpx[http2]'``).
        max_response_bytes: the largest answer body accepted (default 8 MiB); a larger one is
            cut off and the attempt fails (a streamed answer: the bytes of its events).
        stream: stream the ``openai`` transport's answers: ``"auto"`` (the default) for a local
            endpoint (a loopback, private or ``.local`` host) only, True always, False never.
            A server stops computing an answer whose client hung up (a timeout, a cancelled
            run) only when it streams it: see :mod:`ctxeval_llm._transports.openai_compatible`.
        batch: send the run's requests through the Batch API (``/v1/files`` +
            ``/v1/batches``; half the price at OpenAI; answers within the provider's 24 h
            window): see :mod:`ctxeval_llm._transports.batch`. OpenAI-compatible endpoints only.
        batch_linger: seconds without a new request before the collected ones go up.
        batch_poll_interval: seconds between two looks at a batch's status.
        batch_max_requests: lines per batch file at most (OpenAI: 50 000).
        batch_max_bytes: bytes per batch file at most (OpenAI: 200 MB; default 190 MiB).
        extra: more keyword arguments for ``litellm.acompletion`` (and request fields for the
            ``openai`` transport).
        extra_headers: more HTTP headers for every request (a gateway's routing or tenant
            header, say): sent by the ``openai`` transport (over the key's ``Authorization``
            when they name it too), given to litellm as ``extra_headers``, and to a
            ``completion`` callable in its request dict as ``extra_headers``. Never shown in
            reprs, logs, results or the cache key.
        completion: a bring-your-own async callable replacing the transport: it receives the
            request dict (``model``, ``messages``, ``temperature``, ...) and returns the answer
            text, or a dict with ``content`` and optional ``prompt_tokens`` /
            ``completion_tokens``.
        price_per_million_tokens: the model's price as ``(input, output)``: USD per million
            prompt and per million completion tokens, e.g. ``(0.15, 0.60)`` (kept as a
            :class:`ctxeval.plugin.Price`). It overrides the provider's price; give it for a
            model whose price the provider does not know (a local or private model), which a
            run with ``max_cost_usd`` otherwise refuses.
        provider: the LLM provider that made this configuration
            (:class:`ctxeval.plugin.LLMProvider`); its ``price(model)`` prices the requests.
            Default: the ``auto`` provider (litellm's bundled price table).
    """

    model: str = attrs.field(validator=attrs.validators.instance_of(str))
    api_base: str | None = attrs.field(default=None, repr=shown_url)
    api_key: str | None = attrs.field(default=None, repr=no_secret)
    temperature: float = attrs.field(default=0.0, validator=validators.non_negative_number)
    max_tokens: int = attrs.field(default=1024, validator=validators.positive_int)
    context_window: int | None = attrs.field(
        default=None, validator=validators.optional(validators.positive_int)
    )
    timeout: float | None = attrs.field(default=None, validator=validators.optional_positive_number)
    transport: TransportName | ChatTransport = attrs.field(
        default="auto", eq=False, converter=_transport_name
    )
    json_schema: bool = attrs.field(default=True, validator=validators.boolean)
    http2: bool = attrs.field(default=False, validator=validators.boolean)
    max_response_bytes: int = attrs.field(
        default=DEFAULT_MAX_RESPONSE_BYTES, validator=validators.positive_int
    )
    stream: Literal["auto"] | bool = attrs.field(default="auto", converter=_to_stream)
    batch: bool = attrs.field(default=False, validator=validators.boolean)
    batch_linger: float = attrs.field(default=2.0, validator=validators.positive_number)
    batch_poll_interval: float = attrs.field(default=15.0, validator=validators.positive_number)
    batch_max_requests: int = attrs.field(default=50_000, validator=validators.positive_int)
    batch_max_bytes: int = attrs.field(default=190 * 1024 * 1024, validator=validators.positive_int)
    extra: Mapping[str, Any] = attrs.field(factory=dict)
    extra_headers: Mapping[str, str] = attrs.field(factory=dict, converter=to_headers, repr=False)
    completion: Callable[[dict[str, Any]], Awaitable[Any]] | None = attrs.field(
        default=None, repr=False, eq=False
    )
    price_per_million_tokens: Price | None = attrs.field(default=None, converter=_to_price)
    provider: Any = attrs.field(default=None, repr=False, eq=False)

    @transport.validator
    def _check_transport(self, attribute: attrs.Attribute[Any], value: Any) -> None:
        if isinstance(value, str):
            if value not in _TRANSPORT_NAMES:
                raise ConfigError(
                    f"transport must be one of {', '.join(map(repr, _TRANSPORT_NAMES))} or a "
                    f"ChatTransport object, got {value!r}"
                )
            if value == "openai" and not self.is_openai_compatible and self.completion is None:
                raise ConfigError(
                    f"transport='openai' speaks the OpenAI API only; model {self.model!r} is "
                    "not OpenAI-compatible (use 'openai/<name>' with api_base, or "
                    "transport='litellm')"
                )
        elif not isinstance(value, ChatTransport):
            raise ConfigError(
                "transport must be 'auto', 'openai', 'litellm' or an object with async "
                f"complete(ctx, request) and aclose() (a ChatTransport), got {value!r}"
            )

    def __attrs_post_init__(self) -> None:
        if self.batch and self.chosen_transport() != "openai":
            raise ConfigError(
                f"batch=True needs an OpenAI-compatible endpoint (the openai transport); model "
                f"{self.model!r} goes through {self.chosen_transport()!r}: use 'openai/<name>' "
                "(with api_base for another server)"
            )

    def price(self) -> Price | None:
        """The price of this model's tokens: ``price_per_million_tokens`` when given, else its
        provider's ``price(model)`` (None when neither knows it)."""
        if self.price_per_million_tokens is not None:
            return self.price_per_million_tokens
        provider = self.provider
        if provider is None:  # provider "auto" (ctxeval_llm.provider): litellm's table
            return price_of(self.model)
        if not isinstance(provider, PricedLLMProvider):
            return None
        price = provider.price(self.model)
        return price if isinstance(price, Price) else None

    @property
    def endpoint(self) -> str:
        """The endpoint as a string (for cache keys and resource names).

        For OpenAI-compatible models without ``api_base``: ``OPENAI_BASE_URL`` (or
        ``OPENAI_API_BASE``) when set, as the openai SDK and litellm read them, else OpenAI's.
        """
        if self.api_base:
            return self.api_base.rstrip("/")
        if not self.is_openai_compatible:
            return "default"
        from_env = os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_BASE")
        return (from_env or OPENAI_BASE).rstrip("/")

    @property
    def shown_endpoint(self) -> str:
        """:attr:`endpoint` as it is recorded and shown: without the key its userinfo may hold
        (:func:`public_endpoint`)."""
        return public_endpoint(self.endpoint)

    @property
    def resource(self) -> str:
        """The scheduler resource: one shared limit per model and endpoint (as shown: it is
        named in messages; the journal's fingerprint hashes the real endpoint too)."""
        return f"{self.model}@{self.shown_endpoint}"

    @property
    def is_openai_compatible(self) -> bool:
        """True for ``openai/...`` models and OpenAI's own model names."""
        name = self.model
        return name.startswith("openai/") or ("/" not in name and name.startswith(_OPENAI_NATIVE))

    @property
    def wire_model(self) -> str:
        """The model name as an OpenAI-compatible server expects it (no provider prefix)."""
        return self.model.removeprefix("openai/")

    def chosen_transport(self) -> str:
        """``callable``, ``custom``, ``openai`` or ``litellm``: the transport this
        configuration uses."""
        if self.completion is not None:
            return "callable"
        if not isinstance(self.transport, str):
            return "custom"
        if self.transport == "auto":
            return "openai" if self.is_openai_compatible else "litellm"
        return self.transport

    def openai_key(self) -> str | None:
        """The API key the ``openai`` transport sends: the given one, else ``OPENAI_API_KEY``."""
        return self.api_key or os.environ.get("OPENAI_API_KEY") or None

    def secrets(self) -> tuple[str, ...]:
        """The secrets this configuration holds: its key, ``OPENAI_API_KEY`` when sent, and
        the userinfo of the endpoint (:func:`userinfo_secrets`); masked in every message."""
        found = (self.api_key, self.openai_key(), *userinfo_secrets(self.endpoint))
        return tuple(s for s in dict.fromkeys(found) if s)

    @property
    def is_openai_default_endpoint(self) -> bool:
        """Whether requests go to OpenAI's own API (which needs a key)."""
        return self.endpoint.rstrip("/") == OPENAI_BASE


def resolve_llm(value: Any) -> LLMConfig:
    """An :class:`LLMConfig` from ``llm=``: a config, a model string, a dict or a callable."""
    if isinstance(value, LLMConfig):
        return value
    if value is None:
        raise ConfigError(
            "this metric needs an LLM: pass llm='openai/gpt-4o-mini' (any litellm model string), "
            "llm=LLMConfig(...), or an async callable, to evaluate() or to the metric"
        )
    if isinstance(value, str):
        return LLMConfig(model=value)
    if isinstance(value, Mapping):
        try:
            return LLMConfig(**value)
        except TypeError as exc:
            raise ConfigError(f"bad llm settings: {exc}") from None
    if callable(value):
        return LLMConfig(model="custom", completion=value)
    raise ConfigError(
        f"llm must be a model string, a dict, an LLMConfig or a callable, got {value!r}"
    )
