"""What a host callable (``ctxeval_hosts``) adds per row to ``Session.score``, from many threads.

The callables of issue #51 (LangSmith evaluator, autoevals scorer, promptfoo assertion) read
the row's fields through their explicit paths, call ``session.score`` and translate the result
for the host. This script scores the same rows from ``--threads`` threads, alternating:

* **session**: ``session.score(sample_dict)`` (the floor the callables stand on);
* **langsmith**: ``evaluator(inputs, outputs, reference_outputs)``;
* **autoevals**: ``scorer(input=, output=, expected=)``;
* **promptfoo**: ``get_assert(output, {"vars": ...})``;

and prints the best wall time of each and the extra per row against the session, in µs.

    python bench/hosts_callables_overhead.py [--rows 100000] [--threads 8] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import random
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import ctxeval

METRIC = "id_based_context_recall"


def make_rows(n: int) -> list[dict[str, Any]]:
    rng = random.Random(7)
    rows = []
    for _ in range(n):
        retrieved = [f"d{rng.randrange(50)}" for _ in range(10)]
        reference = [f"d{rng.randrange(50)}" for _ in range(3)]
        rows.append({"retrieved_context_ids": retrieved, "reference_context_ids": reference})
    return rows


def in_threads(threads: int, rows: Sequence[Any], call: Callable[[Any], Any]) -> float:
    chunks = [rows[i::threads] for i in range(threads)]

    def work(chunk: Sequence[Any]) -> None:
        for row in chunk:
            call(row)

    started = time.perf_counter()
    workers = [threading.Thread(target=work, args=(c,)) for c in chunks]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    from ctxeval_hosts import braintrust, langsmith, promptfoo

    rows = make_rows(args.rows)
    promptfoo_vars = [{k: json.dumps(v) for k, v in row.items()} for row in rows]
    session = ctxeval.Session([METRIC])
    ls = langsmith.evaluator(METRIC)
    bt = braintrust.scorer(METRIC)
    pf = promptfoo.assertion(METRIC, threshold=0.5)
    ways: dict[str, tuple[Sequence[Any], Callable[[Any], Any]]] = {
        "session": (rows, session.score),
        "langsmith": (rows, lambda r: ls({}, r, r)),
        "autoevals": (rows, lambda r: bt(input="q", output=r, expected=r)),
        "promptfoo": (promptfoo_vars, lambda v: pf("answer", {"vars": v})),
    }
    best = {name: float("inf") for name in ways}
    for _ in range(args.repeat):
        for name, (items, call) in ways.items():
            best[name] = min(best[name], in_threads(args.threads, items, call))
    floor = best["session"]
    print(f"{args.rows} rows, {args.threads} threads, best of {args.repeat}, metric {METRIC}")
    for name, seconds in best.items():
        extra = (seconds - floor) / args.rows * 1e6
        print(
            f"{name:10s} {seconds:7.2f} s  {seconds / args.rows * 1e6:6.1f} µs/row  +{extra:5.1f}"
        )
    for closing in (ls, bt, pf):
        closing.close()
    session.close()


if __name__ == "__main__":
    main()
