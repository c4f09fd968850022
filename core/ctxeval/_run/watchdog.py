"""A watchdog for plugin coroutines that hold the event loop: :class:`Watchdog`.

An async metric's ``ascore`` runs in the event loop's thread. One that blocks there (a
``time.sleep``, a long computation, blocking I/O inside ``async def``) holds the whole run:
``metric_timeout`` cannot fire (the loop that would fire it is the one held), every other call
of the run waits, and Ctrl-C is not seen either, since asyncio and trio turn it into a
cancellation that waits for the loop to get control back.

So a run with async metrics has a watchdog: a daemon thread that asks the loop every
:data:`TICK` seconds for a sign of life (a function the loop calls through its own thread-safe
scheduling), and knows which plugin call is running (each ``ascore`` is awaited through
:meth:`Watchdog.ascore`, whose frame is found on the loop thread's stack). When the loop has not
answered and its thread is inside a plugin's call:

* for ``metric_timeout`` (the same call seen at two looks that far apart, with no answer in
  between): the call is *cut* and the run stops with :class:`EventLoopBlockedError`, naming the
  plugin and where it was; the finished rows are journaled (fix the plugin, then resume);
* for :data:`STALLED` seconds after a Ctrl-C: the call is cut, and the loop's own handling of
  the Ctrl-C (a cancellation of the run, then ``KeyboardInterrupt``) goes on as for any Ctrl-C.

A cut is :class:`LoopCut` (a ``BaseException``, so that ``except Exception`` does not swallow
it) raised inside the plugin's code. When the loop runs in the main thread, the watchdog sends
SIGINT to it, and the run's SIGINT handler (which hands a real Ctrl-C on to the handler it
replaced) raises the cut in the frame the signal interrupts, only if that frame is inside the
call to cut; a signal also ends a ``time.sleep`` and the other system calls it interrupts. In
another thread, the cut is raised with ``PyThreadState_SetAsyncExc`` at the thread's next
bytecode: a call blocked in C code there is cut when the C code returns.

Limits: Python cannot cancel a coroutine that never yields; a cut is an exception inside it,
after which the plugin's state is unknown, so the run stops rather than goes on. Code that holds
the GIL in C (a C extension's long loop) cannot be interrupted at all, nor a C call that does not
return on a signal: the watchdog logs an error naming the plugin, and the run stops when the call
returns.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import TYPE_CHECKING, Any, Final

import anyio

from ctxeval._errors import PluginError
from ctxeval._run.worker import GRACE, raise_in, thread_safe_soon

if TYPE_CHECKING:
    from ctxeval._data.sample import Sample
    from ctxeval._plugins.protocols import Metric, RunContext

__all__ = ["STALLED", "TICK", "EventLoopBlockedError", "LoopCut", "Watchdog"]

logger = logging.getLogger(__name__)

TICK: Final = 0.1
"""Seconds between the watchdog's looks at the loop."""

STALLED: Final = 0.25
"""Seconds a plugin may go on holding the loop after a Ctrl-C before it is cut."""

CANCEL_WAIT: Final = 30.0
"""Seconds a call cut at a Ctrl-C waits for the run's cancellation before it raises
``KeyboardInterrupt`` itself (never reached with asyncio's or trio's own Ctrl-C handling)."""


class EventLoopBlockedError(PluginError):
    """A plugin's coroutine held the event loop past ``metric_timeout`` without yielding: the
    run stopped (its finished rows journaled). The message names the metric, its class and
    where it was.

    Attributes:
        metric: the name of the metric whose call held the loop.
    """

    metric: str | None = None


class LoopCut(BaseException):
    """Raised inside a plugin's coroutine that holds the event loop (see the module docstring).

    A ``BaseException``, so that a plugin's ``except Exception`` does not swallow it.
    """


class _Blocked(LoopCut):
    """The cut of a call that held the loop past ``metric_timeout``."""


class _Interrupted(LoopCut):
    """The cut of a call that held the loop at a Ctrl-C."""


