"""The ``embedding`` matcher (plugin ``ctxeval_embed``) and its offline ``wordllama`` embedder."""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
import random
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np
import pytest

import ctxeval
from ctxeval.cli import main
from ctxeval_embed.matcher import DeterministicEmbeddingMatcher, EmbeddingMatcher
from ctxeval_embed.offline import WordLlamaEmbedder

PARIS = "The capital of France is Paris."
PARIS_AGAIN = "Paris is the French capital city."
BANANAS = "Bananas are yellow when they are ripe."
MARKET = "The stock market fell sharply today."


@attrs.define
class Counting:
    """A deterministic embedder that counts the texts it is asked for (wraps wordllama)."""

    name: str = "counting"
    calls: list[list[str]] = attrs.field(factory=list)
    inner: WordLlamaEmbedder = attrs.field(factory=WordLlamaEmbedder)

    def embed(self, texts: Sequence[str]) -> Any:
        self.calls.append(list(texts))
        return self.inner.embed(texts)

    async def aembed(self, texts: Sequence[str], ctx: Any) -> Any:
        return self.embed(texts)


@attrs.define
class Remote:
    """An embedder without ``embed`` (as an endpoint one is): only ``aembed``."""

    name: str = "remote"
    inner: WordLlamaEmbedder = attrs.field(factory=WordLlamaEmbedder)

    async def aembed(self, texts: Sequence[str], ctx: Any) -> Any:
        return self.inner.embed(texts)


@pytest.fixture
def counting(registry: ctxeval.Registry) -> tuple[ctxeval.Registry, Counting]:
    embedder = Counting()
    registry.register("ctxeval.embedders", "counting", lambda: embedder)
    return registry, embedder


def test_a_paraphrase_matches_and_an_unrelated_sentence_does_not() -> None:
    matcher = ctxeval.default_registry().get_matcher("embedding")
    assert isinstance(matcher, DeterministicEmbeddingMatcher)
    paris, bananas = matcher.match_now([PARIS, BANANAS], [MARKET, PARIS_AGAIN])
    assert paris.matched
    assert paris.evidence == 1
    assert paris.score is not None
    assert matcher.threshold <= paris.score <= 1.0
    assert not bananas.matched
    assert bananas.score is not None
    assert 0.0 <= bananas.score < matcher.threshold


def test_threshold_rule_is_at_or_above() -> None:
    registry = ctxeval.default_registry()
    [verdict] = registry.get_matcher("embedding", threshold=0.0).match_now([PARIS], [MARKET])
    score = verdict.score
    assert score is not None
    assert 0.0 < score < 1.0
    at = registry.get_matcher("embedding", threshold=score).match_now([PARIS], [MARKET])
    above = registry.get_matcher("embedding", threshold=float(np.nextafter(score, 1.0)))
    assert at[0].matched
    assert not above.match_now([PARIS], [MARKET])[0].matched
    assert above.match_batch([([PARIS], [MARKET])]) == [[False]]


def test_no_candidates_and_empty_text() -> None:
    matcher = ctxeval.default_registry().get_matcher("embedding", threshold=0.0)
    assert isinstance(matcher, DeterministicEmbeddingMatcher)
    assert [v.matched for v in matcher.match_now([PARIS], [])] == [False]
    assert matcher.match_now([], [PARIS]) == []
    [empty] = matcher.match_now([""], [PARIS])  # the zero vector: similarity 0
    assert empty.score == 0.0


def _random_pairs(seed: int, count: int) -> list[tuple[list[str], list[str]]]:
    rng = random.Random(seed)
    words = (PARIS + " " + BANANAS + " " + MARKET + " river bank money loan water").split()
    pool = [" ".join(rng.choices(words, k=rng.randint(0, 8))) for _ in range(40)]
    pool += [PARIS, PARIS_AGAIN, BANANAS, MARKET]
    return [
        (rng.choices(pool, k=rng.randint(0, 5)), rng.choices(pool, k=rng.randint(0, 5)))
        for _ in range(count)
    ]


