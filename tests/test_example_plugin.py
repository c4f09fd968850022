"""The third-party example plugin, installed as a real distribution, is discovered and runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from examples_site import install_example

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "ctxeval-example-plugin"

SCRIPT = r"""
import json, ctxeval
infos = {(p.group, p.name): p for p in ctxeval.plugins()}
metric = ctxeval.get_metric("keyword_recall")
ev = ctxeval.evaluate(
    [{"reference": "Gustave Eiffel designed the tower in Paris in 1889.",
      "retrieved_contexts": ["The tower in Paris was completed in 1889."]},
     {"reference": "Gustave Eiffel designed the tower.",
      "retrieved_contexts": ["Gustav Eiffel's designs for the towers"]}],
    metrics=[metric, "fuzzy_keyword_recall"],
)
row, fuzzy, _, fuzzy2 = ev.results
print(json.dumps({
    "statuses": {f"{g}:{n}": (p.status, p.distribution) for (g, n), p in infos.items()
                 if p.distribution == "ctxeval-example-plugin"},
    "score": row.score, "details": dict(row.details), "status": row.status.value,
    "deterministic": hasattr(metric, "score_batch"),
    "fuzzy": [fuzzy.score, fuzzy2.score, dict(fuzzy2.details)],
}))
"""


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """pip-install the example into a private target folder (the test environment is untouched)."""
    return install_example(EXAMPLE, tmp_path_factory.mktemp("example-plugin-site"))


def test_example_plugin_is_discovered_and_runs(installed: Path) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(installed), os.environ.get("PYTHONPATH", "")]),
    }
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, check=True
    )
    result = json.loads(out.stdout.splitlines()[-1])
    assert result["statuses"] == {
        "ctxeval.metrics:keyword_recall": ["ok", "ctxeval-example-plugin"],
        "ctxeval.metrics:fuzzy_keyword_recall": ["ok", "ctxeval-example-plugin"],
        "ctxeval.extractors:keywords": ["ok", "ctxeval-example-plugin"],
        "ctxeval.matchers:substring": ["ok", "ctxeval-example-plugin"],
        "ctxeval.llms:example-gateway": ["ok", "ctxeval-example-plugin"],
    }
    # keywords: gustave, eiffel, designed, tower, paris, 1889 -> tower, paris, 1889 found
    assert result["status"] == "ok"
    assert result["score"] == 0.5
    assert result["details"]["missing"] == ["Gustave", "Eiffel", "designed"]
    assert result["details"]["found"] == ["tower", "Paris", "1889"]
    assert result["deterministic"] is False  # an extractor runs: not a deterministic pipeline
    # ctxeval's fuzzy matcher (threshold 0.85) inside a third-party composition: on the second
    # sample "Gustave" matches "Gustav" (partial ratio 12/13) and "tower" "towers", but
    # "designed" is 0.75 from "designs"
    first, second, details = result["fuzzy"]
    assert first == 0.5
    assert second == 0.75
    # (flags: the verdict of each judged unit, in order, as every judged row gives them)
    assert details == {
        "found": ["Gustave", "Eiffel", "tower"],
        "missing": ["designed"],
        "flags": [1, 1, 0, 1],
    }


def test_without_installing_it_the_plugin_is_unknown() -> None:
    import ctxeval

    with pytest.raises(ctxeval.UnknownNameError):
        ctxeval.get_metric("keyword_recall")


def test_a_gateway_provider_from_a_package_reaches_the_llm(installed: Path, tmp_path: Path) -> None:
    """A company gateway as a third-party package: --provider picks it, its transport sends the
    requests with its own header, and without its token the run stops before any request."""
    from fakes.openai_server import FakeOpenAI
    from llm_judge import Judge

    data = tmp_path / "data.jsonl"
    data.write_text(
        json.dumps({"user_input": "q", "reference": "r", "retrieved_contexts": ["c"]}) + "\n"
    )
    tests = Path(__file__).resolve().parent
    path = os.pathsep.join([str(installed), str(tests), os.environ.get("PYTHONPATH", "")])
    with FakeOpenAI(Judge(verdicts={"c": 1})) as server:
        command = [sys.executable, "-m", "ctxeval", "evaluate", str(data), "-m",
                   "context_precision", "--provider", "example-gateway", "--model", "judge",
                   "--api-base", server.url, "--no-cache", "-q"]  # fmt: skip
        env = {**os.environ, "PYTHONPATH": path, "COLUMNS": "200"}
        env.pop("EXAMPLE_GATEWAY_TOKEN", None)
        refused = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
        assert refused.returncode == 2, refused.stderr
        assert "export EXAMPLE_GATEWAY_TOKEN" in refused.stderr
        assert server.count == 0
        env["EXAMPLE_GATEWAY_TOKEN"] = "gw-token"
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert server.count == 1
        assert server.headers[0]["x-gateway-token"] == "gw-token"
        assert "authorization" not in server.headers[0]
        assert server.requests[0]["model"] == "judge"
