"""The non-LLM context recall with the string matcher (Levenshtein) and with the embedding
matcher (offline ``wordllama``), side by side in one process.

The samples: ``--samples`` (default 1 000) samples of one reference context (one to three
sentences, 80-400 characters) and ``--chunks`` (default 5) retrieved chunks (three to eight
sentences, 250-1 000 characters; one of them holds the reference context or a paraphrase of
it), so 5 000 (reference context, retrieved chunk) pairs by default. The sentences come from
``tests/data/paraphrase_pairs.jsonl``; each text carries its sample's number, so no two
samples share a text (nothing is saved by deduplication across samples).

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

    setups = {
        "string (levenshtein)": words(True, False),
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
    names = list(times)
    print()
    for name in names[1:]:
        best = min(times[name]) / min(times[names[0]])
        median = statistics.median(times[name]) / statistics.median(times[names[0]])
        print(f"{name} / string: {best:.1f}x (best), {median:.1f}x (median); target: <= 3x")
    if mode == "metric":
        for name, evaluation in outputs.items():
            scores = [r.score for r in evaluation.results if r.score is not None]
            print(f"{name}: mean recall {sum(scores) / max(len(scores), 1):.3f}")
    else:
        for name, flags in outputs.items():
            print(f"{name}: share matched {sum(f[0] for f in flags) / len(flags):.3f}")


if __name__ == "__main__":
    main()