Frames = dict[FrameType, "Metric"]


class Watchdog:
    """Watches one run's event loop for plugin coroutines that hold it (module docstring).

    :meth:`ascore` is how the run calls an async metric; :meth:`start` (in the loop) and
    :meth:`stop` bound the watching. Without a start, :meth:`ascore` only awaits the call.
    """

    def __init__(self, timeout: float | None) -> None:
        self.timeout = timeout
        """``metric_timeout``: a call holding the loop this long is cut (None: only at Ctrl-C)."""
        self.interrupted = False
        """A Ctrl-C came during the run, handed to a handler that cancels the run."""
        self._calls: Frames = {}
        """The frame of each call in progress in :meth:`ascore`, with its metric."""
        self._cuts: dict[FrameType, type[LoopCut]] = {}
        """The calls cut (set before the cut is sent, taken by :meth:`ascore`)."""
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._loop_thread = 0
        self._by_signal = False
        """The loop runs in the main thread under this module's SIGINT handler."""
        self._soon: Callable[[Callable[[], object]], object] | None = None
        self._asked_at: float | None = None
        """When the sign of life the loop has not given yet was asked for."""
        self._look: tuple[FrameType, float] | None = None
        """The call seen holding the loop, and since when (reset when the loop answers)."""
        self._cut_at = 0.0
        self._said: set[FrameType] = set()
        self.pending: tuple[FrameType, type[LoopCut]] | None = None
        """A cut sent by signal, for the SIGINT handler to raise."""
        self._thread: threading.Thread | None = None

    # -- the loop's side

    def start(self) -> None:
        """Start watching the running loop (call it in the loop)."""
        self._soon = thread_safe_soon()
        self._loop_thread = threading.get_ident()
        self._by_signal = _watch_signals(self)
        thread = threading.Thread(target=self._watch, name="ctxeval-watchdog", daemon=True)
        thread.start()
        self._thread = thread

    def stop(self) -> None:
        """Stop watching: no cut is sent after this returns."""
        with self._lock:
            self._done.set()
            self.pending = None
        if self._by_signal:
            _unwatch_signals(self)
            self._by_signal = False

    def join(self, timeout: float | None = None) -> None:
        """Wait (at most ``timeout`` seconds) for the watchdog's thread to end, after
        :meth:`stop` (it ends within :data:`TICK`)."""
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    async def ascore(self, metric: Metric, sample: Sample, ctx: RunContext) -> object:
        """``await metric.ascore(sample, ctx)``, watched: a call that holds the loop past
        ``metric_timeout`` raises :class:`EventLoopBlockedError`; one cut at a Ctrl-C waits
        for the run's cancellation."""
        frame = sys._getframe()
        self._calls[frame] = metric
        error: BaseException | None = None
        try:
            try:
                result = await metric.ascore(sample, ctx)
            finally:
                self._calls.pop(frame, None)  # no cut is aimed at this call any more
        except BaseException as exc:  # a cut, or what the plugin made of it
            cut = self._cuts.pop(frame, None)
            if cut is None:
                raise
            error = exc
        else:
            cut = self._cuts.pop(frame, None)  # (a plugin that swallowed its cut)
            if cut is None:
                return result
        finally:
            self._calls.pop(frame, None)  # (a cut that landed in the first one)
        if cut is _Interrupted:
            with anyio.move_on_after(CANCEL_WAIT):
                await anyio.sleep_forever()  # cancelled by the loop's handling of the Ctrl-C
            raise KeyboardInterrupt
        raise _blocked_error(metric, self.timeout, error) from None

    def _answer(self) -> None:
        """The loop's sign of life (called in the loop)."""
        self._asked_at = None

    # -- the watchdog thread

    def _watch(self) -> None:
        soon = self._soon
        assert soon is not None
        while not self._done.wait(TICK):
            now = time.monotonic()
            asked = self._asked_at
            if asked is None:
                self._look = None
                self._asked_at = now
                try:
                    soon(self._answer)
                except Exception:  # the loop is closed: the run is over
                    return
            else:
                try:
                    self._look_at(now, now - asked)
                except Exception:  # (never expected: the watchdog must not die silently)
                    logger.exception("the event loop's watchdog failed; it stops watching")
                    return

    def _look_at(self, now: float, stalled: float) -> None:
        """The loop has not answered for ``stalled`` seconds: cut the call holding it, if
        one of this run's plugins does and it is time."""
        with self._lock:
            if self._done.is_set():
                return
            frame = self._holding()
            if frame is None:  # (the loop is held by other code, if at all)
                self._look = None
                return
            if self._look is None or self._look[0] is not frame:
                self._look = (frame, now)
            held = now - self._look[1]
            cut: type[LoopCut] | None = None
            if self.interrupted and stalled >= STALLED:
                cut = _Interrupted
            elif self.timeout is not None and held >= self.timeout:
                cut = _Blocked
            if cut is None:
                return
            again = frame in self._cuts
            if again and now - self._cut_at < GRACE:
                return  # sent already: give it time to land
            self._cuts[frame] = cut
            self._cut_at = now
            self._send(frame, cut)
            metric = self._calls.get(frame)
        if again and metric is not None and frame not in self._said:
            self._said.add(frame)
            logger.error(
                "metric %r has held the event loop for %.0f s and did not stop when cut: it is "
                "blocked in C code that Python cannot interrupt (or it swallows the cut); the "
                "run stops when the call returns. Run blocking work in a thread "
                "(await anyio.to_thread.run_sync(...))",
                metric.name, stalled,
            )  # fmt: skip

    def _holding(self) -> FrameType | None:
        """The frame of this run's plugin call the loop's thread is in, if it is in one."""
        frame = sys._current_frames().get(self._loop_thread)
        calls = self._calls
        while frame is not None:
            if frame in calls:
                return frame
            frame = frame.f_back
        return None

    def _send(self, frame: FrameType, cut: type[LoopCut]) -> None:
        """Raise ``cut`` in the call of ``frame`` (the lock held, right after finding it on the
        loop thread's stack: the loop's thread does not run meanwhile)."""
        if self._by_signal and signal.getsignal(signal.SIGINT) is _on_sigint:
            self.pending = (frame, cut)
            signal.pthread_kill(self._loop_thread, signal.SIGINT)
        else:
            raise_in(self._loop_thread, cut)


