"""A runner that breaks the sink's contract (the runner SPI is public, #56): the sink checks
what it is handed, per part, and once ``run`` returns, and raises a ``RunnerError`` naming the
runner, the part and the sample, where before ``evaluate()`` returned a short, doubled or
reordered result with no exception (or hung for ever in ``put``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import anyio
import pytest

import ctxeval
from ctxeval import MetricResult
from ctxeval.runners import RowSink, RunnerError, RunPlan, score_part

METRICS = ["id_based_context_precision", "id_ndcg_at_k"]
GUARD = 20
"""Seconds before a run that hangs fails its test (the old sink hung for ever in ``put``)."""


def samples(n: int = 12) -> list[dict[str, Any]]:
    return [
        {
            "id": f"q{i}",
            "retrieved_context_ids": [f"d{(i * 7 + k) % 13}" for k in range(4)],
            "reference_context_ids": [f"d{(i * 3 + k) % 11}" for k in range(2)],
        }
        for i in range(n)
    ]


async def scored_parts(plan: RunPlan, items: Iterable[Any], size: int) -> list[list[MetricResult]]:
    """The rows of ``items`` in parts of ``size`` samples, as a runner would hand them."""
    listed = list(items)
    parts = []
    for first in range(0, len(listed), size):
        scored = await score_part(plan, listed[first : first + size], first_index=first)
        parts.append(list(scored.rows))
    return parts


class Hostile:
    """A runner that hands the parts ``hand(parts, sink)`` chooses (parts of 2 samples)."""

    def __init__(self, name: str, hand: Callable[[list[list[MetricResult]], RowSink], Any]):
        self.name = name
        self._hand = hand

    async def run(self, plan: RunPlan, items: Iterable[Any], sink: RowSink) -> None:
        await self._hand(await scored_parts(plan, items, 2), sink)


def run_with(runner: Any, **options: Any) -> ctxeval.Evaluation:
    async def main() -> ctxeval.Evaluation:
        with anyio.fail_after(GUARD):
            return await ctxeval.aevaluate(samples(), METRICS, runner=runner, **options)

    return anyio.run(main)


async def never_part_0(parts: list[list[MetricResult]], sink: RowSink) -> None:
    for number in range(1, len(parts)):
        await sink.put(number, parts[number])


async def nothing(parts: list[list[MetricResult]], sink: RowSink) -> None:
    return None


async def half(parts: list[list[MetricResult]], sink: RowSink) -> None:
    for number in range(len(parts) // 2):
        await sink.put(number, parts[number])


async def a_row_dropped(parts: list[list[MetricResult]], sink: RowSink) -> None:
    for number, rows in enumerate(parts):
        await sink.put(number, rows[:-1] if number == 2 else rows)


async def a_row_added(parts: list[list[MetricResult]], sink: RowSink) -> None:
    for number, rows in enumerate(parts):
        await sink.put(number, [*rows, rows[0]] if number == 2 else rows)


async def a_metric_the_plan_lacks(parts: list[list[MetricResult]], sink: RowSink) -> None:
    for number, rows in enumerate(parts):
        if number == 1:
            rows = [rows[0], MetricResult.ok(0.5).labelled(rows[0].sample_id, "made_up"), *rows[2:]]
        await sink.put(number, rows)


async def samples_in_the_wrong_part(parts: list[list[MetricResult]], sink: RowSink) -> None:
    parts[1], parts[2] = parts[2], parts[1]
    for number, rows in enumerate(parts):
        await sink.put(number, rows)


async def part_minus_1(parts: list[list[MetricResult]], sink: RowSink) -> None:
    await sink.put(-1, parts[0])


async def backwards_past_the_window(parts: list[list[MetricResult]], sink: RowSink) -> None:
    for number in reversed(range(len(parts))):  # part 0 would come last: never reached
        await sink.put(number, parts[number])


async def twice_while_full(parts: list[list[MetricResult]], sink: RowSink) -> None:
    refused: list[Exception] = []

    async def put(number: int, rows: list[MetricResult]) -> None:
        try:
            await sink.put(number, rows)
        except RunnerError as exc:
            refused.append(exc)

    await sink.put(1, parts[1])
    await sink.put(2, parts[2])  # the sink holds 2 parts: full (samples_in_flight=2)
    async with anyio.create_task_group() as group:  # part 3 twice at once, then part 0
        group.start_soon(put, 3, parts[3])
        group.start_soon(put, 3, parts[4])
        await anyio.sleep(0.05)
        await put(0, parts[0])
    if refused:
        raise refused[0]


@pytest.mark.parametrize(
    ("hand", "said"),
    [
        (never_part_0, r"runner 'never_part_0' returned without handing part 0"),
        (nothing, r"runner 'nothing' returned without handing any part: part 0, from sample 1 "),
        (half, r"handed rows of 6 of the 12 samples \(parts 0 to 2\): part 3, from sample 7 "),
        (a_row_dropped, r"runner 'a_row_dropped', part 2, sample 'q5': its rows are of"),
        (a_row_added, r"runner 'a_row_added', part 2, sample 'q4': its rows are of"),
        (a_metric_the_plan_lacks, r"part 1, sample 'q2': its rows are of the metrics \["),
        (samples_in_the_wrong_part, r"part 1, sample 'q4': at this place of the input"),
        (part_minus_1, r"handed part -1: parts are numbered 0, 1, 2"),
    ],
)
def test_a_runner_that_breaks_the_contract_is_named_with_the_part_and_sample(
    hand: Any, said: str
) -> None:
    with pytest.raises(RunnerError, match=said) as caught:
        run_with(Hostile(hand.__name__, hand))
    assert isinstance(caught.value, ctxeval.CtxevalError)


def test_parts_beyond_the_window_out_of_order_name_the_missing_part_not_hang() -> None:
    """A runner that hands parts backwards, sequentially: part 0 can never come, and the
    sink's wait for it hung for ever; now the part past the window is refused naming part 0."""
    with pytest.raises(RunnerError, match="part 0, the next to pass on, is missing"):
        run_with(Hostile("backwards", backwards_past_the_window), samples_in_flight=2)


def test_one_part_handed_twice_at_once_while_the_sink_is_full_loses_no_sample() -> None:
    """Both hand-overs of part 3 passed the "twice" check before either was held (they waited
    for room), and two samples were silently lost: now the sink refuses it."""
    with pytest.raises(RunnerError, match=r"part (3 of the rows twice|0, the next to pass on)"):
        run_with(Hostile("twice", twice_while_full), samples_in_flight=2)


def test_the_built_in_runners_pass_the_checks() -> None:
    local = ctxeval.evaluate(samples(), METRICS)
    threads = ctxeval.evaluate(samples(), METRICS, runner=Hostile("in_order", in_order))
    assert [r.sample_id for r in threads.results] == [r.sample_id for r in local.results]
    assert len(local.results) == 12 * len(METRICS)


async def in_order(parts: list[list[MetricResult]], sink: RowSink) -> None:
    for number, rows in enumerate(parts):
        await sink.put(number, rows)
