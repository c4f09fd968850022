"""The asyncio fast paths of an LLM request and their anyio twins (trio): an attempt's clock
and deadline (ctxeval._calls.deadline) and a row's fan-out (ctxeval_llm._ask.fanout). Each test
runs on both backends and asks the same of both.

Both run on virtual time: the clock moves only when every task waits, and then jumps to the
next timer (trio's ``MockClock(autojump_threshold=0)``, and its twin for asyncio below). Which
timer fires first, and when, is then what the code did, never how busy the machine was: a block
that sleeps 1 ms under a 50 ms deadline is done before it, even on a machine that stalls the
process for longer than that (it was cut there twice, under load, on the wall clock)."""

from __future__ import annotations

import asyncio
import selectors
import sys
from typing import Any

import anyio
import pytest
from trio.testing import MockClock

from ctxeval._calls.deadline import AttemptClock, Deadlines
from ctxeval_llm._ask.fanout import at_once

if sys.version_info < (3, 11):
    from exceptiongroup import BaseExceptionGroup

pytestmark = pytest.mark.anyio


class _VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An asyncio loop whose :meth:`time` is virtual (from 0): when no callback is ready and
    no file descriptor is, the loop's wait for its next timer takes no time and moves the clock
    to that timer instead. A wait with no timer at all waits for real (for a thread, say)."""

    def __init__(self) -> None:
        self._virtual_now = 0.0
        super().__init__(selector=_JumpingSelector(self))

    def time(self) -> float:
        return self._virtual_now

    def advance(self, seconds: float) -> None:
        self._virtual_now += seconds


class _JumpingSelector(selectors.DefaultSelector):  # type: ignore[misc,valid-type]
    def __init__(self, loop: _VirtualTimeLoop) -> None:
        super().__init__()
        self._virtual_loop = loop

    def select(self, timeout: float | None = None) -> list[tuple[Any, int]]:
        if timeout is None:
            return list(super().select(None))
        ready = list(super().select(0))
        if not ready and timeout > 0:
            self._virtual_loop.advance(timeout)
        return ready


def _virtual(backend: str) -> tuple[str, dict[str, Any]]:
    """``anyio_backend`` on virtual time (a new clock for each test)."""
    if backend == "trio":
        return "trio", {"clock": MockClock(autojump_threshold=0)}
    return "asyncio", {"loop_factory": _VirtualTimeLoop}


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> tuple[str, dict[str, Any]]:
    return _virtual(str(request.param))


def _cancellations_pending(backend: str) -> int:
    """How many cancellations the current asyncio task still carries (0 off asyncio)."""
    if backend != "asyncio" or sys.version_info < (3, 11):
        return 0
    task = asyncio.current_task()
    assert task is not None
    return task.cancelling()


# --- an attempt's deadline -------------------------------------------------------------------


async def test_a_deadline_cuts_the_block_and_stops_its_cancellation_there(
    anyio_backend_name: str,
) -> None:
    clock = AttemptClock()
    start = clock.now()
    with clock.cut_at(start + 0.05) as cut:
        await anyio.sleep(5)
    assert cut.cancelled_caught
    assert clock.now() - start == pytest.approx(0.05)  # at its deadline, not the sleep's end
    assert _cancellations_pending(anyio_backend_name) == 0
    await anyio.sleep(0.01)  # the task goes on: nothing of the cut is left to land later


async def test_a_block_done_before_its_deadline_is_never_cut_afterwards(
    anyio_backend_name: str,
) -> None:
    clock = AttemptClock()
    with clock.cut_at(clock.now() + 0.05) as cut:
        await anyio.sleep(0.001)
    assert not cut.cancelled_caught
    await anyio.sleep(0.1)  # past the deadline: its timer is gone
    assert _cancellations_pending(anyio_backend_name) == 0


async def test_a_deadline_already_past_cuts_at_the_first_await(anyio_backend_name: str) -> None:
    clock = AttemptClock()
    reached = False
    with clock.cut_at(clock.now() - 1) as cut:
        await anyio.sleep(1)
        reached = True
    assert cut.cancelled_caught
    assert not reached


async def test_an_outer_cancel_scope_goes_through_a_deadline_due_with_it(
    anyio_backend_name: str,
) -> None:
    """The run's own cancellation is never taken for the attempt's timeout when it came
    first, even with the cut's timer firing in the same turn of the loop (both due at once,
    the outer's set first): the outer scope catches it, the cut does not. (Had the cut's
    timer fired first, the cut would take it for its own, and the outer scope, as anyio's do,
    would deliver its cancellation again at the next await.)"""
    clock = AttemptClock()
    due = clock.now() + 0.05
    after_cut = False
    with anyio.CancelScope(deadline=due) as outer:
        with clock.cut_at(due) as cut:
            await anyio.sleep(5)
        after_cut = True  # reached only if the cut swallowed the outer cancellation
        await anyio.sleep(5)
    assert outer.cancelled_caught
    assert not cut.cancelled_caught
    assert not after_cut
    assert _cancellations_pending(anyio_backend_name) == 0


@pytest.mark.parametrize("anyio_backend", [_virtual("asyncio")])
async def test_a_deadline_inside_an_asyncio_timeout_leaves_its_count_alone() -> None:
    """asyncio's own timeout outside the attempt still fires (3.11+: the counts of
    cancellations agree)."""
    if sys.version_info < (3, 11):
        pytest.skip("asyncio.timeout is 3.11+")
    clock = AttemptClock()
    cut_caught: list[bool] = []

    async def attempt_then_wait() -> None:
        async with asyncio.timeout(0.1):
            with clock.cut_at(clock.now() + 0.02) as cut:
                await asyncio.sleep(5)
            cut_caught.append(cut.cancelled_caught)
            await asyncio.sleep(5)  # cut by the outer timeout

    with pytest.raises(TimeoutError):
        await attempt_then_wait()
    assert cut_caught == [True]


async def test_the_clock_is_the_event_loops(anyio_backend_name: str) -> None:
    clock = AttemptClock()
    assert clock.now() == anyio.current_time()  # (virtual time: no time passes between)


# --- the run's shared timer (Deadlines, #58) --------------------------------------------------


async def _cut_after(
    deadlines: Deadlines, cut: float, work: float, log: list[tuple[int, bool, float]], i: int
) -> None:
    """One attempt on the shared timer: cut at ``cut`` seconds, done after ``work``."""
    clock = AttemptClock(deadlines)
    start = clock.now()
    with clock.cut_at(start + cut) as timer:
        await anyio.sleep(work)
    log.append((i, timer.cancelled_caught, clock.now() - start))


async def test_attempts_on_the_shared_timer_are_each_cut_at_their_own_deadline(
    anyio_backend_name: str,
) -> None:
    """Attempts that share the run's timer (in order of their deadlines, the usual case) are
    each cut at theirs, whichever ended before them, and an attempt that ended is never cut."""
    deadlines = Deadlines()
    log: list[tuple[int, bool, float]] = []
    async with anyio.create_task_group() as group:
        for i, (cut, work) in enumerate([(0.05, 0.01), (0.05, 5), (0.05, 0.02), (0.05, 5)]):
            group.start_soon(_cut_after, deadlines, cut, work, log, i)
            await anyio.sleep(0.001)
    ends = {i: (caught, round(took, 3)) for i, caught, took in log}
    assert ends == {0: (False, 0.01), 1: (True, 0.05), 2: (False, 0.02), 3: (True, 0.05)}
    await anyio.sleep(1)  # past every deadline: nothing left to cut
    assert _cancellations_pending(anyio_backend_name) == 0


async def test_a_deadline_before_the_queued_ones_gets_a_timer_of_its_own(
    anyio_backend_name: str,
) -> None:
    """A shorter cut after a longer one (a retry cut to what is left of its call's time) is
    not queued behind it: it is cut at its own deadline, not the first one's."""
    deadlines = Deadlines()
    log: list[tuple[int, bool, float]] = []
    async with anyio.create_task_group() as group:
        group.start_soon(_cut_after, deadlines, 0.5, 5, log, 0)
        await anyio.sleep(0.001)
        group.start_soon(_cut_after, deadlines, 0.02, 5, log, 1)
        await anyio.sleep(0.001)
        group.start_soon(_cut_after, deadlines, 0.6, 5, log, 2)
    ends = {i: (caught, round(took, 3)) for i, caught, took in log}
    assert ends == {0: (True, 0.5), 1: (True, 0.02), 2: (True, 0.6)}


async def test_the_shared_timer_serves_one_event_loop(anyio_backend_name: str) -> None:
    """A run's timer is kept on the loop of its first attempt; another loop is not given it."""
    deadlines = Deadlines()
    if anyio_backend_name == "asyncio" and sys.version_info >= (3, 11):
        loop = asyncio.get_running_loop()
        assert deadlines.on(loop) is deadlines
        other = asyncio.new_event_loop()
        try:
            assert deadlines.on(other) is None
        finally:
            other.close()
    log: list[tuple[int, bool, float]] = []
    await _cut_after(deadlines, 0.03, 5, log, 0)
    assert log == [(0, True, pytest.approx(0.03))]


# --- a row's fan-out -------------------------------------------------------------------------


async def test_the_calls_start_in_order_and_all_finish(anyio_backend_name: str) -> None:
    started: list[int] = []
    finished: list[int] = []

    async def one(i: int) -> None:
        started.append(i)
        await anyio.sleep(0.01 * (5 - i))
        finished.append(i)

    await at_once(one, [(i,) for i in range(5)], "test")
    if anyio_backend_name == "asyncio":  # (trio runs a batch of new tasks in either order)
        assert started == [0, 1, 2, 3, 4]
    assert sorted(started) == sorted(finished) == [0, 1, 2, 3, 4]


async def test_a_failure_cancels_the_others_and_is_raised_in_a_group(
    anyio_backend_name: str,
) -> None:
    ended: list[str] = []

    async def one(i: int) -> None:
        try:
            if i == 1:
                await anyio.sleep(0.01)
                raise ValueError("the second call failed")
            await anyio.sleep(5)
            ended.append("finished")
        except anyio.get_cancelled_exc_class():
            ended.append("cancelled")
            raise

    with anyio.fail_after(3):
        with pytest.raises(BaseExceptionGroup) as caught:
            await at_once(one, [(0,), (1,), (2,)], "test")
    assert [type(e) for e in caught.value.exceptions] == [ValueError]
    assert str(caught.value.exceptions[0]) == "the second call failed"
    assert ended == ["cancelled", "cancelled"]


async def test_a_cancellation_from_outside_ends_every_call_before_it_goes_on(
    anyio_backend_name: str,
) -> None:
    ended: list[str] = []

    async def one(i: int) -> None:
        try:
            await anyio.sleep(5)
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await anyio.sleep(0.02)  # a call that takes time to wind down
            ended.append(f"cancelled {i}")
            raise

    with anyio.move_on_after(0.05) as scope:
        await at_once(one, [(0,), (1,), (2,)], "test")
    assert scope.cancelled_caught
    assert sorted(ended) == ["cancelled 0", "cancelled 1", "cancelled 2"]
    assert _cancellations_pending(anyio_backend_name) == 0


async def test_what_the_calls_raise_while_cancelled_is_raised(anyio_backend_name: str) -> None:
    async def one(i: int) -> None:
        try:
            await anyio.sleep(5)
        except anyio.get_cancelled_exc_class():
            if i == 2:
                raise RuntimeError("failed while winding down") from None
            raise

    with pytest.raises(BaseExceptionGroup) as caught:
        with anyio.move_on_after(0.05):
            await at_once(one, [(0,), (1,), (2,)], "test")
    assert [str(e) for e in caught.value.exceptions] == ["failed while winding down"]


async def test_a_single_call_runs_in_the_callers_task(anyio_backend_name: str) -> None:
    seen: list[object] = []

    async def one() -> None:
        seen.append(anyio.get_current_task().id)

    await at_once(one, [()], "test")
    assert seen == [anyio.get_current_task().id]
