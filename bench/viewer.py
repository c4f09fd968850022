"""``ctxeval view`` on a run of 1 000 000 samples x 2 metrics: the index, the API, the page.

1. Writes a run folder directly (``data.jsonl`` of ID samples, and ``results.jsonl`` and
   ``summary.json`` as ``ctxeval evaluate --out`` writes them for ``id_based_context_precision``
   and ``id_based_context_recall``); checks the format first: ``ctxeval evaluate`` on the first
   2 000 samples must write the very same lines.
2. Builds the index in a child process: wall time, peak resident memory (``ru_maxrss``), size.
3. Starts the server in this process and times the API (first call, then median of 5).
4. Headless Chromium, driven through the DevTools protocol (``--remote-debugging-pipe``):
   the time from navigation start until the explorer has rendered (the page's
   ``performance.mark("ctxeval-rendered")``), for the first page and for a deep link to the
   last sample (``#id=...``); median and worst of 5 loads, each after ``about:blank``.

    python bench/viewer.py [--samples 1000000] [--folder /tmp/ctxeval-view-bench]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parents[1]
METRICS = ("id_based_context_precision", "id_based_context_recall")
USAGE = {"requests": 0, "retries": 0, "prompt_tokens": 0, "completion_tokens": 0,
         "cost_usd": 0.0, "cache_hits": 0}  # fmt: skip


def sample(i: int, rng: random.Random) -> dict[str, Any]:
    """The ``i``-th sample: an id (every 50th has none: its position is its id), a question,
    retrieved and reference document ids (every 20th has no reference, every 30th retrieved
    nothing)."""
    retrieved = [] if i % 30 == 7 else [f"d{d}" for d in rng.sample(range(5000), rng.randint(1, 5))]
    reference = [] if i % 20 == 3 else [f"d{d}" for d in rng.sample(range(5000), rng.randint(1, 3))]
    if reference and retrieved and rng.random() < 0.6 and retrieved[0] not in reference:
        reference[0] = retrieved[0]
    row: dict[str, Any] = {
        "user_input": f"question {i} about topic{i % 97}",
        "retrieved_context_ids": retrieved,
        "reference_context_ids": reference,
    }
    if i % 50 != 0:
        row = {"id": f"q{i:07d}", **row}
    return row


def result_rows(sample_id: str, s: dict[str, Any]) -> list[dict[str, Any]]:
    """The two rows ``ctxeval evaluate`` writes for ``s``."""
    retrieved, reference = s["retrieved_context_ids"], s["reference_context_ids"]
    if not reference:
        reason = "nothing to recall: there are no reference context IDs"
        return [{"sample_id": sample_id, "metric": m, "status": "undefined", "score": None,
                 "reason": reason, "details": {}, "usage": USAGE} for m in METRICS]  # fmt: skip
    wanted = set(reference)
    details = {
        "relevant": [d for d in retrieved if d in wanted],
        "irrelevant": [d for d in retrieved if d not in wanted],
        "missing": sorted(wanted - set(retrieved)),
    }
    recall = sum(d in set(retrieved) for d in set(reference)) / len(set(reference))
    if retrieved:
        precision = sum(d in wanted for d in retrieved) / len(retrieved)
        first = {"status": "ok", "score": precision, "reason": None}
    else:
        first = {"status": "undefined", "score": None,
                 "reason": "nothing retrieved: there are no retrieved context IDs"}  # fmt: skip
    return [
        {"sample_id": sample_id, "metric": METRICS[0], **first, "details": details,
         "usage": USAGE},
        {"sample_id": sample_id, "metric": METRICS[1], "status": "ok", "score": recall,
         "reason": None, "details": details, "usage": USAGE},
    ]  # fmt: skip


def generate(folder: Path, n: int) -> None:
    """Write ``folder/data.jsonl`` and the run ``folder/run`` of ``n`` samples."""
    rng = random.Random(0)
    run = folder / "run"
    run.mkdir(parents=True, exist_ok=True)
    scores: dict[str, list[float]] = {m: [] for m in METRICS}
    counts = {m: {"ok": 0, "undefined": 0, "error": 0} for m in METRICS}
    with (folder / "data.jsonl").open("wb") as data, (run / "results.jsonl").open("wb") as out:
        for i in range(n):
            s = sample(i, rng)
            data.write(orjson.dumps(s) + b"\n")
            for row in result_rows(s.get("id", str(i)), s):
                out.write(orjson.dumps(row) + b"\n")
                counts[row["metric"]][row["status"]] += 1
                if row["score"] is not None:
                    scores[row["metric"]].append(row["score"])
    summary = {
        "metrics": {m: {"mean": statistics.fmean(scores[m]) if scores[m] else None,
                        "n_ok": counts[m]["ok"], "n_undefined": counts[m]["undefined"],
                        "n_error": counts[m]["error"], "ci95": None, "ci95_method": None,
                        "usage": USAGE} for m in METRICS},
        "usage": USAGE,
        "data": str(folder / "data.jsonl"),
        "skipped_rows": [],
        "ctxeval": "bench",
    }  # fmt: skip
    (run / "summary.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")


def check_format(n: int = 2000) -> None:
    """``ctxeval evaluate`` on ``n`` generated samples writes the lines :func:`generate` does."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        generate(folder, n)
        subprocess.run(
            [sys.executable, "-m", "ctxeval", "evaluate", str(folder / "data.jsonl"),
             "-m", METRICS[0], "-m", METRICS[1], "--out", str(folder / "real"), "-q"],
            check=True,
        )  # fmt: skip
        ours = (folder / "run" / "results.jsonl").read_bytes().splitlines()
        real = (folder / "real" / "results.jsonl").read_bytes().splitlines()
        assert len(ours) == len(real), (len(ours), len(real))
        for a, b in zip(ours, real, strict=True):
            assert orjson.loads(a) == orjson.loads(b), (a, b)
            assert a == b, (a, b)
    print(f"format check: ctxeval evaluate writes the same {len(real)} lines", flush=True)


