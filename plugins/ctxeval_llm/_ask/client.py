"""Ask the LLM one prompt: cache, scheduler, transport, parsing, validation, usage and cost.

Structured output adapts to the endpoint, once per run (:class:`OutputMode`): the answer's
JSON schema goes as ``response_format`` ``json_schema``; a server that refuses it (a 400/422
naming ``response_format`` or ``json_schema``, or a 500 naming ``response_format``, as
llama-cpp-python answers) gets, step by step, JSON mode with the schema given in
``response_format`` (llama-cpp-python enforces it by grammar), plain JSON mode, the server's
own constrained-decoding fields (vLLM ``guided_json``, llama.cpp ``json_schema``), and at last
the schema in the prompt only; a local server the slot probe recognised as llama-cpp-python
starts at the second step, without a refused request. Until the endpoint has shown whether it
takes the mode, one request at a time probes it (the others wait, outside their time budget),
so a refusal steps down once, not once per concurrent request; a refusal of a mode already
left behind is not a step. The probe is one *attempt*, not one call: any outcome of it but a
refusal of the mode (an answer, a timeout, an answer that is not a completion, a 5xx) ends
the probing, and the others go at the configured concurrency (a probe held for its whole
call, retries included, made a judge that never answers take one deadline per call, one call
at a time: 12 samples took 59 s at a 5 s deadline, #56). The mode in use is in each row's
provenance (``output_mode``). Whatever the mode, the schema is also written in the prompt from
the second step on, and the answer is validated strictly.

Requests to a local server that says how many it computes at once (llama.cpp's slots,
llama-cpp-python's one at a time; :mod:`ctxeval_llm._local.slots`) are held to that number here,
outside their time budget, so that a queue on the server does not eat their timeout.

A malformed answer is asked again with a repair turn (the answer and what was wrong with it),
never as the identical request; an answer cut at ``max_tokens`` (``finish_reason: length``)
is asked again once with twice the budget, then fails its row saying so.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager, nullcontext
from typing import Any, Literal, TypeGuard

import anyio
import attrs

from ctxeval.plugin import (
    BadRequestError,
    CallError,
    ChatTransport,
    Completion,
    FatalCallError,
    MalformedOutputError,
    RunContext,
    ServiceError,
    UnusableLLMError,
    Usage,
    cache_key,
)
from ctxeval.plugin.hooks import RepeatedJudgement
from ctxeval_llm._ask.prompt import Prompt
from ctxeval_llm._local.counting import TokenCounter, can_count
from ctxeval_llm._local.slots import is_local, server_slots
from ctxeval_llm._parsing import parse_json, redact
from ctxeval_llm._transports.batch import Batcher
from ctxeval_llm._transports.choice import held_transport
from ctxeval_llm._transports.openai_compatible import HTTPCompletion, OpenAITransport
from ctxeval_llm.config import LLMConfig, resolve_llm

from .window import check_fits, estimate_fits, known_window, raise_if_overflow, served_window

__all__ = ["BoundLLM", "OutputMode", "ask", "bound_llm", "output_mode"]

logger = logging.getLogger(__name__)

Mode = Literal["json_schema", "json_object_schema", "json_object", "guided", "prompt"]
_NEXT: dict[Mode, Mode] = {
    "json_schema": "json_object_schema",
    "json_object_schema": "json_object",
    "json_object": "guided",
    "guided": "prompt",
}
_DESCRIBED: dict[Mode, str] = {
    "json_schema": "response_format json_schema",
    "json_object_schema": "JSON mode with the schema in response_format",
    "json_object": "JSON mode with the schema in the prompt",
    "guided": "the server's constrained-decoding fields (guided_json, json_schema)",
    "prompt": "the schema in the prompt only",
}
_KNOWN_START: dict[str, Mode] = {"llama-cpp-python": "json_object_schema"}
"""Where a server the slot probe recognised (its ``kind``: :mod:`ctxeval_llm._local.slots`) starts
the ladder: llama-cpp-python answers ``json_schema`` with HTTP 500 and enforces a schema given
with ``json_object``."""
_REJECTION_WORDS = (
    "response_format", "json_schema", "json_object", "structured output", "guided_json",
    "schema", "extra", "unrecognized", "unexpected", "not permitted", "unknown field",
)  # fmt: skip
_REPAIR_SHOWN = 2000
"""The characters of a malformed answer quoted back in a repair turn."""


class OutputMode:
    """How a run asks one endpoint for structured output (shared by every request to it).

    Until an attempt in the current mode has ended otherwise than refused for its mode
    (:attr:`settled`), requests go one at a time (:meth:`turn`): the first is the probe, and
    a refusal steps down once. An answer in the mode also confirms it (:attr:`confirmed`).
    """

    def __init__(self, config: LLMConfig) -> None:
        self.mode: Mode = _first_mode(config)
        self.confirmed = self.mode == "prompt"  # nothing to refuse
        self.settled = self.confirmed
        """Whether requests go at once: an attempt has ended otherwise than refused for its
        output mode (answered, timed out, failed otherwise)."""
        self._probing: anyio.Event | None = None  # set when the probe's call ends, or settles
        self.refusals = 0
        """Requests refused for their output mode (one per step taken, when probed)."""
        self.secrets: tuple[str, ...] = _secrets(config)
        """The keys no answer may carry into a file (redacted before anything is stored)."""
        self.served: str | None = None
        """The model the endpoint last said answered (a local server names its file)."""
        self.served_as: str | None = None
        """:attr:`served` as the endpoint said it (before redaction: redacted once)."""

    @asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        """While not :attr:`settled`, one call at a time: the probe. The others wait until its
        first attempt settles the mode (:meth:`settle`: then they all go), or its call ends
        unsettled (then the next of them probes)."""
        while not self.settled:
            probing = self._probing
            if probing is None:  # this call probes
                self._probing = probing = anyio.Event()
                try:
                    yield
                finally:
                    self._probing = None
                    probing.set()
                return
            await probing.wait()
        yield

    def settle(self) -> None:
        """An attempt ended otherwise than refused for its output mode: requests go at once
        from now on (a timeout says nothing against the mode; holding every call behind one
        that never gets an answer serialises the run)."""
        if not self.settled:
            self.settled = True
            if self._probing is not None:
                self._probing.set()

    def start_for(self, kind: str, resource: str) -> None:
        """Before the first request: start where a server of ``kind`` (a local server the
        slot probe recognised) is known to take the schema, without a refused request to
        learn it. Once a request has been refused or answered, what it showed stands."""
        start = _KNOWN_START.get(kind)
        if start is None or self.confirmed or self.mode != "json_schema":  # (or stepped down)
            return
        self.mode = start
        logger.info(
            "%s is %s: asking in %s (it refuses %s)",
            resource, kind, _DESCRIBED[start], _DESCRIBED["json_schema"],
        )  # fmt: skip

    def answered(self, mode: Mode) -> None:
        """A request in ``mode`` got an answer: the mode is the endpoint's."""
        if mode == self.mode:
            self.confirmed = True
        self.settle()

    def refused(self, exc: CallError, mode: Mode, resource: str) -> bool:
        """After ``exc`` for a request sent in ``mode``: whether it refused the output mode.
        The mode steps down when ``mode`` is the current one (a refusal of a mode already left
        behind only asks to send again)."""
        text = str(exc).lower()
        words = _REJECTION_WORDS if isinstance(exc, BadRequestError) else ("response_format",)
        if mode not in _NEXT or not any(word in text for word in words):
            return False  # (some llama.cpp builds refuse json_schema with a 500)
        self.refusals += 1
        if mode != self.mode:
            return True
        self.mode = _NEXT[mode]
        logger.warning(
            "%s refused %s (%s); using %s for the rest of the run",
            resource, _DESCRIBED[mode], exc, _DESCRIBED[self.mode],
        )  # fmt: skip
        return True


