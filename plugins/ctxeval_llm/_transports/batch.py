"""The Batch API mode: a run's judge requests go up as batch files, for half the price.

With ``LLMConfig(batch=True)`` (``ctxeval evaluate --batch``) on an OpenAI-compatible endpoint,
the requests of a run are not sent one by one: they are collected, written as JSONL batch
files (``/v1/files``, ``purpose=batch``) and submitted (``/v1/batches``, 24 h window); the run
polls each batch, logs its progress, downloads the output and error files, and hands every
answer to the row that asked for it.

* **Collecting**: requests are gathered until none has come for ``batch_linger`` seconds (every
  sample of the window has asked its question), or a batch is full; a batch is split at the
  provider's limits (``batch_max_requests`` lines, ``batch_max_bytes`` bytes). Identical
  requests go up once.
* **Resuming**: each batch is written to ``llm-batches.jsonl`` in the run folder (the journal's
  folder; 0600) as it is created and again when collected, keyed by its lines' ``custom_id``
  (a hash of the request). An interrupted run, resumed, polls the same batches and downloads
  the same files instead of paying again. Without a journal there is nothing to resume from.
* **Failures**: a line the batch answered with an error, a line of an expired batch not done
  in time, or every line of a failed batch is sent again through the normal path (one request,
  with the scheduler's retries). A refused key (401/403) stops the run as it does elsewhere.

One collector at a time does the uploading and polling for everyone (whichever waiting row
finds none at work); the others wait for their answer.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import attrs
import orjson

from ctxeval.plugin import (
    CallError,
    Completion,
    RunContext,
    ServiceError,
    UnusableLLMError,
    __version__,
    error_for_status,
)
from ctxeval_llm.config import LLMConfig

from .openai_compatible import OpenAITransport

__all__ = ["BATCH_STORE", "Batcher", "custom_id"]

logger = logging.getLogger(__name__)
progress = logging.getLogger("ctxeval.progress.batch")
"""Submitted, polled, done: shown by the command line unless ``--quiet``."""

BATCH_STORE = "llm-batches.jsonl"
"""The file, in the run folder, that records the run's batches."""

_DONE = frozenset({"completed", "expired", "failed", "cancelled"})
_FILE_LIMIT = 1 << 30  # the largest output file read (1 GiB)


def custom_id(request: Mapping[str, Any]) -> str:
    """The line id of ``request`` in a batch: a hash of the request itself."""
    canonical = orjson.dumps(dict(request), option=orjson.OPT_SORT_KEYS)
    return "ctxeval-" + hashlib.sha256(canonical).hexdigest()[:32]


@attrs.define
class _Batch:
    """One batch of the run, as recorded in the store."""

    id: str
    custom_ids: list[str]
    status: str = "submitted"
    collected: bool = False


class BatchStore:
    """The run's batches, appended to ``llm-batches.jsonl`` (the last record of an id wins)."""

    def __init__(self, folder: Path | None, endpoint: str) -> None:
        self.path = folder / BATCH_STORE if folder is not None else None
        self.endpoint = endpoint

    def load(self) -> dict[str, _Batch]:
        """The batches an earlier run of this folder created at this endpoint."""
        batches: dict[str, _Batch] = {}
        if self.path is None or not self.path.exists():
            return batches
        for number, line in enumerate(self.path.read_bytes().splitlines(), start=1):
            try:
                record = orjson.loads(line)
                if record.get("endpoint") != self.endpoint:
                    continue
                batch = batches.get(record["batch"]) or _Batch(record["batch"], [])
                batch.custom_ids = record.get("custom_ids") or batch.custom_ids
                batch.status = record.get("status", batch.status)
                batch.collected = bool(record.get("collected", batch.collected))
                batches[batch.id] = batch
            except (ValueError, KeyError, TypeError, AttributeError):
                logger.warning("%s:%d: not a batch record; skipped", self.path, number)
        return batches

    def write(self, batch: _Batch, *, with_ids: bool = False) -> None:
        """Append the state of ``batch`` (its line ids too when ``with_ids``)."""
        if self.path is None:
            return
        record: dict[str, Any] = {
            "batch": batch.id,
            "endpoint": self.endpoint,
            "status": batch.status,
            "collected": batch.collected,
        }
        if with_ids:
            record["custom_ids"] = batch.custom_ids
        self.path.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(descriptor, "ab") as file:
            file.write(orjson.dumps(record) + b"\n")
            file.flush()
            os.fsync(file.fileno())


