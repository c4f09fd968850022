"""Calls and cost of judging context relevance without a reference, side by side: ctxeval's
``context_relevance`` (one request per chunk, and its batch mode: one per sample), ragas 0.4.3's
``ContextRelevance`` (two judges, each rating the joined chunks: 2 requests per sample) and
DeepEval 4.3.1's ``ContextualRelevancyMetric`` (one request per chunk, plus one for the reason).

All of them ask the same fake OpenAI-compatible server (tests/fakes, in this process) about the
same N samples x k chunks, at concurrency 16. The server answers each tool in its own format,
minimally and alike: ctxeval's grades and DeepEval's verdicts carry the same one-sentence
reason; DeepEval's verdicts list the chunk's sentences as its prompt asks (a statement each,
a reason for an irrelevant one); ragas's judges answer one digit.

Counted per tool: the requests the server received, and their prompt and completion tokens in
OpenAI's ``o200k_base`` encoding (gpt-4o/gpt-4o-mini; read offline from litellm's bundled copy;
without it, 4 characters a token): the messages' text, 3 tokens per message and 3 for the
answer's start, plus the JSON schema of a ``response_format`` when one is sent (as OpenAI bills
structured outputs). Cost: at ``--price`` (default gpt-4o-mini's, USD 0.15 / 0.60 per million
prompt / completion tokens).

    python bench/compare_relevance_calls.py [--samples 100] [--chunks 5] [--words 150]
        [--price 0.15,0.60] [--ragas-python PATH] [--deepeval-python PATH]

The peers run in their own environments (bench/peer_env.py makes them: ragas 0.4.3,
deepeval 4.3.1), offline: ragas with ``RAGAS_DO_NOT_TRACK``, DeepEval with
``DEEPEVAL_TELEMETRY_OPT_OUT``, both pointed at the fake server with a dummy key.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import logging
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE))

from fakes.openai_server import FakeOpenAI  # noqa: E402

logger = logging.getLogger("compare_relevance_calls")

REASON = "A one-sentence reason of about fifteen words: the same stand-in text from every judge."
"""The one reason every judge gives (ctxeval's grades, DeepEval's irrelevant statements)."""
CONCURRENCY = 16

RAGAS_RUN = r"""
import json, os, sys, time, warnings
os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")
warnings.filterwarnings("ignore")
from langchain_openai import ChatOpenAI
from ragas import EvaluationDataset, RunConfig, evaluate
from ragas.llms import LangchainLLMWrapper
from ragas.metrics import ContextRelevance
url, data, workers = sys.argv[1], sys.argv[2], int(sys.argv[3])
rows = [json.loads(line) for line in open(data, encoding="utf-8")]
dataset = EvaluationDataset.from_list(
    [{"user_input": r["user_input"], "retrieved_contexts": r["retrieved_contexts"]} for r in rows])
llm = LangchainLLMWrapper(ChatOpenAI(model="gpt-4o-mini", base_url=url, api_key="sk-bench",
                                     temperature=0, max_retries=0))
wall = time.perf_counter()
result = evaluate(dataset, metrics=[ContextRelevance()], llm=llm, show_progress=False,
                  raise_exceptions=False, run_config=RunConfig(max_workers=workers, timeout=120))
scores = [v for row in result.scores for v in row.values()]
print(json.dumps({"wall": time.perf_counter() - wall, "rows": len(scores),
                  "mean": sum(scores) / len(scores)}))
"""

DEEPEVAL_RUN = r"""
import asyncio, json, os, sys, time
os.environ.setdefault("DEEPEVAL_TELEMETRY_OPT_OUT", "YES")
os.environ.setdefault("DEEPEVAL_DISABLE_DOTENV", "1")
os.environ.setdefault("ERROR_REPORTING", "NO")
from deepeval.metrics import ContextualRelevancyMetric
from deepeval.models import GPTModel
from deepeval.test_case import LLMTestCase
url, data, workers = sys.argv[1], sys.argv[2], int(sys.argv[3])
rows = [json.loads(line) for line in open(data, encoding="utf-8")]
model = GPTModel(model="gpt-4o-mini", api_key="sk-bench", base_url=url, temperature=0)

async def main():
    gate = asyncio.Semaphore(workers)
    async def one(row):
        async with gate:
            metric = ContextualRelevancyMetric(model=model, async_mode=True)
            case = LLMTestCase(input=row["user_input"], actual_output="-",
                               retrieval_context=row["retrieved_contexts"])
            return await metric.a_measure(case, _show_indicator=False)
    return await asyncio.gather(*(one(r) for r in rows))

wall = time.perf_counter()
scores = asyncio.run(main())
print(json.dumps({"wall": time.perf_counter() - wall, "rows": len(scores),
                  "mean": sum(scores) / len(scores)}))
