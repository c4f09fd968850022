"""Wrong settings fail at once: one ConfigError that names the argument, before any sample is
read and any row made (issue #30, item 4); data frames and dicts of columns are samples; a cost
cap needs a known price, which the provider gives or the user does."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import ctxeval
from ctxeval.cli import main
from ctxeval.plugin import Price
from ctxeval_llm import LLMConfig
from fakes.openai_server import FakeOpenAI
from llm_judge import Judge

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

ID_ROWS = [
    {"id": "a", "retrieved_context_ids": ["x", "y"], "reference_context_ids": ["y"]},
    {"id": "b", "retrieved_context_ids": ["x"], "reference_context_ids": ["x", "z"]},
    {"id": "c", "retrieved_context_ids": ["z", "x"], "reference_context_ids": ["q"]},
]
LLM_ROW = {"user_input": "q", "reference": "r", "retrieved_contexts": ["useful", "useless"]}
UNPRICED = "openai/fake-judge"  # in no price table


class Counted:
    """Samples that count how many were read."""

    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.rows = rows
        self.read = 0

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for row in self.rows:
            self.read += 1
            yield row


# each case: (samples or None for counted ID_ROWS, keyword arguments, words the message holds)
CASES: dict[str, tuple[Any, dict[str, Any], tuple[str, ...]]] = {
    "cache_false": (None, {"cache": False}, ("cache", "pass None for no cache")),
    "cache_dict": (None, {"cache": {}}, ("cache", "get(key)")),
    "llm_int": (None, {"llm": 42}, ("llm", "model name", "async callable")),
    "llm_empty": (None, {"llm": " "}, ("llm", "empty model name")),
    "registry_str": (None, {"registry": "x"}, ("registry", "ctxeval.Registry")),
    "labels_int": (None, {"labels": 42}, ("labels", "ctxeval.Labels")),
    "samples_none": ("none", {}, ("samples is None", "load_samples")),
    "samples_path": ("data.jsonl", {}, ("samples", "load_samples(path)")),
    "samples_pathlike": (Path("data.jsonl"), {}, ("samples", "load_samples(path)")),
    "samples_one_dict": (ID_ROWS[0], {}, ("samples", "wrap it in a list")),
    "samples_one_sample": (
        ctxeval.Sample.from_dict(ID_ROWS[0]),
        {},
        ("samples", "wrap it in a list"),
    ),
    "samples_int": (42, {}, ("samples", "iterable")),
    "on_progress_two_args": (
        None,
        {"on_progress": lambda a, b: None},
        ("on_progress", "one ctxeval.Progress"),
    ),
    "on_progress_no_arg": (
        None,
        {"on_progress": lambda: None},
        ("on_progress", "one ctxeval.Progress"),
    ),
    "on_progress_not_callable": (None, {"on_progress": 3}, ("on_progress", "callable")),
}


def _arguments(case: str) -> tuple[Any, Counted, dict[str, Any], tuple[str, ...]]:
    samples, options, words = CASES[case]
    counted = Counted(ID_ROWS)
    if samples is None:
        samples = counted
    elif samples == "none":
        samples = None
    return samples, counted, options, words


@pytest.mark.parametrize("case", sorted(CASES))
def test_evaluate_refuses_a_wrong_argument_before_any_row(case: str) -> None:
    samples, counted, options, words = _arguments(case)
    with pytest.raises(ctxeval.ConfigError) as caught:
        ctxeval.evaluate(samples, ["id_mrr"], **options)
    for word in words:
        assert word in str(caught.value)
    assert counted.read == 0


@pytest.mark.anyio
@pytest.mark.parametrize("case", sorted(CASES))
async def test_aevaluate_refuses_a_wrong_argument_before_any_row(case: str) -> None:
    samples, counted, options, words = _arguments(case)
    with pytest.raises(ctxeval.ConfigError) as caught:
        await ctxeval.aevaluate(samples, ["id_mrr"], **options)
    for word in words:
        assert word in str(caught.value)
    assert counted.read == 0


@pytest.mark.parametrize("backend", ["curio", "", None, 1])
def test_an_unknown_backend_is_refused(backend: Any) -> None:
    counted = Counted(ID_ROWS)
    with pytest.raises(ctxeval.ConfigError, match="backend must be 'asyncio' or 'trio'"):
        ctxeval.evaluate(counted, ["id_mrr"], backend=backend)
    assert counted.read == 0


def test_the_settings_object_checks_too() -> None:
    with pytest.raises(ctxeval.ConfigError, match="cache"):
        ctxeval.RunSettings(cache=False)
    with pytest.raises(ctxeval.ConfigError, match="on_progress"):
        ctxeval.RunSettings(on_progress=lambda p, q: None)


def test_progress_callbacks_of_every_good_shape_are_taken() -> None:
    seen: list[Any] = []

    class Sink:
        def __call__(self, progress: Any) -> None:
            seen.append(progress)

        def method(self, progress: Any, extra: int = 0) -> None:
            seen.append(progress)

    for callback in (
        seen.append,  # a builtin method
        lambda *args: seen.append(args[0]),
        lambda p, more=None: seen.append(p),
        Sink(),
        Sink().method,
    ):
        ctxeval.evaluate(ID_ROWS, ["id_mrr"], on_progress=callback)
    assert seen
    assert all(isinstance(p, ctxeval.Progress) for p in seen)


def test_a_cache_with_get_and_set_is_taken() -> None:
    from ctxeval._calls.cache import MemoryCache

    ev = ctxeval.evaluate(ID_ROWS, ["id_mrr"], cache=MemoryCache())
    assert len(ev.results) == 3


# --- an LLM metric without an LLM: one error, not one row per sample ------------------------


def test_an_llm_metric_without_llm_is_one_error_not_ten_thousand_rows() -> None:
    samples = Counted([dict(LLM_ROW, id=str(i)) for i in range(10_000)])
    with pytest.raises(ctxeval.ConfigError) as caught:
        ctxeval.evaluate(samples, ["id_mrr", "context_precision", "context_recall"])
    message = str(caught.value)
    assert message.startswith("llm:")
    assert "context_precision" in message  # (its canonical name, llm_context_precision_...)
    assert "context_recall" in message
    assert "id_mrr" not in message
    assert "llm='openai/gpt-4o-mini'" in message
    assert "--model" in message
    assert samples.read == 0  # at once: before the first sample is read (not timed: counted)


@pytest.mark.anyio
async def test_an_llm_metric_without_llm_fails_at_once_in_aevaluate() -> None:
    samples = Counted([dict(LLM_ROW, id=str(i)) for i in range(10_000)])
    with pytest.raises(ctxeval.ConfigError, match="needs an LLM"):
        await ctxeval.aevaluate(samples, ["context_precision"])
    assert samples.read == 0


def test_a_metric_with_its_own_llm_needs_no_run_llm() -> None:
    with FakeOpenAI(Judge(verdicts={"useful": 1})) as server:
        own = LLMConfig(model=UNPRICED, api_base=server.url, api_key="sk-x")
        metric = ctxeval.get_metric("context_precision", llm=own)
        ev = ctxeval.evaluate([LLM_ROW], [metric])
    assert ev.results[0].status == ctxeval.Status.OK


# --- data frames and dicts of columns ---------------------------------------------------------


def _rows(ev: ctxeval.Evaluation) -> list[tuple[Any, ...]]:
    return [(r.sample_id, r.metric, r.status, r.score) for r in ev.results]


def test_a_data_frame_gives_the_rows_of_the_list_of_dicts() -> None:
    pandas = pytest.importorskip("pandas")
    metrics = ["id_mrr", "id_precision_at_k"]
    expected = _rows(ctxeval.evaluate(ID_ROWS, metrics))
    frame = pandas.DataFrame(ID_ROWS)
    assert _rows(ctxeval.evaluate(frame, metrics)) == expected
    # list cells as numpy arrays (as read from Parquet), and a missing value as NaN
    arrays = frame.assign(
        retrieved_context_ids=[__import__("numpy").array(v) for v in frame.retrieved_context_ids],
        reference=[float("nan")] * len(frame),
    )
    assert _rows(ctxeval.evaluate(arrays, metrics)) == expected


def test_a_dict_of_columns_gives_the_rows_of_the_list_of_dicts() -> None:
    columns = {key: [row[key] for row in ID_ROWS] for key in ID_ROWS[0]}
    expected = _rows(ctxeval.evaluate(ID_ROWS, ["id_mrr"]))
    assert _rows(ctxeval.evaluate(columns, ["id_mrr"])) == expected


@pytest.mark.anyio
async def test_a_data_frame_in_aevaluate_with_progress_total() -> None:
    pandas = pytest.importorskip("pandas")
    seen: list[ctxeval.Progress] = []
    ev = await ctxeval.aevaluate(pandas.DataFrame(ID_ROWS), ["id_mrr"], on_progress=seen.append)
    assert len(ev.results) == 3
    assert seen[-1].total == 3


def test_columns_of_unequal_length_are_one_sample_refused() -> None:
    with pytest.raises(ctxeval.ConfigError, match="wrap it in a list"):
        ctxeval.evaluate({"retrieved_context_ids": [["a"]], "id": ["1", "2"]}, ["id_mrr"])


# --- prices -------------------------------------------------------------------------------------


class PricedProvider:
    """A provider plugin with its own price table."""

    name = "priced"

    def __init__(self, price: Price | None) -> None:
        self._price = price

    def configure(self, *, model: str, api_base: str | None = None, **settings: Any) -> Any:
        return LLMConfig(model=model, api_base=api_base, provider=self, **settings)

    def price(self, model: str) -> Price | None:
        return self._price

    def estimate_cost(self, model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
        return None if self._price is None else self._price.cost(prompt_tokens, completion_tokens)


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(Judge(verdicts={"useful": 1})) as fake:
        yield fake


def _llm_rows(n: int) -> list[dict[str, Any]]:
    return [dict(LLM_ROW, id=f"s{i}") for i in range(n)]


def test_a_cost_cap_with_an_unpriced_model_is_refused_before_any_request(
    server: FakeOpenAI,
) -> None:
    llm = LLMConfig(model=UNPRICED, api_base=server.url, api_key="sk-x")
    samples = Counted(_llm_rows(6))
    with pytest.raises(ctxeval.ConfigError) as caught:
        ctxeval.evaluate(samples, ["context_precision"], llm=llm, max_cost_usd=1e-12)
    message = str(caught.value)
    assert message.startswith("max_cost_usd:")
    assert repr(UNPRICED) in message
    assert "price_per_million_tokens" in message
    assert "--price" in message
    assert samples.read == 0
    assert server.count == 0


def test_a_cost_cap_with_an_unpriced_judge_of_a_metric_is_refused(server: FakeOpenAI) -> None:
    own = LLMConfig(model=UNPRICED, api_base=server.url, api_key="sk-x")
    metric = ctxeval.get_metric("context_precision", llm=own)
    with pytest.raises(ctxeval.ConfigError, match="max_cost_usd"):
        ctxeval.evaluate(_llm_rows(2), [metric], max_cost_usd=1.0)
    assert server.count == 0


def test_a_given_price_prices_the_rows_and_the_cap_stops_the_run(server: FakeOpenAI) -> None:
    price = (1_000_000.0, 1_000_000.0)  # one USD a token: the first request spends the cap
    llm = LLMConfig(
        model=UNPRICED, api_base=server.url, api_key="sk-x", price_per_million_tokens=price
    )
    one = ctxeval.evaluate(_llm_rows(1), ["context_precision"], llm=llm)
    usage = one.usage
    assert usage.cost_usd == usage.prompt_tokens + usage.completion_tokens > 0
    sent = server.count
    with pytest.raises(ctxeval.BudgetExceededError):
        ctxeval.evaluate(
            _llm_rows(40), ["context_precision"], llm=llm, max_cost_usd=1e-12, max_concurrency=1
        )
    assert server.count - sent < 10


def test_live_rows_are_priced_by_the_provider_and_a_given_price_overrides_it(
    server: FakeOpenAI,
) -> None:
    provider = PricedProvider(Price(prompt=2.0, completion=3.0))
    llm = provider.configure(model=UNPRICED, api_base=server.url, api_key="sk-x")
    usage = ctxeval.evaluate(_llm_rows(1), ["context_precision"], llm=llm).usage
    assert usage.cost_usd == pytest.approx(2 * usage.prompt_tokens + 3 * usage.completion_tokens)
    # a cap is taken with it: the provider knows the price
    ctxeval.evaluate(_llm_rows(1), ["context_precision"], llm=llm, max_cost_usd=1e9)
    given = provider.configure(
        model=UNPRICED, api_base=server.url, api_key="sk-x", price_per_million_tokens=(1, 1)
    )
    usage = ctxeval.evaluate(_llm_rows(1), ["context_precision"], llm=given).usage
    total = usage.prompt_tokens + usage.completion_tokens
    assert usage.cost_usd == pytest.approx(total / 1_000_000)
    unknown = PricedProvider(None).configure(model=UNPRICED, api_base=server.url, api_key="k")
    assert ctxeval.evaluate(_llm_rows(1), ["context_precision"], llm=unknown).usage.cost_usd is None


def test_the_auto_provider_prices_from_its_table() -> None:
    from ctxeval_llm.provider import AutoProvider

    provider = AutoProvider()
    assert provider.price(UNPRICED) is None
    price = provider.price("openai/gpt-4o-mini")
    if price is None:
        pytest.skip("litellm's price table is not installed")
    assert price.prompt > 0
    assert price.completion > 0
    assert provider.estimate_cost("openai/gpt-4o-mini", 10, 5) == price.cost(10, 5)
    assert provider.configure(model="openai/gpt-4o-mini").price() == price


@pytest.mark.parametrize("bad", [(-1, 2), (1,), ("a", "b"), "0.1,0.2", (1, float("inf"))])
def test_a_bad_price_is_refused(bad: Any) -> None:
    with pytest.raises(ctxeval.ConfigError, match="price"):
        LLMConfig(model=UNPRICED, price_per_million_tokens=bad)


# --- the command line -------------------------------------------------------------------------


def _cli(args: list[str]) -> int | str | None:
    try:
        return main(args)
    except SystemExit as exc:
        return exc.code


def _data(tmp_path: Path, n: int = 6) -> Path:
    path = tmp_path / "data.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in _llm_rows(n)))
    return path


def test_cli_max_cost_with_an_unpriced_model_exits_2(
    tmp_path: Path, server: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    code = _cli(["evaluate", str(_data(tmp_path)), "-m", "context_precision", "--model", UNPRICED,
                 "--api-base", server.url, "--max-cost", "1e-12", "--no-cache", "--out", str(out),
                 "-q"])  # fmt: skip
    assert code == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "max_cost_usd" in err
    assert "--price IN,OUT" in err
    assert server.count == 0
    assert not (out / "results.jsonl").exists()


def test_cli_max_cost_with_a_price_given_runs_and_stops_on_budget(
    tmp_path: Path, server: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    code = _cli(["evaluate", str(_data(tmp_path, 40)), "-m", "context_precision", "--model",
                 UNPRICED, "--api-base", server.url, "--max-cost", "1e-12", "--price", "0.15,0.6",
                 "--no-cache", "--max-concurrency", "1", "--out", str(out), "-q"])  # fmt: skip
    assert code == 1
    assert "reached its cost limit" in " ".join(capsys.readouterr().err.split())
    assert 0 < server.count < 10
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert rows
    assert all("BudgetExceededError" in r["reason"] for r in rows if r["status"] == "error")


def test_cli_price_from_the_run_file(tmp_path: Path, server: FakeOpenAI) -> None:
    config = tmp_path / "run.toml"
    config.write_text(
        f'data = "{_data(tmp_path, 3)}"\nmodel = "{UNPRICED}"\napi_base = "{server.url}"\n'
        "max_cost = 1000.0\nno_cache = true\n"
        '[[metrics]]\nname = "context_precision"\n'
        "[llm]\nprice_per_million_tokens = [0.15, 0.6]\n"
    )
    assert _cli(["evaluate", "--config", str(config), "-q"]) == 0
    assert server.count > 0


@pytest.mark.parametrize("bad", ["1", "a,b", "-1,2", "1,2,3", "nan,1"])
def test_cli_a_bad_price_exits_2(
    bad: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = _cli(["evaluate", str(_data(tmp_path)), "-m", "context_precision", "--model", UNPRICED,
                 "--price", bad, "-q"])  # fmt: skip
    assert code == 2
    assert "--price" in capsys.readouterr().err


def test_cli_dry_run_uses_the_given_price(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["evaluate", str(_data(tmp_path)), "-m", "context_precision", "--model", UNPRICED,
            "--dry-run"]  # fmt: skip
    assert _cli(args) == 0
    assert "estimated cost: unknown" in " ".join(capsys.readouterr().out.split())
    assert _cli([*args, "--price", "0.15,0.6"]) == 0
    assert "estimated cost: $" in " ".join(capsys.readouterr().out.split())
