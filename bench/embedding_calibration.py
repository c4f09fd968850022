"""Calibrate the matchers of the non-LLM context metrics on the labelled paraphrase set.

For each matcher, the similarity of every (reference context, retrieved chunk) pair of
``tests/data/paraphrase_pairs.jsonl`` (see ``bench/make_paraphrase_set.py``) is computed with
the matcher itself, as the non-LLM metrics compute it (``match_now([reference], [chunk])``:
the verdict's score), and then thresholded at every point of a grid (0.00 to 1.00 by 0.01): a
pair is predicted a match when its similarity is ``>=`` the threshold. For each matcher the
script reports accuracy, precision and recall at every grid point (``--table``), the best
threshold (the highest accuracy; ties go to the lower threshold) and the figures at the
matcher's default threshold, and the accuracy of each ``kind`` of pair at the best threshold.

Matchers:

- ``levenshtein``: ctxeval's ``similarity`` matcher with ``measure="levenshtein"`` (raw text,
  no normalisation), what ``non_llm_context_recall`` uses by default (ragas's measure);
- ``embedding``: the ``embedding`` matcher of ``ctxeval_embed`` (cosine similarity of the
  embeddings) on the embedder given by ``--embedder`` (default ``wordllama``, offline).

    .venv/bin/python bench/embedding_calibration.py                      # both, wordllama
    .venv/bin/python bench/embedding_calibration.py --table              # every grid point
    .venv/bin/python bench/embedding_calibration.py --embedder wordllama --option dim=128
    .venv/bin/python bench/embedding_calibration.py --embedder openai \\
        --option model=text-embedding-3-small --option api_base=https://...  # one model

An endpoint embedder (``openai``) must be calibrated per model: cosine similarities of
different models live on different scales. Run the script against the model and endpoint
you use and pass the best threshold as the matcher's ``threshold`` option.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "paraphrase_pairs.jsonl"
GRID = [round(i / 100, 2) for i in range(101)]


def load_pairs(path: Path = DATA) -> list[dict[str, Any]]:
    """The labelled pairs, one dict per line."""
    with path.open(encoding="utf-8") as file:
        return [json.loads(line) for line in file if line.strip()]


def figures(scores: Sequence[float], labels: Sequence[int], threshold: float) -> dict[str, float]:
    """Accuracy, precision and recall of "match when score >= threshold"."""
    tp = fp = fn = tn = 0
    for score, label in zip(scores, labels, strict=True):
        predicted = score >= threshold
        if predicted and label:
            tp += 1
        elif predicted:
            fp += 1
        elif label:
            fn += 1
        else:
            tn += 1
    return {
        "threshold": threshold,
        "accuracy": (tp + tn) / len(labels),
        "precision": tp / (tp + fp) if tp + fp else 1.0,
        "recall": tp / (tp + fn) if tp + fn else 1.0,
    }


def best_threshold(
    scores: Sequence[float], labels: Sequence[int], grid: Sequence[float] = GRID
) -> dict[str, float]:
    """The grid point with the highest accuracy (ties: the lower threshold) and its figures."""
    best: dict[str, float] | None = None
    for threshold in sorted(grid):
        row = figures(scores, labels, threshold)
        if best is None or row["accuracy"] > best["accuracy"]:
            best = row
    assert best is not None
    return best


def matcher_scores(matcher: Any, pairs: Sequence[dict[str, Any]]) -> list[float]:
    """The matcher's similarity of each pair's reference context to its chunk (the score of
    its verdict for the reference, as the non-LLM recall computes it)."""
    scores = []
    for pair in pairs:
        (verdict,) = matcher.match_now([pair["reference"]], [pair["chunk"]])
        scores.append(float(verdict.score if verdict.score is not None else verdict.matched))
    return scores


def build_matchers(args: argparse.Namespace) -> dict[str, Callable[[], Any]]:
    """Name -> a function building the matcher (through ctxeval's registry)."""
    from ctxeval.plugin import get_matcher

    options: dict[str, Any] = {}
    for option in args.option:
        key, _, value = option.partition("=")
        options[key] = _value(value)
    matchers: dict[str, Callable[[], Any]] = {
        "levenshtein": lambda: get_matcher("similarity", measure="levenshtein"),
        "embedding": lambda: get_matcher("embedding", embedder=args.embedder, **options),
    }
    return {name: matchers[name] for name in args.matchers}


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def calibrate(name: str, matcher: Any, pairs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Every figure the report shows for one matcher."""
    scores = matcher_scores(matcher, pairs)
    labels = [int(pair["label"]) for pair in pairs]
    best = best_threshold(scores, labels)
    default_threshold = float(matcher.threshold)
    by_kind = {}
    for kind in sorted({pair["kind"] for pair in pairs}):
        chosen = [i for i, pair in enumerate(pairs) if pair["kind"] == kind]
        right = sum((scores[i] >= best["threshold"]) == bool(labels[i]) for i in chosen)
        by_kind[kind] = right / len(chosen)
    return {
        "matcher": name,
        "describe": dict(matcher.describe()),
        "best": best,
        "default": figures(scores, labels, default_threshold),
        "grid": [figures(scores, labels, t) for t in GRID],
        "by_kind": by_kind,
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument(
        "--matchers", nargs="+", default=["levenshtein", "embedding"],
        choices=["levenshtein", "embedding"],
    )  # fmt: skip
    parser.add_argument("--embedder", default="wordllama", help="the embedding matcher's embedder")
    parser.add_argument(
        "--option", action="append", default=[], metavar="KEY=VALUE",
        help="an option of the embedding matcher (value read as JSON when it parses)",
    )  # fmt: skip
    parser.add_argument("--table", action="store_true", help="print every grid point")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)

    pairs = load_pairs(args.data)
    kinds = Counter(pair["kind"] for pair in pairs)
    positives = sum(int(pair["label"]) for pair in pairs)
    print(f"{args.data.name}: {len(pairs)} pairs ({positives} label 1), kinds: {dict(kinds)}")
    results = []
    for name, build in build_matchers(args).items():
        result = calibrate(name, build(), pairs)
        results.append(result)
        print(f"\n{name}: {result['describe']}")
        if args.table:
            print("  threshold  accuracy  precision  recall")
            for row in result["grid"]:
                print(
                    f"  {row['threshold']:9.2f}  {row['accuracy']:8.3f}  "
                    f"{row['precision']:9.3f}  {row['recall']:6.3f}"
                )
        print("  kind of pair: accuracy at the best threshold")
        for kind, accuracy in result["by_kind"].items():
            print(f"    {kind:22} {accuracy:.3f}")

    print("\n| matcher | threshold | accuracy | precision | recall |")
    print("|---|---|---|---|---|")
    for result in results:
        for which in ("best", "default"):
            row = result[which]
            print(
                f"| {result['matcher']} ({which}) | {row['threshold']:.2f} | "
                f"{row['accuracy']:.3f} | {row['precision']:.3f} | {row['recall']:.3f} |"
            )
    if args.json:
        args.json.write_text(json.dumps(results, indent=1), encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
