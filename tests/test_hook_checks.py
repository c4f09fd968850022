"""Every hook is declared (a protocol of ``ctxeval.plugin.hooks``) and read through it, never
by a bare ``getattr`` of its name; a plugin whose hook cannot be called as ctxeval calls it is
refused when it is built, with a PluginError naming the plugin and the hook."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, ClassVar

import pytest

import ctxeval
from ctxeval import PluginError
from ctxeval.plugin import (
    BaseDeterministicMatcher,
    BaseDeterministicMetric,
    MetricResult,
    Verdict,
    hooks,
)

ROOT = Path(__file__).resolve().parents[1]
HOOK_NAMES = (
    "default_name|embedder|provenance|fingerprint_data|needs_llm|registry_name|"
    "estimate_calls|estimate_calls_by_model|estimate_calls_by_judge|membership|itemwise|"
    "match_both_batch|both_sides_key|dependencies|trec_eval_averaging"
)
BARE_READ = re.compile(rf"getattr\([^,()]+, \"({HOOK_NAMES})\"")


def _bare_reads(root: Path) -> list[str]:
    found = []
    for top in ("core", "plugins"):
        for path in sorted((root / top).rglob("*.py")):
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if BARE_READ.search(line):
                    found.append(f"{path.relative_to(root)}:{number}: {line.strip()}")
    return found


def test_no_hook_is_read_by_a_bare_getattr() -> None:
    assert _bare_reads(ROOT) == []


def test_a_planted_getattr_of_a_hook_is_caught(tmp_path: Path) -> None:
    (tmp_path / "core").mkdir()
    (tmp_path / "core" / "m.py").write_text('x = getattr(part, "provenance", None)\n')
    assert _bare_reads(tmp_path) == ['core/m.py:1: x = getattr(part, "provenance", None)']


def test_the_hooks_read_by_core_are_declared() -> None:
    for name in ("NamedByDefault", "HasEmbedder", "ReportsProvenance", "MetersUsage"):
        assert name in hooks.__all__
        assert getattr(ctxeval.plugin, name) is getattr(hooks, name)


class _Named(BaseDeterministicMetric):
    registry_name: ClassVar[str] = "oddly_named"
    requires: ClassVar[tuple[str, ...]] = ("retrieved_context_ids",)

    def default_name(self, suffix: str) -> str:  # type: ignore[override]  # (wrong: takes one)
        return f"oddly_named{suffix}"

    def score(self, sample: Any) -> MetricResult:
        return MetricResult.ok(1.0)


class _Reporting(BaseDeterministicMatcher):
    name = "reporting"

    def match_now(self, items: Any, candidates: Any) -> list[Verdict]:
        return [Verdict(True, 1.0, 0) for _ in items]

    def provenance(self) -> dict[str, str]:  # (wrong: provenance(ctx))
        return {"judge": "me"}


def test_a_hook_with_the_wrong_signature_is_refused_when_built() -> None:
    registry = ctxeval.default_registry().copy()
    registry.register("ctxeval.metrics", "oddly_named", lambda **options: _Named(name="x"))
    with pytest.raises(PluginError) as caught:
        registry.get_metric("oddly_named")
    message = str(caught.value)
    assert "metric 'oddly_named'" in message
    assert "default_name()" in message
    assert "NamedByDefault.default_name()" in message
    registry.register("ctxeval.matchers", "reporting", _Reporting)
    with pytest.raises(PluginError, match=r"matcher 'reporting'.*ReportsProvenance\.provenance"):
        registry.get_matcher("reporting")


def test_a_hook_with_a_fitting_signature_is_built() -> None:
    class Fine(_Reporting):
        def provenance(self, ctx: Any, extra: int = 0) -> dict[str, str]:  # type: ignore[override]
            return {"judge": "me"}

    registry = ctxeval.default_registry().copy()
    registry.register("ctxeval.matchers", "fine", Fine)
    assert isinstance(registry.get_matcher("fine"), Fine)
