"""Integrity, fourth round (#56, items 3 to 8): ``--lenient`` stays linear on one repeated id,
no key from the endpoint URL or the answer's envelope reaches a file, no file outside the run
is destroyed, a zero vector is a malformed answer, and the failures that were tracebacks or
unclear say what happened and what to do."""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import multiprocessing
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

import ctxeval
from ctxeval import Status
from ctxeval._plugins.base import BaseMetric
from ctxeval.cli import main
from ctxeval.runners import get_runner
from ctxeval_llm import LLMConfig
from fakes.openai_server import FakeOpenAI, Reply
from llm_judge import Judge

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX only")

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def cli(*args: str) -> int:
    """``ctxeval ARGS`` in this process: its exit code."""
    try:
        return int(main(list(args)) or 0)
    except SystemExit as exc:
        return int(exc.code or 0)


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture
def loader_log_level() -> Iterator[None]:
    """The command line's --lenient quiets the loader's log: as it was, afterwards."""
    logger = logging.getLogger("ctxeval._data.loading")
    level = logger.level
    yield
    logger.setLevel(level)


def stored(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (the run's and the cache's), by name."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


# --- 4. no key from the endpoint URL or the answer's envelope ----------------------------------

URL_KEY = "sk-in-the-url-0123456789"
GRADES = {"useful": 3, "useless": 0}
JUDGED = [
    {
        "id": f"s{i}",
        "user_input": "q",
        "reference": "r",
        "retrieved_contexts": ["useful", f"useless {i}"],
        "retrieved_context_ids": [f"d{i}", f"e{i}"],
    }
    for i in range(3)
]


def test_a_key_in_the_endpoint_url_is_stored_masked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--api-base http://user:KEY@host/v1``: every file of the run (results, summary,
    journal, report, qrels) names the endpoint as ``user:***@host``; requests still go to the
    real one, and the journal's fingerprint still tells two endpoints apart."""
    from ctxeval._run.journal import fingerprint
    from ctxeval_llm.judges import ContextRelevance

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # the URL's userinfo authenticates
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    data = write_jsonl(tmp_path / "d.jsonl", JUDGED)
    out = tmp_path / "run"
    with FakeOpenAI(Judge(grades=GRADES, verdicts={"useful": 1})) as server:
        base = server.url.replace("://", f"://user:{URL_KEY}@")
        code = cli("evaluate", str(data), "-m", "context_relevance", "-m", "context_precision",
                   "--model", "openai/judge", "--api-base", base, "--out", str(out),
                   "--write-qrels", str(tmp_path / "judged.qrels"), "-q")  # fmt: skip
        shown = server.url.replace("://", "://user:***@")
    assert code == 0
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [r["status"] for r in rows] == ["ok"] * 6  # (the requests went to the real URL)
    files = {
        **stored(out),
        **stored(tmp_path / "xdg"),
        "qrels": (tmp_path / "judged.qrels").read_bytes(),
    }
    for name in ("results.jsonl", "summary.json", "journal.jsonl", "report.html", "qrels"):
        assert URL_KEY.encode() not in files[name], name
    assert [name for name, text in files.items() if URL_KEY.encode() in text] == []
    for name in ("results.jsonl", "summary.json", "journal.jsonl", "qrels"):
        assert shown.encode() in files[name], name
    # nor in a repr (a log line, an error quoting the configuration)
    from ctxeval_llm.embeddings import OpenAIEmbedder

    for config in (
        LLMConfig(model="openai/j", api_base=base),
        OpenAIEmbedder(model="e", api_base=base),
    ):
        assert URL_KEY not in repr(config)
        assert "user:***@" in repr(config)
    # the fingerprint hashes the real endpoint: another key in the URL is another judge
    metric = ContextRelevance()
    prints = {
        fingerprint(metric, LLMConfig(model="openai/j", api_base=url))
        for url in ("http://u:one@h/v1", "http://u:two@h/v1", "http://h/v1", "http://g/v1")
    }
    assert len(prints) == 4


