"""The ``openai`` embedder (any OpenAI-compatible ``/v1/embeddings``) over real HTTP against the
fake server: batching, the cache, retries, fail-fast, order and usage."""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest

import ctxeval
from ctxeval import MetricResult, RetryPolicy, Sample, Status
from ctxeval._calls.cache import MemoryCache, SQLiteCache
from ctxeval._calls.scheduler import Scheduler
from ctxeval._plugins.base import BaseMetric
from ctxeval._run.settings import RunSettings
from ctxeval.plugin import Embedder, get_embedder
from ctxeval_llm.embeddings import OpenAIEmbedder
from fakes.openai_server import FakeOpenAI, Reply, fake_embedding

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

FAST = RetryPolicy(initial_backoff=0.001, max_backoff=0.02, jitter=0.0)
SECRET = "sk-test-SECRET-embed-0123456789"
MODEL = "fake-embed"


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


def embedder(server: FakeOpenAI, **options: Any) -> OpenAIEmbedder:
    options.setdefault("api_key", SECRET)
    built = get_embedder("openai", model=MODEL, api_base=server.url, **options)
    assert isinstance(built, OpenAIEmbedder)
    return built


def context(cache: Any = None, **settings: Any) -> Any:
    """A run context of a fresh run (its own gates, as a run has)."""
    settings.setdefault("retry", FAST)
    scheduler = Scheduler(ctxeval.default_registry(), RunSettings(cache=cache, **settings))
    return scheduler.context()


def expected(texts: list[str], size: int = 64) -> np.ndarray[Any, Any]:
    return np.asarray([fake_embedding(text, size) for text in texts], dtype=np.float32)


TEXTS = [f"passage number {i % 600} about topic {i % 600 % 7}" for i in range(1000)]


def test_the_embedder_is_registered_and_is_an_embedder(server: FakeOpenAI) -> None:
    built = embedder(server)
    assert isinstance(built, Embedder)
    assert built.name == f"openai:{MODEL}"
    assert built.resource == f"openai/{MODEL}@{server.url}"
    assert SECRET not in repr(built)
    with pytest.raises(ctxeval.ConfigError, match="batch_size"):
        get_embedder("openai", model=MODEL, batch_size=0)
    with pytest.raises(ctxeval.ConfigError, match="nonsense"):
        get_embedder("openai", model=MODEL, nonsense=1)


@pytest.mark.anyio
async def test_1000_texts_600_unique_go_in_5_requests_then_0_from_the_cache(
    server: FakeOpenAI, tmp_path: Path, anyio_backend: str
) -> None:
    assert len(set(TEXTS)) == 600
    path = tmp_path / "cache" / "ctxeval.sqlite"
    ctx = context(SQLiteCache(path))
    vectors = await embedder(server).aembed(TEXTS, ctx)
    assert server.count == math.ceil(600 / 128) == 5
    sizes = sorted(len(r["input"]) for r in server.embedding_requests)
    assert sizes == [88, 128, 128, 128, 128]
    sent = [text for request in server.embedding_requests for text in request["input"]]
    assert sorted(sent) == sorted(set(TEXTS))  # each unique text once
    assert vectors.dtype == np.float32
    assert vectors.shape == (1000, 64)
    np.testing.assert_allclose(vectors, expected(TEXTS), rtol=1e-6)
    assert ctx.usage.requests == 5
    assert ctx.usage.cache_hits == 0

    again = context(SQLiteCache(path))  # a second run, the same cache file
    second = await embedder(server).aembed(TEXTS, again)
    assert server.count == 5  # nothing sent
    np.testing.assert_array_equal(second, vectors)
    assert again.usage.requests == 0
    assert again.usage.cache_hits == 600
    assert SECRET.encode() not in path.read_bytes()


@pytest.mark.anyio
async def test_the_cache_key_holds_model_endpoint_and_dimensions(
    server: FakeOpenAI, anyio_backend: str
) -> None:
    cache = MemoryCache()
    await embedder(server).aembed(["a b", "c"], context(cache))
    await embedder(server).aembed(["a b", "c"], context(cache))
    assert server.count == 1
    await embedder(server, dimensions=32).aembed(["a b", "c"], context(cache))
    await get_embedder("openai", model="other", api_base=server.url).aembed(["a b"], context(cache))
    assert server.count == 3
    assert server.embedding_requests[1]["dimensions"] == 32
    assert "dimensions" not in server.embedding_requests[0]
    assert len(cache) == 5


