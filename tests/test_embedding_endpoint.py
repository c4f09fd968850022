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
    assert server.count <= 16  # those already in flight; the rest never go
    with pytest.raises(ctxeval.AuthenticationError):  # the gate stays closed for the run
        await embedder(server).aembed(["more"], ctx)
    assert server.count <= 16  # (requests in flight may reach the server late)
    assert all("more" not in request["input"] for request in server.embedding_requests)


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


def test_extra_headers_are_checked_as_the_llm_config_checks_them() -> None:
    """A header value with CR or LF would smuggle a second header into every request, and a
    name with a space or a colon is no header name: both refused when the embedder is made."""
    for bad, said in (
        ({"X-Route": "blue\r\nX-Injected: 1"}, "printable ASCII on one line"),
        ({"X-Route": "blue\nmore"}, "printable ASCII on one line"),
        ({"X Route": "blue"}, "not a valid HTTP header name"),
        ({"X-Route:": "blue"}, "not a valid HTTP header name"),
    ):
        with pytest.raises(ctxeval.ConfigError, match=said):
            OpenAIEmbedder(model="m", api_base="http://127.0.0.1:9/v1", extra_headers=bad)
    fine = OpenAIEmbedder(model="m", api_base="http://127.0.0.1:9/v1", extra_headers={"X-A": "b"})
    assert dict(fine.extra_headers) == {"X-A": "b"}


def test_a_run_sums_the_usage_of_its_rows(server: FakeOpenAI) -> None:
    metric = BestContextSimilarity(embedder=embedder(server))
    evaluation = ctxeval.evaluate(samples(20), [metric], retry=FAST)
    assert all(r.status is Status.OK for r in evaluation.results)
    # the rows' texts gathered: 41 distinct (the bananas shared) in one request, not one per row
    assert server.count == 1
    assert len(server.embedding_requests[0]["input"]) == 41
    assert evaluation.usage.requests == 1
    assert evaluation.usage.prompt_tokens > 0


def test_a_401_stops_the_run_with_one_error_not_one_row_each(server: FakeOpenAI) -> None:
    server.embedding_responder = lambda request: "401"
    metric = BestContextSimilarity(embedder=embedder(server))
    with pytest.raises(ctxeval.AuthenticationError, match="/embeddings") as caught:
        ctxeval.evaluate(samples(50), [metric], retry=FAST, max_concurrency=4)
    assert SECRET not in str(caught.value)
    assert server.count <= 4  # only the calls already in flight; the rest are never sent


def test_the_embedding_matcher_end_to_end(server: FakeOpenAI) -> None:
    """Context recall judged by meaning: the ``embedding`` matcher over this embedder, in a
    composed metric (``non_llm_context_recall`` takes it too: see below)."""
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
    assert server.count == 1  # the 12 distinct texts of the 5 rows in one batch
    assert evaluation.usage.requests == 1


# --- the ragas-named non-LLM metrics over the endpoint -------------------------------------


BATCH = 16


def context_rows(count: int) -> list[dict[str, Any]]:
    """Rows whose texts are distinct per row except two shared by every row."""
    return [
        {"id": str(i), "reference_contexts": [f"the tower is in paris {i}", "zebra quagga okapi"],
         "retrieved_contexts": [f"Paris: the tower is in paris {i}", "bananas are yellow",
                                f"the river {i} runs north"]}
        for i in range(count)
    ]  # fmt: skip


def unique_texts(rows: list[dict[str, Any]]) -> int:
    return len({t for r in rows for t in (*r["reference_contexts"], *r["retrieved_contexts"])})


def endpoint_metric(server: FakeOpenAI, name: str = "non_llm_context_recall", **extra: Any) -> Any:
    options = {"model": MODEL, "api_base": server.url, "batch_size": BATCH, **extra}
    return ctxeval.get_metric(
        name, matcher="embedding", embedder="openai", embedder_options=options, threshold=0.6
    )


