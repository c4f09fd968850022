"""No function of core/ or plugins/ is over :data:`MAX_LINES` lines, but the few that
:data:`KEPT_LONG` names (HTML renderers and prompt texts: one page or one text read top to
bottom, which cutting would scatter), each with why (docs/decisions/0008-a-house-in-layers.md).
An orchestrator that grows past the limit is split by its steps."""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 80

KEPT_LONG = {
    ("core/ctxeval/_output/comparison.py", "render_comparison"): "HTML renderer: the page",
    ("core/ctxeval/_output/report.py", "render_page"): "HTML renderer: the page",
    ("core/ctxeval/_output/trust_section.py", "trust_section"): "HTML renderer: the section",
}
"""The functions that may be longer than :data:`MAX_LINES`, by file and name, with why."""


@functools.cache
def _functions(root: Path) -> tuple[tuple[str, str, int, int], ...]:
    """Every function under ``root``'s core/ and plugins/: file, name, first line, lines."""
    return tuple(_walk(root))


def _walk(root: Path) -> Iterator[tuple[str, str, int, int]]:
    for top in ("core", "plugins"):
        for path in sorted((root / top).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            for node in ast.walk(tree):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    assert node.end_lineno is not None
                    lines = node.end_lineno - node.lineno + 1
                    yield path.relative_to(root).as_posix(), node.name, node.lineno, lines


def _too_long(root: Path) -> list[str]:
    return [
        f"{file}:{line} {name}: {lines} lines (at most {MAX_LINES}): split it by its steps"
        for file, name, line, lines in _functions(root)
        if lines > MAX_LINES and (file, name) not in KEPT_LONG
    ]


def test_no_function_over_the_limit_but_the_kept_ones() -> None:
    assert _too_long(ROOT) == []


def test_each_kept_function_is_still_there_and_long() -> None:
    """The list does not outlive what it names: a kept function split or gone leaves it."""
    long = {(file, name) for file, name, _, lines in _functions(ROOT) if lines > MAX_LINES}
    assert sorted(set(KEPT_LONG) - long) == []


def test_a_planted_long_function_is_caught(tmp_path: Path) -> None:
    package = tmp_path / "plugins" / "pkg"
    package.mkdir(parents=True)
    (tmp_path / "core").mkdir()
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_LINES))
    (package / "long.py").write_text(f"def orchestrate():\n{body}")
    (package / "short.py").write_text("def fine():\n    return 1\n")
    assert _too_long(tmp_path) == [
        f"plugins/pkg/long.py:1 orchestrate: {MAX_LINES + 1} lines (at most {MAX_LINES}): "
        "split it by its steps"
    ]
