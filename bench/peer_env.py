"""Virtual environments for the peers the benchmarks compare against, kept apart from the
project's own (bench/.venvs/, not committed). Each is made on first use with pinned versions.

    python bench/peer_env.py ragas      # make (or check) the ragas 0.4.3 environment
"""

from __future__ import annotations

import compileall
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
VENVS = HERE / ".venvs"

PEERS = {
    # ragas 0.4.3 imports langchain_community.chat_models.vertexai, gone from 0.4: pin 0.3.
    "ragas": ["ragas==0.4.3", "langchain-community<0.4", "rapidfuzz"],
    # ranx compiles its measures with numba on first use (cached on disk afterwards)
    "ranx": ["ranx==0.3.21"],
    # bench/compare_relevance_calls.py counts ContextualRelevancyMetric's calls
    "deepeval": ["deepeval==4.3.1"],
}


def python_of(name: str) -> Path:
    """The interpreter of peer ``name``'s environment, made if missing."""
    venv = VENVS / name
    python = venv / "bin" / "python"
    marker = venv / ".complete"
    if not marker.exists():
        print(f"making the {name} environment in {venv} (once)...", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", *PEERS[name]], check=True)
        marker.write_text(" ".join(PEERS[name]))
    return python


def landmark_samples(count: int, chunks: int) -> list[dict[str, object]]:
    """The samples the LLM comparisons judge: ``count`` questions about landmarks, each with a
    reference and ``chunks`` retrieved chunks (``bench/compare_llm.py``, ``bench/loop_lag.py``)."""
    return [
        {
            "id": str(i),
            "user_input": f"Where is landmark {i}?",
            "reference": f"Landmark {i} is in Paris, France.",
            "retrieved_contexts": [
                f"Chunk {j} about landmark {i} in Paris." for j in range(chunks)
            ],
        }
        for i in range(count)
    ]


def compile_ours() -> None:
    """ctxeval's own sources compiled to bytecode before a timed comparison, as pip compiles
    a peer's at install. An editable install on a machine that sets PYTHONDONTWRITEBYTECODE
    (this one does) would otherwise compile every module anew in each timed process:
    0.1 to 0.2 s per process here that pip-installed peers never pay."""
    for folder in (ROOT / "core", ROOT / "plugins"):
        compileall.compile_dir(folder, quiet=1)


if __name__ == "__main__":
    for peer in sys.argv[1:] or list(PEERS):
        print(python_of(peer))
