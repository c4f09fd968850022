"""Runs inside the ragas virtual environment: ragas 0.4.3's LLM context metrics through
``ragas.evaluate`` against an OpenAI-compatible URL; prints one JSON line."""

from __future__ import annotations

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

from langchain_openai import ChatOpenAI  # noqa: E402
from ragas import EvaluationDataset, RunConfig, evaluate  # noqa: E402
from ragas.llms import LangchainLLMWrapper  # noqa: E402
from ragas.metrics import ContextEntityRecall, LLMContextPrecisionWithReference, LLMContextRecall  # noqa: E402

METRICS = {
    "precision": LLMContextPrecisionWithReference,
    "recall": LLMContextRecall,
    "entities": ContextEntityRecall,
}


def main() -> None:
    url, metric, data, workers = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    with open(data, encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle]
    dataset = EvaluationDataset.from_list(
        [{k: r[k] for k in ("user_input", "reference", "retrieved_contexts")} for r in rows]
    )
    llm = LangchainLLMWrapper(
        ChatOpenAI(
            model="fake-judge", base_url=url, api_key="sk-bench", temperature=0, max_retries=0
        )
    )
    cpu, wall = time.process_time(), time.perf_counter()
    result = evaluate(
        dataset, metrics=[METRICS[metric]()], llm=llm, show_progress=False, raise_exceptions=False,
        run_config=RunConfig(max_workers=workers, timeout=120, max_retries=10, max_wait=60),
    )  # fmt: skip
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    scores = [v for row in result.scores for v in row.values()]
    nan = sum(1 for v in scores if v is None or (isinstance(v, float) and math.isnan(v)))
    print(json.dumps({"wall": wall, "cpu": cpu, "rows": len(scores), "lost": nan}))


if __name__ == "__main__":
    main()