"""


# --- the data --------------------------------------------------------------------------------

_FILLER = (
    "Visitors often arrive early in the morning to avoid the queues at the entrance. "
    "The nearby square hosts a market on most weekends during the summer months. "
    "Several guidebooks describe the view from the upper floors as the best in the city. "
    "Local cafes serve pastries and coffee to the crowds that gather in the afternoon. "
    "The site was restored twice during the last century after damage from storms. "
)


def chunk(sample: int, index: int, words: int) -> str:
    """A chunk of about ``words`` words: a relevant sentence (the even chunks), then filler."""
    head = (
        f"Landmark {sample} stands in Paris, France, on the left bank of the Seine."
        if index % 2 == 0
        else f"Landmark {sample} is often compared with other monuments of the period."
    )
    text = head.split()
    filler = _FILLER.split()
    filler = filler[(11 * index) % len(filler) :] + filler  # each chunk of a sample its own
    while len(text) < words:
        text.extend(filler[: words - len(text)])
    return " ".join(text)


def samples(count: int, chunks: int, words: int) -> list[dict[str, Any]]:
    return [
        {
            "id": str(i),
            "user_input": f"Where is landmark {i}?",
            "retrieved_contexts": [chunk(i, j, words) for j in range(chunks)],
        }
        for i in range(count)
    ]


# --- the server's answers and the counting ---------------------------------------------------


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", text) if s.strip()]


def text_of(message: dict[str, Any]) -> str:
    """A message's text (DeepEval sends a list of parts)."""
    content = message.get("content") or ""
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content)


def answer(request: dict[str, Any]) -> str:
    """Each tool's minimal answer in its own format."""
    schema = ((request.get("response_format") or {}).get("json_schema") or {}).get("name")
    text = "\n".join(text_of(m) for m in request["messages"])
    user = text_of(request["messages"][-1])
    if schema == "relevance" or (schema is None and "\nPassage: " in user):  # ctxeval
        grade = 3 if "stands in" in user else 1
        return json.dumps({"reason": REASON, "grade": grade})
    if schema == "relevance_batch" or "\nPassages:\n" in user:  # ctxeval, batch mode
        passages = re.findall(r"^\[\d+\] (.*)$", user.split("\nPassages:\n", 1)[-1], re.M)
        grades = [3 if "stands in" in p else 1 for p in passages]
        return json.dumps({"grades": [{"reason": REASON, "grade": g} for g in grades]})
    if "Relevance score is" in text:  # ragas: a digit
        return "2"
    if "each statement found in the context" in text:  # DeepEval: the chunk's statements
        context = text.rsplit("Context:\n", 1)[-1].rsplit("\n\nJSON:", 1)[0]
        verdicts = []
        for sentence in _sentences(context):
            if "stands in" in sentence:
                verdicts.append({"statement": sentence, "verdict": "yes"})
            else:
                verdicts.append({"statement": sentence, "reason": REASON, "verdict": "no"})
        return json.dumps({"verdicts": verdicts})
    if "CONCISE reason" in text:  # DeepEval: the reason of the score
        return json.dumps({"reason": f"The score is 0.20 because {REASON[0].lower()}{REASON[1:]}"})
    raise ValueError(f"unknown prompt: {text[:120]!r}")


def _counter(encoding: Any) -> Callable[[str], int]:
    return lambda text: len(encoding.encode(text, disallowed_special=()))


def tokenizer() -> tuple[Callable[[str], int], str]:
    """o200k_base from litellm's bundled copy (offline), else 4 characters a token."""
    spec = importlib.util.find_spec("litellm")
    folders = list(spec.submodule_search_locations or []) if spec else []
    for folder in folders:
        cache = Path(folder) / "litellm_core_utils" / "tokenizers"
        if (cache / "fb374d419588a4632f3f557e76b4b70aebbca790").exists():
            os.environ["TIKTOKEN_CACHE_DIR"] = str(cache)
            try:
                import tiktoken

                encoding = tiktoken.get_encoding("o200k_base")
            except Exception:  # no tiktoken, or the file unreadable: the rough count
                logger.warning("tiktoken's o200k_base could not be read; 4 characters a token")
                break
            return _counter(encoding), "o200k_base"
    return (lambda text: max(1, len(text) // 4)), "4 characters a token"


class Meter:
    """The server's responder: answers, and counts each request's tokens."""

    def __init__(self, count: Callable[[str], int]) -> None:
        self.count = count
        self.lock = threading.Lock()
        self.requests = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0

    def __call__(self, request: dict[str, Any]) -> str:
        content = answer(request)
        messages = request.get("messages") or []
        prompt = 3 + sum(3 + self.count(text_of(m)) for m in messages)
        schema = (request.get("response_format") or {}).get("json_schema")
        if schema is not None:
            prompt += self.count(json.dumps(schema.get("schema", {})))
        with self.lock:
            self.requests += 1
            self.prompt_tokens += prompt
            self.completion_tokens += self.count(content)
        return content

    def snapshot(self) -> tuple[int, int, int]:
        with self.lock:
            return self.requests, self.prompt_tokens, self.completion_tokens


# --- the tools -------------------------------------------------------------------------------


def run_ctxeval(url: str, rows: list[dict[str, Any]], batch: bool) -> dict[str, Any]:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import ctxeval
    from ctxeval_llm import LLMConfig

    llm = LLMConfig(model="openai/gpt-4o-mini", api_base=url, api_key="sk-bench")
    metric = ctxeval.get_metric("context_relevance", batch=batch)
    wall = time.perf_counter()
    ev = ctxeval.evaluate(rows, [metric], llm=llm, cache=None, max_concurrency=CONCURRENCY)
    scores = [r.score for r in ev.results if r.score is not None]
    errors = [r.reason for r in ev.results if r.score is None]
    if errors:
        raise RuntimeError(f"ctxeval rows failed: {errors[:2]}")
    return {
        "wall": time.perf_counter() - wall,
        "rows": len(scores),
        "mean": sum(scores) / len(scores),
    }


def run_peer(python: str, code: str, url: str, data: Path) -> dict[str, Any]:
    env = {**os.environ, "OPENAI_BASE_URL": url, "OPENAI_API_KEY": "sk-bench"}
    with tempfile.TemporaryDirectory() as cwd:  # DeepEval writes a .deepeval folder here
        done = subprocess.run(
            [python, "-c", code, url, str(data), str(CONCURRENCY)],
            capture_output=True, text=True, timeout=1800, env=env, cwd=cwd,
        )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-2000:])
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def peer_python(name: str, given: str | None, pins: list[str]) -> str:
    if given:
        return given
    import peer_env

    peer_env.PEERS.setdefault(name, pins)
    return str(peer_env.python_of(name))