def echoing(field_value: str) -> Any:
    """A judge whose answers carry ``field_value`` in their envelope (model, id, fingerprint)."""
    judge = Judge(verdicts={"useful": 1})

    def respond(request: dict[str, Any]) -> Reply:
        content = judge(request)
        assert isinstance(content, str)
        body = {
            "id": field_value,
            "object": "chat.completion",
            "created": 0,
            "model": field_value,
            "system_fingerprint": field_value,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }
        return Reply(body=json.dumps(body).encode())

    return respond


@pytest.mark.parametrize("echoed", ["configured", "environment", "key-shaped"])
def test_a_key_echoed_in_the_answers_envelope_is_never_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, echoed: str
) -> None:
    configured, gateway = "sk-configured-0123456789", "gw-7f3a9c1e5b2d4a"
    monkeypatch.setenv("MY_GATEWAY_TOKEN", gateway)
    secret = {"configured": configured, "environment": gateway,
              "key-shaped": "sk-proj-nobodyconfiguredthis"}[echoed]  # fmt: skip
    with FakeOpenAI(echoing(secret)) as server:
        llm = LLMConfig(model="openai/judge", api_base=server.url, api_key=configured)
        ev = ctxeval.evaluate(JUDGED, ["context_precision"], llm=llm, journal=tmp_path / "j.jsonl")
    assert [r.status for r in ev.results] == [Status.OK] * 3
    [judge] = ev.results[0].details["provenance"]["judges"]
    assert judge["served_model"] == "***"  # what answered, masked: not dropped
    ev.write(tmp_path / "run")
    files = stored(tmp_path)
    assert {"j.jsonl", "run/results.jsonl", "run/summary.json", "run/report.html"} <= set(files)
    assert [name for name, text in files.items() if secret.encode() in text] == []


# --- 3. --lenient on many copies of one id -------------------------------------------------------


def one_id_rows(n: int) -> list[dict[str, Any]]:
    row = {"id": "", "retrieved_context_ids": ["a", "b"], "reference_context_ids": ["a"]}
    rows = [dict(row) for _ in range(n)]
    rows[1] = {**row, "id": "#3"}  # a real id that looks like a renamed one
    return rows


def test_lenient_names_the_repeats_of_one_id_from_a_counter(
    tmp_path: Path, loader_log_level: None
) -> None:
    """1 000 rows with ``"id": ""``: the repeats are ``#``, ``#2``, ``#4``... (``#3`` is a real
    id, kept), short and unique, on every path (the command line, dicts from Python, an async
    source, the processes runner); they were ``#``, ``##``, ``###``..., quadratic in time and
    in the size of results.jsonl (10 000 rows: 152 s, 109 MB)."""
    n = 1000
    rows = one_id_rows(n)
    expected = ["", "#3", "#", "#2", *(f"#{k}" for k in range(4, n))]
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    out = tmp_path / "run"
    assert cli("evaluate", str(data), "-m", "id_mrr", "--lenient", "-q", "--out", str(out)) == 1
    lines = (out / "results.jsonl").read_text().splitlines()
    assert [json.loads(line)["sample_id"] for line in lines] == expected
    assert max(map(len, lines)) < 600
    ev = ctxeval.evaluate(rows, ["id_mrr"], lenient=True)
    assert [r.sample_id for r in ev.results] == expected

    async def source() -> Any:
        for row in rows:
            yield row

    ev = ctxeval.evaluate(source(), ["id_mrr"], lenient=True)
    assert [r.sample_id for r in ev.results] == expected
    runner = get_runner("processes", workers=2)
    runner.part_size = 300  # type: ignore[attr-defined]
    ev = ctxeval.evaluate(ctxeval.load_samples(data), ["id_mrr"], lenient=True, runner=runner)
    ids = [str(r.sample_id) for r in ev.results]
    assert len(ids) == len(set(ids)) == n
    assert ids[:2] == ["", "#3"]
    assert max(map(len, ids)) <= 6


# --- 5. no file outside the run is destroyed ---------------------------------------------------

ID_ROWS = [
    {"id": f"q{i}", "retrieved_context_ids": ["a", "b"], "reference_context_ids": ["a"]}
    for i in range(5)
]


