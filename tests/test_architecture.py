"""The tree shows the architecture (DESIGN.md §1): no import circle among the modules of
core/ctxeval, of each plugin package under plugins/, nor over core and plugins together,
counting every import (top level, under ``TYPE_CHECKING``, inside functions, and a module named
by a string to ``importlib.import_module``/``__import__``), none exempt; and a dozen public names
at most at the top of core."""

from __future__ import annotations

import ast
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "core" / "ctxeval"
PLUGINS = sorted(path for path in (ROOT / "plugins").iterdir() if (path / "__init__.py").is_file())
MAX_PUBLIC_NAMES = 12


class Import(NamedTuple):
    """One import of a module of the graph: where, of what, and how."""

    source: str
    target: str
    line: int
    how: str  # "module" (top level or TYPE_CHECKING), "function" (inside one), "string"


def _modules(roots: tuple[Path, ...]) -> dict[str, tuple[Path, bool]]:
    modules: dict[str, tuple[Path, bool]] = {}
    for root in roots:
        for path in root.rglob("*.py"):
            parts = list(path.relative_to(root.parent).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            if is_package:
                parts = parts[:-1]
            modules[".".join(parts)] = (path, is_package)
    return modules


def _nodes(node: ast.AST, in_function: bool = False) -> Iterator[tuple[ast.AST, bool]]:
    """Every node below ``node``, with whether it stands inside a function."""
    for child in ast.iter_child_nodes(node):
        inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
        yield child, inner
        yield from _nodes(child, inner)


def _named_by_string(node: ast.Call) -> str | None:
    """The module an ``import_module("x")`` / ``__import__("x")`` call names, if a literal."""
    func = node.func
    called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    if called not in ("import_module", "__import__") or not node.args:
        return None
    first = node.args[0]
    if isinstance(first, ast.Constant) and isinstance(first.value, str):
        return first.value
    return None


def imports(*roots: Path) -> list[Import]:
    """Every import, among the modules of the packages at ``roots``, of one by another."""
    modules = _modules(roots)
    found: list[Import] = []
    for name, (path, is_package) in modules.items():
        base = name.split(".") if is_package else name.split(".")[:-1]
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node, in_function in _nodes(tree):
            how = "function" if in_function else "module"
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    prefix = base[: len(base) - (node.level - 1)]
                    target = ".".join(prefix + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                candidates = [  # a submodule imported by name, else the names' module
                    f"{target}.{alias.name}" if f"{target}.{alias.name}" in modules else target
                    for alias in node.names
                ]
            elif isinstance(node, ast.Import):
                candidates = [alias.name for alias in node.names]
            elif isinstance(node, ast.Call) and (named := _named_by_string(node)):
                candidates, how = [named], "string"
            else:
                continue
            found.extend(
                Import(name, c, getattr(node, "lineno", 0), how)
                for c in candidates
                if c in modules and c != name
            )
    return found


def module_graph(*roots: Path) -> dict[str, set[str]]:
    """Each module of the packages at ``roots`` (dotted name) and their modules it imports,
    every import counted wherever it is."""
    graph: dict[str, set[str]] = {name: set() for name in _modules(roots)}
    for edge in imports(*roots):
        graph[edge.source].add(edge.target)
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


def _shown(found: list[list[str]]) -> str:
    return "\n".join(" <-> ".join(cycle) for cycle in found)


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
    assert not found, "import circles among core modules:\n" + _shown(found)


def test_no_import_cycle_in_each_plugin_package() -> None:
    assert {path.name for path in PLUGINS} >= {"ctxeval_llm", "ctxeval_ids"}
    for package in PLUGINS:
        found = cycles(module_graph(package))
        assert not found, f"import circles in {package.name}:\n" + _shown(found)


def test_no_import_cycle_over_core_and_plugins() -> None:
    graph = module_graph(CORE, *PLUGINS)
    assert "ctxeval_llm" in graph
    assert "ctxeval.plugin" in graph
    found = cycles(graph)
    assert not found, "import circles over core and plugins:\n" + _shown(found)


LLM_FLOORS = (
    ("the face", ("ctxeval_llm",)),
    ("judges and the embedder", ("ctxeval_llm.judges", "ctxeval_llm.embeddings")),
    ("asking", ("ctxeval_llm._ask",)),
    ("transports", ("ctxeval_llm._transports",)),
    ("local servers", ("ctxeval_llm._local",)),
    ("HTTP", ("ctxeval_llm._http",)),
    (
        "settings",
        (
            "ctxeval_llm.config",
            "ctxeval_llm.provider",
            "ctxeval_llm._pricing",
            "ctxeval_llm._parsing",
        ),
    ),
)
"""The floors of ``ctxeval_llm``, top first (docs/decisions/0008): a module imports only from
its own floor or the floors below it."""


def _floor(module: str) -> int | None:
    """The floor of ``module``: the one whose longest name is ``module`` or a package of it
    (the face is ``ctxeval_llm``'s ``__init__`` alone)."""
    best: tuple[int, int] | None = None
    for number, (_, prefixes) in enumerate(LLM_FLOORS):
        for prefix in prefixes:
            inside = number > 0 and module.startswith(prefix + ".")
            if (module == prefix or inside) and (best is None or len(prefix) > best[0]):
                best = (len(prefix), number)
    return None if best is None else best[1]


def upward_imports(package: Path) -> list[str]:
    """The imports of the LLM plugin at ``package`` that run from a floor to a higher one."""
    found = []
    for edge in imports(package):
        source, target = _floor(edge.source), _floor(edge.target)
        assert source is not None, f"{edge.source} stands on no floor of LLM_FLOORS"
        assert target is not None, f"{edge.target} stands on no floor of LLM_FLOORS"
        if target < source:
            found.append(
                f"{edge.source}:{edge.line} ({LLM_FLOORS[source][0]}) imports "
                f"{edge.target} ({LLM_FLOORS[target][0]})"
            )
    return found


def test_the_llm_plugin_imports_only_downward() -> None:
    package = ROOT / "plugins" / "ctxeval_llm"
    assert {_floor(name) for name in _modules((package,))} == set(range(len(LLM_FLOORS)))
    found = upward_imports(package)
    assert not found, "imports that run back up in ctxeval_llm:\n" + "\n".join(found)


def test_an_upward_import_in_the_llm_plugin_is_caught(tmp_path: Path) -> None:
    llm = _copy(ROOT / "plugins" / "ctxeval_llm", tmp_path)
    base = llm / "_http" / "base.py"
    base.write_text(
        base.read_text(encoding="utf-8")
        + "\n\ndef _planted():\n    from ctxeval_llm._ask.client import ask\n",
        encoding="utf-8",
    )
    found = upward_imports(llm)
    assert len(found) == 1
    assert found[0].startswith("ctxeval_llm._http.base:"), found


CORE_FLOORS = (
    ("the command line", ("cli", "__main__")),
    ("the face", ("__init__",)),
    ("sessions, runner SPI, built-in plugins", ("_session", "runners", "builtin")),
    ("running, the viewer, plugin API, testing", ("_run", "_view", "plugin", "testing")),
    ("output", ("_output",)),
    ("judges against people", ("_judge",)),
    ("the pipeline", ("_pipeline",)),
    ("calls, the score policy, the scripted judge", ("_calls", "policy", "_judge_server")),
    ("results", ("_results",)),
    ("plugins", ("_plugins",)),
    ("data", ("_data",)),
    ("the ground", ("_errors", "_version", "_public")),
)
"""The floors of core (``ctxeval``'s subpackages and top modules), top first
(docs/decisions/0010): a module imports only from its own floor or the floors below it, but
for the edges ``ALLOWED_UPWARD`` names."""

ALLOWED_UPWARD = {
    ("ctxeval._plugins.protocols", "ctxeval._results.results"): "annotations: MetricResult, Usage",
    ("ctxeval._plugins.hooks", "ctxeval._results.results"): "annotations: Usage",
    ("ctxeval._plugins.base", "ctxeval._results.results"): "annotations: MetricResult",
    ("ctxeval._plugins.protocols", "ctxeval._calls.limits"): "annotations: RunContext.limits",
    ("ctxeval._calls.scheduler", "ctxeval._run.settings"): "a scheduler is set by RunSettings",
    ("ctxeval._results.evaluation", "ctxeval._judge.labels"): "the rows carry their labels",
    ("ctxeval._results.evaluation", "ctxeval._judge.trust"): "RunResults.trust()",
    ("ctxeval._results.evaluation", "ctxeval._judge.resolve"): "RunResults.with_labels()",
}
"""The imports that run back up between core's floors, each named and justified in
docs/decisions/0010-core-floors.md: a new one fails the test, and so does one listed here that
is gone (the list cannot outlive what it names)."""


def _core_floor(module: str) -> int:
    parts = module.split(".")
    top = parts[1] if len(parts) > 1 else "__init__"
    for number, (_, names) in enumerate(CORE_FLOORS):
        if top in names:
            return number
    raise AssertionError(f"{module} stands on no floor of CORE_FLOORS: add {top} to one")


def core_upward_imports(core: Path) -> dict[tuple[str, str], list[str]]:
    """The imports of core at ``core`` that run from a floor to a higher one, by (source,
    target) module, each with where it stands."""
    found: dict[tuple[str, str], list[str]] = {}
    for edge in imports(core):
        if _core_floor(edge.target) < _core_floor(edge.source):
            where = f"{edge.source}:{edge.line} ({edge.how}) imports {edge.target}"
            found.setdefault((edge.source, edge.target), []).append(where)
    return found


def test_core_imports_only_downward_but_the_named_edges() -> None:
    names = {_core_floor(name) for name in _modules((CORE,))}  # every module on a floor
    assert names == set(range(len(CORE_FLOORS)))
    found = core_upward_imports(CORE)
    unexpected = [where for edge, places in found.items() if edge not in ALLOWED_UPWARD
                  for where in places]  # fmt: skip
    assert not unexpected, "imports that run back up in core:\n" + "\n".join(unexpected)
    gone = sorted(set(ALLOWED_UPWARD) - set(found))
    assert not gone, f"ALLOWED_UPWARD names edges that are gone (strike them): {gone}"


def test_an_upward_import_in_core_is_caught(tmp_path: Path) -> None:
    core = _copy(CORE, tmp_path)
    sample = core / "_data" / "sample.py"
    sample.write_text(
        sample.read_text(encoding="utf-8")
        + "\n\ndef _planted():\n"
        + '    return __import__("importlib").import_module("ctxeval._output.folder")\n',
        encoding="utf-8",
    )
    found = core_upward_imports(core)
    assert set(found) - set(ALLOWED_UPWARD) == {("ctxeval._data.sample", "ctxeval._output.folder")}


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


def test_a_module_named_by_a_string_is_an_import(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("import pkg.b\n")
    (package / "b.py").write_text(
        "import importlib\n\ndef f():\n    return importlib.import_module('pkg.a')\n"
    )
    (package / "c.py").write_text("def g():\n    return __import__('pkg.b')\n")
    graph = module_graph(package)
    assert graph["pkg.b"] == {"pkg.a"}
    assert graph["pkg.c"] == {"pkg.b"}
    assert cycles(graph) == [["pkg.a", "pkg.b"]]


def _copy(source: Path, to: Path) -> Path:
    target = to / source.name
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("assets", "data", "*.pyc"))
    return target


def test_a_planted_import_module_string_in_results_is_caught(tmp_path: Path) -> None:
    core = _copy(CORE, tmp_path)
    assert not cycles(module_graph(core))
    columns = core / "_results" / "columns.py"
    columns.write_text(
        columns.read_text(encoding="utf-8")
        + "\n\ndef _planted():\n"
        + '    return __import__("importlib").import_module("ctxeval._output.folder")\n',
        encoding="utf-8",
    )
    found = cycles(module_graph(core))
    assert any("ctxeval._results.columns" in cycle for cycle in found), found


def test_a_planted_function_level_import_in_results_is_caught(tmp_path: Path) -> None:
    """What Evaluation.write did before the public class moved a floor up (#54): an import
    statement inside a method, running back up from the rows to what writes them."""
    core = _copy(CORE, tmp_path)
    evaluation = core / "_results" / "evaluation.py"
    evaluation.write_text(
        evaluation.read_text(encoding="utf-8")
        + "\n\ndef _planted():\n"
        + "    from ctxeval._output.folder import write_evaluation\n",
        encoding="utf-8",
    )
    found = cycles(module_graph(core))
    assert any("ctxeval._results.evaluation" in cycle for cycle in found), found


def test_a_planted_import_module_string_in_evaluation_is_caught(tmp_path: Path) -> None:
    core = _copy(CORE, tmp_path)
    evaluation = core / "_results" / "evaluation.py"
    evaluation.write_text(
        evaluation.read_text(encoding="utf-8")
        + "\n\ndef _planted():\n"
        + '    return importlib.import_module("ctxeval._output.folder")\n',
        encoding="utf-8",
    )
    found = cycles(module_graph(core))
    assert any("ctxeval._results.evaluation" in cycle for cycle in found), found


def test_a_planted_cycle_inside_plugins_is_caught(tmp_path: Path) -> None:
    llm = _copy(ROOT / "plugins" / "ctxeval_llm", tmp_path)
    assert not cycles(module_graph(llm))
    config = llm / "config.py"
    config.write_text(
        config.read_text(encoding="utf-8") + "\n\ndef _planted():\n    import ctxeval_llm\n",
        encoding="utf-8",
    )
    found = cycles(module_graph(llm))
    assert any("ctxeval_llm.config" in cycle for cycle in found), found
    assert cycles(module_graph(CORE, llm)), "the joint graph misses it"


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
