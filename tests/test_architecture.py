"""The tree shows the architecture (DESIGN.md §1): no import circle among the modules of
core/ctxeval, counting every import (top level, under ``TYPE_CHECKING``, inside functions),
and a dozen public names at most at its top."""

from __future__ import annotations

import ast
from pathlib import Path

CORE = Path(__file__).resolve().parents[1] / "core" / "ctxeval"
MAX_PUBLIC_NAMES = 12


def module_graph(root: Path) -> dict[str, set[str]]:
    """Each module of the package at ``root`` (dotted name) and the package's modules it
    imports, every ``import`` statement counted wherever it is."""
    modules: dict[str, tuple[Path, bool]] = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        modules[".".join(parts)] = (path, is_package)
    graph: dict[str, set[str]] = {}
    for name, (path, is_package) in modules.items():
        base = name.split(".") if is_package else name.split(".")[:-1]
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    prefix = base[: len(base) - (node.level - 1)]
                    target = ".".join(prefix + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                candidates = [target, *(f"{target}.{alias.name}" for alias in node.names)]
            elif isinstance(node, ast.Import):
                candidates = [alias.name for alias in node.names]
            else:
                continue
            found.update(c for c in candidates if c in modules and c != name)
        graph[name] = found
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of ``graph``: its strongly connected components of two modules or
    more (Tarjan, iterative), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            advanced = False
            for succ in successors:
                if succ not in index:
                    index[succ] = low[succ] = counter
                    counter += 1
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(sorted(graph.get(succ, ())))))
                    advanced = True
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return out


def public_names(root: Path) -> list[str]:
    """The public modules and packages at the top of ``root``: ``*.py`` files and folders with
    Python files whose name does not start with ``_`` (``__init__``/``__main__`` not counted;
    a folder of data alone is not a name)."""
    names = []
    for path in root.iterdir():
        if path.name.startswith("_"):
            continue
        if path.is_file() and path.suffix == ".py":
            names.append(path.stem)
        elif path.is_dir() and any(path.rglob("*.py")):
            names.append(path.name)
    return sorted(names)


def test_no_import_cycle_in_core() -> None:
    graph = module_graph(CORE)
    assert "ctxeval._plugins.registry" in graph  # the graph is the package's
    found = cycles(graph)
    assert not found, "import circles among core modules:\n" + "\n".join(
        " <-> ".join(cycle) for cycle in found
    )


def test_a_dozen_public_names_at_most_at_the_top() -> None:
    names = public_names(CORE)
    assert "plugin" in names
    assert len(names) <= MAX_PUBLIC_NAMES, f"{len(names)} public names at the top: {names}"


def test_a_planted_cycle_is_caught(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "_low").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "_low" / "__init__.py").write_text("")
    (package / "_low" / "a.py").write_text("from pkg._low import b\n")
    (package / "_low" / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.top import T\n"
    )
    (package / "top.py").write_text("def f():\n    from ._low.a import x\n")
    (package / "fine.py").write_text("import pkg.top\n")
    found = cycles(module_graph(package))
    assert found == [["pkg._low.a", "pkg._low.b", "pkg.top"]]


def test_too_many_public_names_are_counted(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "data").mkdir(parents=True)
    (package / "data" / "demo.jsonl").write_text("{}\n")
    (package / "sub").mkdir()
    (package / "sub" / "__init__.py").write_text("")
    (package / "_private.py").write_text("")
    (package / "__main__.py").write_text("")
    for i in range(MAX_PUBLIC_NAMES):
        (package / f"m{i}.py").write_text("")
    names = public_names(package)
    assert names == sorted([*(f"m{i}" for i in range(MAX_PUBLIC_NAMES)), "sub"])
    assert len(names) > MAX_PUBLIC_NAMES  # the check above would fail on this tree
