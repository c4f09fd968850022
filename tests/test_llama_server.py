"""The four LLM context metrics against a real local judge: llama-cpp-python's OpenAI-compatible
server (``python -m llama_cpp.server``) with SmolLM2-135M-Instruct, default settings.

A fake server agrees with our assumptions; this one does not: it answers ``response_format:
json_schema`` with HTTP 500, serves one request at a time and its tiny model writes prose when
not held to a schema. What is asserted is the plumbing, not the model's judgment: every row is
ok, undefined, or an error with a reason; the server is recognised, so the output mode it takes
is used from the first request on (no request is refused for its format, and every row names
that mode); the requests the rows count are the requests the server answered.

The server runs from its own environment (llama-cpp-python 0.3.36 compiles for about 11
minutes; ``.ci/run`` builds it once, pip's wheel cache keeps it): ``CTXEVAL_LLAMA_PYTHON``
names its Python. Without it the test is skipped, unless ``CTXEVAL_REQUIRE_LLAMA=1`` (set by
``.ci/run``) makes a missing server a failure (``tests/llama_process.py``).
"""

from __future__ import annotations

import json
import re
from importlib.resources import files

import pytest

import ctxeval
from ctxeval import Status
from ctxeval_llm import LLMConfig
from llama_process import LlamaServer

pytestmark = [pytest.mark.timeout(1200), pytest.mark.xdist_group("llama")]
"""A real model on CPU: about 40 requests here. On the 2-core machine shared with another suite
and a busy loop, they took over 300 s (the default timeout) once; the test asserts plumbing,
never speed. The server is the session's one (``conftest.py``'s ``llama``), shared with
``tests/test_streaming_llm.py``: what a test reads of its log is what came after it started."""

METRICS = ["context_precision", "context_recall", "context_entity_recall", "context_utilization"]
SAMPLES = 4
"""Demo samples judged (each metric asks per chunk or per statement: ~40 requests on CPU)."""


def _samples() -> list[dict[str, object]]:
    rows = []
    with (files("ctxeval") / "data" / "demo.jsonl").open() as handle:
        for line in handle:
            row = json.loads(line)
            row["response"] = row["reference"]  # context_utilization judges against a response
            rows.append(row)
            if len(rows) == SAMPLES:
                break
    return rows


def test_the_four_llm_metrics_against_a_real_llama_server(llama: LlamaServer) -> None:
    url, log = llama.url, llama.log
    logged_before = len(log.read_text())
    llm = LLMConfig(model="openai/smollm2", api_base=url)  # no key: a local endpoint
    ev = ctxeval.evaluate(_samples(), METRICS, llm=llm)  # default settings

    assert len(ev.results) == SAMPLES * len(METRICS)
    for row in ev.results:
        assert row.status in (Status.OK, Status.UNDEFINED, Status.ERROR)
        if row.status is Status.ERROR:
            assert row.reason, row
    ok = [r for r in ev.results if r.status is not Status.ERROR]
    assert ok, [r.reason for r in ev.results]  # the plumbing works for some rows at least

    # one probe found the output mode: every judged row names the same one
    modes = {
        judge["output_mode"]
        for row in ev.results
        for judge in (row.details.get("provenance") or {}).get("judges", [])
    }
    assert modes == {"json_object_schema"}, modes  # recognised: never sent json_schema,
    # which this server refuses with a 500
    served = {
        judge.get("served_model")
        for row in ev.results
        for judge in (row.details.get("provenance") or {}).get("judges", [])
    }
    assert len(served) == 1, served
    assert str(next(iter(served))).endswith(".gguf"), served  # the file it loaded

    # the server's access log: no request refused for its format, the first one included
    logged = log.read_text()[logged_before:]  # (this run's requests)
    statuses = [
        int(m.group(1))
        for m in re.finditer(r'"POST /v1/chat/completions HTTP/1\.1" (\d{3})', logged)
    ]
    assert not [s for s in statuses if s in (400, 422, 500)], statuses

    # the rows count the requests the server got
    assert sum(r.usage.requests for r in ev.results) == len(statuses)


def test_a_prompt_the_estimate_refuses_is_counted_by_the_server(llama: LlamaServer) -> None:
    """With the window given (llama-cpp-python's server does not say its n_ctx), a prompt the
    estimate (bytes / 3) puts over it is counted by the server's tokenizer and sent, since it
    fits; the count is asked while no request of the run is in flight (a request waiting for
    this server's model interrupts a streamed answer)."""
    url, log = llama.url, llama.log
    chunk = " ".join(
        f"Paris landmark number {i} is visited by many tourists every summer." for i in range(160)
    )  # ~10 700 bytes: ~3 600 tokens by the estimate, about 2 700 by SmolLM2's tokenizer
    sample = {
        "id": "long",
        "user_input": "Which landmarks are in Paris?",
        "reference": "Many landmarks are in Paris.",
        "retrieved_contexts": [chunk],
    }
    before = log.read_text().count('"POST /extras/tokenize/count HTTP/1.1" 200')
    llm = LLMConfig(model="openai/smollm2", api_base=url, context_window=4096)
    (row,) = ctxeval.evaluate([sample], ["context_precision"], llm=llm).results
    assert "context window" not in (row.reason or ""), row.reason  # sent, not refused
    assert row.usage.requests >= 1
    after = log.read_text().count('"POST /extras/tokenize/count HTTP/1.1" 200')
    assert after == before + 1  # counted once, by the server


def test_the_nugget_and_claim_metrics_against_a_real_llama_server(llama: LlamaServer) -> None:
    """#55's LLM metrics on the real server: nuggets written by the model (one sample) or
    given by the sample (the other: no extraction), each sample's nuggets judged in one
    request; claims extracted and checked against each chunk (one sample: the same requests
    per sample). Every row is ok, undefined or an error with a reason, and the rows count the
    requests the server answered."""
    url, log = llama.url, llama.log
    before = len(re.findall(r'"POST /v1/chat/completions HTTP/1\.1"', log.read_text()))
    given, written = _samples()[:2]
    given["nuggets"] = [
        {"text": str(given["reference"]), "importance": "vital"},
        {"text": "The answer names a place.", "importance": "okay"},
    ]
    llm = LLMConfig(model="openai/smollm2", api_base=url)
    nuggets = ctxeval.evaluate([given, written], ["context_nugget_recall"], llm=llm)
    claims = ctxeval.evaluate([given], ["claim_recall", "claim_context_precision"], llm=llm)
    rows = [*nuggets.results, *claims.results]

    assert len(rows) == 4
    for row in rows:
        assert row.status in (Status.OK, Status.UNDEFINED, Status.ERROR)
        if row.status is Status.ERROR:
            assert row.reason, row
    assert [r for r in rows if r.status is not Status.ERROR], [r.reason for r in rows]
    first = nuggets.results[0]
    assert first.sample_id == str(given["id"])
    if first.status is not Status.ERROR:
        # both nuggets judged in one request, none written: a request per attempt (this
        # model's answer may fall short of a label per nugget, and is then asked again)
        assert first.details["nuggets_from"] == "given", first.details
        assert len(first.details["nuggets"]) == 2, first.details
        assert first.usage.requests == 1 + first.usage.retries, (first.usage, first.details)
    statuses = [
        int(m.group(1))
        for m in re.finditer(r'"POST /v1/chat/completions HTTP/1\.1" (\d{3})', log.read_text())
    ][before:]
    assert not [s for s in statuses if s >= 400], statuses  # no request refused
    assert sum(r.usage.requests for r in rows) == len(statuses)
