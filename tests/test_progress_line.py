"""The command line's progress line: what it shows at 60, 80 and 120 columns (the rows done of
the total, the rate and the time left first, each labelled; the rest as far as it fits, whole),
when it dares an ETA, how often it prints outside a terminal, and a real run in an 80-column
pseudo-terminal and through a pipe."""

from __future__ import annotations

import io
import json
import os
import pty
import re
import struct
import subprocess
import sys
import termios
import threading
from fcntl import ioctl
from pathlib import Path

import pytest
from rich.console import Console

from ctxeval._results.results import Usage
from ctxeval._run.progress import Progress
from ctxeval.cli.progress import (
    ESTIMATING,
    PlainSchedule,
    ProgressView,
    RateWindow,
    compact,
    progress_line,
    rate_text,
)
from fakes.openai_server import FakeOpenAI
from llm_judge import Judge

WIDTHS = [60, 80, 120]
LLM_USAGE = Usage(requests=123, prompt_tokens=25_000, completion_tokens=4_874, cost_usd=None)
# the pieces of a full line, most important first
ORDER = ["rows", "left", "rows/s", "error", "request", "tokens", "cost", "elapsed"]


def progress(
    done: int = 206,
    total: int | None = 800,
    *,
    errors: int = 0,
    resumed: int = 0,
    usage: Usage = LLM_USAGE,
    elapsed: float = 18.0,
    finished: bool = False,
) -> Progress:
    return Progress(done, total, errors, 0, resumed, usage, elapsed, finished=finished)


def pieces(line: str) -> list[str]:
    return [piece.strip() for piece in line.split(" · ")]


STATES = {
    "llm, mid-run": (progress(), 11.4, 52.3),
    "llm, estimating": (progress(elapsed=1.2, done=3), None, None),
    "errors and cost": (
        progress(errors=17, usage=Usage(requests=9_876, prompt_tokens=3_456_789, cost_usd=12.5)),
        3.3,
        3725.0,
    ),
    "a million rows": (progress(412_345, 1_000_000, usage=Usage()), 812.0, 722.1),
    "resumed": (progress(650, 800, resumed=600), 9.5, 15.8),
    "slow": (progress(7, 40), 0.05, 660.0),
    "deterministic": (progress(usage=Usage()), 5123.0, 0.1),
}


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("state", STATES)
def test_the_line_fits_and_starts_with_done_total_rate_and_time_left(
    width: int, state: str
) -> None:
    p, rate, left = STATES[state]
    line = progress_line(p, width, rate=rate, left=left, bar=True)
    assert len(line) <= width, line
    full = re.sub(r" \(\d+%\)", "", progress_line(p, None, rate=rate, left=left))
    assert f"{p.done}/{p.total} rows" in line
    if rate is None:
        assert ESTIMATING in line
        assert " left" not in line.replace(ESTIMATING, "")
        assert "rows/s" not in line  # no rate from too few rows or seconds
    else:
        assert re.search(r"\d+:\d\d:\d\d left", line), line
        assert rate_text(rate) in line
        # labelled, in this order: done/total, rate, time left
        assert line.index("rows ") < line.index(rate_text(rate)) < line.index(" left")
    # never cut: every piece shown is a whole piece of the full line
    shown = pieces(re.sub(r"^[━╸─]+ | \(\d+%\)", "", line))
    assert all(piece in pieces(full) for piece in shown), (line, full)


@pytest.mark.parametrize("width", WIDTHS)
def test_pieces_are_dropped_lowest_priority_first(width: int) -> None:
    line = progress_line(progress(), width, rate=11.4, left=52.3, bar=True)
    kept = [any(word in piece for piece in pieces(line)) for word in ORDER]
    assert kept == sorted(kept, reverse=True), line  # what is kept is a head of the order
    assert kept[:4] == [True] * 4  # errors fit even at 60 columns


def test_what_each_width_shows() -> None:
    p = progress()
    assert progress_line(p, 60, rate=11.4, left=52.3) == (
        "206/800 rows · 11 rows/s · 0:00:52 left · 0 errors"
    )
    assert progress_line(p, 80, rate=11.4, left=52.3) == (
        "206/800 rows · 11 rows/s · 0:00:52 left · 0 errors · 123 requests · 29.9k tokens"
    )
    wide = progress_line(p, 120, rate=11.4, left=52.3, bar=True)
    assert wide.endswith(
        "206/800 rows · 11 rows/s · 0:00:52 left · 0 errors · 123 requests · 29.9k tokens"
        " · cost unknown"
    )
    assert re.match(r"^━{5,}[╸]?─+ 206/800", wide)  # a bar where the room is left over
    assert progress_line(p, None, rate=11.4, left=52.3) == (
        "206/800 rows (25%) · 11 rows/s · 0:00:52 left · 0 errors · 123 requests"
        " · 29.9k tokens · cost unknown · 0:00:18 elapsed"
    )


