"""The ``openai`` transport's two HTTP clients (aiohttp on asyncio, httpx on trio): which one a
run gets, and that both keep every limit the httpx transport kept: faults, body size, cancelled
requests closing their connection, proxies as httpx's ``trust_env`` reads them, TLS against
the system's store or a custom CA, and ``extra_headers``.

Correctness only: nothing here asserts on time (``bench/llm_throughput.py`` measures the cost
per request). The cases of a run run on each (async library, client) pair a run can have:
asyncio with aiohttp (the default), asyncio with httpx (``CTXEVAL_HTTP_CLIENT=httpx``), trio
with httpx."""

from __future__ import annotations

import base64
import contextlib
import gc
import json
import shutil
import socket
import ssl
import subprocess
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

import ctxeval
from ctxeval import RetryPolicy, Status
from ctxeval_llm import LLMConfig
from ctxeval_llm._http.base import env_proxy
from ctxeval_llm._http.choice import CLIENT_VARIABLE, choose_client
from ctxeval_llm._transports.openai_compatible import OpenAITransport
from fakes.openai_server import FakeOpenAI, Reply
from fakes.proxy import ForwardProxy
from llm_judge import Judge
from test_faults import FAULTS, PATIENT, SAMPLES, judge

KEY = "sk-transport-0123456789abcdef"
SAMPLE = {"user_input": "q", "reference": "r", "retrieved_contexts": ["c"]}
ANSWER = json.dumps({"reason": "r", "verdict": 1})
ONCE = RetryPolicy(max_attempts=1)

# (async library, forced client, the client it must be)
PAIRS = [("asyncio", None, "aiohttp"), ("asyncio", "httpx", "httpx"), ("trio", None, "httpx")]
PAIR_IDS = ["asyncio-aiohttp", "asyncio-httpx", "trio-httpx"]