@pytest.mark.parametrize("reference", ["items", "candidates"])
@pytest.mark.parametrize("threshold", [0.3, 0.67, 0.9])
def test_match_batch_equals_match_now(reference: str, threshold: float) -> None:
    matcher = ctxeval.default_registry().get_matcher(
        "embedding", threshold=threshold, reference=reference
    )
    assert isinstance(matcher, DeterministicEmbeddingMatcher)
    pairs = _random_pairs(seed=int(threshold * 100), count=200)
    expected = [[v.matched for v in matcher.match_now(*pair)] for pair in pairs]
    assert matcher.match_batch(pairs) == expected
    both = matcher.match_both_batch(pairs)
    assert [mine for mine, _ in both] == [
        [v.matched for v in matcher.match_now(a, b)] for a, b in pairs
    ]
    flipped = [[v.matched for v in matcher.match_now(b, a)] for a, b in pairs]
    assert [theirs for _, theirs in both] == flipped


def test_each_distinct_text_is_embedded_once_per_batch(
    counting: tuple[ctxeval.Registry, Counting],
) -> None:
    registry, embedder = counting
    matcher = registry.get_matcher("embedding", embedder="counting", threshold=0.6)
    assert isinstance(matcher, DeterministicEmbeddingMatcher)
    pairs = _random_pairs(seed=7, count=100)
    matcher.match_batch(pairs)
    [texts] = embedder.calls
    assert len(texts) == len(set(texts))
    assert set(texts) == {t for a, b in pairs for t in (*a, *b)}


def test_an_embedder_without_embed_makes_an_async_matcher(registry: ctxeval.Registry) -> None:
    registry.register("ctxeval.embedders", "remote", Remote)
    matcher = registry.get_matcher("embedding", embedder="remote", threshold=0.67)
    assert type(matcher) is EmbeddingMatcher
    assert not isinstance(matcher, ctxeval.plugin.DeterministicMatcher)
    local = registry.get_matcher("embedding", threshold=0.67)
    assert isinstance(local, DeterministicEmbeddingMatcher)
    import anyio

    verdicts = anyio.run(matcher.match, [PARIS, BANANAS], [MARKET, PARIS_AGAIN], None)
    assert verdicts == local.match_now([PARIS, BANANAS], [MARKET, PARIS_AGAIN])
    # the ragas-named metric over it: its twin without the fast path (it may do I/O)
    from ctxeval.builtin.string_metrics import EndpointNonLLMContextRecall

    metric = registry.get_metric(
        "non_llm_context_recall", matcher="embedding", embedder="remote", threshold=0.67
    )
    assert type(metric) is EndpointNonLLMContextRecall
    assert not isinstance(metric, ctxeval.plugin.DeterministicMetric)
    row = {"id": "a", "reference_contexts": [PARIS, BANANAS],
           "retrieved_contexts": [MARKET, PARIS_AGAIN]}  # fmt: skip
    offline = ctxeval.get_metric("non_llm_context_recall", matcher="embedding", threshold=0.67)
    (remote,) = ctxeval.evaluate([row], [metric]).results
    (local_row,) = ctxeval.evaluate([row], [offline]).results
    assert remote.score == local_row.score
    assert remote.details["verdicts"] == local_row.details["verdicts"]


def test_unknown_embedder_needs_a_threshold(counting: tuple[ctxeval.Registry, Counting]) -> None:
    registry, _ = counting
    with pytest.raises(ctxeval.ConfigError, match="no calibrated threshold"):
        registry.get_matcher("embedding", embedder="counting")


