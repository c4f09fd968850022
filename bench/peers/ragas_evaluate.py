"""Runs inside the ragas virtual environment (see bench/peer_env.py): ragas's ``evaluate`` with
its two ID metrics over a JSONL file, then ``to_csv`` of the result, as a user writes a run to
disk with ragas; prints one JSON line with the seconds (the imports before the clock)."""

from __future__ import annotations

import json
import os
import sys
import time
import warnings

os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")  # (see ragas_deterministic.py)
warnings.filterwarnings("ignore")

from ragas import EvaluationDataset, SingleTurnSample, evaluate  # noqa: E402
from ragas.metrics import IDBasedContextPrecision, IDBasedContextRecall  # noqa: E402


def main() -> None:
    path, out = sys.argv[1], sys.argv[2]
    start = time.perf_counter()
    with open(path, encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle]
    fields = ("retrieved_context_ids", "reference_context_ids")
    dataset = EvaluationDataset(
        samples=[SingleTurnSample(**{f: row[f] for f in fields}) for row in rows]
    )
    result = evaluate(
        dataset,
        metrics=[IDBasedContextPrecision(), IDBasedContextRecall()],
        show_progress=False,
    )
    result.to_pandas().to_csv(out, index=False)
    seconds = time.perf_counter() - start
    print(json.dumps({"seconds": seconds, "samples": len(rows)}))


if __name__ == "__main__":
    main()
