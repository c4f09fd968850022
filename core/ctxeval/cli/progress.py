"""Running an evaluation from the command line, with a view of its progress.

On a terminal, one live line that fits the terminal's width: the rows done of the total, the
rate and the time left first, each labelled, then errors, requests, tokens and cost as far as
they fit (a piece is dropped whole, lowest priority first, never cut). Elsewhere (a CI log, a
pipe) the same information as a plain line now and then, and a last line when the run ends.
The line is built by pure functions (:func:`progress_line`, :class:`RateWindow`), tested at
60, 80 and 120 columns.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs

from ctxeval._errors import BudgetExceededError, MissingExtraError, UnusableLLMError
from ctxeval._results.results import Usage
from ctxeval._run.progress import Progress
from ctxeval._run.settings import RunSettings
from ctxeval._run.watchdog import EventLoopBlockedError
from ctxeval.cli.render import EXIT_ERRORS, EXIT_INTERRUPTED, EXIT_USAGE, console, fail

__all__ = [
    "PlainSchedule",
    "ProgressView",
    "RateWindow",
    "progress_line",
    "progress_pieces",
    "run_with_progress",
]

SEPARATOR = " · "
ESTIMATING = "estimating time left…"
BAR_MIN, BAR_MAX = 10, 40
"""Width of the bar on a terminal: shown only when this much room is left over."""


class RateWindow:
    """The rate of a run for its ETA: rows per second over the latter half of the run so far,
    at most the last ``window`` seconds, and none until the rate is steady.

    A run's rows do not come evenly at its start: the deterministic rows of the first samples,
    answers from the cache and rows resumed from a journal come in a burst, while the first LLM
    requests are still being answered. So no rate is told before ``min_seconds``, nor before
    ``min_rows`` rows came within the window with as many per second (within a factor of
    ``tolerance``) in its first half as in its second; once steady, the rate is always told.
    Taking the latter half of the run leaves the start's burst out as the run goes on.

    Give it the rows computed by this run (resumed rows left out). Times are seconds since the
    run started (``Progress.elapsed``), given by the caller: nothing here reads a clock, so the
    rate is a pure function of what was observed.
    """

    def __init__(
        self,
        *,
        window: float = 30.0,
        min_seconds: float = 2.0,
        min_rows: int = 5,
        tolerance: float = 2.0,
    ) -> None:
        self.window = window
        self.min_seconds = min_seconds
        self.min_rows = min_rows
        self.tolerance = tolerance
        self.steady = False
        self._seen: deque[tuple[float, int]] = deque([(0.0, 0)])
        self._lock = threading.Lock()

    def observe(self, elapsed: float, computed: int) -> None:
        """``computed`` rows had been computed ``elapsed`` seconds into the run."""
        with self._lock:
            if elapsed < self._seen[-1][0]:
                return
            self._seen.append((elapsed, computed))
            # keep one observation at or before the oldest moment a window may start from
            start = elapsed - self._span(elapsed)
            while len(self._seen) > 1 and self._seen[1][0] <= start:
                self._seen.popleft()
            if not self.steady and elapsed >= self.min_seconds:
                span = self._span(elapsed)
                rows = computed - self._count_at(elapsed - span)
                recent = computed - self._count_at(elapsed - span / 2)
                older = rows - recent
                self.steady = (
                    rows >= self.min_rows
                    and min(older, recent) > 0
                    and max(older, recent) <= self.tolerance * min(older, recent)
                )

    def _span(self, now: float) -> float:
        return min(self.window, now / 2)

    def _count_at(self, moment: float) -> int:
        count = 0
        for at, computed in self._seen:
            if at > moment:
                break
            count = computed
        return count

    def rate(self, now: float) -> float | None:
        """Rows per second at ``now`` (seconds into the run), or None while it cannot be told."""
        with self._lock:
            if not self.steady or now <= 0:
                return None
            span = self._span(now)
            return max(0, self._seen[-1][1] - self._count_at(now - span)) / span

    @staticmethod
    def left(rate: float | None, done: int, total: int | None) -> float | None:
        """Seconds left at ``rate``, or None when there is no rate or no total."""
        if total is None or rate is None:
            return None
        if done >= total:
            return 0.0
        return (total - done) / rate if rate > 0 else None


@attrs.define
class PlainSchedule:
    """When to print a plain progress line (outside a terminal): never twice within ``min_gap``
    seconds; then the first line, each further tenth of the rows, or ``max_gap`` seconds since
    the last line. A run shorter than ``min_gap`` prints only its last line."""

    total: int | None
    min_gap: float = 5.0
    max_gap: float = 30.0
    steps: int = 10
    _last: float = 0.0
    _step: int = 0
    _printed: bool = False

    def due(self, elapsed: float, done: int) -> bool:
        """Whether to print a line now (and, if so, counted as printed)."""
        gap = elapsed - self._last
        if gap < self.min_gap:
            return False
        step = self._step
        if self.total:
            step = min(self.steps, done * self.steps // self.total)
        if self._printed and step <= self._step and gap < self.max_gap:
            return False
        self._last, self._step, self._printed = elapsed, step, True
        return True


def clock(seconds: float) -> str:
    """``h:mm:ss``."""
    whole = max(0, round(seconds))
    return f"{whole // 3600}:{whole % 3600 // 60:02d}:{whole % 60:02d}"


def compact(n: int) -> str:
    """A count in at most 5 characters: 9999, 29.9k, 188k, 1.2M."""
    if n < 10_000:
        return str(n)
    value, unit = n / 1_000, "k"
    for bigger in ("M", "G"):
        if value >= 999.5:
            value, unit = value / 1_000, bigger
    return f"{value:.0f}{unit}" if value >= 99.95 else f"{value:.1f}{unit}"


def rate_text(rate: float) -> str:
    """``11 rows/s``, ``2.5 rows/s``, ``12 rows/min``."""
    if rate >= 9.95:
        return f"{rate:.0f} rows/s"
    if rate >= 0.995:
        return f"{rate:.1f} rows/s"
    per_minute = rate * 60
    return f"{per_minute:.0f} rows/min" if per_minute >= 9.95 else f"{per_minute:.1f} rows/min"


def _plural(n: int, word: str) -> str:
    return f"{compact(n)} {word}{'' if n == 1 else 's'}"


@attrs.frozen
class _Piece:
    text: str
    priority: int  # 0 is kept longest
    style: str = ""
    glue: str = SEPARATOR  # what joins it to the piece before


def _pieces(p: Progress, total: int | None, rate: float | None, left: float | None) -> list[_Piece]:
    """Every piece of the line, in display order."""
    usage: Usage = p.usage
    unit = "row" if (total if total is not None else p.done) == 1 else "rows"  # not "1 rows"
    count = f"{p.done}/{total} {unit}" if total is not None else f"{p.done} {unit}"
    errors = _Piece(_plural(p.errors, "error"), 3, "bold red" if p.errors else "")
    extra = [errors]
    if p.resumed:
        extra.append(_Piece(f"{compact(p.resumed)} resumed", 4))
    if usage.requests or usage.cache_hits:
        tokens = usage.prompt_tokens + usage.completion_tokens
        cost = "cost unknown" if usage.cost_usd is None else f"cost ${usage.cost_usd:.4f}"
        extra += [
            _Piece(_plural(usage.requests, "request"), 5),
            _Piece(f"{compact(tokens)} tokens", 6),
        ]
        extra.append(_Piece(cost, 7))
        if usage.cache_hits:
            extra.append(_Piece(f"{compact(usage.cache_hits)} cached", 11))
    computed = p.done - p.resumed
    if p.finished:
        average = computed / p.elapsed if p.elapsed > 0 else None
        head = [_Piece(f"scored {count} in {clock(p.elapsed)}", 0, "bold", glue="")]
        if average is not None and computed:
            head.append(_Piece(rate_text(average), 2))
        return head + extra
    head = [_Piece(count, 0, "bold", glue="")]
    if total:
        head.append(_Piece(f"({min(100, 100 * p.done // total)}%)", 10, glue=" "))
    if rate is not None:
        head.append(_Piece(rate_text(rate), 2))
    if total is not None:
        head.append(_Piece(ESTIMATING if left is None else f"{clock(left)} left", 1))
    return [*head, *extra, _Piece(f"{clock(p.elapsed)} elapsed", 9)]


def progress_pieces(
    p: Progress,
    width: int | None,
    *,
    rate: float | None = None,
    left: float | None = None,
    total: int | None = None,
    bar: bool = False,
) -> list[tuple[str, str]]:
    """The line of :func:`progress_line` as (text, rich style) parts, joined by nothing."""
    known = p.total if p.total is not None else total
    pieces = _pieces(p, known, rate, left)
    if width is None:
        kept = pieces
    else:
        candidates = list(pieces)
        if bar and known and not p.finished:
            candidates.append(_BAR)
        # the pieces that fit, taken by priority until one does not: dropped whole, never cut
        kept, room = [], width
        for piece in sorted(candidates, key=lambda q: q.priority):
            cost = BAR_MIN + 1 if piece is _BAR else len(piece.glue) + len(piece.text)
            if cost > room:
                break
            kept.append(piece)
            room -= cost
        if not kept:  # narrower than the count itself: the one case a piece is cut
            return [(pieces[0].text[:width], pieces[0].style)]
        chosen = {id(q) for q in kept}
        kept = [q for q in [_BAR, *pieces] if id(q) in chosen]
    out = [((piece.glue if i else "") + piece.text, piece.style) for i, piece in enumerate(kept)]
    if kept[0] is _BAR and width is not None and known:
        out[:1] = [*_bar(p.done, known, min(BAR_MAX, BAR_MIN + room)), (" ", "")]
    return out


_BAR = _Piece("", 8, glue="")
"""Where the bar goes (first) and when it is dropped (after cost, before the time elapsed)."""


_BAR_CELLS = "━╸─"


def _bar(done: int, total: int, size: int) -> list[tuple[str, str]]:
    """A bar of ``size`` cells: ``━━━━╸─────`` (readable without colour too)."""
    halves = min(2 * size, 2 * size * done // total)
    full, half = divmod(halves, 2)
    rest = size - full - half
    return [("━" * full + "╸" * half, "magenta"), ("─" * rest, "grey37")]


def progress_line(
    p: Progress,
    width: int | None,
    *,
    rate: float | None = None,
    left: float | None = None,
    total: int | None = None,
    bar: bool = False,
) -> str:
    """The progress line of ``p``, at most ``width`` characters (None: all of it).

    ``rate`` (rows per second) and ``left`` (seconds) come from a :class:`RateWindow`; without
    them the line says it is estimating the time left. The rows done of the total, the time
    left and the rate come first; errors, resumed rows, requests, tokens, cost, a bar (with
    ``bar``), the time elapsed, the percentage and cache hits follow as far as they fit, each
    piece whole. The last event (``p.finished``) gives ``scored D/T rows in h:mm:ss · …``.
    ``total`` stands for ``p.total`` when the run does not know it.
    """
    pieces = progress_pieces(p, width, rate=rate, left=left, total=total, bar=bar)
    return "".join(text for text, _ in pieces)


class _LiveLine:
    """The live line, rendered afresh at each refresh of the terminal (the time left and the
    time elapsed move between events) at the console's width of that moment."""

    def __init__(self, view: ProgressView) -> None:
        self.view = view

    def __rich_console__(self, console: Any, options: Any) -> Iterator[Any]:
        from rich.text import Text

        line = Text(no_wrap=True, overflow="crop", end="")
        for text, style in self.view.pieces(options.max_width):
            line.append(text, style=style or None)
        yield line