def build_child(folder: Path) -> dict[str, Any]:
    """Build the index in a child process: its wall time, peak memory and size."""
    code = f"""
import json, resource, sys, time
from pathlib import Path
from ctxeval._output.run_source import run_source
from ctxeval._view.index import build_index
run = run_source(Path({str(folder / "run")!r}))
path = Path({str(folder / "run" / "view-index.sqlite")!r})
start = time.perf_counter()
stats = build_index([run], path)
seconds = time.perf_counter() - start
print(json.dumps({{"seconds": seconds, "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "size_mb": path.stat().st_size / 2**20, "samples": stats["samples"], "rows": stats["rows"]}}))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def fetch(url: str) -> tuple[float, Any]:
    start = time.perf_counter()
    with urllib.request.urlopen(url) as answer:
        body = orjson.loads(answer.read())
    return time.perf_counter() - start, body


class Chromium:
    """Headless Chromium driven through the DevTools protocol over a pipe (fds 3 and 4)."""

    def __init__(self, browser: str) -> None:
        self.profile = tempfile.mkdtemp(prefix="ctxeval-bench-chromium-")
        to_chrome_r, self.to_chrome = os.pipe()
        self.from_chrome, from_chrome_w = os.pipe()

        def fds() -> None:
            os.dup2(to_chrome_r, 3)
            os.dup2(from_chrome_w, 4)

        self.proc = subprocess.Popen(
            [browser, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
             f"--user-data-dir={self.profile}", "--no-first-run", "about:blank"],
            pass_fds=(3, 4), preexec_fn=fds,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self.buffer = b""
        self.next_id = 0
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        attached = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})
        self.session = attached["sessionId"]
        self.call("Page.enable", session=True)

    def call(
        self, method: str, params: dict[str, Any] | None = None, *, session: bool = False
    ) -> Any:
        self.next_id += 1
        message: dict[str, Any] = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = self.session
        os.write(self.to_chrome, orjson.dumps(message) + b"\0")
        while True:
            while b"\0" not in self.buffer:
                chunk = os.read(self.from_chrome, 1 << 16)
                if not chunk:
                    raise RuntimeError("chromium closed the pipe")
                self.buffer += chunk
            raw, self.buffer = self.buffer.split(b"\0", 1)
            answer = orjson.loads(raw)
            if answer.get("id") == self.next_id:
                if "error" in answer:
                    raise RuntimeError(answer["error"])
                return answer.get("result", {})

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True},
                           session=True)  # fmt: skip
        return result.get("result", {}).get("value")

    def rendered_after(self, url: str, check: str) -> tuple[float, float]:
        """Load ``url`` (after about:blank): ms from navigation start to the explorer's first
        render (the page's own clock), and ms of wall time from the navigate command until this
        process saw it. ``check`` is a JS expression that must be true once rendered."""
        self.call("Page.navigate", {"url": "about:blank"}, session=True)
        time.sleep(0.2)
        start = time.perf_counter()
        self.call("Page.navigate", {"url": url}, session=True)
        deadline = start + 30
        while time.perf_counter() < deadline:
            found = self.evaluate(
                "(() => { const m = performance.getEntriesByName('ctxeval-rendered');"
                f" return m.length && ({check}) ? m[0].startTime : null; }})()"
            )
            if found is not None:
                return float(found), (time.perf_counter() - start) * 1000
            time.sleep(0.005)
        state = self.evaluate("location.href + ' ' + document.getElementById('count')?.textContent")
        raise RuntimeError(f"{url}: not rendered in 30 s ({state})")

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)
        os.close(self.to_chrome)
        os.close(self.from_chrome)
        shutil.rmtree(self.profile, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=1_000_000)
    parser.add_argument(
        "--folder", type=Path, default=Path(tempfile.gettempdir()) / "ctxeval-view-bench"
    )
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    check_format()
    folder: Path = args.folder / str(args.samples)
    if not (folder / "run" / "summary.json").exists():
        start = time.perf_counter()
        generate(folder, args.samples)
        print(
            f"generated {args.samples} samples in {time.perf_counter() - start:.1f} s", flush=True
        )
    results = folder / "run" / "results.jsonl"
    print(f"results.jsonl {results.stat().st_size / 2**20:.0f} MB, data.jsonl "
          f"{(folder / 'data.jsonl').stat().st_size / 2**20:.0f} MB", flush=True)  # fmt: skip
    built = build_child(folder)
    table: list[tuple[str, str]] = [
        ("index build (1 process)", f"{built['seconds']:.1f} s, {built['rows'] / built['seconds']:,.0f} rows/s"),
        ("index build peak memory (ru_maxrss)", f"{built['peak_mb']:.0f} MB"),
        ("index file size", f"{built['size_mb']:.0f} MB ({built['samples']:,} samples, {built['rows']:,} rows)"),
    ]  # fmt: skip

    from ctxeval._output.run_source import run_source
    from ctxeval._view.index import ensure_index
    from ctxeval._view.server import make_server, server_url

    run = run_source(folder / "run")
    index = ensure_index([run])
    server = make_server([run], index)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = server_url(server)
    last = f"q{args.samples - 1:07d}" if (args.samples - 1) % 50 else str(args.samples - 1)
    queries = {
        "first page": "api/samples?offset=0&limit=50",
        "deep link, last sample (id=)": f"api/samples?offset=0&limit=50&id={last}",
        "one sample (/api/sample)": f"api/sample?id={last}",
        f"last page (offset {args.samples - 50:,})": f"api/samples?offset={args.samples - 50}&limit=50",
        "sort by recall, lowest first": f"api/samples?limit=50&sort=asc&metric={METRICS[1]}",
        "sort by recall, last page": f"api/samples?limit=50&sort=asc&metric={METRICS[1]}&offset={args.samples - 50}",
        "sort by lowest score (all metrics)": "api/samples?limit=50&sort=desc",
        "filter: status undefined": "api/samples?limit=50&status=undefined",
        "filter: precision 0.2 - 0.4": f"api/samples?limit=50&metric={METRICS[0]}&min=0.2&max=0.4",
        "search 'topic42' (1%)": "api/samples?limit=50&q=topic42",
        "search 'topic42', sorted": f"api/samples?limit=50&q=topic42&sort=asc&metric={METRICS[1]}",
        "search one id": f"api/samples?limit=50&q={last}",
    }  # fmt: skip
    api: list[tuple[str, str]] = []
    for name, query in queries.items():
        first, body = fetch(url + query)
        times = [fetch(url + query)[0] for _ in range(args.repeat)]
        total = body.get("total", 1)
        api.append((f"API {name}", f"first {first * 1000:.0f} ms, then {statistics.median(times) * 1000:.1f} ms (total {total:,})"))  # fmt: skip

    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    page: list[tuple[str, str]] = []
    if browser is None:
        page.append(("chromium", "not installed: skipped"))
    else:
        chrome = Chromium(browser)
        try:
            for name, address, check in (
                ("first page", url, "document.querySelectorAll('details.sample').length === 50"),
                (f"deep link #id={last}", f"{url}#id={last}",
                 f"document.querySelector('details.sample[open]')?.dataset.id === '{last}'"),
            ):  # fmt: skip
                marks, walls = [], []
                for _ in range(args.repeat):
                    mark, wall = chrome.rendered_after(address, check)
                    marks.append(mark)
                    walls.append(wall)
                page.append((f"Chromium {name}: navigation start -> rendered",
                             f"median {statistics.median(marks):.0f} ms, worst {max(marks):.0f} ms "
                             f"(wall, navigate -> seen: median {statistics.median(walls):.0f} ms)"))  # fmt: skip
        finally:
            chrome.close()
    server.shutdown()
    width = max(len(k) for k, _ in table + api + page)
    print(
        f"\nctxeval view, {args.samples:,} samples x {len(METRICS)} metrics, {os.cpu_count()} CPUs\n"
    )
    for key, value in table + api + page:
        print(f"{key:<{width}}  {value}")


if __name__ == "__main__":
    main()
