"""How many requests a local server computes at once, found once per run (within 3 s):
ctxeval then sends no more, so that requests wait in ctxeval (untimed) rather than in the
server's queue (where the wait would count against ``timeout``).

Asked of a server on this machine or the local network (a loopback, private or ``.local``
host), never of a hosted API:

* llama.cpp's ``llama-server``: ``GET /props`` gives ``total_slots`` (its ``-np``);
* a server that lists its slots at ``GET /slots``: their number;
* llama-cpp-python's server (one request at a time; its ``/v1/models`` lists models with an
  empty ``permissions`` list and ``owned_by: "me"``): 1.

Anything else (vLLM, which batches; Ollama; LM Studio; a server that answers none of these) is
not capped: ``--max-concurrency`` is the setting. A probe that fails is not an error.
"""

from __future__ import annotations

import ipaddress
import logging
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx

__all__ = ["ServerSlots", "is_local", "server_slots"]

logger = logging.getLogger(__name__)

_PROBE_TIMEOUT = 3.0


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
        self.models: list[str] | None = None
        """The models the server lists at ``/v1/models`` (a local server names the file it
        loaded there, whatever model name the requests give)."""
        self._limiter: anyio.CapacityLimiter | None = None
        self._found = False
        self._lock = anyio.Lock()

    async def limiter(self, headers: dict[str, str] | None = None) -> anyio.CapacityLimiter | None:
        """The limiter that holds requests to the server's slots, or None when not capped."""
        if not self._found:
            async with self._lock:
                if not self._found:
                    if is_local(self.endpoint):
                        await self._discover(headers or {})
                    self._found = True
        return self._limiter

    async def _discover(self, headers: dict[str, str]) -> None:
        base = self.endpoint.rstrip("/")
        root = base[: -len("/v1")] if base.endswith("/v1") else base
        with anyio.move_on_after(_PROBE_TIMEOUT):  # all probes together: then not capped
            async with httpx.AsyncClient(
                timeout=_PROBE_TIMEOUT, headers=headers, trust_env=False
            ) as client:
                await self._ask(client, base, root)

    async def _ask(self, client: httpx.AsyncClient, base: str, root: str) -> None:
        for source, url, read in (
            ("/props", f"{root}/props", _total_slots),
            ("/slots", f"{root}/slots", _listed_slots),
            ("/v1/models", f"{base}/models", _llama_cpp_python),
        ):
            try:
                response = await client.get(url)
                listing = response.json() if response.status_code == 200 else None
            except (httpx.HTTPError, ValueError):
                listing = None
            if source == "/v1/models":
                self.models = _model_ids(listing)
            found = read(listing) if listing is not None else None
            if found:
                if self.models is None and source != "/v1/models":
                    self.models = await _listed_models(client, base)
                self.slots, self.source = found, source
                self._limiter = anyio.CapacityLimiter(found)
                logger.info(
                    "%s computes %d request(s) at once (%s); ctxeval sends no more, the "
                    "others wait untimed (--max-concurrency sets it for other servers)",
                    self.endpoint, found, source,
                )  # fmt: skip
                return


def _model_ids(data: Any) -> list[str] | None:
    models = data.get("data") if isinstance(data, dict) else None
    if not isinstance(models, list):
        return None
    return [m["id"] for m in models if isinstance(m, dict) and isinstance(m.get("id"), str)]


async def _listed_models(client: httpx.AsyncClient, base: str) -> list[str] | None:
    try:
        response = await client.get(f"{base}/models")
        return _model_ids(response.json()) if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None


def _total_slots(data: Any) -> int | None:
    slots = data.get("total_slots") if isinstance(data, dict) else None
    return slots if isinstance(slots, int) and slots > 0 else None


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


def server_slots(ctx: Any, endpoint: str) -> ServerSlots:
    """The run's :class:`ServerSlots` of ``endpoint`` (``ctx``: the run context)."""
    slots: ServerSlots = ctx.shared(f"ctxeval_llm.slots:{endpoint}", lambda: ServerSlots(endpoint))
    return slots
