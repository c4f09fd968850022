"""The non-LLM context recall with the string matcher (Levenshtein) and with the embedding
matcher (offline ``wordllama``), side by side in one process.

The samples: ``--samples`` (default 1 000) samples of one reference context (one to three
sentences, 80-400 characters) and ``--chunks`` (default 5) retrieved chunks (three to eight
sentences, 250-1 000 characters; one of them holds the reference context or a paraphrase of
it), so 5 000 (reference context, retrieved chunk) pairs by default. The sentences come from
``tests/data/paraphrase_pairs.jsonl``; each text carries its sample's number, so no two
samples share a text (nothing is saved by deduplication across samples).

The floor, ``floor (bare numpy)``: the same model on the same pairs in bare numpy
(:class:`NumpyFloor`: each distinct word tokenised once, the token rows gathered and averaged,
normalised, one batched matrix product; its flags checked equal to the matcher's), timed warm
and cold as the embedding matcher is; the embedding matcher is compared with it turn by turn
(goal: <= 1.3x, issue #58).

Two ways to time, alternating the matchers ``--repeat`` times (default 5), best and
median, clocks around the scoring only (the model is loaded and warmed up before). The
embedding matcher is timed three ways: ``warm`` (the embedder's word cache filled by the
warm-up run: each distinct word of these texts tokenized already), ``cold`` (the word cache
emptied before each run, outside the clock: every distinct word tokenized in the run) and
``tokenizer`` (the word cache off: the Hugging Face tokenizer on every text, as before
2026-11-28):

- ``metric`` (default when it works): ``ctxeval.evaluate`` with
  ``get_metric("non_llm_context_recall")`` and ``get_metric("non_llm_context_recall",
  matcher="embedding")``, the whole run (the fast path: ``match_batch`` per chunk of samples);
- ``matcher`` (``--direct``, or when the metric has no ``matcher`` option yet): the matchers'
  ``match_batch`` over all the pairs of references and chunks, what the metric's fast path
  calls.

    .venv/bin/python bench/embedding_speed.py [--samples 1000] [--chunks 5] [--repeat 5]

``TOKENIZERS_PARALLELISM=false`` keeps the Hugging Face tokenizer on one thread.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ctxeval
from ctxeval.plugin import get_matcher
from ctxeval_embed.offline import word_tokens

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "paraphrase_pairs.jsonl"


def make_samples(n: int, chunks: int, seed: int = 5) -> list[dict[str, Any]]:
    """``n`` samples, one reference context and ``chunks`` retrieved chunks each."""
    rng = random.Random(seed)
    pairs = [json.loads(line) for line in DATA.open(encoding="utf-8")]
    references = sorted({p["reference"] for p in pairs})
    sentences = sorted({p["chunk"] for p in pairs if len(p["chunk"]) < 200} | set(references))
    positives = [p for p in pairs if p["label"] == 1]
    samples = []
    for i in range(n):
        pair = rng.choice(positives)
        reference = f"Record {i}. {pair['reference']}"
        retrieved: list[str] = []
        for _ in range(chunks):
            text = " ".join(rng.sample(sentences, rng.randint(3, 6)))
            retrieved.append(f"Document {i}-{len(retrieved)}. {text}")
        hit = rng.randrange(chunks)
        retrieved[hit] = f"Document {i}-{hit}. {pair['chunk']} {rng.choice(sentences)}"
        samples.append(
            {
                "id": f"s{i}",
                "user_input": "question",
                "reference_contexts": [reference],
                "retrieved_contexts": retrieved,
            }
        )
    return samples


class NumpyFloor:
    """The floor: the same model on the same pairs in bare numpy, as one would write it by hand
    for this bench's shape (one reference, ``chunks`` chunks a pair): each distinct word
    tokenised once (a dictionary kept across runs, as the embedder's word cache is), each
    text's token rows gathered and averaged, the vectors normalised, one (batched) matrix
    product for every pair's similarities. No checks, no blank texts, no other shape."""

    def __init__(self, dim: int, threshold: float) -> None:
        from ctxeval_embed.offline import load_model

        self.table = load_model(dim).embedding
        self.bare = word_tokens(dim).bare
        self.threshold = threshold
        self.words: dict[str, list[int]] = {}

    def __call__(self, pairs: list[tuple[list[str], list[str]]]) -> list[list[bool]]:
        import numpy as np

        texts = list(dict.fromkeys(t for a, b in pairs for t in (*a, *b)))
        words = self.words
        while True:  # once when every word is known, else twice
            try:
                flat: list[int] = []
                extend = flat.extend  # (the fastest of a chain of maps, a comprehension, this)
                offsets = [0]
                for text in texts:  # (the ids of a text: its words' ids, one after the other)
                    for word in text.split(" "):
                        extend(words[word])
                    offsets.append(len(flat))
                break
            except KeyError:  # tokenise the words not seen yet, each once
                new = list({w for t in texts for w in t.split(" ")} - words.keys())
                encoded = self.bare.encode_batch(
                    ["\u2581" + w for w in new], add_special_tokens=False
                )
                words.update(zip(new, (e.ids for e in encoded), strict=True))
        ids = np.array(flat, dtype=np.int32)
        table = self.table
        vectors = np.empty((len(texts), table.shape[1]), dtype=np.float32)
        for row in range(len(texts)):
            start, end = offsets[row], offsets[row + 1]
            vectors[row] = table[ids[start:end]].sum(axis=0) / np.float32(end - start)
        unit = vectors.astype(np.float64)
        unit /= np.linalg.norm(unit, axis=1, keepdims=True)
        where = {t: i for i, t in enumerate(texts)}
        references = unit[[where[a[0]] for a, _ in pairs]][:, None, :]
        chunks = unit[[[where[t] for t in b] for _, b in pairs]]
        similarities = references @ chunks.transpose(0, 2, 1)
        flags: list[list[bool]] = (similarities.max(axis=2) >= self.threshold).tolist()
        return flags


def timed(run: Callable[[], Any]) -> tuple[float, Any]:
    gc.collect()
    start = time.perf_counter()
    out = run()
    return time.perf_counter() - start, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=1_000)
    parser.add_argument("--chunks", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--direct", action="store_true", help="time the matchers directly")
    args = parser.parse_args()

    samples = make_samples(args.samples, args.chunks)
    pairs = [(s["reference_contexts"], s["retrieved_contexts"]) for s in samples]
    lengths = [
        len(t) for s in samples for t in (*s["reference_contexts"], *s["retrieved_contexts"])
    ]
    print(
        f"{len(samples)} samples x {args.chunks} chunks = {len(samples) * args.chunks} pairs; "
        f"text length median {statistics.median(lengths):.0f}, max {max(lengths)} characters"
    )

    start = time.perf_counter()
    embedding: Any = get_matcher("embedding", embedder="wordllama")
    embedding.match_now(["warm up"], ["the model"])  # loads the model
    print(f"wordllama: matcher built and model loaded in {time.perf_counter() - start:.2f} s")
    string = get_matcher("similarity", measure="levenshtein")
    tokens = word_tokens(embedding.embedder.dim)

    def words(on: bool, clear: bool) -> Callable[[], None]:
        def setup() -> None:
            tokens.by_words = on
            if clear:
                tokens.words.clear()
                tokens.pieces.clear()

        return setup

    floor = NumpyFloor(embedding.embedder.dim, embedding.threshold)

    def floor_words(clear: bool) -> Callable[[], None]:
        def setup() -> None:
            if clear:
                floor.words.clear()

        return setup

    setups = {
        "string (levenshtein)": words(True, False),
        "floor (bare numpy, warm)": floor_words(False),
        "floor (bare numpy, cold)": floor_words(True),
        "embedding (wordllama, warm)": words(True, False),
        "embedding (wordllama, cold)": words(True, True),
        "embedding (wordllama, tokenizer)": words(False, False),
    }
    runs: dict[str, Callable[[], Any]]
    mode = "matcher"
    if not args.direct:
        try:
            string_metric = ctxeval.get_metric("non_llm_context_recall")
            embedding_metric = ctxeval.get_metric("non_llm_context_recall", matcher="embedding")
            mode = "metric"
        except ctxeval.ConfigError as exc:
            print(f"(the metric has no matcher option yet: {exc}; timing the matchers)")

    def metric_run(metric: Any) -> Callable[[], Any]:
        return lambda: ctxeval.evaluate(samples, metrics=[metric])

    def matcher_run(matcher: Any) -> Callable[[], Any]:
        return lambda: matcher.match_batch(pairs)

    if mode == "metric":
        runs = {
            name: metric_run(string_metric if name.startswith("string") else embedding_metric)
            for name in setups
        }
    else:
        runs = {
            name: matcher_run(string if name.startswith("string") else embedding) for name in setups
        }
    runs["floor (bare numpy, warm)"] = runs["floor (bare numpy, cold)"] = lambda: floor(pairs)

    for name, run in runs.items():  # warm up
        setups[name]()
        run()
    times: dict[str, list[float]] = {name: [] for name in runs}
    outputs: dict[str, Any] = {}
    for turn in range(args.repeat):
        order = list(runs) if turn % 2 == 0 else list(reversed(runs))
        for name in order:
            setups[name]()
            seconds, outputs[name] = timed(runs[name])
            times[name].append(seconds)
    tokens.by_words = True

    print(f"\n{mode} mode, best and median of {args.repeat}, alternating\n")
    print("| matcher | best (s) | median (s) | pairs per second (median) |")
    print("|---|---:|---:|---:|")
    count = len(samples) * args.chunks
    for name, values in times.items():
        median = statistics.median(values)
        print(f"| {name} | {min(values):.3f} | {median:.3f} | {count / median:,.0f} |")
    print()
    for name, base in (
        ("embedding (wordllama, warm)", "floor (bare numpy, warm)"),
        ("embedding (wordllama, cold)", "floor (bare numpy, cold)"),
        ("embedding (wordllama, warm)", "string (levenshtein)"),
    ):
        ratios = [a / b for a, b in zip(times[name], times[base], strict=True)]  # same turn
        print(
            f"{name} / {base}: {min(ratios):.2f}x (best), {statistics.median(ratios):.2f}x "
            "(median)" + ("; target: <= 1.3x" if base.startswith("floor") else "")
        )
    flags = floor(pairs)
    print(f"floor (bare numpy): share matched {sum(f[0] for f in flags) / len(flags):.3f}")
    if mode == "metric":
        for name, evaluation in outputs.items():
            if name.startswith("floor"):
                continue
            scores = [r.score for r in evaluation.results if r.score is not None]
            print(f"{name}: mean recall {sum(scores) / max(len(scores), 1):.3f}")
    else:
        for name, flags in outputs.items():
            if name.startswith("floor"):
                assert flags == outputs["embedding (wordllama, warm)"], "the floor disagrees"
            print(f"{name}: share matched {sum(f[0] for f in flags) / len(flags):.3f}")


if __name__ == "__main__":
    main()