def test_a_link_planted_at_the_journals_temporary_name_is_not_followed(tmp_path: Path) -> None:
    """``journal.jsonl.tmp`` (the old fixed name) and a guess at the new one, planted as links
    to a file outside the run: the journal is written, the targets are untouched, nothing is
    left behind."""
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    journal = tmp_path / "run" / "journal.jsonl"
    journal.parent.mkdir()
    for name in ("journal.jsonl.tmp", ".journal.jsonl.tmp", "journal.jsonl.partial"):
        (journal.parent / name).symlink_to(victim)
    ev = ctxeval.evaluate(ID_ROWS, ["id_mrr"], journal=journal)
    assert len(ev.results) == 5
    assert victim.read_text() == "precious\n"
    assert json.loads(journal.read_text().splitlines()[0])["ctxeval_journal"] == 2
    # the label sheet, the report, the qrels file: one helper, a new name each time
    from ctxeval._output.files import write_text
    from ctxeval.cli.label_sheet import write_new

    write_text(tmp_path / "run" / "report.html", "<p>r</p>")
    write_new(tmp_path / "run" / "sheet.jsonl", "{}\n")
    leftovers = sorted(p.name for p in journal.parent.iterdir() if ".tmp" in p.name)
    assert leftovers == [".journal.jsonl.tmp", "journal.jsonl.tmp"]  # (the planted links only)
    assert victim.read_text() == "precious\n"


def test_a_device_or_a_fifo_at_a_written_name_is_refused_not_replaced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--write-qrels PATH --overwrite`` on a FIFO (or ``/dev/null``) is refused with one line
    (exit 2) before anything is scored; the FIFO is still a FIFO. The same for a journal and a
    report written from Python."""
    import stat

    from ctxeval import ConfigError
    from ctxeval._output.files import write_text

    data = write_jsonl(tmp_path / "d.jsonl", ID_ROWS)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for target in (str(fifo), "/dev/null"):
        code = cli("evaluate", str(data), "-m", "id_mrr", "--out", str(tmp_path / "run"),
                   "--write-qrels", target, "--overwrite", "-q")  # fmt: skip
        assert code == 2
        err = capsys.readouterr().err
        assert f"--write-qrels {target} is a " in err
        assert "not a regular file" in err
        assert "Traceback" not in err
        assert not (tmp_path / "run" / "results.jsonl").exists()  # refused before scoring
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert stat.S_ISCHR(os.lstat("/dev/null").st_mode)
    with pytest.raises(ConfigError, match="is a FIFO"):
        ctxeval.evaluate(ID_ROWS, ["id_mrr"], journal=fifo)
    with pytest.raises(ConfigError, match="is a FIFO"):
        write_text(fifo, "x")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.jsonl", "pipe", "run"]


# --- 6. an all-zero embedding vector is a malformed answer --------------------------------------

RECALL_ROWS = [
    {"id": str(i), "reference_contexts": [f"the tower is in paris {i}"],
     "retrieved_contexts": [f"Paris: the tower is in paris {i}", "bananas"]}
    for i in range(3)
]  # fmt: skip


def recall_over(matcher: Any) -> Any:
    from ctxeval.plugin import Items, compose, policy

    return compose(
        "embedding_context_recall",
        reference=Items(field="reference_contexts", what="reference contexts"),
        retrieved=Items(field="retrieved_contexts", what="retrieved contexts"),
        matcher=matcher,
        formula=policy.Recall(),
    )


class ZeroEmbedder:
    """A deterministic embedder that answers the zero vector for every text."""

    name = "zeros"
    default_threshold = 0.5

    def embed(self, texts: Any) -> Any:
        import numpy as np

        return np.zeros((len(list(texts)), 8), dtype=np.float32)

    async def aembed(self, texts: Any, ctx: Any) -> Any:
        return self.embed(texts)


def test_an_all_zero_embedding_is_a_malformed_answer_not_a_score_of_0() -> None:
    """An endpoint answering zero vectors: asked again (a malformed answer), then ``error``
    rows naming it, never ``ok`` rows scored 0.0 (the cosine with a zero vector is undefined).
    The same for the matcher over any embedder; a blank text's zero vector still matches
    nothing."""
    from ctxeval import RetryPolicy
    from ctxeval.plugin import get_matcher

    def zeros(request: dict[str, Any]) -> Reply:
        inputs = request["input"]
        data = [{"object": "embedding", "index": i, "embedding": [0.0] * 16}
                for i in range(len(inputs))]  # fmt: skip
        return Reply(body=json.dumps({"object": "list", "data": data, "model": "e"}).encode())

    with FakeOpenAI(embedding_responder=zeros) as server:
        matcher = get_matcher(
            "embedding", embedder="openai", threshold=0.6,
            embedder_options={"model": "e", "api_base": server.url, "api_key": "sk-zero-000000"},
        )  # fmt: skip
        ev = ctxeval.evaluate(
            RECALL_ROWS, [recall_over(matcher)], retry=RetryPolicy(initial_backoff=0.001)
        )
        asked = server.count
    assert [r.status for r in ev.results] == [Status.ERROR] * 3
    assert "not all zero" in (ev.results[0].reason or "")
    assert asked >= 2  # (asked again, as any malformed answer)
    zero = get_matcher("embedding", embedder=ZeroEmbedder(), threshold=0.5)
    ev = ctxeval.evaluate(RECALL_ROWS, [recall_over(zero)])
    assert [r.status for r in ev.results] == [Status.ERROR] * 3
    assert "zero vector" in (ev.results[0].reason or "")
    from ctxeval_embed.matcher import unit_vectors

    assert unit_vectors([[0.0, 0.0], [3.0, 4.0]], ["  ", "x"]).tolist() == [[0, 0], [0.6, 0.8]]


# --- 7. no traceback -----------------------------------------------------------------------------


class FullDiskHandle:
    """The journal's file on a full disk: its writes are buffered, every flush fails."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.pending = ""

    def write(self, text: str) -> int:
        self.pending += text
        return len(text)

    def flush(self) -> None:
        if self.pending:
            raise OSError(errno.ENOSPC, "No space left on device")

    def close(self) -> None:
        self.real.close()
        self.flush()