def composed_recall(server: FakeOpenAI) -> Any:
    from ctxeval.plugin import Items, compose, get_matcher, policy

    matcher = get_matcher(
        "embedding",
        embedder="openai",
        embedder_options={"model": MODEL, "api_base": server.url, "batch_size": BATCH},
        threshold=0.6,
    )
    return compose(
        "composed_recall",
        reference=Items(field="reference_contexts", what="reference contexts"),
        retrieved=Items(field="retrieved_contexts", what="retrieved contexts"),
        matcher=matcher,
        formula=policy.Recall(),
    )


def test_the_ragas_named_metrics_take_the_endpoint_embedder_through_the_run(
    server: FakeOpenAI,
) -> None:
    from ctxeval.plugin import DeterministicMetric

    rows = context_rows(60)
    unique = unique_texts(rows)
    assert unique == 3 * 60 + 2
    metric = endpoint_metric(server)
    assert not isinstance(metric, DeterministicMetric)  # calls out: not the fast path
    assert metric.name == "non_llm_context_recall"
    cache = MemoryCache()
    evaluation = ctxeval.evaluate(rows, [metric], retry=FAST, cache=cache)
    assert [r.status for r in evaluation.results] == [Status.OK] * 60
    assert [r.score for r in evaluation.results] == [0.5] * 60  # the tower found, the zebra not
    # batched across rows: each distinct text once, BATCH per request
    assert server.count <= math.ceil(unique / BATCH)
    sent = [text for request in server.embedding_requests for text in request["input"]]
    texts = {t for r in rows for t in (*r["reference_contexts"], *r["retrieved_contexts"])}
    assert sorted(sent) == sorted(texts)
    assert all(len(request["input"]) <= BATCH for request in server.embedding_requests)
    assert evaluation.usage.requests == server.count
    assert evaluation.usage.prompt_tokens > 0
    details = evaluation.results[0].details
    assert details["matcher"] == "embedding"
    assert details["embedder"] == f"openai:{MODEL}"
    assert details["threshold"] == 0.6
    assert details["provenance"]["judges"] == [
        {"embedder": "openai", "model": MODEL, "endpoint": server.url, "dimensions": None}
    ]

    sent_before = server.count
    again = ctxeval.evaluate(rows, [endpoint_metric(server)], retry=FAST, cache=cache)
    assert server.count == sent_before  # a re-run sends none: every vector from the cache
    assert again.usage.requests == 0
    assert again.usage.cache_hits == 5 * 60  # (counted per row: each row's texts)
    assert [r.score for r in again.results] == [r.score for r in evaluation.results]


def test_the_scores_equal_the_composed_metric_s(server: FakeOpenAI) -> None:
    rows = context_rows(12)
    rows[3]["retrieved_contexts"] = ["nothing here", "zebra quagga okapi and more"]
    rows[5]["retrieved_contexts"] = []
    named = ctxeval.evaluate(rows, [endpoint_metric(server)], retry=FAST)
    composed = ctxeval.evaluate(rows, [composed_recall(server)], retry=FAST)
    assert [(r.status, r.score) for r in named.results] == [
        (r.status, r.score) for r in composed.results
    ]
    assert {r.score for r in named.results} > {0.5}  # not all alike


def test_precision_and_recall_in_one_run_send_each_text_once(server: FakeOpenAI) -> None:
    rows = context_rows(30)
    unique = unique_texts(rows)
    recall = endpoint_metric(server)
    precision = endpoint_metric(server, "non_llm_context_precision_with_reference")
    evaluation = ctxeval.evaluate(rows, [recall, precision], retry=FAST, cache=MemoryCache())
    assert all(r.status is Status.OK for r in evaluation.results)
    assert server.count <= math.ceil(unique / BATCH) + 1  # (the two metrics' rows may straddle)
    sent = [text for request in server.embedding_requests for text in request["input"]]
    assert len(sent) == len(set(sent)) == unique
    offline = ctxeval.get_metric(
        "non_llm_context_precision_with_reference", name="string_precision"
    )  # the same run may hold fast-path metrics too
    mixed = ctxeval.evaluate(rows, [precision, offline], retry=FAST)
    assert all(r.status is Status.OK for r in mixed.results)