class Batcher:
    """Collects one endpoint's requests into batches, submits, polls and hands out answers.

    Args:
        config: the LLM configuration (``batch_*`` settings, endpoint, model).
        transport: the run's ``openai`` transport (its connection pool and error mapping).
        folder: the run folder (where the batch store lives), or None.
    """

    def __init__(self, config: LLMConfig, transport: OpenAITransport, folder: Path | None):
        self.config = config
        self.transport = transport
        self.store = BatchStore(folder, transport.endpoint)
        self.batches = self.store.load()
        self.owner: dict[str, str] = {
            cid: batch.id for batch in self.batches.values() for cid in batch.custom_ids
        }
        self.waiting = {b.id for b in self.batches.values()}  # to poll (or to download again)
        if self.batches:
            progress.info(
                "%s: %d batch(es) of an earlier run found in %s; polling them instead of "
                "sending their requests again", transport.endpoint, len(self.batches),
                self.store.path,
            )  # fmt: skip
        self.pending: dict[str, Mapping[str, Any]] = {}
        self.answers: dict[str, Completion | CallError] = {}
        self._last_added = 0.0
        self.broken: CallError | None = None
        """Why the endpoint took no batch (then every request goes the normal way)."""
        self._collecting = False
        self._changed = anyio.Event()

    async def complete(self, ctx: RunContext, request: Mapping[str, Any]) -> Completion:
        """The answer to ``request`` from a batch; raises the line's error when the batch
        could not answer it (the caller then sends it the normal way)."""
        cid = custom_id(request)
        if self.broken is not None and cid not in self.owner:
            raise self.broken
        if cid not in self.answers and cid not in self.owner and cid not in self.pending:
            self.pending[cid] = request
            self._last_added = anyio.current_time()
        while cid not in self.answers:
            if not self._collecting:
                await self._collect(ctx)
            else:
                changed = self._changed
                await changed.wait()
        answer = self.answers[cid]
        if isinstance(answer, CallError):
            raise answer
        return answer

    def _give_up(self, exc: CallError) -> None:
        """The endpoint took no batch: the pending requests, and all later ones, go the
        normal way."""
        self.broken = ServiceError(
            f"{self.transport.endpoint} took no batch ({exc}); sending the requests the normal way"
        )
        logger.warning("%s", self.broken)
        for cid in self.pending:
            self.answers[cid] = self.broken
        self.pending.clear()
        self._wake()

    def _wake(self) -> None:
        changed, self._changed = self._changed, anyio.Event()
        changed.set()

    async def _collect(self, ctx: RunContext) -> None:
        """Submit what is pending, poll what is out, until nothing is left (one collector)."""
        self._collecting = True
        config = self.config
        try:
            while self.pending or self.waiting:
                now = anyio.current_time()
                quiet = now - self._last_added >= config.batch_linger
                if self.pending and (quiet or len(self.pending) >= config.batch_max_requests):
                    try:
                        await self._submit(ctx)
                    except UnusableLLMError:
                        raise
                    except CallError as exc:
                        self._give_up(exc)
                    continue
                for batch_id in sorted(self.waiting):
                    try:
                        await self._poll(ctx, self.batches[batch_id])
                    except UnusableLLMError:
                        raise
                    except CallError as exc:  # e.g. an earlier run's batch the endpoint forgot
                        self._settle(self.batches[batch_id], {}, f"cannot be collected: {exc}")
                if self.waiting or self.pending:
                    pause = config.batch_poll_interval if self.waiting else config.batch_linger
                    await anyio.sleep(pause)
        finally:
            self._collecting = False
            self._wake()

    def _split(self) -> list[dict[str, Mapping[str, Any]]]:
        """The pending requests as batches within the size limits."""
        parts: list[dict[str, Mapping[str, Any]]] = [{}]
        size = 0
        for cid, request in self.pending.items():
            line = len(self._line(cid, request))
            part = parts[-1]
            if part and (
                len(part) >= self.config.batch_max_requests
                or size + line > self.config.batch_max_bytes
            ):
                parts.append({})
                size = 0
            parts[-1][cid] = request
            size += line
        return parts

    @staticmethod
    def _line(cid: str, request: Mapping[str, Any]) -> bytes:
        line = {"custom_id": cid, "method": "POST", "url": "/v1/chat/completions",
                "body": dict(request)}  # fmt: skip
        return orjson.dumps(line) + b"\n"

    async def _submit(self, ctx: RunContext) -> None:
        for part in self._split():
            data = b"".join(self._line(cid, request) for cid, request in part.items())
            uploaded = await self._call(
                ctx,
                "POST",
                "/files",
                files={"file": ("ctxeval-batch.jsonl", data, "application/jsonl")},
                data={"purpose": "batch"},
            )
            created = await self._call(
                ctx,
                "POST",
                "/batches",
                json={
                    "input_file_id": uploaded["id"],
                    "endpoint": "/v1/chat/completions",
                    "completion_window": "24h",
                    "metadata": {"created_by": f"ctxeval {__version__}"},
                },
            )
            batch = _Batch(str(created["id"]), list(part), str(created.get("status", "")))
            self.batches[batch.id] = batch
            self.store.write(batch, with_ids=True)  # before anything else: a kill must not lose it
            for cid in part:
                self.owner[cid] = batch.id
                self.pending.pop(cid, None)
            self.waiting.add(batch.id)
            progress.info(
                "%s: batch %s submitted: %d requests (%d bytes)",
                self.transport.endpoint, batch.id, len(part), len(data),
            )  # fmt: skip

    async def _poll(self, ctx: RunContext, batch: _Batch) -> None:
        state = await self._call(ctx, "GET", f"/batches/{batch.id}")
        status = str(state.get("status", ""))
        counts = state.get("request_counts") or {}
        if status != batch.status:
            batch.status = status
            self.store.write(batch)
        progress.info(
            "%s: batch %s %s: %s of %s done, %s failed",
            self.transport.endpoint, batch.id, status, counts.get("completed", "?"),
            counts.get("total", "?"), counts.get("failed", 0),
        )  # fmt: skip
        if status not in _DONE:
            return
        answers: dict[str, Completion | CallError] = {}
        for key in ("output_file_id", "error_file_id"):
            if state.get(key):
                content = await self._download(ctx, str(state[key]))
                answers.update(self._read_lines(content))
        reason = {
            "expired": "expired before this request was done",
            "failed": f"failed: {state.get('errors')}",
            "cancelled": "was cancelled",
        }.get(status, "has no answer for this request")
        self._settle(batch, answers, reason)

    def _settle(
        self, batch: _Batch, answers: Mapping[str, Completion | CallError], reason: str
    ) -> None:
        """Hand out ``batch``'s answers; its lines without one fail with ``reason``."""
        for cid in batch.custom_ids:
            self.answers[cid] = answers.get(cid) or ServiceError(f"batch {batch.id} {reason}")
        batch.collected = True
        self.store.write(batch)
        self.waiting.discard(batch.id)
        self._wake()

    def _read_lines(self, content: bytes) -> dict[str, Completion | CallError]:
        answers: dict[str, Completion | CallError] = {}
        for line in content.splitlines():
            if not line.strip():
                continue
            try:
                record = orjson.loads(line)
                cid = record["custom_id"]
                response = record.get("response") or {}
                status = int(response.get("status_code") or 0)
                body = response.get("body") or {}
            except (ValueError, KeyError, TypeError, AttributeError):
                logger.warning("a batch output line is not readable: %r", line[:120])
                continue
            if status == 200:
                try:
                    content_text = body["choices"][0]["message"]["content"]
                    usage = body.get("usage") or {}
                    answers[cid] = Completion(
                        content_text,
                        int(usage.get("prompt_tokens") or 0),
                        int(usage.get("completion_tokens") or 0),
                    )
                    continue
                except (KeyError, IndexError, TypeError, ValueError, AttributeError):
                    status = 0
            error = record.get("error") or (body.get("error") if isinstance(body, dict) else None)
            detail = error.get("message") if isinstance(error, dict) else error
            answers[cid] = error_for_status(
                status or 500, f"batch line {cid}: HTTP {status or '?'}: {detail}"
            )
        return answers

    async def _call(self, ctx: RunContext, method: str, path: str, **arguments: Any) -> Any:
        """The JSON answer of one management request (through the scheduler's retries)."""
        return orjson.loads(await self._send(ctx, method, path, **arguments))

    async def _download(self, ctx: RunContext, file_id: str) -> bytes:
        return await self._send(ctx, "GET", f"/files/{file_id}/content", limit=_FILE_LIMIT)

    async def _send(self, ctx: RunContext, method: str, path: str, **arguments: Any) -> bytes:
        async def once() -> bytes:
            return await self.transport.send(method, path, **arguments)

        body: bytes = await ctx.call(once, resource=self.config.resource)
        return body