def request_body(
    config: LLMConfig,
    prompt: Prompt,
    variables: Mapping[str, Any],
    mode: Mode,
    *,
    repair: tuple[str, str] | None = None,
    max_tokens: int | None = None,
) -> dict[str, Any]:
    """The chat-completion request body for ``prompt`` filled with ``variables``, in output
    ``mode``; ``repair``: a malformed answer and what was wrong with it, asked about again."""
    messages = prompt.messages(variables, schema_in_prompt=mode != "json_schema")
    if repair is not None:
        answer, problem = repair
        messages = [
            *messages,
            {"role": "assistant", "content": answer[:_REPAIR_SHOWN]},
            {
                "role": "user",
                "content": f"That answer cannot be used: {problem}. Answer again with only "
                "the JSON object the instructions ask for, following the schema exactly.",
            },
        ]
    body: dict[str, Any] = {
        "model": config.wire_model,
        "messages": messages,
        "temperature": config.temperature,
        "max_tokens": max_tokens or config.max_tokens,
    }
    if mode == "json_schema":
        body["response_format"] = prompt.response_format()
    elif mode == "json_object_schema":
        body["response_format"] = {"type": "json_object", "schema": dict(prompt.schema)}
    elif mode == "json_object":
        body["response_format"] = {"type": "json_object"}
    elif mode == "guided":
        schema = dict(prompt.schema)
        body["guided_json"] = schema  # vLLM
        body["json_schema"] = schema  # llama.cpp's server
    body.update(config.extra)
    return body