@pytest.fixture(params=PAIRS, ids=PAIR_IDS)
def pair(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    """(the run's async library, the HTTP client it must use), the environment set for it."""
    backend, forced, expected = request.param
    if forced is None:
        monkeypatch.delenv(CLIENT_VARIABLE, raising=False)
    else:
        monkeypatch.setenv(CLIENT_VARIABLE, forced)
    for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY",
                 "all_proxy"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    return backend, expected


def run(
    backend: str, samples: list[dict[str, Any]], llm: Any, metric: Any = "context_precision",
    **options: Any,
) -> ctxeval.Evaluation:  # fmt: skip
    async def main() -> ctxeval.Evaluation:
        with anyio.fail_after(120):  # a run must never hang
            return await ctxeval.aevaluate(samples, [metric], llm=llm, **options)

    return anyio.run(main, backend=backend)


def used_client(backend: str, config: LLMConfig) -> tuple[str | None, dict[str, Any]]:
    """The client one request through a fresh transport used, and what it was made with; the
    transport is closed at the end, on the same loop."""

    async def main() -> tuple[str | None, dict[str, Any]]:
        transport = OpenAITransport(config, max_connections=3)
        await transport.complete(None, {"model": "x", "messages": []})  # type: ignore[arg-type]
        name, client = transport.client_name, transport._pool.current
        facts: dict[str, Any] = {}
        if name == "aiohttp":
            session = client._session  # type: ignore[union-attr]
            facts["limit"] = session.connector.limit
            await transport.aclose()
            facts["closed"] = session.closed
        else:
            pool = client._client  # type: ignore[union-attr]
            await transport.aclose()
            facts["closed"] = pool.is_closed
        assert transport.client_name is None
        return name, facts

    return anyio.run(main, backend=backend)


# --- which client -----------------------------------------------------------------------------


def test_each_run_gets_its_client_made_and_closed_on_its_loop(pair: tuple[str, str]) -> None:
    backend, expected = pair
    with FakeOpenAI(lambda request: ANSWER) as server:
        config = LLMConfig(model="openai/x", api_base=server.url, api_key=KEY)
        name, facts = used_client(backend, config)
    assert name == expected
    assert facts["closed"]
    if name == "aiohttp":
        assert facts["limit"] == 3  # the pool: the resource's max_concurrency


def test_http2_and_a_proxy_aiohttp_does_not_speak_go_to_httpx(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(CLIENT_VARIABLE, raising=False)

    async def chosen(url: str, http2: bool = False) -> str:
        return choose_client(url, http2=http2)

    assert anyio.run(chosen, "http://127.0.0.1:1/v1") == "aiohttp"
    assert anyio.run(chosen, "http://127.0.0.1:1/v1", True) == "httpx"
    assert anyio.run(chosen, "http://127.0.0.1:1/v1", backend="trio") == "httpx"
    monkeypatch.setenv("HTTPS_PROXY", "socks5://127.0.0.1:1080")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    assert anyio.run(chosen, "https://api.example.com/v1") == "httpx"
    assert anyio.run(chosen, "http://127.0.0.1:1/v1") == "aiohttp"  # not through that proxy
    monkeypatch.setenv(CLIENT_VARIABLE, "curl")
    with pytest.raises(ctxeval.ConfigError, match=CLIENT_VARIABLE):
        anyio.run(chosen, "http://127.0.0.1:1/v1")


@pytest.mark.filterwarnings("ignore::ResourceWarning")
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_a_transport_kept_across_runs_gets_a_client_on_each_loop() -> None:
    """Closed at the end of each run (as ctxeval closes its own), or not (a transport of one's
    own, kept by its caller): each run gets a client made on its own loop."""
    with FakeOpenAI(lambda request: ANSWER) as server:
        transport = OpenAITransport(
            LLMConfig(model="openai/x", api_base=server.url, api_key=KEY), max_connections=2
        )

        async def once(close: bool) -> str | None:
            await transport.complete(None, {"model": "x", "messages": []})  # type: ignore[arg-type]
            name = transport.client_name
            if close:
                await transport.aclose()
            return name

        assert anyio.run(once, True) == "aiohttp"
        assert anyio.run(once, True, backend="trio") == "httpx"
        assert anyio.run(once, False) == "aiohttp"  # left open: its loop ends with it
        assert anyio.run(once, False, backend="trio") == "httpx"
        assert anyio.run(once, True) == "aiohttp"
        gc.collect()  # what was left open goes here, with its warnings
        assert server.count == 5


# --- faults, on every client ------------------------------------------------------------------


@pytest.mark.parametrize("fault", FAULTS)
def test_every_fault_is_survived_by_every_client(pair: tuple[str, str], fault: str) -> None:
    backend, _ = pair
    with FakeOpenAI(
        judge(), faults={fault: 0.3}, retry_after=0.01, seed=zlib.crc32(fault.encode()) % 1000
    ) as server:
        llm = LLMConfig(model="openai/judge", api_base=server.url, api_key="sk-faults")
        evaluation = run(
            backend, SAMPLES, llm, timeout=1.0 if fault == "hang" else 30.0, retry=PATIENT,
            max_concurrency=8,
        )  # fmt: skip
        assert len(evaluation.results) == len(SAMPLES)
        problems = [(r.sample_id, r.reason) for r in evaluation.results if r.status != Status.OK]
        assert not problems, problems
        assert all(r.score == 1.0 for r in evaluation.results)
        assert server.count == sum(r.usage.requests for r in evaluation.results)


@pytest.mark.parametrize("status", [429, 500, 503, 400, 401, 404])
def test_an_error_status_is_classified_alike_by_every_client(
    pair: tuple[str, str], status: int
) -> None:
    backend, _ = pair
    fault = {429: "429", 500: "500", 503: "503", 400: "400", 401: "401", 404: "404-model"}
    with FakeOpenAI(lambda request: fault[status]) as server:
        llm = LLMConfig(model="openai/x", api_base=server.url, api_key=KEY)
        try:
            evaluation = run(backend, [SAMPLE], llm, retry=ONCE)
        except ctxeval.UnusableLLMError as exc:  # 401 and 404: the run stops
            reason = f"{type(exc).__name__}: {exc}"
        else:
            [row] = evaluation.results
            assert row.status is Status.ERROR
            reason = row.reason or ""
    assert f"HTTP {status} from {server.url}/chat/completions" in reason
    assert KEY not in reason
    kind = {429: "RateLimitError", 401: "AuthenticationError", 404: "ModelNotFoundError",
            400: "BadRequestError"}.get(status, "ServiceError")  # fmt: skip
    assert kind in reason


def test_an_endless_body_is_cut_at_the_limit_by_every_client(pair: tuple[str, str]) -> None:
    backend, _ = pair
    with FakeOpenAI(lambda request: "endless") as server:
        llm = LLMConfig(
            model="openai/x", api_base=server.url, api_key=KEY, max_response_bytes=100_000
        )
        [row] = run(backend, [SAMPLE], llm, retry=ONCE).results
    assert row.status is Status.ERROR
    assert "larger than 100000 bytes (max_response_bytes)" in (row.reason or "")


# --- a cancelled request closes its connection ------------------------------------------------


class RawServer:
    """An HTTP/1.1 server on 127.0.0.1 (TLS with ``tls``) that answers every request one way
    (probes of the server's kind, ``GET /props`` and the like: 404), and records each
    connection the client closed while a request was in flight.

    ``behaviour``: ``answer`` (a chat completion), ``hang`` (never answers), ``slow-body``
    (the head, then a byte of a long body every 20 ms, until the client hangs up), ``oversize``
    (a body of 64 KiB chunks, until the client hangs up)."""

    def __init__(self, behaviour: str, tls: ssl.SSLContext | None = None) -> None:
        self.behaviour = behaviour
        self.tls = tls
        self.requests = 0
        self.heads: list[bytes] = []
        self.hung_up = 0
        self.changed = threading.Condition()
        self._stop = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.2)
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        port = self._listener.getsockname()[1]
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{port}/v1"

    def wait_hung_up(self, count: int, seconds: float = 20.0) -> bool:
        with self.changed:
            return self.changed.wait_for(lambda: self.hung_up >= count, seconds)

    def close(self) -> None:
        self._stop.set()
        self._listener.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                connection, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._serve, args=(connection,), daemon=True).start()

    def _serve(self, connection: socket.socket) -> None:
        with contextlib.suppress(OSError), contextlib.ExitStack() as stack:
            stack.callback(connection.close)
            if self.tls is not None:
                connection = self.tls.wrap_socket(connection, server_side=True)
                stack.callback(connection.close)
            reader = stack.enter_context(connection.makefile("rb"))
            while not self._stop.is_set():
                head = b""
                while not head.endswith(b"\r\n\r\n"):
                    line = reader.readline()
                    if not line:
                        return
                    head += line
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                reader.read(length)
                with self.changed:
                    self.heads.append(head)
                if head.startswith((b"GET /props ", b"GET /slots ", b"GET /v1/models ")):
                    # probes of what the server is: not this one
                    connection.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 2\r\n\r\n{}")
                    continue
                with self.changed:
                    self.requests += 1
                if self.behaviour == "answer":
                    body = json.dumps(
                        {"choices": [{"message": {"content": ANSWER}, "finish_reason": "stop"}]}
                    ).encode()
                    connection.sendall(
                        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                        + f"Content-Length: {len(body)}\r\n\r\n".encode()
                        + body
                    )
                    continue
                self._until_hung_up(connection)
                return

    def _until_hung_up(self, connection: socket.socket) -> None:
        try:
            if self.behaviour == "hang":
                connection.settimeout(60)
                while connection.recv(1024):
                    pass
            else:
                head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                connection.sendall(head + b"Content-Length: 100000000\r\n\r\n")
                piece = b"x" if self.behaviour == "slow-body" else b"x" * 65536
                for _ in range(3000):
                    connection.sendall(piece)
                    if self.behaviour == "slow-body":
                        self._stop.wait(0.02)
                return  # the client never hung up: not counted
        except OSError:
            pass
        with self.changed:
            self.hung_up += 1
            self.changed.notify_all()


