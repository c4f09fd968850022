"""The import contract (DESIGN §3a): plugin packages use only the public plugin API, and the
core imports no plugin package.

Plugin packages are ctxeval's built-in ones (``ctxeval_ids``, ``ctxeval_llm``,
``ctxeval_spacy``, ``ctxeval_ray`` and ``ctxeval.builtin``, registered like any plugin) and the
example third-party package. Each may import from ctxeval only its public modules: the names in
the ``__all__`` of :mod:`ctxeval.plugin` (the plugin API), of :mod:`ctxeval.runners` (the runner
SPI) and of :mod:`ctxeval` itself (``ctxeval.evaluate``, ``ctxeval.load_samples``...).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

import ctxeval
import ctxeval.plugin
import ctxeval.plugin.hooks
import ctxeval.runners

ROOT = Path(__file__).resolve().parent.parent
PLUGIN_PACKAGES = {
    "ctxeval_ids": ROOT / "plugins" / "ctxeval_ids",
    "ctxeval_llm": ROOT / "plugins" / "ctxeval_llm",
    "ctxeval_spacy": ROOT / "plugins" / "ctxeval_spacy",
    "ctxeval_ray": ROOT / "plugins" / "ctxeval_ray",
    "ctxeval_embed": ROOT / "plugins" / "ctxeval_embed",
    "ctxeval_spark": ROOT / "plugins" / "ctxeval_spark",
    "ctxeval_traces": ROOT / "plugins" / "ctxeval_traces",
    "ctxeval_hosts": ROOT / "plugins" / "ctxeval_hosts",
    "ctxeval.builtin": ROOT / "core" / "ctxeval" / "builtin",
    "ctxeval_example": ROOT / "examples" / "ctxeval-example-plugin" / "src" / "ctxeval_example",
}
CORE = ROOT / "core" / "ctxeval"
PLUGIN_TOP_LEVELS = {
    "ctxeval_ids",
    "ctxeval_llm",
    "ctxeval_spacy",
    "ctxeval_ray",
    "ctxeval_embed",
    "ctxeval_spark",
    "ctxeval_traces",
    "ctxeval_hosts",
    "ctxeval_example",
}
PUBLIC = {
    # the hooks stay importable from ctxeval.plugin itself, as before their namespace
    "ctxeval.plugin": frozenset(ctxeval.plugin.__all__) | frozenset(ctxeval.plugin.hooks.__all__),
    "ctxeval.plugin.hooks": frozenset(ctxeval.plugin.hooks.__all__),
    "ctxeval.runners": frozenset(ctxeval.runners.__all__),
    "ctxeval": frozenset(ctxeval.__all__),
}
"""The modules of ctxeval a plugin package may import from, with the names it may import."""


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def _imports(path: Path, root: Path, package: str) -> Iterator[tuple[int, str, str | None]]:
    """``(line, module, name)`` for every import in ``path`` (a file of ``package``, whose
    folder is ``root``), relative imports resolved (``name`` is None for ``import module``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    here = package.split(".")
    relative_to = path.relative_to(root).parent.parts
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, None
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = [*here, *relative_to]
                base = base[: len(base) - (node.level - 1)]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            for alias in node.names:
                yield node.lineno, module, alias.name


def plugin_violations(root: Path, package: str) -> list[str]:
    """Every import in ``root`` of a ctxeval module other than the public ones, or of a name
    not in a public module's ``__all__``."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for line, module, name in _imports(path, root, package):
            own = module == package or module.startswith(package + ".")
            if own or not (module == "ctxeval" or module.startswith("ctxeval.")):
                continue
            where = f"{_shown(path)}:{line}"
            public = PUBLIC.get(module)
            if public is None or (module == "ctxeval" and name is not None and name not in public):
                # (``from ctxeval import _errors`` names a private module, not a public name)
                found.append(f"{where}: imports {module}" + (f".{name}" if name else ""))
            elif name is not None and name not in public:
                found.append(f"{where}: imports {name}, not in {module}.__all__")
    return found


def core_violations(root: Path) -> list[str]:
    """Every import of a plugin package in the core."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for line, module, _ in _imports(path, root, "ctxeval"):
            if module.split(".")[0] in PLUGIN_TOP_LEVELS:
                found.append(f"{_shown(path)}:{line}: imports {module}")
    return found


@pytest.mark.parametrize("package", sorted(PLUGIN_PACKAGES))
def test_plugin_packages_import_only_the_public_plugin_api(package: str) -> None:
    assert plugin_violations(PLUGIN_PACKAGES[package], package) == []


def test_core_imports_no_plugin_package() -> None:
    assert core_violations(CORE) == []


@pytest.mark.parametrize("module", [ctxeval.plugin, ctxeval.runners, ctxeval])
def test_every_public_name_exists(module: object) -> None:
    missing = [name for name in module.__all__ if not hasattr(module, name)]  # type: ignore[attr-defined]
    assert missing == []


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from ctxeval._results.results import _make\n", "imports ctxeval._results.results._make"),
        ("from ctxeval import _errors\n", "imports ctxeval._errors"),
        ("import ctxeval._run.plan\n", "imports ctxeval._run.plan"),
        ("from ctxeval.runners import ProgressTracker\n", "imports ProgressTracker, not in"),
        ("import ctxeval._plugins.registry\n", "imports ctxeval._plugins.registry"),
        ("from ctxeval.plugin import Scheduler\n", "imports Scheduler, not in"),
        ("from ctxeval.builtin.entities import normalize_entity\n", "ctxeval.builtin.entities"),
    ],
)
def test_a_planted_private_import_is_caught(tmp_path: Path, source: str, expected: str) -> None:
    package = tmp_path / "planted"
    package.mkdir()
    (package / "__init__.py").write_text("from ctxeval.plugin import policy\n" + source)
    problems = plugin_violations(package, "planted")
    assert len(problems) == 1
    assert expected in problems[0]


@pytest.mark.parametrize(
    "source",
    [
        "from ctxeval import MetricResult, evaluate, load_samples\n",
        "import ctxeval\n",
        "from ctxeval.runners import RowSink, RunPlan, SQLiteCache, score_part\n",
    ],
)
def test_public_imports_are_allowed(tmp_path: Path, source: str) -> None:
    package = tmp_path / "allowed"
    package.mkdir()
    (package / "__init__.py").write_text("from ctxeval.plugin import policy\n" + source)
    assert plugin_violations(package, "allowed") == []


def test_a_planted_plugin_import_in_core_is_caught(tmp_path: Path) -> None:
    core = tmp_path / "core"
    core.mkdir()
    (core / "cli.py").write_text("import json\n\n\ndef f():\n    from ctxeval_llm import pricing\n")
    assert core_violations(core) == [f"{core / 'cli.py'}:5: imports ctxeval_llm"]
