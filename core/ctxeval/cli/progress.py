"""Running an evaluation from the command line, with a live view of its progress."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ctxeval._errors import BudgetExceededError, MissingExtraError, UnusableLLMError
from ctxeval._run.settings import RunSettings
from ctxeval.cli.render import EXIT_INTERRUPTED, EXIT_USAGE, console, fail

__all__ = ["ProgressView", "run_with_progress"]


class ProgressView:
    """A live bar on a terminal, plain lines every few seconds elsewhere; silent with --quiet."""

    def __init__(self, *, quiet: bool, total: int | None) -> None:
        self.quiet = quiet
        self.total = total
        self.console = console(stderr=True)
        self.live = self.console.is_terminal and not quiet
        self._last_line = 0.0
        self._progress: Any = None
        self._task: Any = None

    def __enter__(self) -> ProgressView:
        if self.live:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeRemainingColumn,
            )

            self._progress = Progress(
                TextColumn("[bold]scoring"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[rate]}"),
                TimeRemainingColumn(),
                TextColumn("{task.fields[extra]}"),
                console=self.console,
                transient=False,
            )
            self._progress.start()
            self._task = self._progress.add_task("scoring", total=self.total, rate="", extra="")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()

    def __call__(self, p: Any) -> None:
        if self.quiet:
            return
        extra = f"errors {p.errors}"
        if p.usage.requests or p.usage.cache_hits:
            cost = "cost unknown" if p.usage.cost_usd is None else f"${p.usage.cost_usd:.4f}"
            tokens = p.usage.prompt_tokens + p.usage.completion_tokens
            extra += f" · {p.usage.requests} requests · {tokens} tokens · {cost}"
        if self._progress is not None:
            self._progress.update(
                self._task, completed=p.done, rate=f"{p.rate:.0f} rows/s", extra=extra
            )
            return
        now = time.monotonic()
        if p.finished or now - self._last_line >= 5:
            self._last_line = now
            known = p.total if p.total is not None else self.total
            total = f"/{known}" if known is not None else ""
            left = None if known is None or not p.rate else max(0.0, (known - p.done) / p.rate)
            eta = "" if left is None or p.finished else f", eta {left:.0f}s"
            self.console.print(
                f"scored {p.done}{total} rows ({p.rate:.0f}/s{eta}), {extra}", highlight=False
            )


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
        except (UnusableLLMError, MissingExtraError) as exc:
            saved = _journal_rows(journal) if journal else 0
            where = (
                f"; {_saved(saved)} in {journal}: fix it and run the same command with "
                "--resume to finish"
                if journal
                else ""
            )
            fail(f"the run stopped: {exc}{where}", EXIT_USAGE)
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