@contextlib.contextmanager
def raw_server(behaviour: str, tls: ssl.SSLContext | None = None) -> Iterator[RawServer]:
    server = RawServer(behaviour, tls)
    try:
        yield server
    finally:
        server.close()


@pytest.mark.parametrize("behaviour", ["hang", "slow-body"])
def test_a_timed_out_request_closes_its_connection(pair: tuple[str, str], behaviour: str) -> None:
    """Cut by the scheduler's timeout while waiting for the answer's head, or in the middle of
    its body: the server sees the client hang up (it would stop generating)."""
    backend, _ = pair
    with raw_server(behaviour) as server:
        llm = LLMConfig(model="openai/x", api_base=server.url, api_key=KEY)
        samples = [{"id": str(i), **SAMPLE} for i in range(3)]
        evaluation = run(backend, samples, llm, retry=ONCE, timeout=0.5, max_concurrency=3)
        assert all(r.status is Status.ERROR for r in evaluation.results)
        assert all("within 0.5 s" in (r.reason or "") for r in evaluation.results)
        assert server.wait_hung_up(3), (server.requests, server.hung_up)
        assert server.requests == 3


def test_an_oversize_answer_closes_its_connection(pair: tuple[str, str]) -> None:
    backend, _ = pair
    with raw_server("oversize") as server:
        llm = LLMConfig(
            model="openai/x", api_base=server.url, api_key=KEY, max_response_bytes=200_000
        )
        [row] = run(backend, [SAMPLE], llm, retry=ONCE).results
        assert "larger than 200000 bytes" in (row.reason or "")
        assert server.wait_hung_up(1)


