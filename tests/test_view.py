"""``ctxeval view``: the index (built once, rebuilt when the run changed, where it lives), the
server's API (paging, sort, filters, search, one sample, two runs side by side, errors,
read-only), the command line (its address first, its errors, Ctrl-C) and the page in headless
Chromium (the first page, a deep link ``#id=``, hostile text shown as text)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from browser_dom import BROWSER, Shown, dump_dom
from ctxeval._output.run_source import RunSource, run_source
from ctxeval._view import sources
from ctxeval._view.index import ensure_index
from ctxeval._view.schema import connect_readonly
from ctxeval._view.server import make_server, server_url
from ctxeval._view.sources import index_location
from ctxeval.cli import main

METRICS = ("id_based_context_precision", "id_based_context_recall")
PRECISION, RECALL = METRICS
HOSTILE = '</script><script>document.title="pwned"</script><img src=x onerror="document.title=1">'
N = 120


def samples(worse: bool = False) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for i in range(N):
        retrieved = [f"d{(i + j) % 7}" for j in range(3)]
        row: dict[str, Any] = {
            "id": f"q{i:03d}",
            "user_input": f"question number {i} about topic{i % 5}",
            "retrieved_context_ids": retrieved[1:] if worse and i % 3 == 0 else retrieved,
            "reference_context_ids": [] if i % 10 == 0 else [f"d{i % 7}"] if i % 4 else ["d6"],
        }
        if i == 7:
            row["user_input"] = "a zebra-crossing " + HOSTILE
        if i == 11:
            del row["id"]  # its position is its id: "11"
        rows.append(row)
    return rows


def evaluate(folder: Path, name: str, data: list[dict[str, Any]]) -> Path:
    path = folder / f"{name}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in data), encoding="utf-8")
    out = folder / name
    code = main(["evaluate", str(path), "-m", PRECISION, "-m", RECALL, "--out", str(out), "-q"])
    assert code == 0
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("view")
    cwd = os.getcwd()
    os.chdir(folder)  # summary.json's "data" is as given: relative to here
    try:
        return evaluate(folder, "A", samples()), evaluate(folder, "B", samples(worse=True))
    finally:
        os.chdir(cwd)


def rows_of(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "results.jsonl").open(encoding="utf-8")]


def serve(runs: list[RunSource]) -> Iterator[str]:
    server = make_server(runs, ensure_index(runs))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server_url(server)
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def url(runs: tuple[Path, Path]) -> Iterator[str]:
    yield from serve([run_source(runs[0])])


@pytest.fixture(scope="module")
def pair_url(runs: tuple[Path, Path]) -> Iterator[str]:
    yield from serve([run_source(runs[0]), run_source(runs[1])])


def get(url: str, *, method: str = "GET", headers: dict[str, str] | None = None) -> Any:
    request = urllib.request.Request(url, method=method, headers=headers or {})
    with urllib.request.urlopen(request, timeout=60) as answer:
        return json.loads(answer.read())


def status_of(url: str, *, method: str = "GET", headers: dict[str, str] | None = None) -> int:
    """The status of a request that fails, checking its answer is a JSON error."""
    with pytest.raises(urllib.error.HTTPError) as failed:
        get(url, method=method, headers=headers)
    assert json.loads(failed.value.read())["error"]
    return failed.value.code


# --- the index ----------------------------------------------------------------------------


def test_the_data_file_is_found_and_the_index_built_once(runs: tuple[Path, Path]) -> None:
    run = run_source(runs[0])
    assert run.data == (runs[0].parent / "A.jsonl").resolve()  # found beside the run folder
    path = ensure_index([run])
    assert path == runs[0] / "view-index.sqlite"
    assert path.stat().st_mode & 0o777 == 0o600
    with contextlib.closing(connect_readonly(path)) as conn:
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        texts = conn.execute("SELECT texts FROM samples WHERE id = '11'").fetchone()[0]
    assert meta["samples"] == str(N)
    assert meta["rows"] == str(2 * N)
    assert meta["texts_missing"] == "0"
    assert json.loads(texts)["user_input"] == "question number 11 about topic1"
    inode = path.stat().st_ino
    assert ensure_index([run]) == path
    assert path.stat().st_ino == inode  # up to date: not rebuilt


def test_the_index_is_rebuilt_when_the_results_change(tmp_path: Path) -> None:
    out = evaluate(tmp_path, "run", samples()[:20])
    run = run_source(out)
    path = ensure_index([run])
    with contextlib.closing(connect_readonly(path)) as conn:
        built = conn.execute("SELECT value FROM meta WHERE key = 'built'").fetchone()[0]
    results = out / "results.jsonl"
    lines = results.read_text(encoding="utf-8").splitlines(keepends=True)
    results.write_text("".join(lines[:-2]), encoding="utf-8")  # the last sample's rows gone
    path = ensure_index([run_source(out)])
    with contextlib.closing(connect_readonly(path)) as conn:
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
    assert meta["built"] != built
    assert meta["samples"] == "19"
    assert not list(out.glob(".view-index-*"))  # no temporary file left


def test_a_read_only_run_folder_keeps_its_index_in_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(sources.os, "access", lambda path, mode: False)
    run = RunSource(tmp_path / "run", tmp_path / "run" / "results.jsonl", None, None, {})
    other = RunSource(tmp_path / "other", tmp_path / "other" / "results.jsonl", None, None, {})
    where = index_location([run])
    assert where.parent == tmp_path / "cache" / "ctxeval" / "view"
    assert where != index_location([other]) != index_location([run, other])


def test_texts_of_samples_out_of_order_are_found_by_id(tmp_path: Path) -> None:
    out = evaluate(tmp_path, "run", samples()[:30])
    shuffled = tmp_path / "shuffled.jsonl"
    lines = (tmp_path / "run.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    shuffled.write_text("".join(reversed([line for i, line in enumerate(lines) if i != 11])))
    path = ensure_index([run_source(out, shuffled)])
    with contextlib.closing(connect_readonly(path)) as conn:
        missing = conn.execute("SELECT id FROM samples WHERE texts IS NULL").fetchall()
    assert missing == [("11",)]  # positional ids only hold in the file's own order


# --- the API ------------------------------------------------------------------------------


def test_pages_of_every_sample_in_input_order(url: str) -> None:
    first = get(url + "api/samples")
    assert first["total"] == first["all"] == N
    assert [s["id"] for s in first["samples"]] == [f"q{i:03d}" for i in range(11)] + ["11"] + [
        f"q{i:03d}" for i in range(12, 50)
    ]
    last = get(url + "api/samples?offset=100&limit=50")
    assert [s["id"] for s in last["samples"]] == [f"q{i:03d}" for i in range(100, 120)]
    sample = last["samples"][0]
    assert sample["texts"]["retrieved_context_ids"] == ["d2", "d3", "d4"]
    assert set(last["rows"][sample["id"]]) == set(METRICS)


def test_sort_by_a_metric_lowest_first_missing_scores_last(
    url: str, runs: tuple[Path, Path]
) -> None:
    scores = {r["sample_id"]: r["score"] for r in rows_of(runs[0]) if r["metric"] == PRECISION}
    ids: list[str] = []
    for offset in range(0, N, 50):
        page = get(url + f"api/samples?sort=asc&metric={PRECISION}&offset={offset}&limit=50")
        ids += [s["id"] for s in page["samples"]]
    expected = sorted(scores, key=lambda s: (scores[s] is None, scores[s] or 0.0))
    assert ids == expected  # stable: ties in input order
    high = get(url + f"api/samples?sort=desc&metric={PRECISION}&limit=5")
    assert [scores[s["id"]] for s in high["samples"]] == sorted(
        (v for v in scores.values() if v is not None), reverse=True
    )[:5]


def test_filters_by_metric_status_and_score(url: str, runs: tuple[Path, Path]) -> None:
    rows = rows_of(runs[0])
    undefined = get(url + f"api/samples?metric={RECALL}&status=undefined")
    expected = [
        r["sample_id"] for r in rows if r["metric"] == RECALL and r["status"] == "undefined"
    ]
    assert [s["id"] for s in undefined["samples"]] == expected
    assert undefined["total"] == len(expected)
    ranged = get(url + f"api/samples?metric={PRECISION}&min=0.3&max=0.5&limit=500")
    expected = [r["sample_id"] for r in rows if r["metric"] == PRECISION
                and r["score"] is not None and 0.3 <= r["score"] <= 0.5]  # fmt: skip
    assert [s["id"] for s in ranged["samples"]] == expected
    assert expected
    any_metric = get(url + "api/samples?status=undefined&limit=500")
    expected = list(dict.fromkeys(r["sample_id"] for r in rows if r["status"] == "undefined"))
    assert [s["id"] for s in any_metric["samples"]] == expected


def test_search_by_words_and_by_id(url: str) -> None:
    assert [s["id"] for s in get(url + "api/samples?q=zebra-crossing")["samples"]] == ["q007"]
    found = get(url + "api/samples?q=QUESTION%20number%2011")
    assert [s["id"] for s in found["samples"]] == ["11", *(f"q{i}" for i in range(110, 120))]
    assert get(url + "api/samples?q=q042")["total"] == 1
    topic = get(url + f"api/samples?q=topic3&sort=asc&metric={RECALL}&limit=500")
    assert topic["total"] == N // 5 == len(topic["samples"])


def test_one_sample_by_its_id(url: str) -> None:
    page = get(url + "api/samples?id=q012")
    assert [s["id"] for s in page["samples"]] == ["q012"]
    assert page["total"] == 1
    sample = get(url + "api/sample?id=q007")
    assert sample["texts"]["user_input"] == "a zebra-crossing " + HOSTILE
    assert set(sample["rows"]) == set(METRICS)
    assert sample["rows"][PRECISION]["details"]["relevant"] == ["d0"]
    assert get(url + "api/samples?id=nope")["total"] == 0


def test_errors_are_json_with_their_status(url: str) -> None:
    assert status_of(url + "api/sample?id=nope") == 404
    assert status_of(url + "api/sample") == 400
    assert status_of(url + "api/nothing") == 404
    assert status_of(url + "api/samples?sort=sideways") == 400
    assert status_of(url + "api/samples?limit=100000") == 400
    assert status_of(url + "api/samples?min=abc") == 400
    assert status_of(url + "api/samples?sort=diff-asc") == 400  # one run: no difference
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        assert status_of(url + "api/samples", method=method) == 405
    assert status_of(url + "api/summary", headers={"Host": "evil.example:80"}) == 403


def test_the_server_only_reads(url: str, runs: tuple[Path, Path]) -> None:
    index = runs[0] / "view-index.sqlite"
    before = (index.stat().st_mtime_ns, index.stat().st_size)
    get(url + "api/samples?q=topic1&sort=desc")
    assert (index.stat().st_mtime_ns, index.stat().st_size) == before
    page = urllib.request.urlopen(url, timeout=60)
    assert "default-src 'none'" in page.headers["Content-Security-Policy"]
    html = page.read().decode("utf-8")
    assert "q007" not in html
    assert "http://" not in html
    assert "https://" not in html
    head = urllib.request.urlopen(urllib.request.Request(url + "api/summary", method="HEAD"))
    assert head.status == 200
    assert head.read() == b""


def test_two_runs_side_by_side(pair_url: str, runs: tuple[Path, Path]) -> None:
    info = get(pair_url + "api/summary")
    assert info["pair"]
    assert info["metrics"] == [f"{PRECISION} [A]", f"{RECALL} [A]", f"{PRECISION} [B]",
                               f"{RECALL} [B]"]  # fmt: skip
    sample = get(pair_url + "api/sample?id=q003")
    assert set(sample["rows"]) == set(info["metrics"])
    a = {r["sample_id"]: r["score"] for r in rows_of(runs[0]) if r["metric"] == RECALL}
    b = {r["sample_id"]: r["score"] for r in rows_of(runs[1]) if r["metric"] == RECALL}
    page = get(pair_url + f"api/samples?sort=diff-asc&metric={RECALL}%20[B]&limit=500")
    ids = [s["id"] for s in page["samples"]]
    diffs = [b[i] - a[i] for i in ids if a[i] is not None and b[i] is not None]
    assert diffs == sorted(diffs)
    assert diffs[0] < 0  # the biggest drop first
    assert len(ids) == N
    worse = get(pair_url + f"api/samples?metric={RECALL}%20[B]&max=0&status=ok&limit=500")
    assert {s["id"] for s in worse["samples"]} == {i for i in b if b[i] == 0.0}


# --- the command line ---------------------------------------------------------------------


def test_bad_usage_exits_2_saying_what_to_do(
    runs: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for argv, says in (
        (["view", str(tmp_path / "nowhere")], "no such folder"),
        (["view", str(tmp_path)], "no results.jsonl"),
        (["view", str(runs[0]), "--data", str(tmp_path / "none.jsonl")], "--data"),
    ):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2
        assert says in capsys.readouterr().err
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(SystemExit) as exc:
            main(["view", str(runs[0]), "--port", str(taken.getsockname()[1])])
    assert exc.value.code == 2
    assert "in use" in capsys.readouterr().err


def test_the_command_prints_its_address_first_and_stops_on_ctrl_c(
    runs: tuple[Path, Path], tmp_path: Path
) -> None:
    moved = tmp_path / "run"
    shutil.copytree(runs[0], moved)
    summary = json.loads((moved / "summary.json").read_text(encoding="utf-8"))
    summary["data"] = "A.jsonl"  # as given on a command line elsewhere: not found from here
    (moved / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    process = subprocess.Popen(
        [sys.executable, "-m", "ctxeval", "view", str(moved)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # not an inherited SIG_IGN
    )  # fmt: skip
    try:
        assert process.stdout is not None
        address = process.stdout.readline().strip()
        assert address.startswith("http://127.0.0.1:")
        assert address.endswith("/")
        assert "Ctrl-C" in process.stdout.readline() + process.stdout.readline()
        info = get(address + "api/summary")
        assert info["runs"][0]["data"] is None
        assert info["texts_missing"] == N
        sample = get(address + "api/sample?id=q001")
        assert sample["texts"] is None
        assert sample["rows"][RECALL]["status"] == "ok"
    finally:
        process.send_signal(signal.SIGINT)
        try:
            _, err = process.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            process.kill()  # never a server left behind by a failed test
            process.communicate()
            raise
    assert process.returncode in (0, 130)
    assert "Traceback" not in err
    assert "was not found" in err
    assert "--data" in err


# --- the page in a browser ----------------------------------------------------------------


def shown(address: str) -> Shown:
    if BROWSER is None:
        if os.environ.get("CTXEVAL_REQUIRE_BROWSER") == "1":
            raise RuntimeError("CTXEVAL_REQUIRE_BROWSER=1 but no chromium")
        pytest.skip("no chromium (apt-get install -y chromium)")
    return dump_dom(address)


def test_the_page_shows_the_first_fifty_samples(url: str) -> None:
    page = shown(url)
    assert page.title == "ctxeval view: A"
    assert page.count == f"{N} of {N} samples · page 1 of 3"
    assert page.ids[:3] == ["q000", "q001", "q002"]
    assert len(page.ids) == 50
    assert "id_based_context_recall" in page.text  # the summary table and the chips


def test_a_deep_link_opens_that_sample_with_its_evidence(url: str) -> None:
    page = shown(url + "#id=q007")
    assert page.ids == ["q007"]
    assert page.opened == ["q007"]
    assert page.count == f"1 of {N} samples · page 1 of 1 · sample q007 only"
    assert HOSTILE in page.text  # shown as text: no script of the data ran
    assert page.title == "ctxeval view: A"
    assert f"{PRECISION}: ✓ relevant" in page.text  # the evidence beside its chunk id
