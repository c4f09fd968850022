"""Every Python example in the docs and the README runs (against the fake LLM server where it
needs an LLM), so the docs cannot drift from the code."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from fakes.openai_server import FakeOpenAI
from llm_judge import Judge

ROOT = Path(__file__).resolve().parents[1]
PAGES = [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md"]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)

# Names the examples use as placeholders for the reader's own data.
PREAMBLE = """
import json, ctxeval
from ctxeval.runners import SQLiteCache
samples = [json.loads(line) for line in open({demo!r}, encoding="utf-8")][:6]
metrics = ["id_mrr", "non_llm_context_recall"]
"""


DEMO_CSV = 'id,user_input,retrieved_contexts,reference_contexts\nq1,Where?,"[""a""]","[""a""]"\n'


def examples() -> Iterator[tuple[str, int, str]]:
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for match in BLOCK.finditer(text):
            code = textwrap.dedent(match.group(1))
            line = text[: match.start()].count("\n") + 2
            if "from ragas" in code:
                continue  # shown for comparison with ragas, which the suite does not install
            yield str(page.relative_to(ROOT)), line, code


def as_script(code: str) -> str:
    """Top-level ``await`` / ``async with`` (as in a notebook) run inside an async main."""
    try:
        compile(code, "<example>", "exec")
    except SyntaxError:
        body = textwrap.indent(code, "    ")
        return f"import anyio\n\nasync def __example() -> None:\n{body}\n\nanyio.run(__example)\n"
    return code


@pytest.fixture(scope="module")
def llm_server() -> Iterator[FakeOpenAI]:
    judge = Judge(verdicts={}, entities={}, fallback=None)
    judge.verdicts = _Always(1)
    with FakeOpenAI(judge) as server:
        yield server


class _Always(dict):  # type: ignore[type-arg]
    def __init__(self, value: int) -> None:
        super().__init__()
        self.value = value

    def get(self, key: object, default: object = None) -> int:  # type: ignore[override]
        return self.value


@pytest.fixture(scope="module")
def example_plugin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example plugin and the example runner, installed in one target folder."""
    target = tmp_path_factory.mktemp("example-plugin")
    for example in ("ctxeval-example-plugin", "ctxeval-example-runner"):
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
             "--no-build-isolation", "--no-index", "--target", str(target),
             str(ROOT / "examples" / example)],
            check=True, capture_output=True,
        )  # fmt: skip
    return target


def cases() -> Iterator[object]:
    """The examples as parameters; one that uses Ray runs on the test worker that runs
    ``tests/test_ray.py`` (one local Ray cluster at a time, see ``conftest.py``), one that
    uses Spark on the one that runs ``tests/test_spark.py``."""
    for page, line, code in examples():
        ray = re.search(r"\bray\b", code, re.IGNORECASE) is not None
        spark = re.search(r"\bctxeval_spark\b", code) is not None
        group = "ray" if ray else "spark" if spark else None
        yield pytest.param(
            page, line, code, marks=[pytest.mark.xdist_group(group)] if group else []
        )


@pytest.mark.parametrize(("page", "line", "code"), list(cases()), ids=lambda v: str(v)[:40])
def test_doc_example_runs(
    page: str, line: int, code: str, tmp_path: Path, llm_server: FakeOpenAI, example_plugin: Path
) -> None:
    demo = ROOT / "core" / "ctxeval" / "data" / "demo.jsonl"
    (tmp_path / "data.jsonl").write_text(demo.read_text(encoding="utf-8"), encoding="utf-8")
    (tmp_path / "data.csv").write_text(DEMO_CSV, encoding="utf-8")
    script = tmp_path / "example.py"
    script.write_text(PREAMBLE.format(demo=str(demo)) + "\n" + as_script(code))
    env = {
        **os.environ,
        "OPENAI_BASE_URL": llm_server.url,
        "OPENAI_API_KEY": "sk-docs-example",
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "HOME": str(tmp_path),
        "PYTHONPATH": os.pathsep.join([str(example_plugin), os.environ.get("PYTHONPATH", "")]),
        # the host harnesses of docs/hosts/ offline: no telemetry, no price table fetched
        "MLFLOW_DISABLE_TELEMETRY": "true",
        "DEEPEVAL_TELEMETRY_OPT_OUT": "YES",
        "DEEPEVAL_DISABLE_DOTENV": "1",
        "DEEPEVAL_NO_INSPECT_PROMPT": "1",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    }
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        # generous: an example that starts a Ray cluster takes 30 s on an idle machine and
        # over 120 s on a busy one (pytest's own timeout, 300 s, stays the outer bound)
        timeout=280,
    )
    assert done.returncode == 0, f"{page}:{line}\n{code}\n--- stderr ---\n{done.stderr[-2000:]}"


def test_the_docs_have_examples() -> None:
    assert len(list(examples())) >= 15
