"""The HTTP client the ``litellm`` transport hands to litellm: answers cut at
``max_response_bytes``.

litellm reads each answer whole, with its own clients (the ``openai`` SDK's httpx client,
its own httpx-over-aiohttp one), and no bound: a 300 MB body, an endless chunked body or a gzip
bomb filled the memory (5 GB and more). So each request litellm sends for ctxeval goes through
a client of ctxeval's instead (:func:`bounded_client`): an :class:`httpx.AsyncClient` (the
environment's proxies, the system's certificates, no redirects) whose transports
(:class:`BoundedTransport`) hand litellm the answer's body through :class:`BoundedStream`:

* the bytes counted as they come, and the read stopped with :class:`ResponseTooLarge` past
  ``limit`` (a ``Content-Length`` past it is refused before anything is read); the
  connection is then closed;
* ``gzip`` and ``deflate`` undone here, at most 64 KiB of output at a time, and the *decoded*
  bytes counted: a gzip bomb is cut after ``limit`` bytes of output, never inflated whole
  (requests ask for ``Accept-Encoding: gzip, deflate`` only; an answer in another coding,
  which httpx would inflate whole, is refused with :class:`UnreadableEncoding`).

:class:`CallRecord` (a context variable, set around each ``litellm.acompletion``) tells the
transport whether the request went through the bounded client and whether its answer was
refused,
whatever litellm turned the error into.
"""

from __future__ import annotations

import contextvars
import zlib
from collections.abc import AsyncIterator, Iterable, Iterator

import attrs
import httpx

from .base import CONNECT_TIMEOUT, ssl_context
from .errors import oversize_message

__all__ = [
    "CURRENT_CALL",
    "BoundedStream",
    "BoundedTransport",
    "CallRecord",
    "ResponseTooLarge",
    "UnreadableEncoding",
    "bounded_client",
]

STEP = 64 * 1024
"""The most bytes one step of decoding produces."""

ACCEPTED_CODINGS = "gzip, deflate"
"""What the requests accept (what :class:`BoundedStream` decodes within the bound)."""


@attrs.define
class CallRecord:
    """What the bounded client saw of one ``litellm.acompletion`` call."""

    requests: int = 0
    """Requests sent through the bounded client."""
    refused: ResponseTooLarge | UnreadableEncoding | None = None
    """Why the answer was not read, if it was not: cut at the bound, or in a coding not asked
    for."""


CURRENT_CALL: contextvars.ContextVar[CallRecord | None] = contextvars.ContextVar(
    "ctxeval_llm_litellm_call", default=None
)
"""The record of the call in progress in this context (set by the ``litellm`` transport)."""


class ResponseTooLarge(httpx.ReadError):
    """An answer past the bound; reading it stopped there. An httpx error, so that litellm and
    the openai SDK carry it up to the transport, which makes it the one
    :class:`~ctxeval_llm._http.errors.ResponseTooLargeError` (its message the same)."""

    def __init__(self, url: str, limit: int, size: int, *, declared: bool = False) -> None:
        self.url = url
        self.limit = limit
        self.size = size
        self.declared = declared
        how = (
            f"announced {size} bytes (Content-Length)"
            if declared
            else f"was cut off after {size} bytes"
        )
        super().__init__(oversize_message(url, limit, f": it {how}"))


class UnreadableEncoding(httpx.DecodingError):
    """An answer in a content coding that was not asked for (and cannot be read within the
    bound)."""


class _Inflater:
    """One content coding (``gzip`` or ``deflate``) undone at most :data:`STEP` bytes at a time."""

    def __init__(self, coding: str) -> None:
        self._coding = coding
        gzip = coding in {"gzip", "x-gzip"}
        self._decoder = zlib.decompressobj(zlib.MAX_WBITS | 16 if gzip else zlib.MAX_WBITS)
        self._may_be_raw = not gzip  # "deflate" is zlib-wrapped, but some servers send it raw
        self._started = False

    def feed(self, data: bytes) -> Iterator[bytes]:
        while True:
            try:
                out = self._decoder.decompress(data, STEP)
            except zlib.error as exc:
                if self._may_be_raw and not self._started:
                    self._decoder = zlib.decompressobj(-zlib.MAX_WBITS)
                    self._may_be_raw = False
                    continue
                raise httpx.DecodingError(f"the {self._coding} answer is corrupt: {exc}") from None
            self._started = True
            if out:
                yield out
            data = self._decoder.unconsumed_tail
            if not data and len(out) < STEP:
                return

    def feed_all(self, pieces: Iterable[bytes]) -> Iterator[bytes]:
        for piece in pieces:
            yield from self.feed(piece)

    def finish(self) -> bytes:
        try:
            return self._decoder.flush()
        except zlib.error as exc:
            raise httpx.DecodingError(f"the {self._coding} answer is corrupt: {exc}") from None