def test_a_stopped_run_closes_the_connections_in_flight(pair: tuple[str, str]) -> None:
    """A run cancelled from outside (its caller's deadline) hangs up on every request."""
    backend, _ = pair
    with raw_server("hang") as server:
        llm = LLMConfig(model="openai/x", api_base=server.url, api_key=KEY)
        samples = [{"id": str(i), **SAMPLE} for i in range(4)]

        async def main() -> None:
            with anyio.move_on_after(1.0):
                await ctxeval.aevaluate(samples, ["context_precision"], llm=llm, timeout=60)

        anyio.run(main, backend=backend)
        assert server.requests >= 1  # (the gate may send one at a time until one is answered)
        assert server.wait_hung_up(server.requests), (server.requests, server.hung_up)


# --- proxies ---------------------------------------------------------------------------------


def test_requests_go_through_the_environment_proxy_with_its_credentials(
    pair: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    backend, _ = pair
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    with FakeOpenAI(Judge(verdicts={"c": 1})) as server, ForwardProxy() as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url.replace("http://", "http://us%40er:p%3Ass@"))
        llm = LLMConfig(model="openai/x", api_base=server.url, api_key=KEY)
        evaluation = run(backend, [{"id": str(i), **SAMPLE} for i in range(3)], llm)
    assert all(r.status is Status.OK for r in evaluation.results)
    # the local server's probe goes the way the requests go, through the proxy
    assert proxy.probed_only(server.url.removesuffix("/v1"))
    assert proxy.posts == [f"POST {server.url}/chat/completions"] * 3
    expected = "Basic " + base64.b64encode(b"us@er:p:ss").decode()
    assert {h.get("proxy-authorization") for h in server.headers} == {expected}