def version_of(python: str, package: str) -> str:
    done = subprocess.run(
        [python, "-c", f"import importlib.metadata as m; print(m.version({package!r}))"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    return done.stdout.strip() or "?"


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=100)
    parser.add_argument("--chunks", type=int, default=5)
    parser.add_argument("--words", type=int, default=150, help="words per chunk")
    parser.add_argument("--price", default="0.15,0.60", help="USD per million IN,OUT tokens")
    parser.add_argument("--ragas-python", help="the ragas environment's python")
    parser.add_argument("--deepeval-python", help="the DeepEval environment's python")
    parser.add_argument("--skip", default="", help="comma-separated: ragas, deepeval")
    args = parser.parse_args()
    price_in, price_out = (float(p) / 1e6 for p in args.price.split(","))
    count, encoding = tokenizer()
    rows = samples(args.samples, args.chunks, args.words)
    meter = Meter(count)
    skip = set(filter(None, args.skip.split(",")))
    tools: list[tuple[str, Callable[[str, Path], dict[str, Any]]]] = [
        ("ctxeval context_relevance (per chunk)", lambda url, data: run_ctxeval(url, rows, False)),
        ("ctxeval context_relevance (batch=true)", lambda url, data: run_ctxeval(url, rows, True)),
    ]
    if "ragas" not in skip:
        ragas = peer_python("ragas", args.ragas_python, [])
        tools.append((
            f"ragas {version_of(ragas, 'ragas')} ContextRelevance",
            lambda url, data: run_peer(ragas, RAGAS_RUN, url, data),
        ))  # fmt: skip
    if "deepeval" not in skip:
        deepeval = peer_python("deepeval", args.deepeval_python, ["deepeval==4.3.1"])
        tools.append((
            f"DeepEval {version_of(deepeval, 'deepeval')} ContextualRelevancyMetric",
            lambda url, data: run_peer(deepeval, DEEPEVAL_RUN, url, data),
        ))  # fmt: skip
    table = []
    with tempfile.TemporaryDirectory() as folder, FakeOpenAI(meter) as server:
        data = Path(folder) / "relevance.jsonl"
        data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        for name, run in tools:
            before = meter.snapshot()
            result = run(server.url, data)
            after = meter.snapshot()
            requests, prompt, completion = (a - b for a, b in zip(after, before, strict=True))
            cost = prompt * price_in + completion * price_out
            table.append({"tool": name, **result, "requests": requests,
                          "prompt_tokens": prompt, "completion_tokens": completion, "cost": cost})  # fmt: skip
            logger.info("%s: %s", name, table[-1])
    n, k = args.samples, args.chunks
    print(
        f"# context relevance without a reference: {n} samples x {k} chunks of {args.words} "
        f"words, tokens in {encoding}, cost at USD {args.price} per million prompt,completion "
        "tokens\n"
    )
    print("| tool | requests | per sample | prompt tokens | completion tokens | cost (USD) | per 1 000 samples (USD) |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in table:
        print(
            f"| {r['tool']} | {r['requests']:,} | {r['requests'] / n:g} | {r['prompt_tokens']:,} | "
            f"{r['completion_tokens']:,} | {r['cost']:.4f} | {r['cost'] / n * 1000:.3f} |"
        )
    print("\n" + json.dumps(table))


if __name__ == "__main__":
    main()