class BoundLLM:
    """One ``llm`` setting as a run uses it: what each of its requests needs, worked out at
    its first (the configuration, its resource name and price, the context window known
    without asking a server, the run's output mode, transport and server slots for its
    endpoint). Run-wide: :func:`bound_llm` makes one per setting and run."""

    __slots__ = (
        "auth", "config", "first_mode", "given", "holder", "local", "output", "price",
        "repeating", "resource", "shown_endpoint", "slots", "transport", "window",
    )  # fmt: skip

    def __init__(self, given: Any, config: LLMConfig, ctx: RunContext) -> None:
        self.given = given
        """The setting as given (kept: its ``id`` is the key of this binding in the run)."""
        self.config = config
        self.resource = config.resource
        self.shown_endpoint = config.shown_endpoint
        """The endpoint as rows record it (:attr:`LLMConfig.shown_endpoint`)."""
        self.first_mode = _first_mode(config)
        self.price = config.price()
        self.window = known_window(config)
        self.output = output_mode(ctx, config)
        self.slots = server_slots(ctx, config.endpoint)
        self.local = is_local(config.endpoint)
        """Whether the endpoint is a local server (asked for its slots, window and counts)."""
        self.holder = held_transport(config, ctx)
        self.transport: ChatTransport | None = None
        """The run's transport, once it passed its readiness check."""
        key = config.api_key or config.openai_key()
        self.auth = {"Authorization": f"Bearer {key}"} if key else None
        self.repeating: dict[type, bool] = {}
        """Per context class, whether it is a panel's repeated judgement (a protocol's
        ``isinstance`` is slow, and a class's contexts all are, or none is)."""

    def repeats(self, ctx: RunContext) -> TypeGuard[RepeatedJudgement]:
        """Whether ``ctx`` is a panel's repeated judgement
        (:class:`ctxeval.plugin.RepeatedJudgement`)."""
        kind = type(ctx)
        known = self.repeating.get(kind)
        if known is None:
            known = self.repeating[kind] = isinstance(ctx, RepeatedJudgement)
        return known

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
        return await _ask(self, ctx, prompt, variables, expect)

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float | None:
        """The price of one request: the user's price, else the provider's (None: unknown)."""
        price = self.price
        return None if price is None else price.cost(prompt_tokens, completion_tokens)


def bound_llm(ctx: RunContext, llm: Any) -> BoundLLM:
    """The run's :class:`BoundLLM` for ``llm`` (a plugin's ``llm`` option, or else the run's
    ``llm=``: a configuration, a model string, a dict, a callable), made on first use."""
    given = llm if llm is not None else ctx.llm
    bindings: dict[int, BoundLLM] = ctx.shared("ctxeval_llm.bound", dict)
    found = bindings.get(id(given))
    if found is None or found.given is not given:
        if len(bindings) >= _MAX_BINDINGS:  # a setting made anew for each row (a plugin's
            bindings.clear()  # LLMConfig(...) made per row): not one kept per row
        found = bindings[id(given)] = BoundLLM(given, resolve_llm(given), ctx)
    return found


_MAX_BINDINGS = 64
"""The most settings :func:`bound_llm` keeps per run (each keeps its setting alive)."""