def _blocked_error(
    metric: Metric, timeout: float | None, error: BaseException | None
) -> EventLoopBlockedError:
    """The error that stops a run whose plugin held the loop past ``timeout``."""
    kind = type(metric)
    where = _where(error.__traceback__) if error is not None else None
    at = f", at {where}" if where else ""
    bound = f"{timeout:g} s (metric_timeout)" if timeout is not None else "its bound"
    out = EventLoopBlockedError(
        f"metric {metric.name!r} ({kind.__module__}.{kind.__qualname__}{at}) held the event "
        f"loop for more than {bound} without yielding: its async ascore() runs blocking code "
        "(time.sleep, a long computation, blocking I/O) in the event loop, where no timeout can "
        "cut it and every other call of the run waits; run the blocking work in a thread "
        "(await anyio.to_thread.run_sync(...)), or give the metric a synchronous score(), "
        "which ctxeval runs in a worker thread and cuts at metric_timeout"
    )
    out.metric = metric.name
    return out


def _where(tb: TracebackType | None) -> str | None:
    """``file:line in function`` of the innermost frame of ``tb`` outside this module: where
    the plugin was when it was cut."""
    found = None
    for summary in traceback.extract_tb(tb):
        if summary.filename != __file__:
            found = f"{os.path.basename(summary.filename)}:{summary.lineno} in {summary.name}"
    return found


# -- the SIGINT handler of runs whose loop is in the main thread

_watching: list[Watchdog] = []
_replaced: Any = None
"""The SIGINT handler :func:`_on_sigint` replaced (and hands real Ctrl-Cs on to)."""