@pytest.mark.anyio
async def test_a_429_then_success_is_retried(server: FakeOpenAI, anyio_backend: str) -> None:
    answers = iter(["429"])
    server.embedding_responder = lambda request: next(answers, None)
    ctx = context()
    vectors = await embedder(server).aembed(["one", "two"], ctx)
    assert server.statuses == [429, 200]
    assert ctx.usage.requests == 2
    assert ctx.usage.retries == 1
    np.testing.assert_allclose(vectors, expected(["one", "two"]), rtol=1e-6)


@pytest.mark.anyio
async def test_a_malformed_answer_is_retried(server: FakeOpenAI, anyio_backend: str) -> None:
    short = b'{"data": [{"index": 0, "embedding": [0.1, 0.2]}], "usage": {"prompt_tokens": 1}}'
    bad = iter([Reply(200, body=short), Reply(200, body=b'{"data": [')])
    server.embedding_responder = lambda request: next(bad, None)
    ctx = context()
    vectors = await embedder(server).aembed(["one", "two"], ctx)
    assert server.count == 3  # one vector for two texts, a broken body, then right
    np.testing.assert_allclose(vectors, expected(["one", "two"]), rtol=1e-6)


@pytest.mark.anyio
async def test_a_400_is_not_retried(server: FakeOpenAI, anyio_backend: str) -> None:
    server.embedding_responder = lambda request: "400"
    with pytest.raises(ctxeval.BadRequestError, match="/embeddings"):
        await embedder(server).aembed(["one"], context())
    assert server.count == 1


@pytest.mark.anyio
async def test_a_401_stops_the_calls_at_once_naming_the_endpoint(
    server: FakeOpenAI, anyio_backend: str
) -> None:
    server.embedding_responder = lambda request: "401"
    ctx = context()
    with pytest.raises(ctxeval.AuthenticationError) as caught:
        await embedder(server, batch_size=2).aembed([str(i) for i in range(40)], ctx)
    message = str(caught.value)
    assert f"{server.url}/embeddings" in message
    assert "Incorrect API key" in message
    assert SECRET not in message
    sent = server.count
    assert sent <= 16  # those already in flight; the rest never go
    with pytest.raises(ctxeval.AuthenticationError):  # the gate stays closed for the run
        await embedder(server).aembed(["more"], ctx)
    assert server.count == sent


@pytest.mark.anyio
async def test_an_unknown_model_stops_the_calls(server: FakeOpenAI, anyio_backend: str) -> None:
    server.models = {"some-other-model"}
    with pytest.raises(ctxeval.ModelNotFoundError, match=MODEL):
        await embedder(server).aembed(["one"], context())
    assert server.count == 1


def test_no_key_for_openai_s_own_endpoint_stops_before_any_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_BASE", raising=False)
    built = get_embedder("openai", model="text-embedding-3-small")
    import anyio

    with pytest.raises(ctxeval.MissingCredentialsError, match="OPENAI_API_KEY"):
        anyio.run(built.aembed, ["x"], context())


@pytest.mark.anyio
async def test_the_order_follows_the_texts_when_the_server_shuffles(
    server: FakeOpenAI, anyio_backend: str
) -> None:
    server.shuffle_embeddings = True
    texts = [f"text {i} word{i}" for i in range(50)]
    vectors = await embedder(server).aembed(texts, context())
    first = server.embedding_requests[0]
    assert first["input"] == texts
    np.testing.assert_allclose(vectors, expected(texts), rtol=1e-6)