@pytest.mark.parametrize(
    "name", ["non_llm_context_recall", "non_llm_context_precision_with_reference"]
)
def test_non_llm_metrics_with_the_embedding_matcher(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    batches: list[int] = []
    original = DeterministicEmbeddingMatcher.match_batch

    def spy(self: DeterministicEmbeddingMatcher, pairs: Any) -> list[list[bool]]:
        batches.append(len(pairs))
        return original(self, pairs)

    monkeypatch.setattr(DeterministicEmbeddingMatcher, "match_batch", spy)
    metric = ctxeval.get_metric(name, matcher="embedding")
    assert metric.settings() == {  # type: ignore[attr-defined]
        "matcher": "embedding",
        "embedder": "wordllama",
        "threshold": metric.pipeline.matcher.threshold,  # type: ignore[attr-defined]
    }
    pairs = _random_pairs(seed=3, count=300)
    samples = [
        {"id": str(i), "reference_contexts": a, "retrieved_contexts": b}
        for i, (a, b) in enumerate(pairs)
    ]
    rows = ctxeval.evaluate(samples, [metric]).results
    assert batches, "the fast path (match_batch) was not taken"
    one_by_one = [metric.score(ctxeval.Sample(**s)) for s in samples]  # type: ignore[attr-defined]
    assert [(r.status, r.score) for r in rows] == [(r.status, r.score) for r in one_by_one]
    assert [dict(r.details or {}) for r in rows] == [dict(r.details or {}) for r in one_by_one]
    assert any(r.score not in (None, 0.0) for r in rows)


def test_the_metric_options_and_the_similarity_default_stay() -> None:
    default = ctxeval.get_metric("non_llm_context_recall")
    assert default.settings() == {  # type: ignore[attr-defined]
        "measure": "levenshtein",
        "threshold": 0.5,
        "normalize": False,
    }
    pinned = ctxeval.get_metric("non_llm_context_recall", matcher="embedding", threshold=0.8)
    assert pinned.settings()["threshold"] == 0.8  # type: ignore[attr-defined]
    with pytest.raises(ctxeval.ConfigError, match="embedder and embedder_options go with"):
        ctxeval.get_metric("non_llm_context_recall", embedder="wordllama")
    with pytest.raises(ctxeval.ConfigError, match="measure and normalize"):
        ctxeval.get_metric("non_llm_context_recall", matcher="embedding", measure="jaro")


def test_entity_recall_takes_the_embedding_matcher() -> None:
    metric = ctxeval.get_metric(
        "context_entity_recall", extractor="spacy", matcher="embedding",
        matcher_options={"threshold": 0.6},
    )  # fmt: skip
    row = ctxeval.evaluate(
        [{"reference": "Marie Curie won the Nobel Prize in Paris.",
          "retrieved_contexts": ["Marie Curie lived in Paris for years."]}],
        [metric],
    ).results[0]  # fmt: skip
    assert row.status == "ok"


OFFLINE = r"""
import socket, sys
def refuse(*args, **kwargs):
    raise OSError("network is unreachable (blocked by the test)")
socket.socket.connect = refuse
socket.socket.connect_ex = refuse
socket.create_connection = refuse
import logging
before = list(logging.getLogger().handlers)
import ctxeval
embedder = ctxeval.default_registry().get_embedder("wordllama")
vectors = embedder.embed(["The capital of France is Paris.", "Bananas are yellow."])
assert vectors.shape == (2, 256) and str(vectors.dtype) == "float32", vectors.shape
assert list(logging.getLogger().handlers) == before, "importing wordllama touched logging"
small = ctxeval.default_registry().get_embedder("wordllama", dim=64).embed(["x y"])
assert small.shape == (1, 64)
print("ok")
"""


def test_the_offline_embedder_loads_with_no_network(tmp_path: Any) -> None:
    # a fresh process (nothing cached), an empty home (no ~/.cache/wordllama), no offline
    # switch set, sockets refused and proxies that lead nowhere (for downloads in Rust code)
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HOME", "XDG_CACHE_HOME")
    }
    env.update(
        HOME=str(tmp_path),
        HTTP_PROXY="http://127.0.0.1:9",
        HTTPS_PROXY="http://127.0.0.1:9",
        ALL_PROXY="http://127.0.0.1:9",
        NO_PROXY="",
    )
    done = subprocess.run(
        [sys.executable, "-c", OFFLINE], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
    assert not (tmp_path / ".cache").exists()


def test_plugins_lists_the_embedder(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plugins", "--json"]) == 0
    plugins = json.loads(capsys.readouterr().out)
    found = {(p["group"], p["name"]): p for p in plugins}
    assert found["ctxeval.embedders", "wordllama"]["status"] == "ok"
    assert found["ctxeval.matchers", "embedding"]["status"] == "ok"


def test_a_missing_extra_shows_the_install_command(
    registry: ctxeval.Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "wordllama" else find_spec(name, *a),
    )
    [info] = [p for p in registry.plugins() if p.name == "wordllama"]
    assert info.status != "ok"
    assert info.install == "pip install 'ctxeval[embed]'"
    with pytest.raises(ctxeval.MissingExtraError):
        registry.get_matcher("embedding")


@pytest.mark.parametrize("dim", [256, 64])
def test_the_embedder_gives_wordllamas_own_vectors(dim: int) -> None:
    """The embedder pools each text's own tokens (no padding to a batch's longest text): the
    vectors must be WordLlama's own, bit for bit, whatever the mix of lengths."""
    from ctxeval_embed.offline import load_model

    rng = random.Random(dim)
    words = [
        "the",
        "Eiffel",
        "Tower",
        "is",
        "in",
        "Paris",
        "built",
        "1889",
        "by",
        "Gustave",
        "Eiffel",
        "café",
        "naïve",
        "東京",
    ]
    texts = ["", " ", "x", *TRICKY] + [
        " ".join(rng.choice(words) for _ in range(rng.randint(1, 80))) for _ in range(500)
    ]
    ours = WordLlamaEmbedder(dim=dim).embed(texts)
    theirs = load_model(dim).embed(texts, norm=False, batch_size=64)
    assert ours.dtype == np.float32
    assert np.array_equal(ours, theirs)


TRICKY = [
    "", " ", "  ", "   ", "a  b", "a   b  ", " lead", "  lead", "trail ", "trail  ", "\n\nx\ty",
    "a \n b", "foo\n  bar", "<s> hi </s>", "x<unk>y", "a \u2581 b", "\u2581\u2581x", "x\u2581",
    "caf\u00e9 na\u00efve \u6771\u4eac \U0001f600 ok", "a\u00a0b", "\u3000 a", "x" * 600,
    "C++:  if (x) {\n    return y;\n}", "1889, 330 m; 7.3 million visitors (2015).",
]  # fmt: skip


def test_the_word_cache_gives_the_tokenizer_s_own_ids() -> None:
    """Each distinct word is tokenized once (``WordTokens``): the ids must be the tokenizer's
    on any text (spaces in runs, leading or trailing, the word mark, added tokens, other
    scripts), cold and warm."""
    from ctxeval_embed.offline import WordTokens, _unpadded_tokenizer

    tokenizer = _unpadded_tokenizer(256)
    rng = random.Random(7)
    alphabet = list("ab c  \n\t.,\u00e9\U0001f600\u2581x<s>")
    texts = TRICKY + [
        "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40))) for _ in range(2000)
    ]
    expected = [e.ids for e in tokenizer.encode_batch(texts, add_special_tokens=False)]
    tokens = WordTokens(tokenizer)
    assert tokens.by_words
    for _ in range(2):  # cold, then every word known
        flat, offsets = tokens.ids(texts)
        assert [flat[a:b].tolist() for a, b in itertools.pairwise(offsets)] == expected
    assert 0 < len(tokens.words) < 2000


def test_a_tokenizer_of_another_shape_is_used_as_it_is() -> None:
    from tokenizers import pre_tokenizers

    from ctxeval_embed.offline import WordTokens, _unpadded_tokenizer

    other = _unpadded_tokenizer(256).from_str(_unpadded_tokenizer(256).to_str())
    other.pre_tokenizer = pre_tokenizers.Whitespace()
    tokens = WordTokens(other)
    assert not tokens.by_words
    flat, offsets = tokens.ids(TRICKY)
    expected = [e.ids for e in other.encode_batch(TRICKY, add_special_tokens=False)]
    assert [flat[a:b].tolist() for a, b in itertools.pairwise(offsets)] == expected