async def _ask(
    bound: BoundLLM,
    ctx: RunContext,
    prompt: Prompt,
    variables: Mapping[str, Any],
    expect: int | None,
) -> Any:
    """:meth:`BoundLLM.ask` (see there), step by step: the request as first sent, refused if
    it cannot fit the known window; the cache; the Batch API; else each attempt through the
    run's call service (:func:`_attempts`, :func:`_send`); the answer kept in the cache."""
    config, repeat = _for_this_judgement(bound, ctx)
    canonical = request_body(config, prompt, variables, bound.first_mode)
    if bound.window is not None and (config.batch or not bound.local):  # a known window:
        check_fits(ctx, config, prompt, canonical, bound.window)  # never sent if too long
    cache = ctx.cache
    key = None
    if cache is not None:
        key = _cache_key(config, prompt, canonical, repeat)
        hit = cache.get(key)
        if hit is not None:  # free; but a run whose price is unknown stays "unknown"
            free = 0.0 if bound.price is not None else None
            ctx.add_usage(Usage(cache_hits=1, cost_usd=free))
            return prompt.check(hit, expect)
    transport = bound.transport
    if transport is None:  # (the run's first requests: they wait for its readiness check)
        transport = bound.transport = await bound.holder.check(ctx)
    answered = None
    if config.batch and isinstance(transport, OpenAITransport):
        line = {**canonical, "seed": repeat} if repeat else canonical
        answered = await _from_batch(bound, ctx, transport, prompt, line, expect)
    if answered is None:
        attempt = _attempts(bound, ctx, transport, config, prompt, variables, canonical, expect)
        answered = await _send(bound, ctx, config, prompt, variables, canonical, attempt)
    raw, answer = answered
    if cache is not None and key is not None:
        cache.set(key, raw)  # the answer as the model gave it; checked again when read
    return answer


def _for_this_judgement(bound: BoundLLM, ctx: RunContext) -> tuple[LLMConfig, int]:
    """The configuration and the repeat number of this judgement: a panel's repeated judgement
    (ctxeval.plugin.JudgeContext) has its own temperature and its own cache entry (and, in a
    batch, its own line); any other is the setting's, repeat 0."""
    config = bound.config
    if bound.repeats(ctx):
        temperature = ctx.temperature
        if temperature is not None and temperature != config.temperature:
            config = attrs.evolve(config, temperature=temperature)
        return config, ctx.repeat
    return config, 0


def _cache_key(config: LLMConfig, prompt: Prompt, canonical: Mapping[str, Any], repeat: int) -> str:
    """The key of the answer to ``canonical`` (the request as first sent) in the run's cache."""
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
    return cache_key(**parts)


def _attempts(
    bound: BoundLLM,
    ctx: RunContext,
    transport: ChatTransport,
    config: LLMConfig,
    prompt: Prompt,
    variables: Mapping[str, Any],
    canonical: dict[str, Any],
    expect: int | None,
) -> Callable[[], Awaitable[Any]]:
    """One attempt of the request, for the run's call service to time and retry: sent in the
    output mode the endpoint takes (a refused mode: the next one, at once), its usage counted,
    the answer read and checked; after a malformed or cut answer, the next attempt asks with a
    repair or a larger budget. Returns ``(raw, checked answer)``."""
    output = bound.output
    first_mode = bound.first_mode
    again = _Again()

    async def attempt() -> Any:
        while True:
            mode = output.mode
            if mode == first_mode and again.repair is None and again.budget is None:
                request = canonical  # (as made above; a transport does not change it)
            else:
                request = request_body(
                    config, prompt, variables, mode, repair=again.repair,
                    max_tokens=again.budget,
                )  # fmt: skip
            try:
                completion = await transport.complete(ctx, request)
            except (BadRequestError, ServiceError) as exc:
                refused = False
                try:
                    raise_if_overflow(exc, ctx, config, prompt, request)  # "context length"
                    refused = output.refused(exc, mode, bound.resource)
                finally:
                    if not refused:  # an answer that says nothing against the mode
                        output.settle()
                if not refused:
                    raise
                ctx.add_usage(Usage(requests=1))  # the refused request was sent too
                continue
            except BaseException:  # a timeout (a cancellation), any other failure
                output.settle()
                raise
            output.answered(mode)
            served = completion.model
            if served and served != output.served_as:  # a string from the answer: no key in
                output.served = redact(served, *output.secrets)  # it either
                output.served_as = served
            break
        ctx.add_usage(_usage_of(bound, completion))
        content = completion.content
        if _holds_secret(content, output.secrets):
            content = redact(content, *output.secrets)  # a judge that echoes a key
        try:
            raw = parse_json(content)
            return raw, prompt.check(raw, expect)
        except MalformedOutputError as exc:  # it may quote the answer: no secret in it
            problem = redact(str(exc), *config.secrets())
            if completion.finish_reason == "length":
                again.cut(config.max_tokens, problem)
            else:
                again.repair = (content, problem)
            raise MalformedOutputError(problem) from None

    return attempt