def test_the_last_line_says_what_was_scored_in_how_long() -> None:
    p = progress(800, 800, errors=2, elapsed=72.4, finished=True)
    line = progress_line(p, 80, rate=11.0, left=0.0)
    assert line.startswith("scored 800/800 rows in 0:01:12 · 11 rows/s · 2 errors")
    assert "left" not in line
    assert len(line) <= 80
    assert progress_line(p, None).endswith("123 requests · 29.9k tokens · cost unknown")


def test_unknown_total_and_a_very_narrow_terminal() -> None:
    line = progress_line(progress(total=None), 80, rate=2.0, left=None, bar=True)
    assert line.startswith("206 rows · 2.0 rows/s · 0 errors")
    assert "left" not in line
    assert "━" not in line  # no bar without a total
    assert progress_line(progress(), 10) == "206/800 ro"  # narrower than the count: cut


def test_numbers_stay_short() -> None:
    assert [compact(n) for n in (9_999, 29_874, 188_000, 999_499, 999_999, 1_234_567)] == [
        "9999",
        "29.9k",
        "188k",
        "999k",
        "1.0M",
        "1.2M",
    ]
    assert [rate_text(r) for r in (11.4, 2.53, 0.2, 0.01)] == [
        "11 rows/s",
        "2.5 rows/s",
        "12 rows/min",
        "0.6 rows/min",
    ]


def rates(window: RateWindow, counts: dict[float, int]) -> dict[float, float | None]:
    """The rate told right after each observation."""
    told = {}
    for moment, count in counts.items():
        window.observe(moment, count)
        told[moment] = window.rate(moment)
    return told


def test_no_rate_from_the_burst_at_the_start() -> None:
    """The deterministic rows of every sample come at once (1.2 s in: the first LLM answer was
    slow), then 10 rows/s: no rate until the burst is out of the window, then 10 rows/s."""
    counts = {1.2: 200} | {tenth / 10: 200 + tenth - 12 for tenth in range(13, 100)}
    told = rates(RateWindow(), counts)
    first = min(moment for moment, rate in told.items() if rate is not None)
    assert 2.4 <= first <= 2.5
    assert all(told[moment] == pytest.approx(10, rel=0.1) for moment in told if moment >= first)
    assert RateWindow.left(told[9.9], 287, 800) == pytest.approx(51.3, rel=0.05)


def test_no_rate_from_too_few_rows_or_seconds() -> None:
    assert rates(RateWindow(), {0.5: 20, 1.0: 40, 1.9: 76}) == {0.5: None, 1.0: None, 1.9: None}
    assert set(rates(RateWindow(), {2.0: 2, 3.0: 3, 4.0: 4}).values()) == {None}  # 2 rows
    uneven = {2.0: 1, 3.0: 2, 4.0: 30}  # 1 row, then 28: not steady yet
    assert set(rates(RateWindow(), uneven).values()) == {None}


def test_once_steady_the_rate_follows_the_run() -> None:
    window = RateWindow()
    told = rates(window, {tenth / 10: tenth for tenth in range(1, 401)})  # 10 rows/s
    assert told[2.0] == pytest.approx(10)
    assert window.rate(40.0) == pytest.approx(10)
    assert window.rate(50.0) == pytest.approx(6)  # nothing for the last 10 s of 25
    assert window.rate(80.0) == 0.0  # a stall: no time left can be told
    assert RateWindow.left(0.0, 10, 800) is None
    assert RateWindow.left(None, 10, 800) is None
    assert RateWindow.left(3.0, 800, 800) == 0.0
    assert RateWindow.left(3.0, 10, None) is None


def test_plain_lines_come_every_tenth_at_most_every_5_s() -> None:
    short = PlainSchedule(800)
    assert not any(short.due(t / 10, t * 20) for t in range(1, 40))  # a 4-s run: none
    run = PlainSchedule(1000)  # 10 rows/s for 100 s
    printed = [t for t in range(1, 101) if run.due(float(t), 10 * t)]
    assert printed == [5, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100]
    slow = PlainSchedule(100_000)  # under a tenth in the whole run: every 30 s
    assert [t for t in range(1, 100) if slow.due(float(t), t)] == [5, 35, 65, 95]
    unknown = PlainSchedule(None)
    assert [t for t in range(1, 70) if unknown.due(float(t), t)] == [5, 35, 65]


def test_a_quiet_view_makes_no_console() -> None:
    """``--quiet`` prints nothing: no rich console is made (nor rich imported, #58)."""
    view = ProgressView(quiet=True, total=10)
    assert view.console is None
    assert not view.live
    with view:
        view(Progress(10, 10, 0, 0, 0, Usage(), 1.0, finished=True))


def plain_view(total: int | None) -> tuple[ProgressView, io.StringIO]:
    view = ProgressView(quiet=False, total=total)
    out = io.StringIO()
    view.console = Console(file=out, width=80, highlight=False)
    view.live = False
    return view, out


