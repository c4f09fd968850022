"""A lean HTTP/1.1 client for JSON POSTs, on anyio streams (asyncio and trio alike).

What the direct transport needs and nothing more: keep-alive connections to one origin
(``http`` or ``https``), a request with a ``Content-Length`` body, a response with a
``Content-Length`` or chunked body. A connection that was cut while in use is closed, never
reused; a request that found its idle keep-alive connection closed by the server is sent once
more on a fresh connection (nothing was processed).

It exists because a general client costs several milliseconds of CPU per request on a busy
pool, which is what bounds an evaluation against a fast endpoint.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from urllib.parse import urlsplit

import anyio
import anyio.abc

__all__ = ["HTTPError", "HTTPPool", "Response"]

_MAX_HEADER = 64 * 1024


class HTTPError(OSError):
    """The connection failed, or the server's answer was not valid HTTP.

    Attributes:
        sends: how many times the request was written to a connection before failing.
    """

    sends = 1


class Response:
    """Status, headers (lower-case names) and body of one answer.

    ``sends`` is how many times the request was written: more than 1 when an idle keep-alive
    connection turned out closed and the request went again on another one (each counts as a
    request sent over the network).
    """

    __slots__ = ("body", "headers", "sends", "status")

    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body
        self.sends = 1

    @property
    def status_code(self) -> int:  # the name the retry classifier reads
        return self.status


class _Connection:
    __slots__ = ("buffer", "stream")

    def __init__(self, stream: anyio.abc.ByteStream) -> None:
        self.stream = stream
        self.buffer = bytearray()

    async def _fill(self) -> None:
        try:
            data = await self.stream.receive(65536)
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
            raise HTTPError("the server closed the connection") from None
        self.buffer += data

    async def read_until(self, marker: bytes) -> bytes:
        start = 0
        while True:
            index = self.buffer.find(marker, start)
            if index >= 0:
                head = bytes(self.buffer[:index])
                del self.buffer[: index + len(marker)]
                return head
            if len(self.buffer) > _MAX_HEADER:
                raise HTTPError("the response head is too long")
            start = max(0, len(self.buffer) - len(marker) + 1)
            await self._fill()

    async def read_exactly(self, size: int) -> bytes:
        while len(self.buffer) < size:
            await self._fill()
        data = bytes(self.buffer[:size])
        del self.buffer[:size]
        return data


class HTTPPool:
    """Keep-alive connections to the origin of ``base_url``; :meth:`post` sends one request."""

    def __init__(self, base_url: str, *, headers: Mapping[str, str] | None = None) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"api_base must be an http(s) URL, got {base_url!r}")
        self.tls = parts.scheme == "https"
        self.host = parts.hostname
        self.port = parts.port or (443 if self.tls else 80)
        self.prefix = parts.path.rstrip("/")
        host_header = self.host if parts.port is None else f"{self.host}:{self.port}"
        fixed = {"Host": host_header, "Accept": "application/json", "User-Agent": "ctxeval"}
        fixed.update(headers or {})
        self._head = "".join(f"{k}: {v}\r\n" for k, v in fixed.items())
        self._idle: list[_Connection] = []
        self._ssl = ssl.create_default_context() if self.tls else None

    async def _connect(self) -> _Connection:
        try:
            stream: anyio.abc.ByteStream
            if self._ssl is not None:
                stream = await anyio.connect_tcp(
                    self.host, self.port, tls=True, ssl_context=self._ssl,
                    tls_standard_compatible=False,
                )  # fmt: skip
            else:
                stream = await anyio.connect_tcp(self.host, self.port)
        except OSError as exc:
            raise HTTPError(f"cannot connect to {self.host}:{self.port}: {exc}") from None
        return _Connection(stream)

    async def post(
        self, path: str, body: bytes, *, content_type: str = "application/json"
    ) -> Response:
        """POST ``body`` to ``path`` (under the base URL's path) and read the whole answer."""
        request = (
            f"POST {self.prefix}{path} HTTP/1.1\r\n{self._head}"
            f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode("latin-1") + body
        sends = 0
        try:
            while self._idle:
                connection = self._idle.pop()
                sends += 1
                try:
                    response = await self._exchange(connection, request)
                except _StaleConnectionError:
                    continue  # the server closed an idle connection: try another one
                response.sends = sends
                return response
            sends += 1
            response = await self._exchange(await self._connect(), request, fresh=True)
            response.sends = sends
            return response
        except HTTPError as exc:
            exc.sends = max(sends, 1)
            raise

    async def _exchange(
        self, connection: _Connection, request: bytes, *, fresh: bool = False
    ) -> Response:
        reusable = False
        try:
            try:
                await connection.stream.send(request)
                head = await connection.read_until(b"\r\n\r\n")
            except (HTTPError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
                if not fresh and not connection.buffer:
                    raise _StaleConnectionError from None
                raise HTTPError(f"{exc}") from None
            response, reusable = await self._read_response(connection, head)
            return response
        finally:
            if reusable:
                self._idle.append(connection)
            else:
                with anyio.CancelScope(shield=True):
                    await connection.stream.aclose()

    async def _read_response(self, connection: _Connection, head: bytes) -> tuple[Response, bool]:
        lines = head.decode("latin-1").split("\r\n")
        try:
            version, code, *_ = lines[0].split(" ", 2)
            status = int(code)
        except ValueError:
            raise HTTPError(f"not an HTTP response: {lines[0][:80]!r}") from None
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if headers.get("transfer-encoding", "").lower() == "chunked":
            body = await self._read_chunked(connection)
        elif "content-length" in headers:
            try:
                length = int(headers["content-length"])
            except ValueError:
                raise HTTPError("bad Content-Length") from None
            body = await connection.read_exactly(length)
        else:  # the body runs to the end of the connection
            while True:
                try:
                    await connection._fill()
                except HTTPError:
                    break
            body, connection.buffer = bytes(connection.buffer), bytearray()
            return Response(status, headers, body), False
        keep = headers.get("connection", "").lower() != "close" and version == "HTTP/1.1"
        return Response(status, headers, body), keep

    async def _read_chunked(self, connection: _Connection) -> bytes:
        parts: list[bytes] = []
        while True:
            size_line = await connection.read_until(b"\r\n")
            try:
                size = int(size_line.split(b";")[0].strip(), 16)
            except ValueError:
                raise HTTPError("bad chunk size") from None
            if size == 0:
                while await connection.read_until(b"\r\n"):  # trailers, then the empty line
                    pass
                return b"".join(parts)
            parts.append(await connection.read_exactly(size))
            await connection.read_until(b"\r\n")

    async def aclose(self) -> None:
        """Close the idle connections."""
        idle, self._idle = self._idle, []
        for connection in idle:
            with anyio.CancelScope(shield=True):
                await connection.stream.aclose()


class _StaleConnectionError(Exception):
    """An idle keep-alive connection turned out closed before any byte of the answer."""