class ProgressView:
    """One live line on a terminal (fitted to its width), plain lines now and then elsewhere
    (:class:`PlainSchedule`) and a last line at the end; silent with --quiet."""

    def __init__(self, *, quiet: bool, total: int | None) -> None:
        self.quiet = quiet
        self.total = total
        self.console: Any = None if quiet else console(stderr=True)  # (quiet: rich unloaded)
        self.live = self.console is not None and _interactive(self.console)
        self.rates = RateWindow()
        self.schedule = PlainSchedule(total)
        self._origin = time.monotonic()  # the run's start, on this process's monotonic clock
        self._latest: Progress | None = None
        self._bar = True
        self._live: Any = None

    def __enter__(self) -> ProgressView:
        if self.live:
            from rich.live import Live

            self._live = Live(
                _LiveLine(self),
                console=self.console,
                refresh_per_second=4,
                transient=False,
            )
            self._live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.stop()

    def pieces(self, width: int) -> list[tuple[str, str]]:
        """The line now, at ``width``."""
        p = self._latest
        now = time.monotonic() - self._origin
        if p is None:
            p = Progress(0, self.total, 0, 0, 0, Usage(), now)
        elif not p.finished:
            p = attrs.evolve(p, elapsed=max(p.elapsed, now))
        rate = self.rates.rate(p.elapsed)
        known = p.total if p.total is not None else self.total
        left = RateWindow.left(rate, p.done, known)
        parts = progress_pieces(p, width, rate=rate, left=left, total=self.total, bar=self._bar)
        drawn = "".join(text for text, _ in parts)
        if not p.finished and not drawn.startswith(tuple(_BAR_CELLS)):
            self._bar = False  # once dropped for the line's text, no bar flashing back and forth
        return parts

    def __call__(self, p: Progress) -> None:
        if self.quiet:
            return
        if self._latest is None:
            self._origin = time.monotonic() - p.elapsed
        self.rates.observe(p.elapsed, p.done - p.resumed)
        self._latest = p
        if self._live is not None:
            return  # drawn at the next refresh
        known = p.total if p.total is not None else self.total
        self.schedule.total = known
        if p.finished or self.schedule.due(p.elapsed, p.done):
            rate = self.rates.rate(p.elapsed)
            left = RateWindow.left(rate, p.done, known)
            line = progress_line(p, None, rate=rate, left=left, total=self.total)
            prefix = "" if p.finished else "scoring "
            self.console.print(prefix + line, highlight=False, markup=False, soft_wrap=True)