def test_outside_a_terminal_a_short_run_prints_its_last_line_only() -> None:
    view, out = plain_view(800)
    with view:
        for tenth in range(1, 21):  # 2 s: too short for a line, and for an ETA
            view(progress(40 * tenth, None, elapsed=tenth / 10))
        view(progress(800, None, elapsed=2.05, finished=True))
    lines = out.getvalue().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("scored 800/800 rows in 0:00:02 · 390 rows/s · 0 errors")
    assert lines[0].endswith("cost unknown")  # one line, never wrapped at 80 columns


def test_outside_a_terminal_a_longer_run_prints_labelled_lines() -> None:
    view, out = plain_view(None)
    with view:
        for tenth in range(1, 121):  # 11 rows/s, for 12 s
            view(progress(round(1.1 * tenth), 800, elapsed=tenth / 10, usage=Usage()))
        view(progress(800, 800, elapsed=72.4, usage=Usage(), finished=True))
    lines = out.getvalue().splitlines()
    assert lines == [
        "scoring 55/800 rows (6%) · 11 rows/s · 0:01:09 left · 0 errors · 0:00:05 elapsed",
        "scoring 110/800 rows (13%) · 11 rows/s · 0:01:03 left · 0 errors · 0:00:10 elapsed",
        "scored 800/800 rows in 0:01:12 · 11 rows/s · 0 errors",
    ]


def test_quiet_prints_nothing() -> None:
    view, out = plain_view(800)
    view.quiet = True
    with view:
        view(progress(800, 800, elapsed=9.0, finished=True))
    assert out.getvalue() == ""


# --- end to end: ctxeval evaluate against the fake OpenAI server --------------------------

ROWS = [
    {
        "id": f"q{i}",
        "user_input": f"question {i}",
        "reference": f"reference {i}",
        "retrieved_contexts": ["useful", "useless"],
        "retrieved_context_ids": ["x", str(i)],
        "reference_context_ids": [str(i)],
    }
    for i in range(40)
]
COLOUR = re.compile(r"\x1b\[[0-9;]*m")
CURSOR = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def evaluate_args(tmp_path: Path, url: str) -> list[str]:
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    return [
        sys.executable, "-m", "ctxeval", "evaluate", str(data),
        "-m", "context_precision", "-m", "id_mrr",
        "--model", "openai/x", "--api-base", url, "--no-cache", "--max-concurrency", "4",
    ]  # fmt: skip


def environment(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE")}
    return {**env, "OPENAI_API_KEY": "sk-test", "COLUMNS": "80", "LINES": "24", **extra}


def test_a_run_in_an_80_column_terminal(tmp_path: Path) -> None:
    """Standard error on a pseudo-terminal of 80 columns: every line drawn fits, and shows the
    rows done of the total (the time left or that it is being estimated), then the last line."""
    with FakeOpenAI(Judge(verdicts={"useful": 1}), latency=0.02) as server:
        controller, terminal = pty.openpty()
        ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
        process = subprocess.Popen(
            evaluate_args(tmp_path, server.url),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=terminal,
            env=environment(TERM="xterm-256color"),
        )
        os.close(terminal)
        drawn = bytearray()

        def read() -> None:
            while True:
                try:
                    chunk = os.read(controller, 4096)
                except OSError:  # the other side closed
                    return
                if not chunk:
                    return
                drawn.extend(chunk)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        stdout, _ = process.communicate(timeout=120)
        reader.join(timeout=30)
        os.close(controller)
    text = drawn.decode("utf-8", errors="replace")
    assert process.returncode == 0, text
    assert "summary" in stdout.decode()
    assert "\x1b[" in text  # drawn as a live line, with the cursor moved back over it
    lines = [
        line
        for line in re.split(r"[\r\n]+", CURSOR.sub("\n", COLOUR.sub("", text)))
        if line.strip()
    ]
    assert lines, text
    assert all(len(line) <= 80 for line in lines), lines
    running, last = lines[:-1], lines[-1]
    assert last.startswith("scored 80/80 rows in "), lines
    assert all(re.search(r"\b\d+/80 rows\b", line) for line in running), lines
    assert all(" left" in line or ESTIMATING in line for line in running), lines


def test_a_run_through_a_pipe(tmp_path: Path) -> None:
    """Outside a terminal: plain lines only (no cursor movement), none cut at 80 columns, the
    last one whole."""
    with FakeOpenAI(Judge(verdicts={"useful": 1}), latency=0.02) as server:
        done = subprocess.run(
            evaluate_args(tmp_path, server.url),
            capture_output=True,
            text=True,
            env=environment(),
            timeout=120,
        )
    assert done.returncode == 0, done.stderr
    assert "\x1b[" not in done.stderr
    lines = done.stderr.splitlines()
    last = next(line for line in lines if line.startswith("scored "))
    assert re.match(r"scored 80/80 rows in \d:\d\d:\d\d · .* · 0 errors · \d+ requests", last)
    assert last.endswith("cost unknown")
    for line in lines:
        if line.startswith("scoring "):
            assert re.search(r"\d+/80 rows \(\d+%\)", line)
            assert " left" in line or ESTIMATING in line
