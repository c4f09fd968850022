"""The ``openai`` embedder: texts to vectors through any OpenAI-compatible ``/v1/embeddings``.

Registered as entry point ``openai`` of the ``ctxeval.embedders`` group; the ``embedding``
matcher (and any plugin) gets it with ``get_embedder("openai", model=...)``. It reuses the LLM
plugin's HTTP machinery: the same
:class:`~ctxeval_llm._transports.openai_compatible.OpenAITransport` (one httpx pool per run
and endpoint, proxies, system CA store, body size limit, the one table that classifies
failures), and every request goes through the run context's call service (the
shared limits of its resource, timeouts, retries on 429/5xx/timeouts within the deadline, none
on 400/401; a refused key or an unknown model stops the run at once with one message).

:meth:`OpenAIEmbedder.aembed`:

1. deduplicates the texts;
2. looks each one up in the run's cache (key: model, endpoint, dimensions and the text; never
   the key or the headers);
3. hands the missing ones to the run's collector for this endpoint (:class:`_Collector`, one
   per run and embedder configuration), which gathers the texts of every row that asks at
   about the same time (the rows of a run ask at once: each one's metric embeds its texts)
   and sends them ``batch_size`` per request: a full batch at once, the rest when no text has
   come for ``linger`` seconds; several requests at once under the run's limits. A text
   asked by two rows goes once. So a run of N distinct texts, all asked within one window
   of samples in flight, sends ``ceil(N / batch_size)`` requests, not one per row;
4. checks each answer strictly (one vector per text, every ``index`` once, one length, finite
   numbers; otherwise a :class:`ctxeval.MalformedOutputError`, retried a few times);
5. counts usage (requests, prompt tokens, cost when the price is known, cache hits; a
   request's tokens count against the row whose task sent it, so the run's totals are
   exact and a row's are approximate), stores each new vector in the cache, and returns the
   vectors in the order of ``texts``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import math
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np
import orjson

from ctxeval.plugin import (
    BadRequestError,
    ConfigError,
    MalformedOutputError,
    MissingCredentialsError,
    Price,
    RunContext,
    UnusableLLMError,
    Usage,
    cache_key,
    validators,
)

from ._ask.fanout import at_once
from ._parsing import redact
from ._transports.choice import transport_for
from ._transports.openai_compatible import OpenAITransport
from .config import DEFAULT_MAX_RESPONSE_BYTES, LLMConfig, no_secret, shown_url, to_headers

__all__ = ["OpenAIEmbedder"]

CACHE_VERSION = "embedding/1"
"""Part of every cache key: a change of the stored form makes new keys."""


def _to_price(value: Any) -> Price | None:
    if value is None or isinstance(value, Price):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return Price.per_million(float(value), 0.0)
        except ValueError as exc:
            raise ConfigError(f"price_per_million_tokens: {exc}") from None
    raise ConfigError(
        "price_per_million_tokens must be USD per million input tokens (a number, e.g. 0.02) "
        f"or a ctxeval.plugin.Price; got {value!r}"
    )


@attrs.frozen(kw_only=True)
class OpenAIEmbedder:
    """Vectors from an OpenAI-compatible ``/v1/embeddings`` endpoint (OpenAI, vLLM, Ollama,
    Text Embeddings Inference, LiteLLM proxy, a company gateway).

    Attributes:
        model: the model as the server names it, e.g. ``"text-embedding-3-small"``,
            ``"BAAI/bge-small-en-v1.5"``, ``"nomic-embed-text"`` (an ``openai/`` prefix is
            accepted and dropped on the wire).
        api_base: the endpoint, e.g. ``"http://localhost:8000/v1"``; default:
            ``OPENAI_BASE_URL`` when set, else OpenAI's.
        api_key: the key; default ``OPENAI_API_KEY``. OpenAI's own endpoint needs one (the run
            stops before any request without it); a local server does not. Never shown in
            reprs, logs, results or the cache.
        batch_size: texts per request (default 128; OpenAI takes up to 2048).
        dimensions: the vectors' length, for models that can shorten them
            (``text-embedding-3-*``); passed through, and the answer must have it.
        timeout: seconds one request may take (default: the run's ``timeout``).
        extra_headers: more HTTP headers for every request (a gateway's routing header, say);
            never logged.
        max_response_bytes: the largest answer accepted (default 8 MiB; a batch of 128
            vectors of 3072 floats is about 5 MiB as JSON).
        price_per_million_tokens: USD per million input tokens, for a model whose price the
            local price table does not know.
        linger: seconds without a new text after which a run's collector sends a batch that
            is not full (default 0.01): the rows of a run ask within that time of each other.
    """

    model: str = attrs.field(validator=validators.text)
    api_base: str | None = attrs.field(default=None, repr=shown_url)
    api_key: str | None = attrs.field(default=None, repr=no_secret)
    batch_size: int = attrs.field(default=128, validator=validators.positive_int)
    dimensions: int | None = attrs.field(
        default=None, validator=validators.optional(validators.positive_int)
    )
    timeout: float | None = attrs.field(default=None, validator=validators.optional_positive_number)
    extra_headers: Mapping[str, str] = attrs.field(
        factory=dict, converter=to_headers, repr=False, eq=False
    )
    max_response_bytes: int = attrs.field(
        default=DEFAULT_MAX_RESPONSE_BYTES, validator=validators.positive_int
    )
    price_per_million_tokens: Price | None = attrs.field(default=None, converter=_to_price)
    linger: float = attrs.field(default=0.01, validator=validators.non_negative_number)
    _config: LLMConfig = attrs.field(init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        model = self.model if self.model.startswith("openai/") else f"openai/{self.model}"
        config = LLMConfig(
            model=model,
            api_base=self.api_base,
            api_key=self.api_key,
            timeout=self.timeout,
            transport="openai",
            max_response_bytes=self.max_response_bytes,
            price_per_million_tokens=self.price_per_million_tokens,
        )
        object.__setattr__(self, "_config", config)

    # --- what the run and the matcher read ----------------------------------------------------

    @property
    def name(self) -> str:
        """``openai:<model>`` (in messages and the matcher's evidence)."""
        return f"openai:{self._config.wire_model}"

    @property
    def endpoint(self) -> str:
        """Where the requests go (``.../v1``)."""
        return self._config.endpoint

    @property
    def resource(self) -> str:
        """The scheduler resource of the requests (``model@endpoint``): its limits apply."""
        return self._config.resource

    @property
    def fingerprint_data(self) -> str:
        """What changes the vectors: model, endpoint and dimensions (for the journal)."""
        return f"{CACHE_VERSION}:{self._config.wire_model}@{self.endpoint}:{self.dimensions}"

    def provenance(self, ctx: RunContext) -> Mapping[str, Any]:
        """Who embedded: the model, the endpoint and the dimensions."""
        return {"embedder": "openai", "model": self._config.wire_model,
                "endpoint": self._config.shown_endpoint,
                "dimensions": self.dimensions}  # fmt: skip

    def cache_key_of(self, text: str) -> str:
        """The cache key of ``text``'s vector (no secret in it)."""
        return cache_key(
            kind=CACHE_VERSION,
            model=self._config.wire_model,
            endpoint=self.endpoint,
            dimensions=self.dimensions,
            text=text,
        )

    # --- embedding --------------------------------------------------------------------------

    async def aembed(self, texts: Sequence[str], ctx: RunContext) -> np.ndarray[Any, Any]:
        """The vectors of ``texts``: a float32 array of shape ``(len(texts), d)``, in order."""
        if isinstance(texts, str):
            raise TypeError("aembed takes a sequence of texts, not one string")
        texts = list(texts)
        for text in texts:
            if not isinstance(text, str):
                raise TypeError(f"aembed takes texts (str), got {type(text).__name__}")
        unique = list(dict.fromkeys(texts))
        vectors: dict[str, np.ndarray[Any, Any]] = {}
        cache = ctx.cache
        missing: list[str] = []
        hits = 0
        for text in unique:
            stored = cache.get(self.cache_key_of(text)) if cache is not None else None
            vector = _vector_of(stored) if stored is not None else None
            if vector is None:
                missing.append(text)
            else:
                vectors[text] = vector
                hits += 1
        if hits:
            ctx.add_usage(Usage(cache_hits=hits))
        if missing:
            collector = ctx.shared(self._collector_key(), lambda: _Collector(self))
            vectors.update(await collector.embed(missing, ctx))
        if not texts:
            return np.zeros((0, self.dimensions or 0), dtype=np.float32)
        lengths = {len(v) for v in vectors.values()}
        if len(lengths) != 1:
            raise MalformedOutputError(
                f"{self.name} at {self._config.shown_endpoint}: vectors of different lengths "
                f"{sorted(lengths)} (the cache and the server disagree; clear the cache)"
            )
        return np.stack([vectors[text] for text in texts]).astype(np.float32, copy=False)

    def _collector_key(self) -> str:
        """The run-wide collector of this configuration: equal embedders (the same endpoint,
        model, dimensions, batch size, key and headers) share one; the key and headers enter
        only as a hash."""
        secret = hashlib.blake2b(
            orjson.dumps([self.api_key, sorted(self.extra_headers.items())]), digest_size=8
        ).hexdigest()
        return f"ctxeval_llm.embeddings:{self.fingerprint_data}:{self.batch_size}:{secret}"

    async def _send_all(
        self, batches: list[list[str]], ctx: RunContext
    ) -> list[list[np.ndarray[Any, Any]]]:
        """The vectors of each batch, the requests sent at once (the run's limits pace them);
        the first failure cancels the rest and is raised (a run-stopping one first)."""
        config = self._config
        if config.is_openai_default_endpoint and not config.openai_key():
            raise MissingCredentialsError(
                f"embedder {self.name!r} goes to {self._config.shown_endpoint}, which needs an "
                "API key, and "
                "none is set: export OPENAI_API_KEY=... (or pass api_key=...); for a local or "
                "other OpenAI-compatible server, give its URL with api_base="
            )
        transport = await transport_for(config, ctx)
        assert isinstance(transport, OpenAITransport)
        results: list[list[np.ndarray[Any, Any]] | None] = [None] * len(batches)
        failures: list[BaseException] = []

        async def one(number: int) -> None:
            try:
                results[number] = await self._send(batches[number], transport, ctx)
            except Exception as exc:
                failures.append(exc)
                raise

        try:  # (the fan-out of a judge's requests: a failure cancels the others)
            await at_once(one, [(number,) for number in range(len(batches))], "ctxeval_llm: embed")
        except Exception:  # the failures (in a group when several ran), kept by one()
            if not failures:
                raise
        if failures:
            stopping = [exc for exc in failures if isinstance(exc, UnusableLLMError)]
            raise (stopping or failures)[0]
        return [r for r in results if r is not None]

    async def _send(
        self, texts: list[str], transport: OpenAITransport, ctx: RunContext
    ) -> list[np.ndarray[Any, Any]]:
        """One request for ``texts`` under the run's call service (limits, retries)."""
        config = self._config
        body: dict[str, Any] = {"model": config.wire_model, "input": texts}
        if self.dimensions is not None:
            body["dimensions"] = self.dimensions
        content = orjson.dumps(body)
        headers = {**self.extra_headers, "Content-Type": "application/json"}
        estimate = sum(len(text) for text in texts) / 4

        async def attempt() -> list[np.ndarray[Any, Any]]:
            data = await transport.send("POST", "/embeddings", content=content, headers=headers)
            vectors, prompt_tokens = self._parse(data, len(texts))
            price = config.price()
            ctx.add_usage(
                Usage(
                    prompt_tokens=prompt_tokens,
                    cost_usd=None if price is None else price.cost(prompt_tokens, 0),
                )
            )
            return vectors

        vectors: list[np.ndarray[Any, Any]] = await ctx.call(
            attempt, resource=config.resource, tokens=estimate, timeout=config.timeout
        )
        return vectors

    def _parse(self, data: bytes, count: int) -> tuple[list[np.ndarray[Any, Any]], int]:
        """The vectors of an answer, in the order of the request's texts, and its prompt
        tokens; a :class:`MalformedOutputError` for anything but a well-formed answer."""
        where = f"{self._config.shown_endpoint}/embeddings"
        try:
            reply = orjson.loads(data)
        except orjson.JSONDecodeError:
            snippet = redact(data[:120].decode("utf-8", "replace"), *self._config.secrets())
            raise MalformedOutputError(f"{where}: the answer is not JSON: {snippet!r}") from None
        items = reply.get("data") if isinstance(reply, dict) else None
        if not isinstance(items, list):
            raise MalformedOutputError(f"{where}: the answer has no 'data' list")
        if len(items) != count:
            raise MalformedOutputError(
                f"{where}: {len(items)} vectors for {count} texts "
                f"(model {self._config.wire_model!r})"
            )
        ordered: list[np.ndarray[Any, Any] | None] = [None] * count
        for position, item in enumerate(items):
            if not isinstance(item, dict):
                raise MalformedOutputError(f"{where}: item {position} is not an object")
            index = item.get("index", position)
            if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < count:
                raise MalformedOutputError(f"{where}: item {position} has a bad index {index!r}")
            if ordered[index] is not None:
                raise MalformedOutputError(f"{where}: index {index} appears twice")
            vector = _vector_of(item.get("embedding"))
            if vector is None:
                raise MalformedOutputError(
                    f"{where}: item {position} has no embedding (a non-empty list of finite "
                    "numbers, not all zero)"
                )
            ordered[index] = vector
        vectors = [v for v in ordered if v is not None]
        lengths = {len(v) for v in vectors}
        if len(lengths) != 1:
            raise MalformedOutputError(f"{where}: vectors of different lengths {sorted(lengths)}")
        (length,) = lengths
        if self.dimensions is not None and length != self.dimensions:
            raise BadRequestError(
                f"{where}: the model {self._config.wire_model!r} answered vectors of {length} "
                f"numbers, not the dimensions={self.dimensions} asked (the server or model "
                "ignores 'dimensions'; leave it out)"
            )
        usage = reply.get("usage")
        tokens = usage.get("prompt_tokens") if isinstance(usage, dict) else None
        prompt_tokens = tokens if isinstance(tokens, int) and tokens >= 0 else 0
        return vectors, prompt_tokens


QUIET_TICKS = 20
"""Turns of the event loop without a new text before a batch that is not full is sent."""


class _Collector:
    """One run's texts to embed at one endpoint, gathered across rows and sent in full batches.

    The first row that finds texts pending and no collector at work collects for everyone
    (as the Batch API mode's collector does, :mod:`ctxeval_llm._transports.batch`): it sends
    every full batch at once, and the rest once no text has come for ``linger`` seconds; the
    other rows wait for their vectors. A text asked while pending or on its way is not asked
    again. A failed request fails the rows waiting for its texts (a later row asks again); a
    collector cancelled (its row's time limit) puts its texts back for the next one. Vectors
    are kept only until every row that asked for them has them: the cache keeps them beyond.
    """

    def __init__(self, embedder: OpenAIEmbedder) -> None:
        self.embedder = embedder
        self.pending: dict[str, None] = {}
        self.sending: set[str] = set()
        self.vectors: dict[str, np.ndarray[Any, Any]] = {}
        self.failed: dict[str, BaseException] = {}
        self.wanted: dict[str, int] = {}
        self.last_added = 0.0
        self.collecting = False
        self.changed: Any = None

    def _wake(self) -> None:
        changed, self.changed = self.changed, None
        if changed is not None:
            changed.set()

    async def embed(self, texts: list[str], ctx: RunContext) -> dict[str, np.ndarray[Any, Any]]:
        """The vectors of ``texts`` (distinct), by text."""
        import anyio

        for text in texts:
            self.wanted[text] = self.wanted.get(text, 0) + 1
            if text in self.vectors or text in self.pending or text in self.sending:
                continue
            self.failed.pop(text, None)  # a text that failed for an earlier row: ask again
            self.pending[text] = None
            self.last_added = anyio.current_time()
        try:
            while True:
                waiting = [text for text in texts if text not in self.vectors]
                if not waiting:
                    return {text: self.vectors[text] for text in texts}
                errors = [self.failed[text] for text in waiting if text in self.failed]
                if errors:
                    stopping = [exc for exc in errors if isinstance(exc, UnusableLLMError)]
                    raise (stopping or errors)[0]
                if not self.collecting:
                    await self._collect(ctx)
                else:
                    if self.changed is None:
                        self.changed = anyio.Event()
                    await self.changed.wait()
        finally:
            for text in texts:
                left = self.wanted[text] - 1
                if left:
                    self.wanted[text] = left
                else:
                    del self.wanted[text]
                    self.vectors.pop(text, None)
                    self.failed.pop(text, None)

    async def _quiet(self, linger: float) -> bool:
        """Whether no text came for ``linger`` seconds and then for :data:`QUIET_TICKS`
        turns of the event loop (the ticks: a process paused by a busy machine must not
        take the rows it has not yet run for a quiet endpoint); waits for either."""
        import anyio

        count = len(self.pending)
        waited = anyio.current_time() - self.last_added
        if waited < linger:
            await anyio.sleep(linger - waited)
            return False
        for _ in range(QUIET_TICKS):
            await anyio.sleep(0)
            if len(self.pending) != count:
                return False
        return True

    async def _collect(self, ctx: RunContext) -> None:
        """Send what is pending until nothing is (one collector at a time)."""
        embedder = self.embedder
        size, linger = embedder.batch_size, embedder.linger
        self.collecting = True
        try:
            while self.pending:
                full = len(self.pending) >= size
                if not full and not await self._quiet(linger):
                    continue
                texts = list(self.pending)
                if full:
                    texts = texts[: len(texts) // size * size]  # the full batches first
                for text in texts:
                    del self.pending[text]
                self.sending.update(texts)
                batches = [texts[start : start + size] for start in range(0, len(texts), size)]
                done = False
                try:
                    answers = await embedder._send_all(batches, ctx)
                    done = True
                except Exception as exc:
                    done = True
                    for text in texts:
                        if text in self.wanted:
                            self.failed[text] = exc
                else:
                    cache = ctx.cache
                    for batch, answer in zip(batches, answers, strict=True):
                        for text, vector in zip(batch, answer, strict=True):
                            if cache is not None:
                                cache.set(embedder.cache_key_of(text), vector.tolist())
                            if text in self.wanted:
                                self.vectors[text] = vector
                finally:
                    self.sending.difference_update(texts)
                    if not done:  # cancelled: the texts go back for the next collector
                        self.pending = {**dict.fromkeys(texts), **self.pending}
                    self._wake()
        finally:
            self.collecting = False
            self._wake()


def _vector_of(value: Any) -> np.ndarray[Any, Any] | None:
    """A float32 vector from a list of numbers (or OpenAI's base64 of float32), or None."""
    if isinstance(value, str):
        try:
            raw = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            return None
        if not raw or len(raw) % 4:
            return None
        vector = np.frombuffer(raw, dtype="<f4").astype(np.float32)
    elif isinstance(value, list) and value:
        if not all(
            isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
            for x in value
        ):
            return None
        vector = np.asarray(value, dtype=np.float32)
    else:
        return None
    if not np.isfinite(vector).all() or not vector.any():
        return None  # (a zero vector: its cosine with anything is undefined)
    return vector