def _interactive(out: Any) -> bool:
    """Whether a live line can be drawn: a terminal that is not dumb, really a terminal (CI
    services set FORCE_COLOR without one), or TTY_INTERACTIVE=1."""
    if os.environ.get("TTY_INTERACTIVE") == "1":
        return True
    isatty = getattr(out.file, "isatty", None)
    try:
        return bool(out.is_interactive and isatty is not None and isatty())
    except ValueError:  # a closed stream
        return False


def run_with_progress(
    samples: Any,
    metrics: list[Any],
    *,
    llm: Any,
    settings: RunSettings,
    quiet: bool,
    total: int | None,
    consume: Callable[[Sequence[Any]], None],
    runner: Any = None,
) -> BudgetExceededError | None:
    """Run ``metrics`` over ``samples`` with a progress view, handing each part of the rows to
    ``consume`` as it comes, in input order (none is kept here); the cost limit that stopped
    the run early, if one did. Ctrl-C exits 130 with how to resume; an LLM no request can
    succeed with (a refused or missing key, an unknown model, an unreachable endpoint) exits 2
    with what to fix."""
    from ctxeval._run.api import stream
    from ctxeval._run.bridge import run_to_completion
    from ctxeval._run.processes import WorkerLostError

    stopped: list[BudgetExceededError] = []
    journal = Path(settings.journal) if settings.journal is not None else None
    with ProgressView(quiet=quiet, total=total) as view:

        async def main() -> None:
            async with stream(
                samples, metrics, llm=llm, settings=settings, on_progress=view, runner=runner
            ) as r:
                try:
                    async for part in r.parts():  # as the run holds them (columns, not rows)
                        consume(part)
                except BudgetExceededError as exc:
                    stopped.append(exc)

        try:
            run_to_completion(main)
        except (UnusableLLMError, MissingExtraError, EventLoopBlockedError) as exc:
            saved = _journal_rows(journal) if journal else 0
            where = (
                f"; {_saved(saved)} in {journal}: fix it and run the same command with "
                "--resume to finish"
                if journal
                else ""
            )
            fail(f"the run stopped: {exc}{where}", EXIT_USAGE)
        except WorkerLostError as exc:  # a worker killed: nothing to fix but to go on
            saved = _journal_rows(journal) if journal else 0
            where = f" ({_saved(saved)} in {journal})" if journal else ""
            fail(f"the run stopped{where}: {exc}", EXIT_ERRORS)
        except KeyboardInterrupt:
            saved = _journal_rows(journal) if journal else 0
            where = f" ({_saved(saved)} in {journal})" if journal else ""
            hint = (
                " run the same command with --resume to finish it"
                if journal
                else " use --out DIR to be able to resume"
            )
            fail(f"interrupted{where};{hint}", EXIT_INTERRUPTED)
    return stopped[0] if stopped else None


def _saved(rows: int) -> str:
    """How many LLM rows the journal holds (deterministic rows are scored again, for free)."""
    return f"{rows} judged row{'' if rows == 1 else 's'} saved"


def _journal_rows(journal: Path) -> int:
    try:
        with journal.open(encoding="utf-8", errors="replace") as handle:
            return max(0, sum(1 for _ in handle) - 1)
    except OSError:
        return 0
