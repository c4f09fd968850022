"""docs/reliability.md is a table of promises, each with the tests that check it; this keeps
the table true.

* every row of a promise table names at least one test, as ``tests/FILE.py::TEST``, and each
  named test exists (read from the file's syntax tree: a function or an ``async`` one, at the
  top of the module);
* every test of the reliability suites (:data:`SUITES`) is named in some row: a new
  reliability test needs its promise written down;
* the promises that had no test of their own have one here (a key never follows a redirect,
  every run file synced before it takes its name, a failed overwrite leaves the previous run
  whole).
"""

from __future__ import annotations

import ast
import errno
import json
import os
import re
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import anyio
import pytest

import ctxeval
from ctxeval import RetryPolicy, Status
from ctxeval.cli import main
from ctxeval_llm import LLMConfig
from fakes.openai_server import FakeOpenAI, Reply
from llm_judge import Judge

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "reliability.md"
HEADER = ["promise", "how it is kept", "tests"]
REFERENCE = re.compile(r"`(tests/[\w/]+\.py)::(\w+)`")

SUITES = [
    "tests/test_faults.py",
    "tests/test_kill_resume.py",
    "tests/test_interrupt.py",
    "tests/test_bad_input.py",
    "tests/test_bounds.py",
    "tests/test_watchdog.py",
    "tests/test_integrity_round3.py",
    "tests/test_integrity_round4.py",
    "tests/test_trec_strict.py",
    "tests/test_csv_formulas.py",
    "tests/test_bad_paths.py",
    "tests/test_litellm_bounds.py",
    "tests/test_lenient_rows.py",
    "tests/test_hostile_runners.py",
    "tests/test_reliability_table.py",
]
"""The reliability suites: each of their tests is named in the page."""

CHECKS_OF_THE_TABLE = {
    "test_every_promise_names_tests_that_exist",
    "test_every_reliability_test_is_named_in_the_page",
}


def cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def promise_rows() -> list[tuple[int, list[str]]]:
    """(line number, cells) of each row of the page's promise tables."""
    rows: list[tuple[int, list[str]]] = []
    in_table = False
    for number, line in enumerate(PAGE.read_text(encoding="utf-8").splitlines(), 1):
        if not line.startswith("|"):
            in_table = False
            continue
        if cells(line) == HEADER:
            in_table = True
            continue
        if in_table and not set(line) <= set("|-: "):
            rows.append((number, cells(line)))
    return rows


@cache
def defined_tests(path: str) -> frozenset[str]:
    """The names of the test functions at the top of ``path``."""
    tree = ast.parse((ROOT / path).read_text(encoding="utf-8"), filename=path)
    return frozenset(
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.name.startswith("test_")
    )


def test_every_promise_names_tests_that_exist() -> None:
    rows = promise_rows()
    assert len(rows) >= 40, "the promise tables were not found (header: promise | how ...)"
    problems: list[str] = []
    for number, row in rows:
        where = f"docs/reliability.md:{number}"
        if len(row) != 3 or not row[0] or not row[1]:
            problems.append(f"{where}: a row needs a promise, how it is kept and its tests")
            continue
        named = REFERENCE.findall(row[2])
        if not named:
            problems.append(f"{where}: names no test as `tests/FILE.py::TEST`")
        loose = set(re.findall(r"\btest_\w+", row[2])) - {n for _, n in named}
        loose -= {Path(f).stem for f, _ in named}
        if loose:
            problems.append(f"{where}: write {sorted(loose)} as `tests/FILE.py::TEST`")
        for path, name in named:
            if not (ROOT / path).is_file():
                problems.append(f"{where}: {path} does not exist")
            elif name not in defined_tests(path):
                problems.append(f"{where}: {path} has no test {name} (renamed? removed?)")
    assert not problems, "\n".join(problems)


def test_every_reliability_test_is_named_in_the_page() -> None:
    named = {(f, n) for _, row in promise_rows() for f, n in REFERENCE.findall(row[-1])}
    missing = [
        f"{path}::{name}"
        for path in SUITES
        for name in sorted(defined_tests(path))
        if (path, name) not in named and name not in CHECKS_OF_THE_TABLE
    ]
    assert not missing, (
        "these reliability tests are in no row of docs/reliability.md: add the promise they "
        "check (or name them in its row):\n" + "\n".join(missing)
    )


