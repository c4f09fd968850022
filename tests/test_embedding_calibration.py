"""The embedding matcher's calibration holds on the shipped labelled set.

``tests/data/paraphrase_pairs.jsonl`` (written by ``bench/make_paraphrase_set.py``) labels
(reference context, retrieved chunk) pairs as paraphrases (1) or not (0). On it, the
``embedding`` matcher over the offline ``wordllama`` embedder must classify better than the
Levenshtein ``similarity`` matcher (each at its own best threshold), and the shipped default
threshold must stay within 0.02 of the best one, so that the table cannot drift from the data.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

DATA = Path(__file__).resolve().parent / "data" / "paraphrase_pairs.jsonl"
GRID = [round(i / 100, 2) for i in range(101)]


def pairs() -> list[dict[str, Any]]:
    with DATA.open(encoding="utf-8") as file:
        return [json.loads(line) for line in file if line.strip()]


def scores(matcher: Any, rows: Sequence[dict[str, Any]]) -> list[float]:
    """The matcher's similarity of each reference context to its chunk."""
    out = []
    for row in rows:
        (verdict,) = matcher.match_now([row["reference"]], [row["chunk"]])
        out.append(float(verdict.score))
    return out


def accuracy(values: Sequence[float], labels: Sequence[int], threshold: float) -> float:
    return sum((v >= threshold) == bool(y) for v, y in zip(values, labels, strict=True)) / len(
        labels
    )


def best(values: Sequence[float], labels: Sequence[int]) -> tuple[float, float]:
    """(threshold, accuracy) of the highest accuracy on the grid; ties: the lower threshold."""
    found = (0.0, -1.0)
    for threshold in GRID:
        value = accuracy(values, labels, threshold)
        if value > found[1]:
            found = (threshold, value)
    return found


def test_the_shipped_set_is_labelled_and_balanced() -> None:
    rows = pairs()
    assert len(rows) >= 300
    assert len({row["id"] for row in rows}) == len(rows)
    assert {row["label"] for row in rows} == {0, 1}
    positives = sum(row["label"] for row in rows)
    assert 0.4 <= positives / len(rows) <= 0.6
    for row in rows:
        assert all(row[key] for key in ("reference", "chunk", "kind"))


def test_embedding_beats_levenshtein_and_its_default_is_calibrated() -> None:
    pytest.importorskip("wordllama")
    from ctxeval.plugin import get_matcher
    from ctxeval_embed.matcher import DEFAULT_THRESHOLDS

    rows = pairs()
    labels = [row["label"] for row in rows]
    string_best = best(scores(get_matcher("similarity", measure="levenshtein"), rows), labels)
    embedding = get_matcher("embedding", embedder="wordllama")
    embedding_best = best(scores(embedding, rows), labels)

    assert embedding_best[1] > string_best[1], (embedding_best, string_best)
    assert embedding.threshold == DEFAULT_THRESHOLDS["wordllama"]
    assert abs(DEFAULT_THRESHOLDS["wordllama"] - embedding_best[0]) <= 0.02 + 1e-9, (
        f"DEFAULT_THRESHOLDS['wordllama'] = {DEFAULT_THRESHOLDS['wordllama']}, but the best "
        f"threshold on {DATA.name} is {embedding_best[0]} (accuracy {embedding_best[1]:.3f}): "
        "run bench/embedding_calibration.py and update the table"
    )