def test_a_journal_filling_the_disk_stops_the_run_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The journal's write failing (a full disk) stops the run with the one line a full disk
    gives (exit 1, what to free, ``--resume``); closing the journal in ``execute``'s
    ``finally`` no longer raises the same failure again over it (it was a traceback ending in
    ``OSError: [Errno 28]`` from ``journal.close()``)."""
    from ctxeval._run import journal as journal_module

    real_open = journal_module._open_private

    def full(path: Path, mode: str) -> Any:
        handle = real_open(path, mode)
        return FullDiskHandle(handle) if "a" in mode else handle

    monkeypatch.setattr(journal_module, "_open_private", full)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-journal-000000")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    data = write_jsonl(tmp_path / "d.jsonl", JUDGED)
    with FakeOpenAI(Judge(verdicts={"useful": 1})) as server:
        code = cli("evaluate", str(data), "-m", "context_precision", "--model", "openai/j",
                   "--api-base", server.url, "--out", str(tmp_path / "run"), "-q")  # fmt: skip
    err = capsys.readouterr().err
    assert code == 1
    assert "Errno 28" not in err  # (the fake server may print a reset of its own)
    assert "Exception Group" not in err
    assert "journal.jsonl): No space left on device" in err
    assert "free some space" in err
    assert "--resume" in err
    from ctxeval._output.files import UnwritableFolderError

    with FakeOpenAI(Judge(verdicts={"useful": 1})) as server:
        llm = LLMConfig(model="openai/j", api_base=server.url)
        with pytest.raises(UnwritableFolderError, match="No space left on device") as caught:
            ctxeval.evaluate(JUDGED, ["context_precision"], llm=llm, journal=tmp_path / "j.jsonl")
    assert caught.value.filename == str(tmp_path / "j.jsonl")


def test_the_viewer_indexes_the_readable_rows_and_names_the_others(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A results.jsonl with a line that is not JSON, a row without ``sample_id`` and a torn
    last line: the viewer indexes the other rows and one warning names the first bad line
    (it was a traceback)."""
    from ctxeval._output.run_source import run_source
    from ctxeval._view.index import ensure_index

    data = write_jsonl(tmp_path / "d.jsonl", ID_ROWS)
    out = tmp_path / "run"
    assert cli("evaluate", str(data), "-m", "id_mrr", "--out", str(out), "-q") == 0
    good = (out / "results.jsonl").read_text()
    (out / "results.jsonl").write_text(
        good + "not json\n" + '{"metric": "id_mrr", "score": 1.0}\n' + good.splitlines()[0][:40]
    )
    caplog.set_level(logging.WARNING, logger="ctxeval._view.index")
    index = ensure_index([run_source(out)])
    import sqlite3

    with contextlib.closing(sqlite3.connect(index)) as db:
        assert db.execute("SELECT count(*) FROM samples").fetchone()[0] == 5
    [warning] = [r.getMessage() for r in caplog.records]
    assert warning.startswith("3 line(s) of ")
    assert f"(the first: {out / 'results.jsonl'}:6: not JSON" in warning


