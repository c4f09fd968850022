"""The floor under reading OTLP JSON traces (#52): what the fastest JSON readers installed cost
on the trace file alone, against ``ctxeval.load_samples`` reading the equivalent samples JSONL
whole.

The files are bench/traces.py's (OpenInference spans as a collector's file exporter writes them,
10 spans a trace; one sample a trace in the JSONL). Each reader runs in a fresh process; its CPU
(user + system) less that of an empty process is compared with ``load_samples``'s:

* ``lines``: iterating the file's lines, nothing else;
* ``orjson`` / ``msgspec``: every line decoded to Python objects;
* ``msgspec typed``: every line decoded into structs of only the fields a reader needs
  (trace, span and parent ids, attribute keys), the attribute values left undecoded
  (``msgspec.Raw``): the least a JSON reader in C does;
* ``pyarrow``: ``pyarrow.json.read_json`` of the whole file (C++, threads);
* ``load_traces``: ctxeval's reader, whole (samples made).

``load_samples`` counts ``import ctxeval`` (about 0.07 s), which the JSON readers do not: that
favours the readers, so the ratios are, if anything, low.

    python bench/traces_floor.py [--traces 100000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import traces  # bench/traces.py: the same files

READERS = {
    "empty process": "pass",
    "lines": "for line in open(P, 'rb'): pass",
    "orjson": "import orjson\nfor line in open(P, 'rb'): orjson.loads(line)",
    "msgspec": "import msgspec\nd = msgspec.json.Decoder()\nfor line in open(P, 'rb'): d.decode(line)",
    "msgspec typed": """import msgspec
class A(msgspec.Struct):
    key: str
    value: msgspec.Raw
class S(msgspec.Struct):
    traceId: str = ""
    spanId: str = ""
    parentSpanId: str = ""
    attributes: list[A] = []
class SS(msgspec.Struct):
    spans: list[S] = []
class RS(msgspec.Struct):
    scopeSpans: list[SS] = []
class R(msgspec.Struct):
    resourceSpans: list[RS] = []
d = msgspec.json.Decoder(R)
for line in open(P, 'rb'): d.decode(line)""",
    "pyarrow": "import pyarrow.json as pj\n"
    "pj.read_json(P, read_options=pj.ReadOptions(block_size=64 << 20))",
    "load_traces": "import ctxeval\nfor s in ctxeval.load_traces(P, format='openinference'): pass",
    "load_samples (JSONL)": "import ctxeval\nfor s in ctxeval.load_samples(J): pass",
}
WRAP = """import resource, sys
P, J = sys.argv[1], sys.argv[2]
{code}
u = resource.getrusage(resource.RUSAGE_SELF)
print(u.ru_utime + u.ru_stime)"""


def cpu(code: str, otlp: Path, jsonl: Path) -> float | None:
    done = subprocess.run(
        [sys.executable, "-c", WRAP.format(code=code), str(otlp), str(jsonl)],
        capture_output=True,
        text=True,
    )
    if done.returncode:  # a reader not installed (pyarrow, msgspec)
        return None
    return float(done.stdout.split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        otlp, jsonl = Path(tmp) / "traces.json", Path(tmp) / "samples.jsonl"
        traces.write_otlp(otlp, args.traces)
        traces.write_jsonl(jsonl, args.traces)
        print(f"{args.traces} traces: OTLP JSON {otlp.stat().st_size / 1e6:.1f} MB, "
              f"samples JSONL {jsonl.stat().st_size / 1e6:.1f} MB; CPU best of {args.repeat}")  # fmt: skip
        times: dict[str, list[float]] = {name: [] for name in READERS}
        for _ in range(args.repeat):
            for name, code in READERS.items():
                seconds = cpu(code, otlp, jsonl)
                if seconds is not None:
                    times[name].append(seconds)
    base = min(times["empty process"])
    jsonl_cpu = min(times["load_samples (JSONL)"]) - base
    for name, values in times.items():
        if name == "empty process" or not values:
            continue
        own = min(values) - base
        print(f"  {name:22} {own:7.2f} s  {own / jsonl_cpu:6.2f}x load_samples of the JSONL")


if __name__ == "__main__":
    main()
