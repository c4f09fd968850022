"""LLM context precision against a fake OpenAI-compatible server at a fixed latency.

200 samples x 5 retrieved chunks = 1 000 usefulness verdicts, concurrency 16, 50 ms latency
(by default). The server runs in its own process, so the client's CPU time is the client's
alone. What is measured is ctxeval's whole client path, end to end: ``ctxeval.evaluate`` with
``llm_context_precision_with_reference`` (scheduler and gate, prompts, cache key, request
JSON, HTTP, answer parsing and checking, usage, result rows), not a bare HTTP client.

For each client it reports wall time against the physical limit
``ceil(requests / concurrency) x latency``, and the client's CPU time per request
(``time.process_time``: every thread of the process, user and system):

* ``openai/aiohttp``: the ``openai`` transport on asyncio (aiohttp, the default there);
* ``openai/httpx``: the same on asyncio with ``CTXEVAL_HTTP_CLIENT=httpx`` (the former client);
* ``openai/trio``: the ``openai`` transport on trio (httpx);
* ``litellm``: the ``litellm`` transport on asyncio;
* ``bare/aiohttp``: no ctxeval, the floor: the same requests (the same bodies, as ctxeval
  builds them) sent by a bare ``aiohttp.ClientSession`` at the same concurrency, each answer
  read and parsed as JSON. ``ctxeval / floor`` below is the ratio of the CPU per request of
  each client to its floor's, measured side by side in the same run (on a busy or slow machine the
  absolute figures move together; the ratio much less);
* ``bare/httpx`` and ``bare/httpx-trio``: the same by a bare ``httpx.AsyncClient`` on asyncio
  and on trio (#58). Each ctxeval path is compared with the floor of the library it used on
  the same async library (aiohttp: ``bare/aiohttp``; httpx on asyncio: ``bare/httpx``; on
  trio: ``bare/httpx-trio``; litellm, which sends through httpx: ``bare/httpx``), run by run:
  the table gives the median and the best of those ratios.

Each measured run is a fresh process (warmed up by 20 samples first), the clients alternating:
litellm's import alone (its threads, and a heap the garbage collector walks) would add CPU to
whatever ran after it in the same process. Each run names the HTTP client the transport
actually used. With ``--latency 0.001`` the client, not the server's latency, sets the pace:
the CPU per request is the client's cost.

    python bench/llm_throughput.py [--samples 200] [--chunks 5] [--latency 0.05]
    python bench/llm_throughput.py --latency 0.001 --samples 400 --repeat 5   # 2 000 requests
    python bench/llm_throughput.py --clients openai/aiohttp,openai/httpx
    python bench/llm_throughput.py --latency 0.001 --clients openai/aiohttp,bare/aiohttp
    python bench/llm_throughput.py --latency 0.001 --stream false   # whole answers

The fake server stands for the fast local server of this measure, vLLM batching short
judgements, and says so as vLLM does (``owned_by: "vllm"`` in its ``/v1/models``): by default
(``--stream auto``) the ``openai`` transport does not stream to it, vLLM stopping an abandoned
whole request by itself. ``--stream true`` measures streamed answers (one server-sent event
per word of the answer, as a server sends one per token), as ``auto`` sends them to
llama-cpp-python or an unrecognised local server; ``--stream false`` whole answers.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import ctxeval
from ctxeval_llm import LLMConfig
from ctxeval_llm._http.choice import CLIENT_VARIABLE

ROOT = Path(__file__).resolve().parents[1]
SERVER = r"""
import json, sys, time
sys.path.insert(0, sys.argv[2])
from fakes.openai_server import FakeOpenAI
answer = json.dumps({"reason": "it states the answer", "verdict": 1})
vllm = {"object": "list", "data": [{"id": "fake-judge", "object": "model", "owned_by": "vllm",
                                   "max_model_len": 32768}]}  # as vLLM lists its model
