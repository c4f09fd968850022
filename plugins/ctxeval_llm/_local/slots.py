"""How many requests a local server computes at once, found once per run (within 3 s, or the
requests' own timeout when shorter: a server that never answers holds the run no longer than
one request's timeout):
ctxeval then sends no more, so that requests wait in ctxeval (untimed) rather than in the
server's queue (where the wait would count against ``timeout``).

Asked of a server on this machine or the local network (a loopback, private or ``.local``
host), never of a hosted API. What each server really says (read from their code, and
answered the same way by the tests' fake server):

* llama.cpp's ``llama-server``: ``GET /props`` gives ``total_slots`` (its ``-np``), and
  ``default_generation_settings.n_ctx``; ``GET /slots`` lists the slots (when not disabled);
* llama-cpp-python's server (one request at a time: one lock around the model; its
  ``/v1/models`` lists models with an empty ``permissions`` list and ``owned_by: "me"``): 1;
* vLLM (``/v1/models`` lists its models with ``owned_by: "vllm"`` and ``max_model_len``): it
  batches up to ``--max-num-seqs`` requests at once (256 by default on most GPUs), and no
  endpoint says that number (``/metrics`` has the requests running and waiting right now,
  and ``vllm:cache_config_info``, not the scheduler's limit): not capped, ctxeval's
  concurrency (16 by default) is far below it; its ``max_model_len`` is the context window;
* Ollama (``GET /api/version`` answers ``{"version": ...}``; asked only of a server that
  lists its models at ``/v1/models``, as Ollama does): it computes
  ``OLLAMA_NUM_PARALLEL`` requests per model at once and queues the others, and no endpoint
  says how many (``/api/ps`` lists the loaded models with their ``context_length``, not
  that): not capped, and a warning says to set ``--max-concurrency`` to it.

Anything else (LM Studio; a server that answers none of these) is not capped:
``--max-concurrency`` is the setting. A probe that fails is not an error.

What was found is kept on the run's :class:`ServerSlots`: the cap, the server's kind, the
models it lists (a local server names the file it loaded) and its context window when it says
it (``n_ctx``, ``max_model_len``, ``context_length``).
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import anyio
import orjson

from ctxeval.plugin import CallError
from ctxeval_llm._http.base import HTTPClient
from ctxeval_llm._http.choice import open_client
from ctxeval_llm._parsing import whole_number
from ctxeval_llm.config import public_endpoint

__all__ = [
    "ServerAPI",
    "ServerSlots",
    "as_is",
    "is_local",
    "server_context",
    "server_slots",
    "server_urls",
]

logger = logging.getLogger(__name__)

_PROBE_TIMEOUT = 3.0
_PROBE_LIMIT = 4 * 1024 * 1024  # bytes of one probe's answer (a long /v1/models)


def is_local(url: str) -> bool:
    """Whether ``url``'s host is this machine or the local network."""
    host = urlsplit(url).hostname or ""
    if host == "localhost" or host.endswith((".localhost", ".local")):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_link_local


