"""The fake OpenAI-compatible server as a process, answering both ctxeval's and ragas's prompts.

    python bench/fake_judge_server.py --latency 0.05 [--max-in-flight 8] [--faults 429=0.2,500=0.1]

Prints its base URL, serves until its standard input closes. ``GET /stats`` gives the request
count, the answers by status and the most requests in flight at once.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from fakes.openai_server import FakeOpenAI


def answer(request: dict[str, Any]) -> str:
    """A useful-context judge: every chunk useful, every statement attributed, two entities."""
    schema = ((request.get("response_format") or {}).get("json_schema") or {}).get("name")
    text = " ".join(str(m.get("content", "")) for m in request["messages"])
    if schema == "usefulness" or (
        schema is None and "verdict" in text and "attributed" not in text
    ):
        return json.dumps({"reason": "the context states the answer", "verdict": 1})
    if schema == "usefulness_batch":
        count = request["messages"][-1]["content"].count("\n[") + 1
        return json.dumps({"verdicts": [{"reason": "useful", "verdict": 1}] * count})
    if schema == "attribution" or "attributed" in text:
        return json.dumps(
            {"classifications": [{"statement": "s1", "reason": "supported", "attributed": 1}]}
        )
    if schema == "entity_presence":
        return json.dumps({"present": [1]})
    return json.dumps({"entities": ["Paris", "France"]})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--max-in-flight", type=int)
    parser.add_argument("--faults", default="", help="e.g. 429=0.2,500=0.1")
    parser.add_argument("--retry-after", type=float, default=1.0)
    args = parser.parse_args()
    faults = {k: float(v) for k, v in (item.split("=") for item in args.faults.split(",") if item)}
    server = FakeOpenAI(
        answer, latency=args.latency, max_in_flight=args.max_in_flight, faults=faults,
        retry_after=args.retry_after, seed=7,
    )  # fmt: skip
    server.start()
    print(server.url, flush=True)
    sys.stdin.read()
    server.stop()


if __name__ == "__main__":
    main()
