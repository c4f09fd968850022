"""Offline context entity recall with spaCy against bare ``nlp.pipe`` over the same texts.

N samples (default 2 000) whose references name people, places, organisations and dates.
``ctxeval`` runs ``context_entity_recall`` with ``extractor="spacy"`` (verify mode: the
reference's entities, looked for in the contexts); the baseline runs ``nlp.pipe`` over the same
reference texts with the same pipeline and does nothing else. Both alternate in one process,
``--repeat`` times; medians and the ratio are reported.

    python bench/spacy_entity_recall.py [--samples 2000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import ctxeval
from ctxeval_spacy.model import load, resolve_model

PEOPLE = [
    "Ada Lovelace",
    "Alan Turing",
    "Marie Curie",
    "Nikola Tesla",
    "Grace Hopper",
    "Isaac Newton",
    "Rosalind Franklin",
    "Charles Darwin",
]
PLACES = ["London", "Paris", "Berlin", "Geneva", "Boston", "Kyoto", "Vienna", "Lisbon"]
ORGS = ["the Royal Society", "IBM", "the University of Cambridge", "CERN", "the Navy", "Bell Labs"]


def make_samples(n: int, seed: int = 7) -> list[dict[str, object]]:
    rng = random.Random(seed)
    samples = []
    for i in range(n):
        person, place, org = rng.choice(PEOPLE), rng.choice(PLACES), rng.choice(ORGS)
        year = rng.randint(1800, 2020)
        reference = (
            f"{person} worked with {org} in {place} from {year} to {year + rng.randint(1, 9)}. "
            f"In {rng.choice(PLACES)} the work of {person} was presented to {rng.choice(ORGS)}."
        )
        context = f"{person} moved to {place} in {year} and joined {rng.choice(ORGS)}."
        samples.append({"id": str(i), "reference": reference, "retrieved_contexts": [context]})
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    samples = make_samples(args.samples)
    texts = [str(s["reference"]) for s in samples]
    nlp = load(None, ("ner",))  # the very pipeline the plugin uses
    metric = ctxeval.get_metric("context_entity_recall", extractor="spacy")
    ctxeval.evaluate(samples[:50], [metric])  # warm up
    list(nlp.pipe(texts[:50]))
    bare, ours = [], []
    for _ in range(args.repeat):
        start = time.perf_counter()
        docs = list(nlp.pipe(texts, batch_size=256))
        bare.append(time.perf_counter() - start)
        assert len(docs) == len(texts)
        start = time.perf_counter()
        evaluation = ctxeval.evaluate(samples, [metric])
        ours.append(time.perf_counter() - start)
        assert evaluation.ok
    b, o = statistics.median(bare), statistics.median(ours)
    mean = evaluation.summary()[metric.name].mean
    print(
        f"# spaCy entity recall: {args.samples} samples, pipeline {resolve_model(None)} "
        f"(ner), median of {args.repeat}"
    )
    print("\n| run | wall (s) | samples/s |\n|---|---:|---:|")
    print(f"| bare nlp.pipe over the references | {b:.2f} | {args.samples / b:.0f} |")
    print(f"| ctxeval context_entity_recall (spacy, verify) | {o:.2f} | {args.samples / o:.0f} |")
    print(f"\nctxeval / bare nlp.pipe: {o / b:.2f}x (mean entity recall {mean:.3f})")


if __name__ == "__main__":
    main()