def _codings(response: httpx.Response) -> list[str]:
    """The content codings of ``response``, in the order they were applied (no ``identity``)."""
    found: list[str] = []
    for value in response.headers.get_list("content-encoding"):
        for coding in value.split(","):
            coding = coding.strip().lower()
            if coding and coding != "identity":
                found.append(coding)
    return found


class BoundedStream(httpx.AsyncByteStream):
    """``inner``'s bytes, decoded (``codings``, applied in that order), cut at ``limit``."""

    def __init__(
        self, inner: httpx.AsyncByteStream, url: str, limit: int, codings: list[str]
    ) -> None:
        self._inner = inner
        self._url = url
        self._limit = limit
        self._codings = codings

    def _cut(self, size: int) -> ResponseTooLarge:
        error = ResponseTooLarge(self._url, self._limit, size)
        record = CURRENT_CALL.get()
        if record is not None:
            record.refused = error
        return error

    async def __aiter__(self) -> AsyncIterator[bytes]:
        inflaters = [_Inflater(coding) for coding in reversed(self._codings)]
        received = 0  # as sent (compressed or not)
        size = 0  # as decoded
        async for chunk in self._inner:
            received += len(chunk)
            if received > self._limit:
                raise self._cut(received)
            pieces: Iterable[bytes] = (chunk,)
            for inflater in inflaters:
                pieces = inflater.feed_all(pieces)
            for piece in pieces:
                size += len(piece)
                if size > self._limit:
                    raise self._cut(size)
                yield piece
        for i, inflater in enumerate(inflaters):
            pieces = (inflater.finish(),)
            for later in inflaters[i + 1 :]:
                pieces = later.feed_all(pieces)
            for piece in pieces:
                size += len(piece)
                if size > self._limit:
                    raise self._cut(size)
                if piece:
                    yield piece

    async def aclose(self) -> None:
        await self._inner.aclose()


class BoundedTransport(httpx.AsyncBaseTransport):
    """``inner``, with each answer's body cut at ``limit`` bytes (see the module)."""

    def __init__(self, inner: httpx.AsyncBaseTransport, limit: int) -> None:
        self._inner = inner
        self._limit = limit

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        record = CURRENT_CALL.get()
        if record is not None:
            record.requests += 1
        request.headers["Accept-Encoding"] = ACCEPTED_CODINGS
        response = await self._inner.handle_async_request(request)
        url = str(request.url.copy_with(query=None))
        codings = _codings(response)
        unknown = [c for c in codings if c not in {"gzip", "x-gzip", "deflate"}]
        if unknown:
            await response.aclose()
            refused = UnreadableEncoding(
                f"{url}: the answer is in Content-Encoding {', '.join(unknown)}, which was not "
                f"asked for (Accept-Encoding: {ACCEPTED_CODINGS}) and cannot be read within "
                "max_response_bytes"
            )
            if record is not None:
                record.refused = refused
            raise refused
        declared = response.headers.get("content-length", "")
        if not codings and declared.isdigit() and int(declared) > self._limit:
            await response.aclose()
            error = ResponseTooLarge(url, self._limit, int(declared), declared=True)
            if record is not None:
                record.refused = error
            raise error
        stream = response.stream
        assert isinstance(stream, httpx.AsyncByteStream)
        headers = response.headers
        if codings:  # decoded here: httpx must not decode it again
            headers = httpx.Headers(
                [
                    (name, value)
                    for name, value in response.headers.multi_items()
                    if name.lower() not in {"content-encoding", "content-length"}
                ]
            )
        return httpx.Response(
            response.status_code,
            headers=headers,
            stream=BoundedStream(stream, url, self._limit, codings),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._inner.aclose()


def bounded_client(limit: int) -> httpx.AsyncClient:
    """An :class:`httpx.AsyncClient` whose every answer is cut at ``limit`` bytes (decoded):
    the environment's proxies (``HTTPS_PROXY``, ``NO_PROXY``...), certificates checked against
    the system's store, no redirects, no timeout but the connect one (the scheduler times each
    attempt)."""
    client = httpx.AsyncClient(
        timeout=httpx.Timeout(None, connect=CONNECT_TIMEOUT),
        trust_env=True,
        verify=ssl_context(),
        follow_redirects=False,
    )
    # every transport of the client (the direct one and one per proxy of the environment)
    # wrapped: httpx offers no public way to wrap them once it has read the environment
    client._transport = BoundedTransport(client._transport, limit)
    client._mounts = {
        pattern: None if transport is None else BoundedTransport(transport, limit)
        for pattern, transport in client._mounts.items()
    }
    return client