server = FakeOpenAI(lambda request: answer, latency=float(sys.argv[1]), routes={"/v1/models": vllm})
server.start()
print(server.url, flush=True)
sys.stdin.read()
"""

CLIENTS: dict[str, tuple[str, str, str | None]] = {
    # name: (transport, backend, CTXEVAL_HTTP_CLIENT)
    "openai/aiohttp": ("openai", "asyncio", None),
    "openai/httpx": ("openai", "asyncio", "httpx"),
    "openai/trio": ("openai", "trio", None),
    "litellm": ("litellm", "asyncio", None),
    "bare/aiohttp": ("bare", "asyncio", None),
    "bare/httpx": ("bare", "asyncio", "httpx"),
    "bare/httpx-trio": ("bare", "trio", "httpx"),
}
FLOORS = {"bare/aiohttp": "aiohttp", "bare/httpx": "httpx", "bare/httpx-trio": "httpx"}
"""Each bare client, and the library it floors: a ctxeval path is compared with the bare
client of the library it used, on the same async library (httpx on trio with bare/httpx-trio)."""


def start_server(latency: float) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(latency), str(ROOT / "tests")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    return process, process.stdout.readline().strip()


STREAM = os.environ.get("CTXEVAL_BENCH_STREAM", "auto")
"""The ``stream`` setting of the measured runs (``--stream``, passed to the workers)."""


def client_used(url: str, client: str) -> str:
    """The HTTP client the ``openai`` transport picks for ``client``'s settings (one request
    through it), or the transport's name for the others."""
    transport, backend, forced = CLIENTS[client]
    if transport == "bare":
        return FLOORS[client]
    if transport != "openai":
        return transport
    import anyio

    from ctxeval_llm._transports.openai_compatible import OpenAITransport

    config = LLMConfig(model="openai/fake-judge", api_base=url, api_key="sk-bench", stream=STREAM)

    async def one() -> str:
        sender = OpenAITransport(config, max_connections=1)
        request = {"model": "fake-judge", "messages": [{"role": "user", "content": "x"}]}
        try:
            await sender.complete(None, request)  # type: ignore[arg-type]  # (ctx unused)
            return str(sender.client_name)
        finally:
            await sender.aclose()

    with _Forced(forced):
        return anyio.run(one, backend=backend)


class _Forced:
    """``CTXEVAL_HTTP_CLIENT`` set to ``value`` inside the block (unset for None)."""

    def __init__(self, value: str | None) -> None:
        self.value = value
        self.before: str | None = None

    def __enter__(self) -> None:
        self.before = os.environ.pop(CLIENT_VARIABLE, None)
        if self.value is not None:
            os.environ[CLIENT_VARIABLE] = self.value

    def __exit__(self, *exc: object) -> None:
        os.environ.pop(CLIENT_VARIABLE, None)
        if self.before is not None:
            os.environ[CLIENT_VARIABLE] = self.before


def bare_bodies(url: str, samples: list[dict[str, object]]) -> list[bytes]:
    """The request bodies ``one_run`` sends, as ctxeval builds them."""
    import orjson

    from ctxeval_llm._ask.client import request_body
    from ctxeval_llm.judges.prompts import USEFULNESS

    config = LLMConfig(model="openai/fake-judge", api_base=url, api_key="sk-bench")
    return [
        orjson.dumps(
            request_body(
                config,
                USEFULNESS,
                {"question": s["user_input"], "answer": s["reference"], "context": chunk},
                "json_schema",
            )
        )
        for s in samples
        for chunk in s["retrieved_contexts"]  # type: ignore[attr-defined]
    ]


BARE_HEADERS = {"Content-Type": "application/json", "Authorization": "Bearer sk-bench"}


def _checked(status: int, data: bytes) -> None:
    """An answer read as every bare client reads it: JSON, its verdict's JSON too."""
    import orjson

    answer = orjson.loads(data)
    assert status == 200, answer
    json.loads(answer["choices"][0]["message"]["content"])