async def _send(
    bound: BoundLLM,
    ctx: RunContext,
    config: LLMConfig,
    prompt: Prompt,
    variables: Mapping[str, Any],
    canonical: dict[str, Any],
    attempt: Callable[[], Awaitable[Any]],
) -> Any:
    """``attempt`` through the run's call service (timed, retried, within the resource's
    limits), once a local server gives a slot and its window lets the request in; the first
    requests of an output mode not yet confirmed go one at a time. Returns what it returned."""
    output = bound.output
    chars = 0
    for message in canonical["messages"]:
        chars += len(message["content"])
    estimate = chars / 4 + config.max_tokens
    slots = bound.slots
    if slots.found:  # (the usual case: without an await)
        limiter = slots.known_limiter
    else:
        limiter = await slots.limiter(bound.auth, timeout=config.timeout)
    if not output.confirmed and slots.kind is not None:  # (the probe has recognised it)
        output.start_for(slots.kind, bound.resource)
    if bound.local and not _fits_local_window(bound, prompt, canonical):  # the window, once
        # the server said its own, and its own count if needed
        await _check_local_window(bound, ctx, prompt, variables, canonical, limiter)
    resource, timeout = bound.resource, config.timeout
    if output.settled and limiter is None:  # the usual case, once the first answer came
        return await ctx.call(attempt, resource=resource, tokens=estimate, timeout=timeout)
    async with output.turn(), limiter or nullcontext():  # waits here are not timed
        return await ctx.call(attempt, resource=resource, tokens=estimate, timeout=timeout)


def _fits_local_window(bound: BoundLLM, prompt: Prompt, request: Mapping[str, Any]) -> bool:
    """Whether ``request`` fits the window :func:`_check_local_window` checks against, by the
    estimate (the usual case: nothing to check further); False: check it there."""
    config = bound.config
    configured = config.context_window is not None
    window = bound.window if configured else served_window(bound.slots) or bound.window
    return window is None or estimate_fits(config, prompt, request, window)


async def _check_local_window(
    bound: BoundLLM,
    ctx: RunContext,
    prompt: Prompt,
    variables: Mapping[str, Any],
    request: Mapping[str, Any],
    limiter: anyio.CapacityLimiter | None,
) -> None:
    """:func:`~ctxeval_llm._ask.window.check_fits` for a local server, once it has been asked
    (:mod:`ctxeval_llm._local.slots`): against the configured window, else the server's own, else
    the provider's table; a prompt the estimate refuses is counted by the server's tokenizer
    when it has one (:mod:`ctxeval_llm._local.counting`), holding one of the server's slots (on
    llama-cpp-python, a request waiting for its model interrupts a streamed answer).

    ``request`` is the body in the first output mode (the estimate counts the schema in any
    mode); the server counts the body in the run's mode, as it will be sent (from the second
    step on the schema is written in the prompt)."""
    config = bound.config
    configured = config.context_window is not None
    window = bound.window if configured else served_window(bound.slots) or bound.window
    if window is None or estimate_fits(config, prompt, request, window):
        return
    counted = None
    if can_count(bound.slots):
        endpoint = config.endpoint
        counter = ctx.shared(f"ctxeval_llm.counter:{endpoint}", lambda: TokenCounter(endpoint))
        mode = bound.output.mode
        sent = request
        if mode != bound.first_mode:
            sent = request_body(config, prompt, variables, mode)
        async with limiter or nullcontext():
            counted = await counter.count(bound.slots, sent, bound.auth, timeout=config.timeout)
    check_fits(ctx, config, prompt, request, window, counted)


async def _from_batch(
    bound: BoundLLM,
    ctx: RunContext,
    transport: OpenAITransport,
    prompt: Prompt,
    request: Mapping[str, Any],
    expect: int | None,
) -> tuple[Any, Any] | None:
    """The raw and checked answer from the run's batches, or None when the batch could
    not give one (the request is then sent the normal way)."""
    config = bound.config
    batcher = ctx.shared(
        f"ctxeval_llm.batch:{config.resource}",
        lambda: Batcher(config, transport, ctx.run_folder),
    )
    try:
        completion = await batcher.complete(ctx, request)
        content = completion.content
        secrets = output_mode(ctx, config).secrets
        if any(secret in content for secret in secrets) or "sk-" in content:
            content = redact(content, *secrets)  # a judge that echoes a key
        raw = parse_json(content)
        answer = prompt.check(raw, expect)
    except UnusableLLMError:
        raise
    except CallError as exc:
        logger.debug("%s; sending it the normal way", exc)
        return None
    price = bound.cost(completion.prompt_tokens, completion.completion_tokens)
    ctx.add_usage(
        Usage(
            requests=1,
            prompt_tokens=completion.prompt_tokens,
            completion_tokens=completion.completion_tokens,
            cost_usd=None if price is None else price * BATCH_PRICE,
        )
    )
    return raw, answer