@pytest.mark.anyio
async def test_usage_counts_requests_tokens_cost_and_cache_hits(
    server: FakeOpenAI, anyio_backend: str
) -> None:
    cache = MemoryCache()
    texts = ["alpha beta gamma delta"] * 3 + [f"text {i}" for i in range(300)]
    ctx = context(cache)
    built = embedder(server, batch_size=100, price_per_million_tokens=2.0)
    await built.aembed(texts, ctx)
    tokens = sum(max(1, len(t) // 4) for t in dict.fromkeys(texts))
    assert server.count == 4  # 301 unique texts, 100 per request
    usage = ctx.usage
    assert usage.requests == 4
    assert usage.prompt_tokens == tokens
    assert usage.completion_tokens == 0
    assert usage.cost_usd == pytest.approx(tokens * 2.0 / 1_000_000)
    again = context(cache)
    await built.aembed(texts[:5], again)
    assert again.usage.cache_hits == 3  # the 3 unique texts among the 5
    assert again.usage.requests == 0


@pytest.mark.anyio
async def test_extra_headers_and_the_key_are_sent(server: FakeOpenAI, anyio_backend: str) -> None:
    await embedder(server, extra_headers={"X-Route": "blue"}).aembed(["x"], context())
    assert server.headers[0]["x-route"] == "blue"
    assert server.headers[0]["authorization"] == f"Bearer {SECRET}"


@pytest.mark.anyio
async def test_vectors_of_different_lengths_are_malformed(
    server: FakeOpenAI, anyio_backend: str
) -> None:
    body = b'{"data": [{"index": 0, "embedding": [0.1, 0.2]}, {"index": 1, "embedding": [0.1]}]}'
    server.embedding_responder = lambda request: Reply(200, body=body)
    with pytest.raises(ctxeval.MalformedOutputError, match="different lengths"):
        await embedder(server).aembed(["a", "b"], context())
    assert server.count == 3  # the first try and two retries (max_malformed_retries)


# --- in a run ------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class BestContextSimilarity(BaseMetric):
    """A test metric: the cosine of the reference and its closest retrieved context."""

    registry_name = "best_context_similarity"
    requires = ("reference", "retrieved_contexts")
    embedder: Any = attrs.field(eq=False)

    async def ascore(self, sample: Sample, ctx: ctxeval.RunContext) -> MetricResult:
        texts = [sample.reference or "", *sample.retrieved_contexts]
        vectors = await self.embedder.aembed(texts, ctx)
        scores = vectors[1:] @ vectors[0]
        return MetricResult.ok(float(scores.max()))


def samples(count: int) -> list[dict[str, Any]]:
    return [
        {
            "id": str(i),
            "user_input": "q",
            "reference": f"the tower is in paris {i}",
            "retrieved_contexts": [f"paris has a tower {i}", "bananas are yellow"],
        }
        for i in range(count)
    ]


def test_a_run_sums_the_usage_of_its_rows(server: FakeOpenAI) -> None:
    metric = BestContextSimilarity(embedder=embedder(server))
    evaluation = ctxeval.evaluate(samples(20), [metric], retry=FAST)
    assert all(r.status is Status.OK for r in evaluation.results)
    assert server.count == 20  # one request per row (three texts each)
    assert evaluation.usage.requests == 20
    assert evaluation.usage.prompt_tokens > 0


def test_a_401_stops_the_run_with_one_error_not_one_row_each(server: FakeOpenAI) -> None:
    server.embedding_responder = lambda request: "401"
    metric = BestContextSimilarity(embedder=embedder(server))
    with pytest.raises(ctxeval.AuthenticationError, match="/embeddings") as caught:
        ctxeval.evaluate(samples(50), [metric], retry=FAST, max_concurrency=4)
    assert SECRET not in str(caught.value)
    assert server.count <= 4  # only the calls already in flight; the rest are never sent


def test_the_embedding_matcher_end_to_end(server: FakeOpenAI) -> None:
    """Context recall judged by meaning: the ``embedding`` matcher over this embedder.

    ``non_llm_context_recall`` runs without I/O and refuses an embedder that calls a service,
    so the metric is composed, as its documentation says."""
    from ctxeval.plugin import Items, compose, get_matcher, policy

    try:
        matcher = get_matcher(
            "embedding",
            embedder="openai",
            embedder_options={"model": MODEL, "api_base": server.url},
            threshold=0.6,
        )
    except ctxeval.UnknownNameError:
        pytest.skip("the embedding matcher (plugin ctxeval_embed) is not registered yet")
    metric = compose(
        "embedding_context_recall",
        reference=Items(field="reference_contexts", what="reference contexts"),
        retrieved=Items(field="retrieved_contexts", what="retrieved contexts"),
        matcher=matcher,
        formula=policy.Recall(),
    )
    rows = [
        {"id": str(i), "reference_contexts": [f"the tower is in paris {i}", "zebra quagga okapi"],
         "retrieved_contexts": [f"Paris: the tower is in paris {i}", "bananas are yellow"]}
        for i in range(5)
    ]  # fmt: skip
    evaluation = ctxeval.evaluate(rows, [metric], retry=FAST)
    assert [r.status for r in evaluation.results] == [Status.OK] * 5
    assert [r.score for r in evaluation.results] == [0.5] * 5  # the tower found, the zebra not
    assert server.count == 5  # one request per row: its four texts in one batch
    assert evaluation.usage.requests == 5