def test_report_on_rows_the_summary_does_not_name_computes_their_numbers(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """``ctxeval report RUN`` when results.jsonl holds a metric summary.json lacks: the
    numbers are computed again from the rows, with a warning (it was a KeyError)."""
    data = write_jsonl(tmp_path / "d.jsonl", ID_ROWS)
    out = tmp_path / "run"
    assert cli("evaluate", str(data), "-m", "id_mrr", "--out", str(out), "-q") == 0
    with (out / "results.jsonl").open("a") as rows:
        rows.write((out / "results.jsonl").read_text().replace('"id_mrr"', '"other"'))
    (out / "report.html").unlink()
    caplog.set_level(logging.WARNING, logger="ctxeval._output.rebuild")
    assert cli("report", str(out)) == 0
    assert "names no metric 'other'" in caplog.text
    assert "other" in (out / "report.html").read_text()


def test_a_page_offset_past_what_sqlite_holds_is_a_400(tmp_path: Path) -> None:
    import threading
    import urllib.error
    import urllib.request

    from ctxeval._output.run_source import run_source
    from ctxeval._view.index import ensure_index
    from ctxeval._view.server import make_server, server_url

    data = write_jsonl(tmp_path / "d.jsonl", ID_ROWS)
    out = tmp_path / "run"
    assert cli("evaluate", str(data), "-m", "id_mrr", "--out", str(out), "-q") == 0
    runs = [run_source(out)]
    server = make_server(runs, ensure_index(runs))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base = server_url(server) + "api/samples?offset="
        for offset in (2**63, 2**64 + 5, 10**40):
            with pytest.raises(urllib.error.HTTPError) as failed:
                urllib.request.urlopen(base + str(offset), timeout=60)
            assert failed.value.code == 400
            assert "offset <=" in json.loads(failed.value.read())["error"]
        with urllib.request.urlopen(base + str(2**62), timeout=60) as page:
            assert json.loads(page.read())["samples"] == []
    finally:
        server.shutdown()
        server.server_close()


# --- 8. clear errors -----------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class KillsItsWorker(BaseMetric):
    """An async metric (its rows are journaled) whose worker process is killed at sample q7."""

    registry_name = "kills_its_worker"
    requires = ("retrieved_context_ids", "reference_context_ids")

    async def ascore(self, sample: ctxeval.Sample, ctx: ctxeval.RunContext) -> Any:
        if sample.id == "q7" and multiprocessing.parent_process() is not None:
            os.kill(os.getpid(), signal.SIGKILL)
        return ctxeval.get_metric("id_mrr").score(sample)


def test_a_worker_killed_under_the_processes_runner_says_what_is_kept_and_resume(
    tmp_path: Path,
) -> None:
    from concurrent.futures.process import BrokenProcessPool

    from ctxeval._run.processes import ProcessesRunner

    rows = [
        {"id": f"q{i}", "retrieved_context_ids": ["a", "b"], "reference_context_ids": ["a"]}
        for i in range(12)
    ]
    runner = ProcessesRunner(workers=2, part_size=4)
    with pytest.raises(BrokenProcessPool) as caught:
        ctxeval.evaluate(rows, [KillsItsWorker()], runner=runner, journal=tmp_path / "j.jsonl")
    message = str(caught.value)
    assert isinstance(caught.value, ctxeval.CtxevalError)
    assert "a worker process of runner 'processes' ended abruptly" in message
    assert "--resume" in message
    assert "journal" in message


@pytest.mark.usefixtures("loader_log_level")
def test_an_over_deep_row_of_a_json_array_is_one_bad_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A ``.json`` array with one row nested 100 000 deep: with ``--lenient`` that row is an
    error row naming its line and the others are scored, as in JSONL (the whole file was
    refused); strict, the refusal names the row's line."""
    good = [json.dumps({**row, "note": "a, ] or } in [text]"}) for row in ID_ROWS[:2]]
    deep = '{"id": "deep", "metadata": ' + "[" * 100_000 + "]" * 100_000 + "}"
    big = '{"id": "big", "metadata": {"n": ' + "9" * 5000 + "}}"
    data = tmp_path / "d.json"
    data.write_text("[\n" + ",\n".join([good[0], deep, big, good[1]]) + "\n]\n")
    out = tmp_path / "run"
    assert cli("evaluate", str(data), "-m", "id_mrr", "--lenient", "-q", "--out", str(out)) == 1
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [(r["sample_id"], r["status"]) for r in rows] == [
        ("q0", "ok"), ("1", "error"), ("2", "error"), ("q1", "ok")
    ]  # fmt: skip
    assert f"{data}:3: " in rows[1]["reason"]
    assert "nested too deeply" in rows[1]["reason"]
    assert f"{data}:4: " in rows[2]["reason"]
    capsys.readouterr()
    assert cli("evaluate", str(data), "-m", "id_mrr", "-q") == 2
    err = capsys.readouterr().err
    assert f"{data}:3: " in err
    assert "nested too deeply" in err


@pytest.fixture
def read_only_folder(tmp_path: Path) -> Iterator[Path]:
    """A folder nothing can be written in: a read-only tmpfs as root (skipped where mounting
    is not permitted), else a folder without write permission."""
    folder = tmp_path / "ro"
    folder.mkdir()
    if os.geteuid() != 0:
        folder.chmod(0o555)
        yield folder
        folder.chmod(0o755)
        return
    import subprocess

    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "ro,size=1M", "tmpfs", str(folder)], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a read-only tmpfs here: {done.stderr.decode(errors='replace')}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def test_a_read_only_out_says_nothing_was_written_not_of_a_journal(
    tmp_path: Path, read_only_folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = write_jsonl(tmp_path / "d.jsonl", ID_ROWS)
    for out in (read_only_folder, read_only_folder / "run"):
        assert cli("evaluate", str(data), "-m", "id_mrr", "--out", str(out), "-q") == 1
        err = capsys.readouterr().err
        assert f"cannot write the run folder ({out}" in err
        assert "nothing was scored or written" in err
        assert "journal" not in err
        assert "--resume" not in err


def test_a_journal_path_that_cannot_be_written_is_a_config_error() -> None:
    for path in ("/proc/nope", "/proc/self/nope/journal.jsonl"):
        with pytest.raises(ctxeval.ConfigError) as caught:
            ctxeval.evaluate(ID_ROWS, ["id_mrr"], journal=path)
        assert f"journal={path!r} cannot be written" in str(caught.value)
        assert "a folder you can write" in str(caught.value)


def test_a_run_keeps_a_bounded_number_of_error_reasons() -> None:
    """Rows set aside by ``--lenient`` each name their line: past ``MAX_ERROR_GROUPS``
    distinct reasons, the others are counted together, so the memory of a run with a million
    of them stays bounded (it kept one group per row: about half a KB each)."""
    from ctxeval import MetricResult
    from ctxeval._output.totals import MAX_ERROR_GROUPS, RunTotals

    totals = RunTotals(["id_mrr"])
    extra = 500
    for i in range(MAX_ERROR_GROUPS + extra):
        totals.add(
            [MetricResult.error(f"set aside: d.jsonl:{i + 1}: ...").labelled(str(i), "id_mrr")]
        )
    groups = totals.error_groups()
    assert len(groups) == MAX_ERROR_GROUPS + 1
    assert groups[0].count == extra  # the others, counted together
    assert groups[0].reason.startswith("other reasons (past the first 1000")
    assert totals.error_count == MAX_ERROR_GROUPS + extra
    assert totals.summary()["id_mrr"].n_error == MAX_ERROR_GROUPS + extra
