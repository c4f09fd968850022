"""How a run's summary is shown, one way for every place that shows it: the command line's
table (:func:`summary_table`, a rich table), ``print(evaluation)`` (:func:`plain_text` of it),
a notebook (:func:`summary_html`) and the LLM usage line under it (:func:`usage_line`).

Each metric's line has the same cells everywhere (:func:`summary_cells`): the mean and the
bounds of its 95% confidence interval to three decimals (a mean is never shown as
``0.30000000000000004``: the numbers kept are exact, what is shown is rounded), and the counts
of ``ok``, ``undefined`` and ``error`` rows. A metric's numbers are read from a
:class:`~ctxeval.MetricSummary` or from its entry in ``summary.json`` (a dict), whichever is
given.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from ctxeval._results.results import Usage

if TYPE_CHECKING:
    from rich.console import RenderableType
    from rich.table import Table

__all__ = [
    "COLUMNS",
    "number",
    "plain_text",
    "span",
    "summary_cells",
    "summary_html",
    "summary_table",
    "usage_line",
]

COLUMNS: Final = ("metric", "mean", "95% CI", "ok", "undef", "error")
"""The columns of the summary table, in order."""

_MIN_WIDTHS: Final = (5, 11, 3, 5, 5)
"""The narrowest the number columns are, so that they keep their width (a long metric name
wraps instead)."""

PLAIN_WIDTH: Final = 120
"""The width ``print(evaluation)`` lays the table out in (a narrower table stays narrow; a
metric name too long for it wraps)."""


def number(value: float | None, digits: int = 3) -> str:
    """``value`` to ``digits`` decimals; ``—`` when there is none (None, NaN)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return f"{value:.{digits}f}"


def span(interval: Sequence[float] | None, digits: int = 3) -> str:
    """A confidence interval as ``low`` and ``high`` joined by an en dash (as the command line
    shows it); ``—`` when there is none."""
    if interval is None:
        return "—"
    low, high = interval
    return f"{number(low, digits)}\u2013{number(high, digits)}"


def _entry(summary: Any) -> Mapping[str, Any]:
    """A metric's numbers as ``summary.json`` holds them (a MetricSummary's ``to_dict()``)."""
    if isinstance(summary, Mapping):
        return summary
    as_dict: Mapping[str, Any] = summary.to_dict()
    return as_dict


def summary_cells(summary: Any) -> tuple[str, str, int, int, int]:
    """One metric's cells after its name: mean, 95% CI, ok, undefined, error (a
    :class:`~ctxeval.MetricSummary` or its ``summary.json`` entry)."""
    entry = _entry(summary)
    return (
        number(entry["mean"]),
        span(entry["ci95"]),
        int(entry["n_ok"]),
        int(entry["n_undefined"]),
        int(entry["n_error"]),
    )


