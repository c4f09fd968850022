"""No two places in core/ and plugins/ share six or more lines of the same logic (#54).

Lines are compared as read: white space folded, comments, docstrings (a string standing as a
statement) and import statements left out, and so are a function's signature (its ``def``
down to its body: a protocol and the classes that implement it share one by design) and the
lines with no logic of their own (brackets, ``...``, ``pass``, a bare decorator). A run of
:data:`MIN_LINES` such lines standing in two places is a shared run; the pairs that stay,
alike in what they declare or forward rather than in logic, are :data:`ALLOWED_PAIRS`, each
named in docs/decisions/0010-core-floors.md.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MIN_LINES = 6
_NO_LOGIC = re.compile(r"^([\s()\[\]{},:;]*|\.\.\.|pass|@\w+)$")

ALLOWED_PAIRS = {
    frozenset({"core/ctxeval/_run/api.py"}): (
        "evaluate() hands its keyword arguments to aevaluate's body as aevaluate does"
    ),
    frozenset({"core/ctxeval/builtin/entities.py", "plugins/ctxeval_llm/judges/_metrics.py"}): (
        "an LLM part's panel options (judges, repeats, jury, temperature) handed to judge_part"
    ),
    frozenset({"plugins/ctxeval_llm/judges/_metrics.py"}): (
        "the parts' option declarations (attrs fields each part declares for itself)"
    ),
    frozenset({"plugins/ctxeval_hosts/_outcome.py"}): (
        "Adapter.score and its async twin Adapter.ascore (the same steps, one awaiting)"
    ),
    frozenset({"core/ctxeval/_data/sample.py", "plugins/ctxeval_hosts/_fields.py"}): (
        "a host's field names itself (deepeval's context) before any Sample is made"
    ),
}
"""The pairs of files (one file: two places in it) allowed to share a run, with why."""


def logic_lines(text: str) -> list[tuple[int, str]]:
    """The lines of the Python source ``text`` that carry logic, numbered, white space
    folded (see the module)."""
    tree = ast.parse(text)
    left_out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            left_out.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            left_out.update(range(node.lineno, node.body[0].lineno))
        elif (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            left_out.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    comments = {
        token.start[0]: token.start[1]
        for token in tokenize.generate_tokens(io.StringIO(text).readline)
        if token.type == tokenize.COMMENT
    }
    kept = []
    for number, line in enumerate(text.splitlines(), 1):
        if number in left_out:
            continue
        folded = " ".join(line[: comments.get(number)].split())
        if folded and not _NO_LOGIC.match(folded):
            kept.append((number, folded))
    return kept


def shared_runs(root: Path, *folders: str) -> dict[frozenset[str], list[str]]:
    """The runs of :data:`MIN_LINES` logic lines that stand in two places of the Python files
    under ``folders`` of ``root``, by the pair of files (one file for two places in it), each
    as ``a.py:FIRST-LAST ~ b.py:FIRST-LAST``."""
    places: dict[tuple[str, ...], list[tuple[str, int, int]]] = defaultdict(list)
    for folder in folders:
        for path in sorted((root / folder).rglob("*.py")):
            name = path.relative_to(root).as_posix()
            lines = logic_lines(path.read_text(encoding="utf-8"))
            for at in range(len(lines) - MIN_LINES + 1):
                run = lines[at : at + MIN_LINES]
                places[tuple(text for _, text in run)].append((name, run[0][0], run[-1][0]))
    found: dict[frozenset[str], list[str]] = defaultdict(list)
    for where in places.values():
        for i, (a, a_first, a_last) in enumerate(where):
            for b, b_first, b_last in where[i + 1 :]:
                if a == b and b_first <= a_last:  # (one run overlapping itself)
                    continue
                found[frozenset({a, b})].append(f"{a}:{a_first}-{a_last} ~ {b}:{b_first}-{b_last}")
    return dict(found)


def test_no_six_lines_of_logic_stand_in_two_places() -> None:
    found = shared_runs(ROOT, "core", "plugins")
    unexpected = [run for pair, runs in found.items() if pair not in ALLOWED_PAIRS for run in runs]
    assert not unexpected, (
        "runs of six lines or more standing in two places (say it once, or name the pair in "
        "ALLOWED_PAIRS and docs/decisions with why):\n" + "\n".join(unexpected)
    )
    gone = [sorted(pair) for pair in ALLOWED_PAIRS if pair not in found]
    assert not gone, f"ALLOWED_PAIRS names pairs that share no run any more (strike them): {gone}"


def test_a_copied_run_is_found_and_what_is_not_logic_is_not(tmp_path: Path) -> None:
    body = "".join(f"    total = total * {n} + len(items)  # step {n}\n" for n in range(6))
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text(
        f"def f(items):\n    total = 0\n{body}    return total\n", encoding="utf-8"
    )
    (tmp_path / "pkg" / "b.py").write_text(
        "import os\n\n\nclass C:\n    def g(self, items):\n"
        '        """Another docstring."""\n        total = 1\n'
        + body.replace("    ", "        ").replace("# step", "# other")
        + "        return total\n",
        encoding="utf-8",
    )
    signature = "def h(\n    a,\n    b,\n    c,\n    d,\n    e,\n    f,\n):\n"
    (tmp_path / "pkg" / "c.py").write_text(
        f'"""Doc."""\n\n\n{signature}    return a\n', encoding="utf-8"
    )
    (tmp_path / "pkg" / "d.py").write_text(
        f'"""Doc."""\n\n\n{signature}    return b\n\n\n' + "(\n)\n" * 8, encoding="utf-8"
    )
    found = shared_runs(tmp_path, "pkg")
    assert set(found) == {frozenset({"pkg/a.py", "pkg/b.py"})}, found
    assert found[frozenset({"pkg/a.py", "pkg/b.py"})] == [  # seven lines: two runs of six
        "pkg/a.py:3-8 ~ pkg/b.py:8-13",
        "pkg/a.py:4-9 ~ pkg/b.py:9-14",
    ]
