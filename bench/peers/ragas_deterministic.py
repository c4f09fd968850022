"""Runs inside the ragas virtual environment (see bench/peer_env.py): ragas's non-LLM and ID
metrics over a JSONL file, timed; prints one JSON line."""

from __future__ import annotations

import asyncio
import json
import math
import os
import sys
import time
import warnings

# ragas 0.4.3 posts usage events with a blocking requests.post on the event loop's thread;
# offline, each one waits for a DNS failure (~0.15 s) and serialises every request. Off, as
# any user would set it in production.
os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")
warnings.filterwarnings("ignore")

from ragas import SingleTurnSample  # noqa: E402
from ragas.metrics import (  # noqa: E402
    IDBasedContextPrecision,
    IDBasedContextRecall,
    NonLLMContextPrecisionWithReference,
    NonLLMContextRecall,
)

PARTS = {
    "string": (NonLLMContextPrecisionWithReference, NonLLMContextRecall),
    "id": (IDBasedContextPrecision, IDBasedContextRecall),
}


async def score_all(metric: object, samples: list[SingleTurnSample]) -> list[float]:
    return list(await asyncio.gather(*(metric.single_turn_ascore(s) for s in samples)))  # type: ignore[attr-defined]


def main() -> None:
    path, part = sys.argv[1], sys.argv[2]
    start, cpu = time.perf_counter(), time.process_time()
    with open(path, encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle]
    fields = (
        ("retrieved_contexts", "reference_contexts")
        if part == "string"
        else ("retrieved_context_ids", "reference_context_ids")
    )
    samples = [SingleTurnSample(**{f: row[f] for f in fields}) for row in rows]
    scores = []
    for factory in PARTS[part]:
        scores.append(asyncio.run(score_all(factory(), samples)))
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    nan = sum(
        1
        for column in scores
        for s in column
        if s is None or (isinstance(s, float) and math.isnan(s))
    )
    print(
        json.dumps(
            {
                "seconds": seconds,
                "cpu": cpu,
                "samples": len(samples),
                "nan": nan,
                "first": [c[0] for c in scores],
            }
        )
    )


if __name__ == "__main__":
    main()