MAX_TOKENS_SAID = 10_000_000
"""The most tokens one answer's usage is believed to count; more (``1e300``) is not usage."""


def _usage_of(bound: BoundLLM, completion: Completion) -> Usage:
    """The usage an answer reports, priced; token counts that cannot be true (negative, beyond
    :data:`MAX_TOKENS_SAID`) are not taken, nor those of an answer that reported none (a
    stream from llama-cpp-python): no tokens, and the cost unknown."""
    config = bound.config
    if type(completion) is HTTPCompletion and not completion.usage_known:
        _say_no_usage(bound.resource)
        return Usage(cost_usd=None)
    said = prompt_tokens, completion_tokens = completion.prompt_tokens, completion.completion_tokens
    if not (
        isinstance(prompt_tokens, int)
        and isinstance(completion_tokens, int)
        and 0 <= prompt_tokens <= MAX_TOKENS_SAID
        and 0 <= completion_tokens <= MAX_TOKENS_SAID
    ):
        logger.warning(
            "%s reported usage that cannot be true (prompt_tokens %.20s, completion_tokens "
            "%.20s): not counted, the cost of the answer unknown",
            config.resource, said[0], said[1],
        )  # fmt: skip
        return Usage(cost_usd=None)
    price = bound.price
    return Usage(
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        cost_usd=None if price is None else price.cost(prompt_tokens, completion_tokens),
    )


@functools.lru_cache(maxsize=64)
def _say_no_usage(resource: str) -> None:
    """Log, once per resource (the cache remembers it), that its answers report no usage."""
    logger.info(
        "%s reports no usage for its answers (some servers send none in a stream): their "
        "tokens and cost are unknown",
        resource,
    )


_SECRET_NAMES = ("_API_KEY", "_KEY", "_TOKEN", "_SECRET")


def _holds_secret(content: str, secrets: tuple[str, ...]) -> bool:
    """Whether ``content`` holds one of ``secrets``, or anything like a key (``sk-``)."""
    if "sk-" in content:
        return True
    for secret in secrets:  # noqa: SIM110  (any() of a generator costs a frame per request)
        if secret in content:
            return True
    return False


def _secrets(config: LLMConfig) -> tuple[str, ...]:
    """The configured key, the endpoint's userinfo and every provider key in the environment
    (``*_API_KEY``, ``*_TOKEN``...) long enough to be one."""
    found = set(config.secrets())
    found.update(v for k, v in os.environ.items() if k.upper().endswith(_SECRET_NAMES))
    return tuple(sorted(s for s in found if len(s) >= 8))


def output_mode(ctx: RunContext, config: LLMConfig) -> OutputMode:
    """The run's :class:`OutputMode` for ``config``'s endpoint."""
    mode: OutputMode = ctx.shared(
        f"ctxeval_llm.output_mode:{config.resource}", lambda: OutputMode(config)
    )
    return mode


class _Again:
    """How one prompt's next attempt differs from the last, after a malformed answer: a repair
    turn quoting it, or (after an answer cut at ``max_tokens``) twice the budget."""

    __slots__ = ("budget", "repair")

    def __init__(self) -> None:
        self.repair: tuple[str, str] | None = None
        self.budget: int | None = None

    def cut(self, max_tokens: int, problem: str) -> None:
        """The answer stopped at the token budget: double it once, then give up."""
        if self.budget is not None:
            raise FatalCallError(
                f"the answer was cut at max_tokens ({self.budget}) again (finish_reason "
                f"'length'; first at {max_tokens}): {problem}; raise max_tokens (a run file's "
                "max_tokens, or LLMConfig(max_tokens=...))"
            )
        self.budget = 2 * max_tokens


def _first_mode(config: LLMConfig) -> Mode:
    """The output mode a request is first asked in (and cached under): :class:`OutputMode`'s
    start, without making one."""
    return "json_schema" if config.json_schema else "prompt"


BATCH_PRICE = 0.5
"""The share of the normal price a batch request costs (OpenAI's Batch API: half)."""


async def ask(
    ctx: RunContext,
    llm: Any,
    prompt: Prompt,
    variables: Mapping[str, Any],
    *,
    expect: int | None = None,
) -> Any:
    """The checked answer to ``prompt`` from a plugin's ``llm`` option, or else the run's
    ``llm=``: :meth:`BoundLLM.ask` of :func:`bound_llm`."""
    return await _ask(bound_llm(ctx, llm), ctx, prompt, variables, expect)