async def _bare_aiohttp(url: str, bodies: list[bytes], concurrency: int) -> None:
    import asyncio

    import aiohttp

    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(
        connector=connector, cookie_jar=aiohttp.DummyCookieJar()
    ) as session:
        gate = asyncio.Semaphore(concurrency)

        async def one(body: bytes) -> None:
            async with (
                gate,
                session.post(f"{url}/chat/completions", data=body, headers=BARE_HEADERS) as got,
            ):
                _checked(got.status, await got.read())

        await asyncio.gather(*(one(body) for body in bodies))


async def _bare_httpx(url: str, bodies: list[bytes], concurrency: int) -> None:
    import anyio
    import httpx

    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(limits=limits, timeout=None) as client:
        gate = anyio.Semaphore(concurrency)

        async def one(body: bytes) -> None:
            async with gate:
                got = await client.post(
                    f"{url}/chat/completions", content=body, headers=BARE_HEADERS
                )
                _checked(got.status_code, got.content)

        async with anyio.create_task_group() as group:
            for body in bodies:
                group.start_soon(one, body)


def bare_run(
    url: str, client: str, samples: list[dict[str, object]], concurrency: int
) -> tuple[float, float, int]:
    """The requests ``one_run`` sends, by a bare client of the library ``client`` names
    (aiohttp, or httpx on asyncio or trio) at the same concurrency: the floor."""
    import anyio

    _, backend, _ = CLIENTS[client]
    bodies = bare_bodies(url, samples)
    send = _bare_aiohttp if FLOORS[client] == "aiohttp" else _bare_httpx
    cpu, wall = time.process_time(), time.perf_counter()
    anyio.run(send, url, bodies, concurrency, backend=backend)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return wall, cpu, len(bodies)


def one_run(
    url: str, client: str, samples: list[dict[str, object]], concurrency: int
) -> tuple[float, float, int]:
    transport, backend, forced = CLIENTS[client]
    if transport == "bare":
        return bare_run(url, client, samples, concurrency)
    llm = LLMConfig(
        model="openai/fake-judge",
        api_base=url,
        api_key="sk-bench",
        transport=transport,  # type: ignore[arg-type]
        stream=STREAM,
    )
    with _Forced(forced):
        cpu, wall = time.process_time(), time.perf_counter()
        evaluation = ctxeval.evaluate(
            samples,
            ["llm_context_precision_with_reference"],
            llm=llm,
            max_concurrency=concurrency,
            backend=backend,  # type: ignore[arg-type]
        )
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    assert evaluation.ok, [r.reason for r in evaluation.results if r.reason][:3]
    return wall, cpu, evaluation.usage.requests


def make_samples(count: int, chunks: int) -> list[dict[str, object]]:
    return [
        {
            "id": str(i),
            "user_input": f"Question {i}?",
            "reference": f"The reference answer of question {i}.",
            "retrieved_contexts": [f"Chunk {j} retrieved for question {i}." for j in range(chunks)],
        }
        for i in range(count)
    ]


def worker(url: str, client: str, samples: list[dict[str, object]], concurrency: int) -> None:
    """One measured run in this fresh process, after a warm-up; prints it as JSON."""
    used = client_used(url, client)
    one_run(url, client, samples[:20], concurrency)  # imports, connections
    wall, cpu, requests = one_run(url, client, samples, concurrency)
    print(json.dumps({"client": used, "wall": wall, "cpu": cpu, "requests": requests}))