def summary_table(metrics: Mapping[str, Any], *, title: str | None = "summary") -> Table:
    """The summary table of ``metrics`` (name -> :class:`~ctxeval.MetricSummary` or its
    ``summary.json`` entry) as a rich table: the command line's, ``Evaluation``'s in a rich
    console. Names are shown as they are (never read as markup); an error count is red."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    # no outer frame and one space between columns: the longest built-in metric name
    # (non_llm_context_precision_with_reference) and the numbers fit 80 columns unwrapped
    table = Table(
        title=title, box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True
    )
    longest = max((len(name) for name in metrics), default=len(COLUMNS[0]))
    table.add_column(COLUMNS[0], overflow="fold", min_width=min(longest, 44))
    for column, width in zip(COLUMNS[1:], _MIN_WIDTHS, strict=True):
        table.add_column(column, justify="right", no_wrap=True, min_width=width)
    for name, summary in metrics.items():
        mean, interval, ok, undefined, errors = summary_cells(summary)
        table.add_row(
            Text(name),
            mean,
            interval,
            str(ok),
            str(undefined),
            Text.assemble((str(errors), "red")) if errors else "0",  # (the digits only)
        )
    return table


def usage_line(usage: Usage | Mapping[str, Any]) -> str | None:
    """What the LLM calls of a run cost, in one line; None when it made none (and used no
    cache)."""
    if isinstance(usage, Mapping):
        usage = Usage.from_dict(usage)
    if not (usage.requests or usage.cache_hits):
        return None
    cost = "unknown" if usage.cost_usd is None else f"${usage.cost_usd:.4f}"
    return (
        f"LLM: {usage.requests} requests ({usage.retries} retries), "
        f"{usage.cache_hits} cache hits, "
        f"{usage.prompt_tokens + usage.completion_tokens} tokens, cost {cost}"
    )


def plain_text(*renderables: RenderableType | str, width: int = PLAIN_WIDTH) -> str:
    """``renderables`` laid out as a rich console would show them, as plain text (no colour,
    no control codes; not a notebook's HTML, even inside one), without trailing spaces."""
    import io

    from rich.console import Console

    console = Console(
        file=io.StringIO(),
        width=width,
        color_system=None,
        force_terminal=False,
        force_jupyter=False,
        force_interactive=False,
        highlight=False,
        emoji=False,
        markup=False,
        legacy_windows=False,
    )
    for renderable in renderables:
        console.print(renderable, soft_wrap=isinstance(renderable, str))
    text: str = console.file.getvalue()  # type: ignore[attr-defined]
    return "\n".join(line.rstrip() for line in text.splitlines())


_CELL: Final = "padding:3px 10px;text-align:right;font-variant-numeric:tabular-nums;"
_HEAD: Final = "border-bottom:1px solid rgba(127,127,127,.5);"
_LINE: Final = "border-top:1px solid rgba(127,127,127,.18);"
_WARNING: Final = (
    "padding:4px 10px;margin:2px 0;font-weight:700;color:#7a4b00;"
    "background:#fff3cd;border-left:4px solid #e0a100"
)
_BAR: Final = (
    "display:inline-block;width:56px;height:7px;margin-left:8px;vertical-align:middle;"
    "background:rgba(127,127,127,.22);border-radius:2px;overflow:hidden"
)


def _mean_bar(mean: float | None) -> str:
    if mean is None or not 0.0 <= mean <= 1.0:
        return ""
    return (
        f"<span style='{_BAR}'><span style='display:block;height:100%;"
        f"width:{mean * 100:.1f}%;background:#4c78a8'></span></span>"
    )


def summary_html(
    metrics: Mapping[str, Any],
    *,
    caption: str | None = None,
    notes: Iterable[str] = (),
    warning: str | None = None,
) -> str:
    """The summary table as a small self-contained HTML fragment (a notebook's view): inline
    styles only, every text escaped, the theme's colours and fonts kept. ``notes``: lines of
    plain text shown under the table (one that starts with a space, indented); ``warning``:
    a line shown above it, bold on an amber band (the scripted judge's NOT A REAL JUDGE)."""
    head = "".join(
        f"<th style='{_CELL}{_HEAD}text-align:{'left' if i == 0 else 'right'}'>"
        f"{html.escape(c)}</th>"
        for i, c in enumerate(COLUMNS)
    )
    rows = []
    for name, summary in metrics.items():
        mean, interval, ok, undefined, errors = summary_cells(summary)
        error_style = "color:#d62728;font-weight:600;" if errors else ""
        rows.append(
            f"<tr style='{_LINE}'>"
            f"<td style='{_CELL}text-align:left'><code>{html.escape(name)}</code></td>"
            f"<td style='{_CELL}white-space:nowrap'>{html.escape(mean)}"
            f"{_mean_bar(_entry(summary)['mean'])}</td>"
            f"<td style='{_CELL}white-space:nowrap'>{html.escape(interval)}</td>"
            f"<td style='{_CELL}'>{ok}</td><td style='{_CELL}'>{undefined}</td>"
            f"<td style='{_CELL}{error_style}'>{errors}</td>"
            "</tr>"
        )
    title = (
        f"<caption style='caption-side:top;text-align:left;padding:4px 10px;"
        f"font-weight:600'>{html.escape(caption)}</caption>"
        if caption
        else ""
    )
    below = "".join(
        f"<div style='padding:1px 10px 1px {28 if note[:1] == ' ' else 10}px;opacity:.8'>"
        f"{html.escape(note.strip())}</div>"
        for note in notes
    )
    above = f"<div role='alert' style='{_WARNING}'>{html.escape(warning)}</div>" if warning else ""
    return (
        f"<div class='ctxeval-summary'>{above}"
        f"<table style='border-collapse:collapse'>{title}<thead><tr>{head}</tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>{below}</div>"
    )
