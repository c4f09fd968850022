"""What the LLM client's fast paths (#58) keep as it was: a judge's answer read by orjson reads
as json reads it (json still reading what orjson does not: integers past 64 bits, NaN, text
around the object), and a transport's readiness check made once however many requests wait
for it, again by the next request when it failed."""

from __future__ import annotations

import json
import math
from typing import Any

import anyio
import pytest

from ctxeval.plugin import MalformedOutputError
from ctxeval_llm._parsing import parse_json
from ctxeval_llm._transports.choice import _Ready

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    "text",
    [
        '{"reason": "it states the answer", "verdict": 1}',
        '  {"verdict": 0, "reason": "caf\\u00e9 \\ud83d\\ude00"}\n',
        '{"a": 1, "a": 2}',
        '{"big": 123456789012345678901234567890, "small": -9223372036854775809}',
        '{"n": 18446744073709551615, "f": 1.0000000000000002, "e": 5e-324, "z": -0.0}',
        '{"nested": {"list": [1, 2.5, "x", null, true]}}',
    ],
)
def test_an_answer_reads_as_json_reads_it(text: str) -> None:
    read = parse_json(text)
    assert read == json.loads(text)
    assert repr(read) == repr(json.loads(text))  # (types too: an int stays an int)


def test_what_orjson_refuses_is_still_read_as_json_reads_it() -> None:
    assert parse_json('{"x": 1e400}') == {"x": math.inf}
    assert math.isnan(parse_json('{"x": NaN}')["x"])
    assert parse_json('{"x": "\\ud800"}') == {"x": "\ud800"}
    assert parse_json('Here it is: {"verdict": 1} as asked') == {"verdict": 1}
    assert parse_json('```json\n{"verdict": 0}\n```') == {"verdict": 0}
    assert parse_json("[1, 2]") == [1, 2]
    with pytest.raises(MalformedOutputError, match="not JSON"):
        parse_json("no object here")


class _Checked:
    name = "checked"

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.checks = 0

    async def ready(self, ctx: Any) -> None:
        self.checks += 1
        await anyio.sleep(0.01)
        if self.checks <= self.failures:
            raise RuntimeError(f"check {self.checks} failed")

    async def complete(self, ctx: Any, request: Any) -> Any:
        raise AssertionError("not sent")

    async def aclose(self) -> None:
        pass


async def test_the_readiness_check_is_made_once_for_every_request_waiting() -> None:
    transport = _Checked(failures=0)
    holder = _Ready(transport)  # type: ignore[arg-type]
    got: list[object] = []

    async def request() -> None:
        got.append(await holder.check(None))  # type: ignore[arg-type]

    async with anyio.create_task_group() as group:
        for _ in range(50):
            group.start_soon(request)
    assert transport.checks == 1
    assert got == [transport] * 50


async def test_a_failed_readiness_check_is_made_again_by_the_next_request() -> None:
    transport = _Checked(failures=1)
    holder = _Ready(transport)  # type: ignore[arg-type]
    outcomes: list[str] = []

    async def request() -> None:
        try:
            await holder.check(None)  # type: ignore[arg-type]
            outcomes.append("ready")
        except RuntimeError as exc:
            outcomes.append(str(exc))

    async with anyio.create_task_group() as group:
        for _ in range(5):
            group.start_soon(request)
    assert transport.checks == 2
    assert sorted(outcomes) == ["check 1 failed"] + ["ready"] * 4
