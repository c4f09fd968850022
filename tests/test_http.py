"""The direct transport's HTTP/1.1 client against raw servers: chunked bodies, closed
connections, keep-alive reuse and a cut-off answer."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable

import anyio
import anyio.abc
import pytest

from ctxeval_llm.http import HTTPError, HTTPPool

pytestmark = pytest.mark.anyio

CLOSED = (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError)
Handler = Callable[[anyio.abc.SocketStream], Awaitable[None]]


async def read_request(stream: anyio.abc.SocketStream) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        data += await stream.receive()
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length")
    )
    while len(body) < length:
        body += await stream.receive()
    return body


async def serve(handler: Handler, test: Callable[[str], Awaitable[None]]) -> list[int]:
    """Serve ``handler`` per connection on 127.0.0.1, run ``test``; return the connections."""
    connections: list[int] = []
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)

    async def handle(stream: anyio.abc.SocketStream) -> None:
        connections.append(id(stream))
        async with stream:
            with contextlib.suppress(
                anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError
            ):
                await handler(stream)

    async with anyio.create_task_group() as group:
        group.start_soon(listener.serve, handle)
        with anyio.fail_after(10):
            await test(f"http://127.0.0.1:{port}/v1")
        group.cancel_scope.cancel()
    return connections


async def test_keep_alive_reuses_one_connection() -> None:
    async def handler(stream: anyio.abc.SocketStream) -> None:
        while True:
            body = await read_request(stream)
            await stream.send(
                b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
            )

    async def test(url: str) -> None:
        pool = HTTPPool(url)
        for i in range(5):
            response = await pool.post("/echo", b"x" * i)
            assert (response.status, response.body) == (200, b"x" * i)
        await pool.aclose()

    assert len(await serve(handler, test)) == 1


async def test_chunked_body_with_trailers() -> None:
    async def handler(stream: anyio.abc.SocketStream) -> None:
        await read_request(stream)
        await stream.send(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\nX-Trailer: 1\r\n\r\n"
        )

    async def test(url: str) -> None:
        response = await HTTPPool(url).post("/x", b"{}")
        assert response.body == b"hello, world"

    await serve(handler, test)


async def test_connection_close_and_a_stale_idle_connection() -> None:
    async def handler(stream: anyio.abc.SocketStream) -> None:
        await read_request(stream)  # answer once, keep-alive advertised, then hang up
        await stream.send(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")

    async def test(url: str) -> None:
        pool = HTTPPool(url)
        assert (await pool.post("/a", b"1")).body == b"ok"
        await anyio.sleep(0.05)  # the server has closed the idle connection by now
        assert (await pool.post("/b", b"2")).body == b"ok"  # sent again on a fresh one

    assert len(await serve(handler, test)) == 2


async def test_an_answer_cut_short_is_an_error() -> None:
    async def handler(stream: anyio.abc.SocketStream) -> None:
        await read_request(stream)
        await stream.send(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial")

    async def test(url: str) -> None:
        with pytest.raises(HTTPError, match="closed the connection"):
            await HTTPPool(url).post("/x", b"{}")

    await serve(handler, test)


async def test_nothing_listening() -> None:
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    await listener.aclose()
    with pytest.raises(HTTPError, match="cannot connect"):
        await HTTPPool(f"http://127.0.0.1:{port}").post("/x", b"{}")


def test_only_http_urls() -> None:
    with pytest.raises(ValueError, match="http"):
        HTTPPool("ftp://example.com")