def test_no_proxy_bypasses_the_proxy_on_every_client(
    pair: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    backend, _ = pair
    with FakeOpenAI(Judge(verdicts={"c": 1})) as server, ForwardProxy() as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        monkeypatch.setenv("NO_PROXY", "example.com, 127.0.0.1")
        llm = LLMConfig(model="openai/x", api_base=server.url, api_key=KEY)
        run(backend, [SAMPLE, SAMPLE], llm)
    assert proxy.seen == []
    assert server.count == 2


ENVIRONMENTS: list[dict[str, str]] = [
    {},
    {"HTTP_PROXY": "http://proxy:3128"},
    {"HTTPS_PROXY": "proxy:3128"},
    {"ALL_PROXY": "http://all:1"},
    {"ALL_PROXY": "http://all:1", "HTTPS_PROXY": "http://secure:2"},
    {"HTTP_PROXY": "http://p:1", "HTTPS_PROXY": "http://p:1", "NO_PROXY": "*"},
    {"HTTP_PROXY": "http://p:1", "HTTPS_PROXY": "http://p:1", "NO_PROXY": "example.com"},
    {"HTTP_PROXY": "http://p:1", "HTTPS_PROXY": "http://p:1", "NO_PROXY": ".example.com"},
    {"HTTP_PROXY": "http://p:1", "HTTPS_PROXY": "http://p:1", "NO_PROXY": "localhost,10.0.0.7"},
    {"HTTP_PROXY": "http://p:1", "HTTPS_PROXY": "http://p:1", "NO_PROXY": "::1"},
    {"HTTP_PROXY": "http://p:1", "HTTPS_PROXY": "http://p:1", "NO_PROXY": "example.com:8443"},
    {
        "HTTP_PROXY": "http://p:1",
        "HTTPS_PROXY": "http://p:1",
        "NO_PROXY": "https://api.example.com",
    },
    {"https_proxy": "http://lower:1", "HTTPS_PROXY": "http://upper:2"},
]
URLS = [
    "http://example.com/v1",
    "https://example.com/v1",
    "https://api.example.com/v1",
    "https://example.com:8443/v1",
    "https://notexample.com/v1",
    "http://localhost:8000/v1",
    "http://10.0.0.7:8000/v1",
    "http://[::1]:8000/v1",
]


@pytest.mark.parametrize("environment", ENVIRONMENTS, ids=lambda e: repr(e))
def test_the_proxy_is_the_one_httpx_would_use(
    environment: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    httpx_utils = pytest.importorskip("httpx._utils")
    import httpx

    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    mounts = {
        httpx_utils.URLPattern(k): v for k, v in httpx_utils.get_environment_proxies().items()
    }
    for url in URLS:
        by_httpx = next(
            (mounts[p] for p in sorted(mounts) if p.matches(httpx.URL(url))), None
        )  # the most specific pattern first, as httpx looks them up
        assert env_proxy(url) == by_httpx, url


# --- TLS: the system's store, or a custom CA --------------------------------------------------


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A private CA and a certificate it signed for 127.0.0.1 (made with the openssl CLI)."""
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command")
    folder = tmp_path_factory.mktemp("tls")
    ca, ca_key = folder / "ca.pem", folder / "ca.key"
    cert, key, csr = folder / "server.pem", folder / "server.key", folder / "server.csr"
    ext = folder / "server.ext"
    ext.write_text(
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n"
        "keyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n"
    )
    curve = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True)

    openssl("req", "-x509", *curve, "-keyout", str(ca_key), "-out", str(ca), "-days", "2",
            "-subj", "/CN=ctxeval test CA", "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign")  # fmt: skip
    openssl("req", *curve, "-keyout", str(key), "-out", str(csr), "-subj", "/CN=127.0.0.1")
    signed = ["-CA", str(ca), "-CAkey", str(ca_key), "-CAcreateserial", "-days", "2"]
    openssl("x509", "-req", "-in", str(csr), *signed, "-out", str(cert), "-extfile", str(ext))
    return {"ca": ca, "cert": cert, "key": key}


def server_tls(certificates: dict[str, Path]) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certificates["cert"], certificates["key"])
    return context


def test_a_certificate_the_system_does_not_trust_is_refused(
    pair: tuple[str, str], certificates: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    backend, _ = pair
    with raw_server("answer", server_tls(certificates)) as server:
        llm = LLMConfig(model="openai/x", api_base=server.url, api_key=KEY)
        with pytest.raises(ctxeval.EndpointUnreachableError) as caught:
            run(backend, [SAMPLE], llm)
    assert "certificate" in str(caught.value).lower()
    assert server.requests == 0  # nothing sent over a connection it could not trust


def test_a_custom_ca_in_ssl_cert_file_is_trusted(
    pair: tuple[str, str], certificates: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    backend, _ = pair
    monkeypatch.setenv("SSL_CERT_FILE", str(certificates["ca"]))
    with raw_server("answer", server_tls(certificates)) as server:
        llm = LLMConfig(model="openai/x", api_base=server.url, api_key=KEY)
        evaluation = run(backend, [SAMPLE, SAMPLE], llm)
    assert [r.status for r in evaluation.results] == [Status.OK, Status.OK]
    assert server.requests == 2


# --- extra_headers -----------------------------------------------------------------------------


def test_extra_headers_go_with_every_request_of_every_client(pair: tuple[str, str]) -> None:
    backend, _ = pair
    headers = {"X-Route": "blue", "X-Tenant-Token": "tenant-secret-0123456789"}
    with FakeOpenAI(Judge(verdicts={"c": 1})) as server:
        llm = LLMConfig(model="openai/x", api_base=server.url, api_key=KEY, extra_headers=headers)
        run(backend, [SAMPLE, SAMPLE], llm)
        seen = server.headers
    assert len(seen) == 2
    for got in seen:
        assert got["x-route"] == "blue"
        assert got["x-tenant-token"] == "tenant-secret-0123456789"
        assert got["authorization"] == f"Bearer {KEY}"
        assert got["content-type"] == "application/json"


def test_extra_headers_replace_the_key_header_and_are_masked(pair: tuple[str, str]) -> None:
    backend, _ = pair
    token = "gateway-token-abcdefghijkl"
    refusal = json.dumps({"error": {"message": f"bad token Bearer {token}"}}).encode()
    with FakeOpenAI(lambda request: Reply(401, body=refusal)) as server:  # it echoes the token
        llm = LLMConfig(
            model="openai/x", api_base=server.url, api_key=KEY,
            extra_headers={"authorization": f"Bearer {token}"},
        )  # fmt: skip
        with pytest.raises(ctxeval.AuthenticationError) as caught:
            run(backend, [SAMPLE], llm)
        [got] = server.headers
    assert got["authorization"] == f"Bearer {token}"  # one Authorization: the given one
    assert "HTTP 401" in str(caught.value)
    assert token not in str(caught.value)


def test_extra_headers_are_checked_hidden_and_part_of_the_transport_key() -> None:
    config = LLMConfig(model="openai/x", api_base="http://h/v1", extra_headers={"X-A": "secret1"})
    assert "secret1" not in repr(config)
    other = LLMConfig(model="openai/x", api_base="http://h/v1", extra_headers={"X-A": "secret2"})
    assert OpenAITransport.shared_key(config) != OpenAITransport.shared_key(other)
    assert "secret1" not in OpenAITransport.shared_key(config)
    assert LLMConfig(model="openai/x", extra_headers=None).extra_headers == {}
    with pytest.raises(ctxeval.ConfigError, match="extra_headers"):
        LLMConfig(model="openai/x", extra_headers={"X-A": 1})  # type: ignore[dict-item]
    with pytest.raises(ctxeval.ConfigError, match="extra_headers"):
        LLMConfig(model="openai/x", extra_headers={"X-A": "a\r\nX-Injected: 1"})
    with pytest.raises(ctxeval.ConfigError, match="extra_headers"):
        LLMConfig(model="openai/x", extra_headers=["X-A"])  # type: ignore[arg-type]


# --- the other requests through the transport (Batch API, embeddings) ------------------------


def test_forms_json_and_queries_are_encoded_alike_by_every_client(pair: tuple[str, str]) -> None:
    backend, _ = pair
    with raw_server("answer") as server:
        transport = OpenAITransport(
            LLMConfig(model="openai/x", api_base=server.url, api_key=KEY), max_connections=2
        )

        async def main() -> None:
            try:
                await transport.send("POST", "/files", files={"file": ("a.jsonl", b"{}\n")},
                                     data={"purpose": "batch"})  # fmt: skip
                await transport.send("POST", "/batches", json={"input_file_id": "f"})
                await transport.send("GET", "/batches/b1", params={"after": "x y"})
                await transport.send("POST", "/embeddings", content=b"{}",
                                     headers={"Content-Type": "application/json"})  # fmt: skip
            finally:
                await transport.aclose()

        anyio.run(main, backend=backend)
    upload, create, poll, embed = (head.decode("latin-1") for head in server.heads)
    assert upload.startswith("POST /v1/files HTTP/1.1")
    assert "multipart/form-data; boundary=" in upload.lower()
    assert create.startswith("POST /v1/batches HTTP/1.1")
    assert "content-type: application/json" in create.lower()
    assert poll.startswith("GET /v1/batches/b1?after=x+y HTTP/1.1")
    for head in (upload, create, poll, embed):
        assert f"authorization: bearer {KEY.lower()}" in head.lower()
        assert head.lower().count("\r\nhost:") == 1
        assert head.lower().count("\r\ncontent-length:") <= 1