def test_a_resumed_run_reuses_the_journal_and_a_changed_endpoint_redoes(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    rows = context_rows(10)
    journal = tmp_path / "run" / "journal.jsonl"
    first = ctxeval.evaluate(rows, [endpoint_metric(server)], retry=FAST, journal=journal)
    sent = server.count
    assert sent > 0
    resumed = ctxeval.evaluate(
        rows, [endpoint_metric(server)], retry=FAST, journal=journal, resume=True
    )
    assert server.count == sent  # every row from the journal, no cache needed
    assert [r.score for r in resumed.results] == [r.score for r in first.results]
    other = ctxeval.evaluate(
        rows,
        [endpoint_metric(server, dimensions=64)],  # another setup: the rows are redone
        retry=FAST,
        journal=journal,
        resume=True,
    )
    assert server.count > sent
    assert server.embedding_requests[-1]["dimensions"] == 64
    assert all(r.status is Status.OK for r in other.results)


def test_the_endpoint_settings_missing_is_a_config_error_saying_what_to_pass() -> None:
    with pytest.raises(ctxeval.ConfigError, match="embedder_options") as caught:
        ctxeval.get_metric("non_llm_context_recall", matcher="embedding", embedder="openai")
    message = str(caught.value)
    assert '"model"' in message
    assert "api_base" in message
    with pytest.raises(ctxeval.ConfigError, match="embedder_options"):
        ctxeval.get_metric(
            "non_llm_context_recall", matcher="similarity", embedder_options={"model": "x"}
        )
    with pytest.raises(ctxeval.ConfigError, match="mapping"):
        ctxeval.get_metric(
            "non_llm_context_recall", matcher="embedding", embedder="openai", embedder_options=3
        )


def test_the_key_in_the_options_is_never_shown(server: FakeOpenAI) -> None:
    metric = endpoint_metric(server, api_key=SECRET)
    assert SECRET not in repr(metric)
    evaluation = ctxeval.evaluate(context_rows(2), [metric], retry=FAST)
    assert server.headers[0]["authorization"] == f"Bearer {SECRET}"
    assert SECRET not in str([r.to_json() for r in evaluation.results])


def test_the_command_line_caches_and_resumes(
    server: FakeOpenAI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    from ctxeval.cli import main

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    data = tmp_path / "data.jsonl"
    rows = context_rows(20)
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    options = json.dumps({"model": MODEL, "api_base": server.url, "batch_size": BATCH})
    spec = (
        "non_llm_context_recall:matcher=embedding,embedder=openai,threshold=0.6,"
        f"embedder_options={options}"
    )
    out = tmp_path / "run"
    assert main(["evaluate", str(data), "-m", spec, "--out", str(out), "--quiet"]) == 0
    sent = server.count
    assert 0 < sent <= math.ceil(unique_texts(rows) / BATCH)
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [r["score"] for r in results] == [0.5] * 20
    assert main(["evaluate", str(data), "-m", spec, "--out", str(out), "--resume", "--quiet"]) == 0
    assert server.count == sent  # resumed from the journal
    again = tmp_path / "again"
    assert main(["evaluate", str(data), "-m", spec, "--out", str(again), "--quiet"]) == 0
    assert server.count == sent  # a new run: every vector from the cache


def test_no_key_for_openai_s_own_endpoint_stops_the_run_with_one_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_BASE"):
        monkeypatch.delenv(name, raising=False)
    metric = ctxeval.get_metric(
        "non_llm_context_recall",
        matcher="embedding",
        embedder="openai",
        embedder_options={"model": "text-embedding-3-small"},
    )
    with pytest.raises(ctxeval.MissingCredentialsError, match=r"OPENAI_API_KEY.*api_base"):
        ctxeval.evaluate(context_rows(5), [metric], retry=FAST)