def _watch_signals(watchdog: Watchdog) -> bool:
    """Put ``watchdog`` under this module's SIGINT handler (installed by the first); False
    when the loop is not in the main thread, or signals cannot be used here."""
    global _replaced
    if threading.current_thread() is not threading.main_thread() or not hasattr(
        signal, "pthread_kill"
    ):
        return False
    if not _watching:
        try:
            current = signal.getsignal(signal.SIGINT)
            if current is not _on_sigint:
                signal.signal(signal.SIGINT, _on_sigint)
                _replaced = current
        except (ValueError, OSError):  # (an interpreter without signals)
            return False
    _watching.append(watchdog)
    return True


def _unwatch_signals(watchdog: Watchdog) -> None:
    """Take ``watchdog`` from under the SIGINT handler; the last one puts back the handler
    it replaced (unless another was installed meanwhile)."""
    global _replaced
    if watchdog in _watching:
        _watching.remove(watchdog)
    if not _watching and signal.getsignal(signal.SIGINT) is _on_sigint:
        signal.signal(signal.SIGINT, signal.SIG_DFL if _replaced is None else _replaced)
        _replaced = None


def _on_sigint(signum: int, frame: FrameType | None) -> Any:
    """SIGINT while runs are watched: a cut a watchdog sent, raised here if the interrupted
    frame is inside the call to cut; else a Ctrl-C, handed to the handler this one replaced
    (see the module docstring)."""
    sent = [w for w in list(_watching) if w.pending is not None]
    if sent:
        for watchdog in sent:
            target, cut = watchdog.pending or (None, LoopCut)
            watchdog.pending = None
            if frame is not target and _on_stack(frame, target):
                raise cut
        return None  # too late: the call is over
    replaced = _replaced
    holding = any(_inside_call(frame, w._calls) for w in _watching)
    if _cancels_the_run(replaced):
        for watchdog in _watching:
            watchdog.interrupted = True
    if replaced is signal.SIG_IGN:
        return None
    if replaced is None or replaced is signal.SIG_DFL:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.raise_signal(signal.SIGINT)  # what the default would have done
        return None
    # (inside a plugin's call, trio's handler would raise KeyboardInterrupt right there, in a
    # task; with no frame it hands it to the run's main task, as when the loop is idle)
    return replaced(signum, None if holding else frame)


def _on_stack(frame: FrameType | None, target: FrameType | None) -> bool:
    while frame is not None:
        if frame is target:
            return True
        frame = frame.f_back
    return False


def _inside_call(frame: FrameType | None, calls: Frames) -> bool:
    """Whether ``frame`` is inside one of ``calls`` (not in the watching frame itself)."""
    start = frame
    while frame is not None:
        if frame in calls:
            return frame is not start
        frame = frame.f_back
    return False


def _cancels_the_run(handler: Any) -> bool:
    """Whether ``handler`` is asyncio's or trio's own Ctrl-C handling, which cancels the run
    (and then raises ``KeyboardInterrupt``) once the loop gets control back."""
    method = getattr(getattr(handler, "func", None), "__func__", None)  # a Runner's handler
    if method is not None and method in _runner_handlers():  # is a partial of its _on_sigint
        return True
    return bool(
        getattr(handler, "__module__", "") == "trio._core._ki"
        and getattr(handler, "__qualname__", "") == "KIManager.install.<locals>.handler"
    )


def _runner_handlers() -> list[Any]:
    """``Runner._on_sigint`` of the runners that run asyncio: ``asyncio.Runner`` (Python
    3.11+) and anyio's backport of it, which anyio's asyncio backend uses on Python 3.10."""
    runners = [getattr(asyncio, "Runner", None)]
    backend = sys.modules.get("anyio._backends._asyncio")  # (imported by a run on asyncio)
    runners.append(getattr(backend, "Runner", None))
    return [r._on_sigint for r in runners if r is not None and hasattr(r, "_on_sigint")]
