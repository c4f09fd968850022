"""The parts of a run handed to long-running Spark tasks: :class:`WorkServer` on the driver,
:func:`pull` in each task.

A Spark job costs tens to hundreds of milliseconds to schedule, and each byte of a job's
input and result crosses the JVM twice; a job per part of the input spent more time there
than in scoring. So the ``spark`` runner starts one job of ``workers`` tasks for the whole
run, and each task asks the driver for parts over one socket
(:mod:`multiprocessing.connection`, authenticated with a random key only the run's tasks hold),
scores each with ctxeval's local runner and sends its rows straight back. Spark still places
the tasks, runs a lost one again and stops them with the job.

A task that dies holding a part (a killed Python worker, a lost executor) gives it back: the
driver hands the part to the next task that asks, Spark starts a task in the dead one's place,
and the part's rows arrive once. A part whose tasks die :data:`ATTEMPTS` times fails the run.
"""

from __future__ import annotations

import collections
import logging
import secrets
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future
from contextlib import suppress
from multiprocessing.connection import Client, Connection, Listener
from typing import Any

from ctxeval.runners import WorkerLostError

__all__ = ["ATTEMPTS", "WorkServer", "pull"]

logger = logging.getLogger(__name__)

ATTEMPTS = 4
"""How many tasks may die holding one part before the run stops (Spark's own default number
of attempts of a task)."""

_Item = tuple["Future[Any]", Callable[[], Any], int]
"""A part waiting: its future, the call that scores it, and how many tasks died holding it."""


class WorkServer:
    """The driver's side: calls waiting in order, each handed to the next task that asks, its
    result set on its future.

    Args:
        host: the address the tasks reach the driver at (``127.0.0.1`` in local mode).
    """

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.authkey = secrets.token_bytes(32)
        self._listener = Listener((host, 0), authkey=self.authkey)
        self.address: tuple[str, int] = self._listener.address
        self._waiting: collections.deque[_Item] = collections.deque()
        self._held: dict[int, _Item] = {}  # by id(future): parts a task is scoring
        self._changed = threading.Condition()
        self._stopping = False
        self._closed = False
        self._failure: BaseException | None = None
        self._accepting = threading.Thread(
            target=self._accept, name="ctxeval-spark-work", daemon=True
        )
        self._accepting.start()

    def put(self, future: Future[Any], call: Callable[[], Any]) -> None:
        """Queue ``call``; its result (or exception) goes to ``future``."""
        with self._changed:
            if self._failure is not None:
                future.set_exception(self._failure)
                return
            self._waiting.append((future, call, 0))
            self._changed.notify()

    def fail(self, error: BaseException) -> None:
        """The tasks cannot go on (the Spark job failed): every part not done fails with
        ``error``, and so does every part put from now on."""
        with self._changed:
            self._failure = error
            items = [*self._waiting, *self._held.values()]
            self._waiting.clear()
            self._held.clear()
            self._changed.notify_all()
        for future, _, _ in items:
            if not future.done():
                future.set_exception(error)

    def unfinished(self) -> int:
        """Parts queued or being scored."""
        with self._changed:
            return len(self._waiting) + len(self._held)

    def finish(self) -> None:
        """No more parts: each task stops once it asks for the next (a task that connects
        from now on is told to stop at once)."""
        with self._changed:
            self._stopping = True
            self._changed.notify_all()

    def close(self) -> None:
        """Stop taking connections (once the tasks have ended)."""
        self.finish()
        self._closed = True
        with suppress(OSError):  # wake the accepting thread, which then stops
            Client(self.address, authkey=self.authkey).close()
        self._accepting.join(5)
        self._listener.close()

    def _accept(self) -> None:
        while True:
            try:
                connection = self._listener.accept()
            except OSError:  # (a failed handshake: not one of the run's tasks)
                if self._closed:
                    return
                logger.warning("a connection to the run's work server was refused")
                continue
            if self._closed:
                connection.close()
                return
            threading.Thread(
                target=self._serve, args=(connection,), name="ctxeval-spark-task", daemon=True
            ).start()

    def _next(self) -> _Item | None:
        """The next part to hand out, or None when the tasks should stop."""
        with self._changed:
            while True:
                if self._failure is not None or (self._stopping and not self._waiting):
                    return None
                while self._waiting:
                    item = self._waiting.popleft()
                    future = item[0]
                    if future.running() or future.set_running_or_notify_cancel():
                        self._held[id(future)] = item
                        return item
                self._changed.wait()

    def _serve(self, connection: Connection) -> None:
        """One task's connection: a part out, its rows in, until the tasks stop."""
        with connection:
            while (item := self._next()) is not None:
                future, call, _ = item
                try:
                    connection.send(call)
                except (OSError, EOFError):
                    self._give_back(item, "before it was sent")
                    return
                except Exception as exc:  # (the call does not pickle)
                    self._settle(future, ("error", exc))
                    continue
                try:
                    answer = connection.recv()
                except (OSError, EOFError):
                    self._give_back(item, "while a task scored it")
                    return
                self._settle(future, answer)
            with suppress(OSError):
                connection.send(None)

    def _settle(self, future: Future[Any], answer: tuple[str, Any]) -> None:
        with self._changed:
            if self._held.pop(id(future), None) is None:
                return  # failed meanwhile
        status, value = answer
        if future.done():
            return
        if status == "ok":
            future.set_result(value)
        else:
            future.set_exception(value)

    def _give_back(self, item: _Item, when: str) -> None:
        """A task died holding ``item``: the next task that asks gets it."""
        future, call, deaths = item
        with self._changed:
            if self._held.pop(id(future), None) is None:
                return
            if deaths + 1 < ATTEMPTS:
                self._waiting.appendleft((future, call, deaths + 1))
                self._changed.notify()
                logger.info("a Spark task ended %s; its part goes to the next task", when)
                return
        future.set_exception(
            WorkerLostError(
                f"{ATTEMPTS} Spark tasks ended while scoring the same part of the input (their "
                "Python workers killed, or out of memory); the rows finished before it are "
                "kept (an LLM metric's rows in the journal): run again with --resume, with "
                "smaller parts or more memory per executor"
            )
        )


def pull(address: tuple[str, int], authkey: bytes, _partition: Iterable[Any]) -> Iterator[Any]:
    """In a Spark task (``mapPartitions``): score the parts the driver hands out until it says
    stop. Yields nothing; the rows go back over the connection."""
    with Client(address, authkey=authkey) as connection:
        while (call := connection.recv()) is not None:
            try:
                answer: tuple[str, Any] = ("ok", call())
            except Exception as exc:
                answer = ("error", exc)
            try:
                connection.send(answer)
            except Exception as exc:  # (the result does not pickle)
                connection.send(
                    ("error", RuntimeError(f"a part's result could not be sent: {exc!r}"))
                )
    yield from ()