# --- the promises that had no test of their own ----------------------------------------------

KEY = "sk-test-reliability-0123456789"
SAMPLE = {"user_input": "q", "reference": "r", "retrieved_contexts": ["c"]}


@pytest.mark.parametrize("transport", ["openai", "litellm"])
def test_a_key_never_follows_a_redirect(transport: str) -> None:
    with FakeOpenAI(Judge(verdicts={"c": 1})) as elsewhere:
        moved = Reply(307, body=b"", headers={"Location": f"{elsewhere.url}/chat/completions"})
        with FakeOpenAI(lambda request: moved) as server:
            llm = LLMConfig(model="openai/x", api_base=server.url, api_key=KEY, transport=transport)

            async def run() -> ctxeval.Evaluation:
                with anyio.fail_after(120):
                    return await ctxeval.aevaluate(
                        [SAMPLE],
                        ["context_precision"],
                        llm=llm,
                        retry=RetryPolicy(max_attempts=1),
                    )

            [row] = anyio.run(run).results
            asked = server.count
        assert elsewhere.count == 0
    assert asked == 1
    assert row.status is Status.ERROR
    assert KEY not in (row.reason or "")


def id_rows(n: int, seed: int) -> str:
    return "".join(
        json.dumps({"id": f"s{i}", "retrieved_context_ids": [f"d{(i + seed) % 7}", "d1"],
                    "reference_context_ids": ["d1"]}) + "\n"
        for i in range(n)
    )  # fmt: skip


def cli(*args: str) -> int:
    """``ctxeval ARGS`` in this process: its exit code."""
    try:
        return int(main(list(args)) or 0)
    except SystemExit as exc:
        return int(exc.code or 0)


RUN_FILES = ["results.jsonl", "summary.json", "report.html", "results.csv"]


def test_every_run_file_is_synced_before_it_takes_its_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: set[str] = set()
    named: list[tuple[str, str, bool]] = []  # (from, to, synced before)
    fsync = os.fsync

    def record_fsync(fd: int) -> None:
        synced.add(os.path.realpath(f"/proc/self/fd/{fd}"))
        fsync(fd)

    def recorded(move: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(source: Any, target: Any, *args: Any, **kwargs: Any) -> Any:
            before = os.path.realpath(source) in synced
            named.append((os.fspath(source), os.fspath(target), before))
            return move(source, target, *args, **kwargs)

        return wrapper

    monkeypatch.setattr(os, "fsync", record_fsync)
    for name in ("replace", "rename", "link"):
        monkeypatch.setattr(os, name, recorded(getattr(os, name)))
    data = tmp_path / "data.jsonl"
    data.write_text(id_rows(30, 0))
    out = tmp_path / "run"
    assert (
        cli("evaluate", str(data), "-m", "id_mrr", "--out", str(out), "--format", "csv", "-q") == 0
    )
    for file in RUN_FILES:
        assert (out / file).is_file(), file
        moves = [m for m in named if Path(m[1]).resolve() == (out / file).resolve()]
        assert moves, f"{file} was not renamed into place"
        assert all(before for _, _, before in moves), f"{file} took its name before fsync"


def test_a_failed_overwrite_leaves_the_previous_files_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from ctxeval._output import writers

    out = tmp_path / "run"
    first = tmp_path / "first.jsonl"
    first.write_text(id_rows(40, 0))
    assert (
        cli("evaluate", str(first), "-m", "id_mrr", "--out", str(out), "--format", "csv", "-q") == 0
    )
    before = {file: (out / file).read_bytes() for file in RUN_FILES}

    add = writers._JSONLFile.add

    def full_disk(self: Any, rows: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", str(self.partial))

    monkeypatch.setattr(writers._JSONLFile, "add", full_disk)
    second = tmp_path / "second.jsonl"
    second.write_text(id_rows(3000, 3))
    code = cli("evaluate", str(second), "-m", "id_mrr", "--out", str(out), "--overwrite",
               "--format", "csv", "-q")  # fmt: skip
    assert code == 1
    assert "No space left on device" in capsys.readouterr().err
    monkeypatch.setattr(writers._JSONLFile, "add", add)
    assert {file: (out / file).read_bytes() for file in RUN_FILES} == before
    assert not [p.name for p in out.iterdir() if p.name.endswith((".partial", ".tmp"))]
