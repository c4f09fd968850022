"""Integrity, third round: one run per folder at a time, a paid answer is never lost to its
cache, ``--lenient`` scores every good row of a file with a repeated id, and labels files are
read strictly (and written private)."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import sqlite3
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import ctxeval
from ctxeval import DataError, Labels, RetryPolicy, Status
from ctxeval._calls.cache import SQLiteCache
from ctxeval._errors import CacheError
from ctxeval._output.folder import FolderInUseError, RunFolder, claim_folder
from ctxeval.cli import main
from ctxeval_llm import LLMConfig
from fakes.openai_server import FakeOpenAI, Reply
from llm_judge import Judge

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX only (flock, signals)")

FAST = RetryPolicy(initial_backoff=0.001, max_backoff=0.02, jitter=0.0)

ROWS = [
    {
        "id": f"s{i}",
        "user_input": "q",
        "reference": f"reference {i}",
        "retrieved_contexts": ["useful", f"useless {i}"],
        "retrieved_context_ids": ["x", str(i)],
        "reference_context_ids": [str(i)],
    }
    for i in range(12)
]


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ctxeval", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=120,
    )


def held_until(release: threading.Event) -> Callable[[dict[str, Any]], str | Reply]:
    """The judge, answering only once ``release`` is set."""
    judge = Judge(verdicts={"useful": 1})

    def respond(request: dict[str, Any]) -> str | Reply:
        release.wait(60)
        return judge(request)

    return respond


def wait_for(condition: Callable[[], bool], what: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def results(folder: Path) -> list[tuple[str, str]]:
    lines = (folder / "results.jsonl").read_text().splitlines()
    return [(r["sample_id"], r["metric"]) for r in map(json.loads, lines)]


# --- 1. one run per folder at a time ---------------------------------------------------------


def test_a_second_run_on_a_folder_being_written_is_refused_at_once(tmp_path: Path) -> None:
    """Run A is scoring into --out; run B on the same folder (to overwrite it, or to resume
    it) is refused at once, naming A's pid and host, and A's rows are A's alone."""
    data_a = write_jsonl(tmp_path / "a.jsonl", ROWS)
    data_b = write_jsonl(tmp_path / "b.jsonl", [{**r, "id": f"b{i}"} for i, r in enumerate(ROWS)])
    out = tmp_path / "run"
    release = threading.Event()
    with FakeOpenAI(held_until(release)) as server:
        env = {**os.environ, "OPENAI_API_KEY": "sk-lock", "XDG_CACHE_HOME": str(tmp_path / "c")}
        judged = [
            *("-m", "context_precision", "--model", "openai/judge", "--api-base", server.url),
            *("--max-concurrency", "2", "--no-cache", "-q", "--out", str(out)),
        ]
        run_a = subprocess.Popen(
            [sys.executable, "-m", "ctxeval", "evaluate", str(data_a), *judged],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            wait_for(lambda: server.count >= 1, "run A's first request")
            started = time.monotonic()
            refused = [
                cli("evaluate", str(data_b), "-m", "id_mrr", "--out", str(out), "--overwrite",
                    env=env),
                cli("evaluate", str(data_a), *judged, "--resume", env=env),
            ]  # fmt: skip
            for b in refused:
                assert b.returncode == 2, b.stderr
                assert f"pid {run_a.pid} on {socket.gethostname()}" in b.stderr
                assert "Traceback" not in b.stderr
            assert time.monotonic() - started < 60  # at once: never waits for A to end
            assert run_a.poll() is None  # A still running, untouched
        finally:
            release.set()
            _, a_err = run_a.communicate(timeout=120)
    assert run_a.returncode == 0, a_err
    assert results(out) == [(f"s{i}", "context_precision") for i in range(12)]
    assert not (out / ".lock").exists()  # released, and its file removed, at the end


def test_a_lock_left_by_a_killed_run_does_not_block(tmp_path: Path) -> None:
    """kill -9 leaves the lock file behind, with the dead run's pid: the next run takes it
    over (the system released the lock itself) and --resume finishes the run."""
    data = write_jsonl(tmp_path / "d.jsonl", ROWS)
    out = tmp_path / "run"
    release = threading.Event()
    with FakeOpenAI(held_until(release)) as server:
        env = {**os.environ, "OPENAI_API_KEY": "sk-lock", "XDG_CACHE_HOME": str(tmp_path / "c")}
        base = ["evaluate", str(data), "-m", "context_precision", "--model", "openai/judge",
                "--api-base", server.url, "--no-cache", "-q", "--out", str(out)]  # fmt: skip
        killed = subprocess.Popen(
            [sys.executable, "-m", "ctxeval", *base],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for(lambda: server.count >= 1, "the first request")
        assert json.loads((out / ".lock").read_text())["pid"] == killed.pid
        killed.send_signal(signal.SIGKILL)
        killed.wait(30)
        assert (out / ".lock").exists()  # left behind, stale
        release.set()
        resumed = cli(*base, "--resume", env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert len(results(out)) == len(ROWS)
    assert not (out / ".lock").exists()


HOLDER = """
import sys, time
from ctxeval._output.folder import claim_folder
lock = claim_folder(sys.argv[1])
print("held", flush=True)
time.sleep(120)
"""


@contextlib.contextmanager
def another_process_holding(folder: Path) -> Iterator[subprocess.Popen[str]]:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(folder)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "held"
        yield holder
    finally:
        holder.kill()
        holder.wait(30)


def test_two_processes_on_one_folder_from_python(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    ev = ctxeval.evaluate(ROWS[:3], ["id_mrr"])
    with another_process_holding(folder) as holder:
        with pytest.raises(FolderInUseError, match=f"pid {holder.pid} on ") as caught:
            RunFolder(folder, ["id_mrr"], title="t")
        assert caught.value.holder["pid"] == holder.pid
        with pytest.raises(FolderInUseError):
            ev.write(folder)
        with pytest.raises(FolderInUseError):
            claim_folder(folder)
        assert os.listdir(folder) == [".lock"]  # nothing begun by the refused runs
    # the holder killed (-9): its lock went with it
    paths = ev.write(folder)
    assert paths["results"].exists()
    assert not (folder / ".lock").exists()
    # in one process too: a folder being written refuses a second writer until it finishes
    first = RunFolder(tmp_path / "two", ["id_mrr"], title="t")
    assert stat.S_IMODE(os.stat(tmp_path / "two" / ".lock").st_mode) == 0o600
    with pytest.raises(FolderInUseError):
        RunFolder(tmp_path / "two", ["id_mrr"], title="t")
    for part in ev._parts:
        first.add(part)
    first.finish()
    RunFolder(tmp_path / "two", ["id_mrr"], title="t").abort()  # free again


# --- 2. a paid answer is never lost ----------------------------------------------------------


class FullDisk:
    """A cache connection whose writes fail as SQLite's do on a full disk."""

    def __init__(self, db: sqlite3.Connection, message: str) -> None:
        self.db = db
        self.message = message
        self.writes = 0

    def execute(self, sql: str, *args: Any) -> Any:
        if sql.startswith("INSERT"):
            self.writes += 1
            raise sqlite3.OperationalError(self.message)
        return self.db.execute(sql, *args)

    def close(self) -> None:
        self.db.close()


def judge_config(server: FakeOpenAI) -> LLMConfig:
    return LLMConfig(model="openai/judge", api_base=server.url, api_key="sk-cache")


@pytest.mark.parametrize(
    "message",
    ["database or disk is full", "attempt to write a readonly database", "disk I/O error"],
)
def test_an_answer_the_cache_cannot_keep_still_scores_its_row(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, message: str
) -> None:
    cache = SQLiteCache(tmp_path / "llm.sqlite")
    assert cache._db is not None
    broken = FullDisk(cache._db, message)
    cache._db = broken  # type: ignore[assignment]
    caplog.set_level(logging.WARNING, logger="ctxeval._calls.cache")
    with FakeOpenAI(Judge(verdicts={"useful": 1})) as server:
        ev = ctxeval.evaluate(
            ROWS, ["context_precision"], llm=judge_config(server), cache=cache, retry=FAST
        )
        sent = server.count
    assert [r.status for r in ev.results] == [Status.OK] * len(ROWS)
    assert [r.score for r in ev.results] == [1.0] * len(ROWS)
    assert sent == ev.usage.requests == 2 * len(ROWS)  # each chunk's answer paid once, used
    assert broken.writes == 1  # the cache off after the first failure
    assert not cache.enabled
    assert message in (cache.problem or "")
    warnings = [r for r in caplog.records if r.name == "ctxeval._calls.cache"]
    assert len(warnings) == 1
    assert "the run goes on without the cache" in warnings[0].getMessage()


def test_a_cache_that_cannot_be_opened_is_off_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    not_a_database = tmp_path / "llm.sqlite"
    not_a_database.write_bytes(b"this is not SQLite" * 100)
    caplog.set_level(logging.WARNING, logger="ctxeval._calls.cache")
    cache = SQLiteCache(not_a_database)
    assert not cache.enabled
    assert cache.get("k") is None
    cache.set("k", {"v": 1})  # skipped, no error
    assert len(cache) == 0
    [warning] = [r.getMessage() for r in caplog.records if r.name == "ctxeval._calls.cache"]
    assert f"the LLM cache {not_a_database} cannot be opened: file is not a database" in warning
    with pytest.raises(CacheError, match="cannot be opened: file is not a database") as caught:
        SQLiteCache(not_a_database, required=True)
    assert "\n" not in str(caught.value)
    # an answer with a lone surrogate (a judge can send one) is kept, escaped, not lost
    fine = SQLiteCache(tmp_path / "fine.sqlite")
    fine.set("k", {"text": "cut \ud83d pair"})
    assert fine.get("k") == {"text": "cut \ud83d pair"}


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A 1 MB tmpfs (skipped where mounting is not permitted)."""
    mount = tmp_path / "tiny"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1M", "tmpfs", str(mount)], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace')}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(disk: Path) -> None:
    """Fill ``disk`` to the last byte."""
    with contextlib.suppress(OSError), (disk / "filler").open("wb", buffering=0) as handle:
        while True:
            handle.write(b"\0" * 4096)


def test_a_full_disk_under_the_cache_loses_no_answer(
    tiny_disk: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cache = SQLiteCache(tiny_disk / "cache" / "llm.sqlite")
    assert cache.enabled
    fill(tiny_disk)
    caplog.set_level(logging.WARNING, logger="ctxeval._calls.cache")
    rows = [{**r, "reference": f"{r['reference']} {'x' * 2000}"} for r in ROWS]
    with FakeOpenAI(Judge(verdicts={"useful": 1})) as server:
        ev = ctxeval.evaluate(
            rows, ["context_precision"], llm=judge_config(server), cache=cache, retry=FAST
        )
    assert [r.status for r in ev.results] == [Status.OK] * len(ROWS)
    assert not cache.enabled
    assert "database or disk is full" in (cache.problem or "")
    assert len([r for r in caplog.records if r.name == "ctxeval._calls.cache"]) == 1
    # the command line on that full disk: its cache cannot be opened, the run goes on
    data = write_jsonl(tmp_path / "d.jsonl", ROWS[:4])
    with FakeOpenAI(Judge(verdicts={"useful": 1})) as server:
        done = cli(
            "evaluate", str(data), "-m", "context_precision", "--model", "openai/judge",
            "--api-base", server.url, "-q", "--out", str(tmp_path / "run"),
            env={"OPENAI_API_KEY": "sk-x", "XDG_CACHE_HOME": str(tiny_disk / "xdg")},
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert "cannot be opened" in done.stderr
    assert "the run goes on without the cache" in done.stderr
    assert len(results(tmp_path / "run")) == 4


# --- 3. --lenient scores every good row ------------------------------------------------------


@pytest.fixture
def loader_log_level() -> Iterator[None]:
    """The command line's --lenient quiets the loader's log (it lists the skipped rows
    itself), in this process: as it was, for the tests that follow."""
    logger = logging.getLogger("ctxeval._data.loading")
    level = logger.level
    yield
    logger.setLevel(level)


@pytest.mark.usefixtures("loader_log_level")
def test_lenient_sets_a_repeated_id_aside_not_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [
        {"id": f"q{i}", "retrieved_context_ids": ["a", "b"], "reference_context_ids": ["a"]}
        for i in range(40)
    ]
    rows.insert(25, {**rows[3], "reference_context_ids": ["b"]})  # line 26 repeats q3
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    out = tmp_path / "run"
    argv = ["evaluate", str(data), "-m", "id_mrr", "-m", "P@1", "--out", str(out)]
    assert main([*argv, "--lenient"]) == 1  # (an input row was set aside: error rows)
    scored = results(out)
    ids = [f"q{i}" for i in range(40)]
    assert [s for s, _ in scored[::2]] == [*ids[:25], "q3#", *ids[25:]]  # every row, in order
    summary = json.loads((out / "summary.json").read_text())
    set_aside = [
        json.loads(line)
        for line in (out / "results.jsonl").read_text().splitlines()
        if '"q3#"' in line
    ]
    assert [r["status"] for r in set_aside] == ["error", "error"]
    assert set_aside[0]["reason"].startswith(
        f"set aside: {data}:26: sample 'q3': field 'id': an earlier row has this id"
    )
    assert "1 error row(s)" not in capsys.readouterr().out  # (2: one per metric)
    assert {name: m["n_ok"] for name, m in summary["metrics"].items()} == {
        "id_mrr": 40,
        "P@1": 40,
    }
    # the same from Python, on every runner's path (not only the all-deterministic one); a
    # lenient reader (strict=False) leaves the row out instead, as asked
    ev = ctxeval.evaluate(ctxeval.load_samples(data), ["id_mrr"], lenient=True)
    assert [r.sample_id for r in ev.results] == [*ids[:25], "q3#", *ids[25:]]
    stream = ctxeval.load_samples(data, strict=False)
    ev = ctxeval.evaluate(stream, ["id_mrr"])
    assert len(ev.results) == 40
    [skipped] = [str(e) for e in stream.errors]
    assert skipped.startswith(f"{data}:26: sample 'q3': field 'id': an earlier row has this id")
    # strict (the default): refused, and the message says how to score the others
    with pytest.raises(SystemExit) as refused:
        main([*argv[:-2], "--out", str(tmp_path / "strict")])
    assert refused.value.code == 2
    err = capsys.readouterr().err
    assert "two samples have this id" in err
    assert "--lenient" in err


# --- 4. labels files: strict and safe ----------------------------------------------------------

LABEL = {"sample_id": "q1", "metric": "context_precision", "index": 0, "label": 1}


def test_a_label_sheet_with_any_unicode_reads_back(tmp_path: Path) -> None:
    texts = ["line\u2028separator", "para\u2029graph", "next\x85line", "form\x0cfeed", "a\rb"]
    sheet = tmp_path / "sheet.jsonl"
    sheet.write_text(
        "".join(
            json.dumps({**LABEL, "index": i, "item": t, "label": i % 2}, ensure_ascii=False) + "\n"
            for i, t in enumerate(texts)
        ),
        encoding="utf-8",
        newline="",
    )
    labels = Labels.load(sheet)
    assert labels.items == {("context_precision", "q1"): {i: i % 2 for i in range(5)}}
    assert [labels.lines["context_precision", "q1", i] for i in range(5)] == [1, 2, 3, 4, 5]


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".json"])
def test_an_index_in_other_digits_is_a_data_error(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"labels{suffix}"
    if suffix == ".csv":
        path.write_text("sample_id,metric,index,label\nq1,context_precision,0,1\nq1,m,²,1\n")
    elif suffix == ".json":
        path.write_text(json.dumps([LABEL, {**LABEL, "index": "²"}], indent=1))
    else:
        path.write_text(json.dumps(LABEL) + "\n" + json.dumps({**LABEL, "index": "٣"}) + "\n")
    with pytest.raises(DataError) as caught:
        Labels.load(path)
    line = {".csv": 3, ".json": 8, ".jsonl": 2}[suffix]
    assert str(caught.value).startswith(f"{path}:{line}: sample 'q1': field 'index': ")


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".json"])
def test_a_file_that_is_not_utf8_names_line_and_field(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"labels{suffix}"
    latin = "café".encode("latin-1")
    if suffix == ".csv":
        path.write_bytes(b"sample_id,metric,index,label\nq1,m,0,1\n" + latin + b",m,0,1\n")
    elif suffix == ".json":
        path.write_bytes(b'[\n{"sample_id": "q1", "metric": "m", "index": 0, "label": 1},\n'
                         b'{"sample_id": "' + latin + b'", "metric": "m", "index": 0, "label": 1}'
                         b"\n]")  # fmt: skip
    else:
        path.write_bytes(
            json.dumps(LABEL).encode() + b'\n{"sample_id": "' + latin + b'", "metric": "m"}\n'
        )
    with pytest.raises(DataError) as caught:
        Labels.load(path)
    message = str(caught.value)
    line = 2 if suffix == ".jsonl" else 3
    assert message.startswith(f"{path}:{line}: field 'sample_id': not valid UTF-8 (the byte 0xe9)")
    assert "save the file as UTF-8" in message


def test_an_excel_csv_with_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    path = tmp_path / "labels.csv"
    path.write_bytes(
        "sample_id,metric,index,item,label\r\n"
        'q1,context_precision,0,"two\r\nlines, and a comma",1\r\n'
        "q1,context_precision,1,x,0\r\n".encode("utf-8-sig")
    )
    labels = Labels.load(path)
    assert labels.items == {("context_precision", "q1"): {0: 1, 1: 0}}
    assert labels.lines["context_precision", "q1", 1] == 4  # the line its row starts on


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("labels.jsonl", b""),
        ("labels.jsonl", b"\n  \n\n"),
        ("labels.jsonl", b"\xef\xbb\xbf"),
        ("labels.csv", b"sample_id,metric,index,label\n"),
        ("labels.json", b"[]"),
        ("labels.json", b""),
    ],
)
def test_an_empty_labels_file_is_an_error(tmp_path: Path, name: str, content: bytes) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(DataError, match="the labels file is empty"):
        Labels.load(path)
    with pytest.raises(DataError, match="the labels file is empty"):
        ctxeval.evaluate(ROWS[:1], ["id_mrr"], labels=path)


def test_the_label_sheet_is_written_private_whole_and_never_over_a_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ctxeval.cli.label_sheet import write_new

    with FakeOpenAI(Judge(verdicts={"useful": 1})) as server:
        samples = [
            {**r, "retrieved_contexts": ["useful\u2028text", f"useless {i}"]}
            for i, r in enumerate(ROWS)
        ]
        ev = ctxeval.evaluate(samples, ["context_precision"], llm=judge_config(server), retry=FAST)
    ev.write(tmp_path / "run")
    data = write_jsonl(tmp_path / "d.jsonl", samples)
    old = os.umask(0o022)
    try:
        code = main(["label-sheet", str(tmp_path / "run"), "-m", "context_precision", "-n", "5",
                     "--data", str(data)])  # fmt: skip
    finally:
        os.umask(old)
    assert code == 0
    sheet = tmp_path / "run" / "label-sheet.jsonl"
    assert stat.S_IMODE(os.stat(sheet).st_mode) == 0o600
    assert not [p for p in (tmp_path / "run").iterdir() if p.name.endswith(".tmp")]
    records = [json.loads(line) for line in sheet.read_bytes().decode().split("\n") if line]
    assert any("\u2028" in (r["item"] or "") for r in records)
    for record in records:  # filled in: it is a labels file, read back whole
        record["label"] = 1
    sheet.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    assert len(Labels.load(sheet)) == len(records) == 10
    # a file that appeared at the name meanwhile is never replaced
    taken = tmp_path / "taken.jsonl"
    taken.write_text("mine")
    with pytest.raises(FileExistsError):
        write_new(taken, "sheet")
    assert taken.read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")) == []