class ServerSlots:
    """The requests one endpoint computes at once, found by the first request of the run to
    ask (:meth:`limiter`); shared by every request to it."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self.slots: int | None = None
        """What the server said (None: not known, not capped)."""
        self.source: str | None = None
        """Where it was found (``/props``, ``/slots``, ``/v1/models``)."""
        self.n_ctx: int | None = None
        """The context window of one slot, when the server said (llama.cpp's ``n_ctx`` in
        ``/props`` or ``/slots``; read by :mod:`ctxeval_llm._ask.window`)."""
        self.models: list[str] | None = None
        """The models the server lists at ``/v1/models`` (a local server names the file it
        loaded there, whatever model name the requests give)."""
        self.kind: str | None = None
        """The server, when recognised: ``llama.cpp``, ``llama-cpp-python``, ``vllm``,
        ``ollama``."""
        self.context_window: int | None = None
        """The tokens one request may use, when the server says: :attr:`n_ctx` (llama.cpp),
        vLLM's ``max_model_len``, Ollama's ``context_length`` of the loaded model."""
        self._limiter: anyio.CapacityLimiter | None = None
        self._found = False
        self._asking: anyio.Event | None = None
        """Set when the request asking the server is done (None: none is asking)."""

    @property
    def found(self) -> bool:
        """Whether the server has been asked (or, not being local, is never asked)."""
        return self._found

    @property
    def known_limiter(self) -> anyio.CapacityLimiter | None:
        """What :meth:`limiter` gives once :attr:`found` (without an ``await``)."""
        return self._limiter

    async def limiter(
        self, headers: dict[str, str] | None = None, *, timeout: float | None = None
    ) -> anyio.CapacityLimiter | None:
        """The limiter that holds requests to the server's slots, or None when not capped.
        The probes take at most 3 s together, or ``timeout`` (a request's) when shorter."""
        while not self._found:  # one request asks; the others wait, then all go (#58)
            asking = self._asking
            if asking is not None:
                await asking.wait()
                continue
            self._asking = asking = anyio.Event()
            try:
                if is_local(self.endpoint):
                    limit = _PROBE_TIMEOUT if timeout is None else min(timeout, _PROBE_TIMEOUT)
                    await self._discover(headers or {}, limit)
                self._found = True
            finally:
                self._asking = None
                asking.set()
        return self._limiter

    async def _discover(self, headers: dict[str, str], limit: float) -> None:
        base, root = server_urls(self.endpoint)
        with anyio.move_on_after(limit):  # all probes together: then not capped
            # the client the requests use (aiohttp on asyncio, httpx elsewhere), its own pool
            client = await open_client(self.endpoint, max_connections=1, http2=False, say=as_is)
            try:
                await self._ask(ServerAPI(client, headers, limit=_PROBE_LIMIT), base, root)
            finally:
                with anyio.CancelScope(shield=True):
                    await client.aclose()

    async def _ask(self, client: ServerAPI, base: str, root: str) -> None:
        for source, url, read in (
            ("/props", f"{root}/props", _total_slots),
            ("/slots", f"{root}/slots", _listed_slots),
            ("/v1/models", f"{base}/models", _llama_cpp_python),
        ):
            listing = await client.json(url)
            if source == "/v1/models":
                self.models = _model_ids(listing)
            elif listing is not None and self.n_ctx is None:  # llama.cpp's /props, /slots
                self.n_ctx = self.context_window = server_context(listing)
            found = read(listing) if listing is not None else None
            if found:
                if self.models is None and source != "/v1/models":
                    self.models = _model_ids(await client.json(f"{base}/models"))
                self.kind = "llama-cpp-python" if source == "/v1/models" else "llama.cpp"
                self._cap(found, source)
                return
            if source == "/v1/models" and _owned_by(listing) == "vllm":
                self.kind = "vllm"
                self.context_window = _max_model_len(listing)
                logger.info(
                    "%s is vLLM: it batches up to its --max-num-seqs requests at once, which "
                    "it does not expose; not capped (--max-concurrency sets how many ctxeval "
                    "sends)",
                    public_endpoint(self.endpoint),
                )
                return
        if self.models is None:  # no OpenAI-compatible listing: not Ollama either
            return
        version = await client.json(f"{root}/api/version")
        if isinstance(version, dict) and isinstance(version.get("version"), str):
            self.kind = "ollama"
            self.context_window = _ollama_context(await client.json(f"{root}/api/ps"))
            logger.warning(
                "%s is Ollama %s: it computes OLLAMA_NUM_PARALLEL requests per model at once "
                "(its API does not say how many) and queues the others, and a queued request's "
                "wait counts against its timeout: set --max-concurrency (max_concurrency=) to "
                "the server's OLLAMA_NUM_PARALLEL",
                public_endpoint(self.endpoint), version["version"],
            )  # fmt: skip

    def _cap(self, found: int, source: str) -> None:
        self.slots, self.source = found, source
        self._limiter = anyio.CapacityLimiter(found)
        logger.info(
            "%s computes %d request(s) at once (%s); ctxeval sends no more, the "
            "others wait untimed (--max-concurrency sets it for other servers)",
            public_endpoint(self.endpoint), found, source,
        )  # fmt: skip


def server_urls(endpoint: str) -> tuple[str, str]:
    """``endpoint`` without a trailing ``/``, and the server's root (without ``/v1``): where
    its own endpoints are (``/props``, ``/tokenize``, ``/api/ps``)."""
    base = endpoint.rstrip("/")
    return base, base[: -len("/v1")] if base.endswith("/v1") else base


def as_is(text: str) -> str:
    """A client's ``say`` that shows errors unchanged (a local server's own endpoints: their
    errors are not shown; a failed probe or count leaves its default)."""
    return text


class ServerAPI:
    """Requests to a local server's own endpoints, with the run's headers (its key: a server
    may want it): the JSON of a 200 answer (at most ``limit`` bytes), else None (an error,
    another status, not JSON)."""

    def __init__(self, client: HTTPClient, headers: Mapping[str, str], *, limit: int) -> None:
        self._client = client
        self._headers = dict(headers)
        self._limit = limit

    async def json(self, url: str) -> Any:
        """``GET url``'s JSON."""
        return await self._send("GET", url, None)

    async def post(self, url: str, body: Mapping[str, Any]) -> Any:
        """The JSON answered to ``POST url`` of ``body`` as JSON."""
        return await self._send("POST", url, orjson.dumps(body))

    async def _send(self, method: str, url: str, content: bytes | None) -> Any:
        headers = self._headers
        if content is not None:
            headers = {**headers, "Content-Type": "application/json"}
        try:
            answer = await self._client.request(method, url, content, headers, self._limit)
            return orjson.loads(answer.body) if answer.status == 200 else None
        except (CallError, ValueError):
            logger.debug("%s %s: no answer", method, url, exc_info=True)
            return None


def _owned_by(data: Any) -> str | None:
    """Who owns the models ``/v1/models`` lists, when all say the same."""
    models = data.get("data") if isinstance(data, dict) else None
    if not isinstance(models, list) or not models:
        return None
    owners = {m.get("owned_by") for m in models if isinstance(m, dict)}
    owner = owners.pop() if len(owners) == 1 else None
    return owner if isinstance(owner, str) else None


def _max_model_len(data: Any) -> int | None:
    """vLLM's ``max_model_len`` of the (smallest) model ``/v1/models`` lists."""
    models = data.get("data") if isinstance(data, dict) else None
    found = [whole_number(m.get("max_model_len")) for m in models or [] if isinstance(m, dict)]
    sizes = [n for n in found if n is not None]
    return min(sizes) if sizes else None


def _ollama_context(data: Any) -> int | None:
    """The (smallest) ``context_length`` of the models Ollama's ``/api/ps`` lists as loaded."""
    models = data.get("models") if isinstance(data, dict) else None
    found = [whole_number(m.get("context_length")) for m in models or [] if isinstance(m, dict)]
    sizes = [n for n in found if n is not None]
    return min(sizes) if sizes else None


def _model_ids(data: Any) -> list[str] | None:
    models = data.get("data") if isinstance(data, dict) else None
    if not isinstance(models, list):
        return None
    return [m["id"] for m in models if isinstance(m, dict) and isinstance(m.get("id"), str)]


def _total_slots(data: Any) -> int | None:
    return whole_number(data.get("total_slots") if isinstance(data, dict) else None)


def _listed_slots(data: Any) -> int | None:
    return len(data) if isinstance(data, list) and data else None


def _llama_cpp_python(data: Any) -> int | None:
    models = data.get("data") if isinstance(data, dict) else None
    if not isinstance(models, list) or not models:
        return None
    same = all(
        isinstance(m, dict) and m.get("owned_by") == "me" and m.get("permissions") == []
        for m in models
    )
    return 1 if same else None


def server_context(listing: Any) -> int | None:
    """``n_ctx`` of one slot, from llama.cpp's ``/props`` (``default_generation_settings``)
    or ``/slots`` (the smallest of the slots'), or None when the listing has none."""
    found: list[Any] = []
    if isinstance(listing, Mapping):
        settings = listing.get("default_generation_settings")
        if isinstance(settings, Mapping):
            found.append(settings.get("n_ctx"))
        found.append(listing.get("n_ctx"))
    elif isinstance(listing, list):
        found = [s.get("n_ctx") for s in listing if isinstance(s, Mapping)]
    sizes = [n for n in map(whole_number, found) if n is not None]
    return min(sizes) if sizes else None


def server_slots(ctx: Any, endpoint: str) -> ServerSlots:
    """The run's :class:`ServerSlots` of ``endpoint`` (``ctx``: the run context)."""
    slots: ServerSlots = ctx.shared(f"ctxeval_llm.slots:{endpoint}", lambda: ServerSlots(endpoint))
    return slots