def measure(url: str, client: str, args: argparse.Namespace) -> dict[str, Any]:
    options = [
        f"--{name}={getattr(args, name)}" for name in ("samples", "chunks", "concurrency", "stream")
    ]
    done = subprocess.run(
        [sys.executable, __file__, "--worker", client, "--url", url, *options],
        capture_output=True,
        text=True,
    )
    if done.returncode:
        sys.exit(f"the {client} run failed:\n{done.stderr}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def floor_of(client: str, used: str, results: dict[str, list[dict[str, Any]]]) -> str | None:
    """The bare client ``client`` is compared with, among those measured: the one of the
    library it used on the same async library (litellm: bare httpx, else bare aiohttp)."""
    _, backend, _ = CLIENTS[client]
    if used == "aiohttp":
        floor = "bare/aiohttp"
    elif used == "httpx":
        floor = "bare/httpx-trio" if backend == "trio" else "bare/httpx"
    else:
        floor = "bare/httpx" if "bare/httpx" in results else "bare/aiohttp"
    return floor if floor in results else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--chunks", type=int, default=5)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--clients",
        default=",".join(CLIENTS),
        help=f"comma-separated, of: {', '.join(CLIENTS)} (default: all)",
    )
    parser.add_argument(
        "--stream",
        default="auto",
        choices=["auto", "true", "false"],
        help="the openai transport's stream setting (auto: streamed, the server being local)",
    )
    parser.add_argument("--worker", help=argparse.SUPPRESS)  # one run, in its own process
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    global STREAM
    STREAM = args.stream
    if args.worker:
        samples = make_samples(args.samples, args.chunks)
        worker(args.url, args.worker, samples, args.concurrency)
        return
    chosen = [name.strip() for name in args.clients.split(",") if name.strip()]
    unknown = [name for name in chosen if name not in CLIENTS]
    if unknown:
        parser.error(f"unknown clients {unknown}; choose from {list(CLIENTS)}")
    server, url = start_server(args.latency)
    try:
        results: dict[str, list[dict[str, Any]]] = {client: [] for client in chosen}
        for _ in range(args.repeat):  # the clients alternating
            for client in chosen:
                results[client].append(measure(url, client, args))
                print(f"  {client}: {json.dumps(results[client][-1])}", file=sys.stderr)
    finally:
        server.stdin.close()  # type: ignore[union-attr]
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:  # (a loaded machine: its threads still closing)
            server.kill()
            server.wait()
    requests = args.samples * args.chunks
    limit = math.ceil(requests / args.concurrency) * args.latency
    latency_ms = args.latency * 1000
    print(
        f"# LLM context precision: {args.samples} samples x {args.chunks} chunks = {requests} "
        f"verdicts, concurrency {args.concurrency}, latency {latency_ms:g} ms, "
        f"stream {args.stream}, median of {args.repeat} (each run a fresh process)"
    )
    print(f"limit: ceil({requests}/{args.concurrency}) x {latency_ms:g} ms = {limit:.3f} s\n")
    print(
        "| client | HTTP client used | requests | wall (s) | wall / limit "
        "| client CPU per request (ms) | floor | ctxeval / floor, median (best) "
        "| CPU per request, each run (ms) |"
    )
    print("|---|---|---:|---:|---:|---:|---|---:|---|")
    summary: dict[str, Any] = {}
    for client, runs in results.items():
        wall = statistics.median(r["wall"] for r in runs)
        per_run = [r["cpu"] / r["requests"] * 1000 for r in runs]
        cpu = statistics.median(per_run)
        each = ", ".join(f"{x:.3f}" for x in per_run)
        used = runs[0]["client"]
        floor = floor_of(client, used, results)
        ratios = (
            []
            if floor is None
            else [  # each run against its floor's run of the same round
                (mine["cpu"] / mine["requests"]) / (base["cpu"] / base["requests"])
                for mine, base in zip(runs, results[floor], strict=True)
            ]
        )
        ratio = f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}x)" if ratios else ""
        print(
            f"| {client} | {used} | {runs[0]['requests']} | {wall:.2f} | {wall / limit:.2f}x "
            f"| {cpu:.3f} | {floor or ''} | {ratio} | {each} |"
        )
        summary[client] = {
            "client": used,
            "wall_s": wall,
            "limit_s": limit,
            "cpu_ms_per_request": cpu,
            "cpu_ms_per_request_runs": per_run,
            "floor": floor,
            "cpu_over_floor_median": statistics.median(ratios) if ratios else None,
            "cpu_over_floor_best": min(ratios) if ratios else None,
        }
    print("\n" + json.dumps(summary))


if __name__ == "__main__":
    main()
