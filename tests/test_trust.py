"""How far to trust the judge: agreement with people, the PPI-corrected mean, repeats, juries.

The statistical tests run a scripted judge with known error rates on the fake OpenAI server
(over real HTTP, through the LLM plugin), and check the figures against their closed forms.
"""

from __future__ import annotations

import json
import random
import threading
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import ctxeval
from ctxeval import Labels, RetryPolicy
from ctxeval._calls.cache import MemoryCache
from ctxeval._errors import ConfigError, DataError
from ctxeval._judge.agreement import Agreement
from ctxeval._judge.sheet import label_sheet
from ctxeval._results.stats import cohen_kappa, ppi_mean
from ctxeval.plugin import Panel, Verdict, majority, policy
from ctxeval_llm import LLMConfig
from fakes.openai_server import FakeOpenAI
from llm_judge import prompt_name, user_text

FAST = RetryPolicy(initial_backoff=0.001, max_backoff=0.02, jitter=0.0)
PRECISION = "context_precision"  # rows carry the name as written (an alias here)


def _contexts(request: dict[str, Any]) -> list[str]:
    """The chunks a usefulness request judges (one, or a numbered list in batch mode)."""
    text = user_text(request)
    if prompt_name(request) == "usefulness":
        return [text.split("\nContext: ", 1)[1]]
    listing = text.split("\nContexts:\n", 1)[1]
    return [line.split("] ", 1)[1] for line in listing.split("\n")]


def _answer(request: dict[str, Any], verdicts: Sequence[int]) -> str:
    if prompt_name(request) == "usefulness":
        return json.dumps({"reason": "scripted", "verdict": verdicts[0]})
    return json.dumps({"verdicts": [{"reason": "scripted", "verdict": v} for v in verdicts]})


def truth_of(chunk: str) -> int:
    """The scripted truth: a chunk ending in "R" is relevant."""
    return int(chunk.endswith("R"))


class ErringJudge:
    """Wrong on a chunk with probability ``fp`` (truth 0) or ``fn`` (truth 1), decided once
    per chunk (the same answer every time it is asked), per model."""

    def __init__(self, fp: float, fn: float) -> None:
        self.fp, self.fn = fp, fn

    def __call__(self, request: dict[str, Any]) -> str:
        verdicts = []
        for chunk in _contexts(request):
            truth = truth_of(chunk)
            wrong = random.Random(f"{request['model']}|{chunk}").random() < (
                self.fn if truth else self.fp
            )
            verdicts.append(truth ^ wrong)
        return _answer(request, verdicts)


class NoisyJudge:
    """Each judgement of a chunk is wrong with probability ``noise[model]``, independently:
    the k-th time a chunk is asked, the answer is drawn from a generator seeded by the chunk
    and k, so each chunk gets the same multiset of answers whatever the order of requests."""

    def __init__(self, noise: dict[str, float]) -> None:
        self.noise = noise
        self.asked: Counter[tuple[str, str]] = Counter()
        self.lock = threading.Lock()

    def __call__(self, request: dict[str, Any]) -> str:
        verdicts = []
        for chunk in _contexts(request):
            with self.lock:
                k = self.asked[request["model"], chunk]
                self.asked[request["model"], chunk] += 1
            draw = random.Random(f"{request['model']}|{chunk}|{k}").random()
            verdicts.append(truth_of(chunk) ^ (draw < self.noise[request["model"]]))
        return _answer(request, verdicts)


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


def judge(server: FakeOpenAI, model: str = "judge") -> LLMConfig:
    return LLMConfig(model=f"openai/{model}", api_base=server.url, api_key="sk-test")


def pool(n: int, chunks: int, base_rate: float, seed: int = 0) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    return [
        {
            "id": f"s{i}",
            "user_input": f"question {i}",
            "reference": f"reference {i}",
            "retrieved_contexts": [
                f"chunk {i}.{k} " + ("R" if rng.random() < base_rate else "N")
                for k in range(chunks)
            ],
        }
        for i in range(n)
    ]


def true_flags(sample: dict[str, Any]) -> list[int]:
    return [truth_of(c) for c in sample["retrieved_contexts"]]


# --- closed forms -----------------------------------------------------------------------------


def test_kappa_matches_its_closed_form_on_textbook_tables() -> None:
    # Cohen's kappa, the two worked examples of its Wikipedia article
    assert cohen_kappa(20, 5, 10, 15) == pytest.approx(0.4, abs=1e-12)
    assert cohen_kappa(45, 15, 25, 15) == pytest.approx((0.6 - 0.54) / (1 - 0.54), abs=1e-12)
    assert cohen_kappa(7, 0, 0, 3) == 1.0
    assert cohen_kappa(0, 5, 5, 0) == pytest.approx(-1.0)  # total disagreement, balanced
    assert cohen_kappa(10, 0, 0, 0) is None  # one class throughout: chance agreement is 1
    assert cohen_kappa(0, 0, 0, 0) is None


def test_agreement_figures_match_their_closed_forms() -> None:
    counts = [(3, 1, 0, 2), (5, 0, 2, 1), (2, 1, 1, 7)]  # per sample: tp, fp, fn, tn
    a = Agreement.of(counts)
    tp, fp, fn, tn = 10, 2, 3, 10
    assert (a.tp, a.fp, a.fn, a.tn, a.n_items, a.n_samples) == (tp, fp, fn, tn, 25, 3)
    assert a.accuracy == pytest.approx(20 / 25)
    assert a.balanced_accuracy == pytest.approx((10 / 13 + 10 / 12) / 2)
    assert a.kappa == pytest.approx(cohen_kappa(tp, fp, fn, tn))
    low, high = a.kappa_ci95  # type: ignore[misc]
    assert -1 <= low <= high <= 1
    assert Agreement.of([(4, 0, 0, 0), (2, 0, 0, 0)]).balanced_accuracy is None


def test_ppi_mean_matches_its_formula() -> None:
    rng = np.random.default_rng(7)
    y = rng.random(40).round(2)
    f = np.clip(y + rng.normal(0.1, 0.1, 40), 0, 1)
    u = np.clip(rng.random(300) + 0.1, 0, 1)
    out = ppi_mean(list(y), list(f), list(u))
    assert out is not None
    n, big_n = len(y), len(u)
    lam = np.cov(y, f)[0, 1] / ((1 + n / big_n) * np.var(np.concatenate([f, u]), ddof=1))
    lam = min(1.0, max(0.0, lam))
    mean = lam * u.mean() + (y - lam * f).mean()
    se = np.sqrt(lam**2 * u.var(ddof=1) / big_n + (y - lam * f).var(ddof=1) / n)
    assert out["lambda"] == pytest.approx(lam)
    assert out["mean"] == pytest.approx(mean)
    assert out["ci95_low"] == pytest.approx(max(0, mean - 1.959963984540054 * se))
    assert out["ci95_high"] == pytest.approx(min(1, mean + 1.959963984540054 * se))
    # with nothing unlabelled it is the labelled mean; with one label, nothing
    alone = ppi_mean([0.2, 0.4, 0.9], [1.0, 1.0, 1.0], [])
    assert alone is not None
    assert alone["mean"] == pytest.approx(0.5)
    assert alone["lambda"] == 0
    assert ppi_mean([1.0], [1.0], [0.5, 0.5]) is None


# --- labels files -----------------------------------------------------------------------------


def test_labels_load_in_both_forms_and_from_csv(tmp_path: Path) -> None:
    jsonl = tmp_path / "labels.jsonl"
    jsonl.write_text(
        '{"sample_id": "a", "metric": "context_precision", "labels": [1, 0, true]}\n\n'
        '{"sample_id": 7, "metric": "context_recall", "index": 2, "label": false}\n'
        '{"sample_id": 7, "metric": "context_recall", "index": 3, "label": null}\n'
        '{"sample_id": "b", "metric": "context_recall", "labels": [null, 1]}\n'
    )
    labels = Labels.load(jsonl)
    assert labels.items == {
        ("context_precision", "a"): {0: 1, 1: 0, 2: 1},
        ("context_recall", "7"): {2: 0},
        ("context_recall", "b"): {1: 1},  # null: not labelled yet
    }
    assert labels.lines["context_recall", "7", 2] == 3  # the file's own line, blanks counted
    csv_file = tmp_path / "labels.csv"
    csv_file.write_text(
        "sample_id,metric,index,label\na,context_precision,0,1\na,context_precision,1,no\n"
    )
    assert Labels.load(csv_file).items == {("context_precision", "a"): {0: 1, 1: 0}}


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ('{"sample_id": "a", "metric": "m", "index": 0, "label": 2}', "label"),
        ('{"sample_id": "a", "metric": "m", "index": -1, "label": 1}', "index"),
        ('{"metric": "m", "index": 0, "label": 1}', "sample_id"),
        ('{"sample_id": "a", "index": 0, "label": 1}', "metric"),
        ('{"sample_id": "a", "metric": "m"}', "index and label"),
        ('{"sample_id": "a", "metric": "m", "labels": "x"}', "labels"),
        ("not json", "not JSON"),
    ],
)
def test_a_bad_label_is_named_with_file_and_line(tmp_path: Path, line: str, words: str) -> None:
    path = tmp_path / "labels.jsonl"
    path.write_text('{"sample_id": "ok", "metric": "m", "index": 0, "label": 1}\n' + line + "\n")
    with pytest.raises(DataError) as caught:
        Labels.load(path)
    assert f"{path}:2" in str(caught.value)
    assert words in str(caught.value)


def test_two_labels_of_one_item_that_differ_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "labels.jsonl"
    path.write_text(
        '{"sample_id": "a", "metric": "m", "index": 1, "label": 1}\n'
        '{"sample_id": "a", "metric": "m", "labels": [0, 0]}\n'
    )
    with pytest.raises(DataError, match="labelled 1 on line 1 and 0 here"):
        Labels.load(path)


def test_labels_for_a_metric_the_run_does_not_score_stop_it_before_any_call(
    server: FakeOpenAI,
) -> None:
    labels = Labels.from_records([{"sample_id": "s0", "metric": "context_recall", "labels": [1]}])
    with pytest.raises(ConfigError, match="does not score; it scores: context_precision"):
        ctxeval.evaluate(pool(2, 2, 0.5), ["context_precision"], llm=judge(server), labels=labels)
    assert server.count == 0


# --- the corrected mean: coverage over many seeds ---------------------------------------------


def test_ppi_interval_covers_the_true_mean_and_the_judged_mean_is_biased(
    server: FakeOpenAI,
) -> None:
    """A judge wrong on 10% of irrelevant chunks and 20% of relevant ones, relevant chunks 70%
    of all: its mean is biased. Over 1000 seeds, each drawing 400 samples (120 labelled by
    people, i.e. with the truth) from a judged pool, the PPI 95% interval covers the pool's
    true mean in 93-97% of them."""
    server.responder = ErringJudge(fp=0.10, fn=0.20)
    samples = pool(1500, 3, base_rate=0.7)
    metric = ctxeval.get_metric("context_precision", batch=True)
    judged = ctxeval.evaluate(samples, [metric], llm=judge(server), retry=FAST)
    assert judged.ok
    assert server.count == len(samples)
    rows = judged.rows(PRECISION)
    formula = policy.AveragePrecision()
    human = {s["id"]: true_flags(s) for s in samples}
    truths = [formula.value([bool(f) for f in human[s["id"]]], 1) for s in samples]
    true_mean = sum(truths) / len(truths)
    judged_bias = judged.summary()[PRECISION].mean - true_mean  # type: ignore[operator]
    assert judged_bias < -0.04  # the judge misses relevant chunks: it scores low

    covered = naive_covered = 0
    seeds = 1000
    for seed in range(seeds):
        rng = random.Random(seed)
        drawn = [rng.randrange(len(rows)) for _ in range(400)]  # iid from the pool
        taken = [rows[i].labelled(f"d{k}", PRECISION) for k, i in enumerate(drawn)]
        labels = Labels(
            {
                (PRECISION, f"d{k}"): dict(enumerate(human[rows[i].sample_id]))
                for k, i in enumerate(drawn[:120])
            }
        )
        run = ctxeval.Evaluation(taken, [PRECISION], labels=labels, formulas={PRECISION: formula})
        corrected = run.trust()[PRECISION].corrected
        assert corrected is not None
        assert corrected.n_labelled == 120
        covered += corrected.ci95[0] <= true_mean <= corrected.ci95[1]
        low, high = run.summary()[PRECISION].ci95  # type: ignore[misc]
        naive_covered += low <= true_mean <= high
    assert 0.93 <= covered / seeds <= 0.97, covered / seeds
    assert naive_covered / seeds < 0.5, naive_covered / seeds


def test_agreement_and_corrected_mean_of_a_run_with_a_labels_file(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    server.responder = ErringJudge(fp=0.10, fn=0.20)
    samples = pool(300, 3, base_rate=0.6, seed=3)
    path = tmp_path / "labels.jsonl"
    with path.open("w") as handle:
        for sample in samples[:90]:
            record = {"sample_id": sample["id"], "metric": "context_precision"}
            handle.write(json.dumps({**record, "labels": true_flags(sample)}) + "\n")
        handle.write(json.dumps({**record, "sample_id": "nope", "index": 0, "label": 1}) + "\n")
    ev = ctxeval.evaluate(samples, ["context_precision"], llm=judge(server), labels=path)
    trust = ev.trust()[PRECISION]
    a = trust.agreement
    assert a is not None
    assert a.n_samples == 90
    assert a.n_items == 270
    # the confusion counts are those of the scripted errors, counted by hand
    expected = Counter()
    for sample in samples[:90]:
        for chunk in sample["retrieved_contexts"]:
            t = truth_of(chunk)
            said = t ^ (random.Random(f"judge|{chunk}").random() < (0.2 if t else 0.1))
            expected["tp" if said and t else "fp" if said else "fn" if t else "tn"] += 1
    assert (a.tp, a.fp, a.fn, a.tn) == (
        expected["tp"],
        expected["fp"],
        expected["fn"],
        expected["tn"],
    )
    assert a.kappa == pytest.approx(cohen_kappa(a.tp, a.fp, a.fn, a.tn))
    assert trust.skipped == {"sample not in the run": 1}
    corrected = trust.corrected
    assert corrected is not None
    assert corrected.n_labelled == 90
    assert corrected.n_unlabelled == 210
    # the same figures in summary.json, the terminal and the report
    out = tmp_path / "run"
    from ctxeval._output.folder import write_outputs
    from ctxeval._output.summary import summary_dict

    summary = summary_dict(ev)
    paths = write_outputs(ev, out, title="t", summary=summary)
    written = json.loads(paths["summary"].read_text())["metrics"][PRECISION]["judge"]
    assert written["agreement"]["kappa"] == pytest.approx(a.kappa)
    assert written["corrected"]["mean"] == pytest.approx(corrected.mean)
    page = paths["report"].read_text()
    assert "How far to trust the judge" in page
    assert f"{corrected.mean:.3f}" in page


# --- repeats ---------------------------------------------------------------------------------


def test_flip_rates_match_the_scripted_noise_and_repeats_are_cached(server: FakeOpenAI) -> None:
    p, repeats = 0.2, 5
    server.responder = NoisyJudge({"judge": p})
    samples = pool(250, 4, base_rate=0.5, seed=5)
    metric = ctxeval.get_metric("context_precision", batch=True, repeats=repeats)
    cache = MemoryCache()
    ev = ctxeval.evaluate(samples, [metric], llm=judge(server), cache=cache, retry=FAST)
    assert ev.ok
    assert server.count == len(samples) * repeats
    assert len(cache) == len(samples) * repeats  # each repeat its own entry
    temperatures = {r["temperature"] for r in server.requests}
    assert temperatures == {0.7}
    r = ev.trust()[PRECISION].repeatability
    assert r is not None
    assert r.n_items == 1000
    assert r.disagreement == pytest.approx(2 * p * (1 - p), abs=0.03)
    assert r.flip_rate == pytest.approx(1 - (1 - p) ** repeats - p**repeats, abs=0.05)
    assert len(r.unsure) == round(r.flip_rate * 1000)  # type: ignore[operator]
    # the majority verdict is the one scored
    for row in ev.rows(PRECISION):
        votes = {v["index"]: v["judges"]["judge"] for v in row.details["votes"]}
        assert row.details["flags"] == [majority(votes[i]) for i in range(4)]
    # a re-run reads every repeat back from the cache, and gives the same rows
    before = server.count
    again = ctxeval.evaluate(samples, [metric], llm=judge(server), cache=cache, retry=FAST)
    assert server.count == before
    assert [x.details["votes"] for x in again.results] == [x.details["votes"] for x in ev.results]


def test_recall_repeats_judge_the_statements_the_first_judgement_split(server: FakeOpenAI) -> None:
    def responder(request: dict[str, Any]) -> str:
        if prompt_name(request) == "attribution":
            return json.dumps(
                {
                    "classifications": [
                        {"statement": "A.", "reason": "r", "attributed": 1},
                        {"statement": "B.", "reason": "r", "attributed": 0},
                    ]
                }
            )
        assert prompt_name(request) == "attribution_given"
        assert user_text(request).endswith("Statements:\n[1] A.\n[2] B.")
        return json.dumps(
            {"verdicts": [{"reason": "g", "attributed": 1}, {"reason": "g", "attributed": 1}]}
        )

    server.responder = responder
    metric = ctxeval.get_metric("context_recall", repeats=3)
    ev = ctxeval.evaluate(pool(3, 2, 0.5), [metric], llm=judge(server), retry=FAST)
    assert ev.ok
    assert server.count == 9
    row = ev.results[0]
    assert row.score == 1.0  # B. is attributed by 2 of 3 judgements
    assert [v["judges"]["judge"] for v in row.details["votes"]] == [[1, 1, 1], [0, 1, 1]]
    labels = Labels.from_records(
        [{"sample_id": "s0", "metric": "context_recall", "labels": [1, 0]}]
    )
    agreement = ev.with_labels(labels).trust()["context_recall"].agreement
    assert agreement is not None
    assert (agreement.tp, agreement.fp) == (1, 1)


# --- juries ----------------------------------------------------------------------------------


def test_escalate_asks_the_strong_judge_only_where_the_cheap_one_is_unsure(
    server: FakeOpenAI,
) -> None:
    server.responder = NoisyJudge({"cheap": 0.25, "strong": 0.0})
    samples = pool(60, 3, base_rate=0.5, seed=9)
    metric = ctxeval.get_metric(
        "context_precision",
        judges=[judge(server, "cheap"), judge(server, "strong")],
        repeats=3,
        jury="escalate",
    )
    ev = ctxeval.evaluate(samples, [metric], retry=FAST, max_concurrency=4)
    assert ev.ok
    asked = Counter(r["model"] for r in server.requests)
    jury = ev.trust()[PRECISION].jury
    assert jury is not None
    assert asked["cheap"] == 180 * 3  # one request per chunk and repeat
    assert asked["strong"] == jury.n_escalated > 0  # only the unsure chunks
    assert jury.usage["openai/cheap"].requests == asked["cheap"]
    assert jury.usage["openai/strong"].requests == asked["strong"]
    assert server.peak_in_flight <= 4  # the one scheduler's limit holds for every judge
    # the strong judge (never wrong) decides every escalated chunk; the strong one runs once
    # at its own temperature
    for row, sample in zip(ev.rows(PRECISION), samples, strict=True):
        for vote in row.details["votes"]:
            if vote["escalated"]:
                assert row.details["flags"][vote["index"]] == true_flags(sample)[vote["index"]]
                assert vote["judges"]["openai/strong"] == [true_flags(sample)[vote["index"]]]
            else:
                assert len(set(vote["judges"]["openai/cheap"])) == 1
    strong = [r for r in server.requests if r["model"] == "strong"]
    assert {r["temperature"] for r in strong} == {0.0}
    judges = ev.results[0].details["provenance"]["judges"]
    assert [j["judge"] for j in judges] == ["openai/cheap", "openai/strong"]
    assert {j["prompts"][0] for j in judges} == {"usefulness@1"}


def test_majority_of_three_judges_and_their_agreement(server: FakeOpenAI) -> None:
    server.responder = ErringJudge(fp=0.3, fn=0.3)
    samples = pool(100, 2, base_rate=0.5, seed=11)
    judges = [judge(server, name) for name in ("a", "b", "c")]
    metric = ctxeval.get_metric("context_precision", judges=judges, batch=True)
    ev = ctxeval.evaluate(samples, [metric], retry=FAST)
    jury = ev.trust()[PRECISION].jury
    assert jury is not None
    assert jury.n_items == 200
    assert jury.n_escalated == 0
    assert [(p["a"], p["b"]) for p in jury.pairs] == [
        ("openai/a", "openai/b"), ("openai/a", "openai/c"), ("openai/b", "openai/c"),
    ]  # fmt: skip
    for row, _sample in zip(ev.rows(PRECISION), samples, strict=True):
        for vote in row.details["votes"]:
            said = [vote["judges"][f"openai/{m}"][0] for m in "abc"]
            assert row.details["flags"][vote["index"]] == int(sum(said) >= 2)

    # each pair's agreement, counted by hand from the scripted answers
    def said(model: str, chunk: str) -> int:
        t = truth_of(chunk)
        return t ^ (random.Random(f"{model}|{chunk}").random() < 0.3)

    chunks = [c for s in samples for c in s["retrieved_contexts"]]
    same = sum(said("a", c) == said("b", c) for c in chunks)
    assert jury.pairs[0]["agreement"] == pytest.approx(same / len(chunks))


class _Fixed:
    """A matcher that answers ``answers[repeat]`` (the repeat its JudgeContext says)."""

    name = "fixed"
    needs_llm = False

    def __init__(self, *answers: Sequence[int]) -> None:
        self.answers = answers

    async def match(
        self, items: Sequence[str], candidates: Sequence[str], ctx: Any
    ) -> list[Verdict]:
        said = self.answers[ctx.repeat]
        return [Verdict(bool(v), float(v), None, f"said {v}") for v in said]


@pytest.mark.anyio
async def test_panel_rules_break_ties_as_documented() -> None:
    from ctxeval._calls.context import RowContext
    from ctxeval._calls.scheduler import Scheduler

    ctx = RowContext(Scheduler(ctxeval.default_registry(), ctxeval.RunSettings()))
    # one judge, two repeats that disagree: the first judgement wins
    one = Panel(judges=[_Fixed([1], [0])], repeats=2)
    [verdict] = await one.match(["x"], ["c"], ctx)
    assert verdict.matched
    assert verdict.score == 0.5
    assert verdict.votes.unsure
    # two judges that disagree: the one listed last wins
    two = Panel(judges=[_Fixed([1]), _Fixed([0])], names=["a", "b"])
    [verdict] = await two.match(["x"], ["c"], ctx)
    assert not verdict.matched
    assert verdict.votes.disagree
    assert verdict.reason == "said 0"


def test_bad_judging_options_are_refused_at_once(server: FakeOpenAI) -> None:
    with pytest.raises(ConfigError, match="jury"):
        ctxeval.get_metric("context_precision", jury="vote")
    with pytest.raises(ConfigError, match="repeats"):
        ctxeval.get_metric("context_precision", repeats=0)
    with pytest.raises(ConfigError, match="not both"):
        ctxeval.get_metric("context_precision", llm="openai/x", judges=["openai/y", "openai/z"])
    with pytest.raises(ConfigError, match="repeats >= 2"):
        ctxeval.get_metric("context_precision", judges=["openai/y", "openai/z"], jury="escalate")
    with pytest.raises(ConfigError, match="call an LLM"):
        ctxeval.get_metric("context_entity_recall", extractor="spacy", repeats=3)


def test_a_dry_run_counts_every_repeat_and_judge(tmp_path: Path, capsys: Any) -> None:
    from ctxeval.cli import main

    data = tmp_path / "data.jsonl"
    data.write_text("\n".join(json.dumps(s) for s in pool(4, 3, 0.5)) + "\n")
    judges = '["openai/gpt-4o-mini","openai/gpt-4.1-mini","openai/gpt-4o"]'
    spec = f"context_precision:judges={judges},repeats=3,jury=escalate"
    assert main(["evaluate", str(data), "-m", spec, "--dry-run"]) == 0
    said = capsys.readouterr().out
    # 12 chunks: two cheap judges x 3 repeats, and the strong one at most once each, each
    # judge priced at its own model's price
    assert "84 LLM calls; estimated cost: $" in said
    assert "openai/gpt-4o-mini: 36 calls, $" in said
    assert "openai/gpt-4.1-mini: 36 calls, $" in said
    assert "openai/gpt-4o: 12 calls, $" in said


def test_a_metric_with_its_own_llm_settings_object_is_judged(server: FakeOpenAI) -> None:
    """(An LLMConfig holds a dict, so the parts of a metric holding one cannot be hashed: the
    row's provenance must not need them to be.)"""
    server.responder = ErringJudge(fp=0.0, fn=0.0)
    metric = ctxeval.get_metric("context_precision", llm=judge(server))
    ev = ctxeval.evaluate(pool(3, 2, 0.5), [metric], retry=FAST)
    assert ev.ok, ev.results[0].reason
    provenance = ev.results[0].details["provenance"]
    assert provenance["ctxeval"] == ctxeval.__version__
    assert provenance["judges"] == [
        {
            "model": "openai/judge",
            "endpoint": server.url,
            "prompts": ["usefulness@1"],
            "temperature": 0.0,
            "max_tokens": 1024,
            "output_mode": "json_schema",
        }
    ]


def test_entity_recall_rows_are_checked_against_people_entity_by_entity() -> None:
    """The entity recall seed's worked example (2/3 with spaCy), each reference entity's
    verdict compared with a person's (Gustave Eiffel is not in the context; Paris and 1889
    are)."""
    pytest.importorskip("spacy")
    from seed_data import EIFFEL_CONTEXT, EIFFEL_REFERENCE

    sample = {"id": "eiffel", "reference": EIFFEL_REFERENCE, "retrieved_contexts": [EIFFEL_CONTEXT]}
    metric = ctxeval.get_metric("context_entity_recall", extractor="spacy")
    ev = ctxeval.evaluate([sample], [metric])
    row = ev.results[0]
    entities, flags = row.details["reference_entities"], row.details["flags"]
    assert row.score == pytest.approx(2 / 3)
    assert flags == [0, 1, 1]
    assert entities[0] == "Gustave Eiffel"
    labels = Labels.from_records(
        [{"sample_id": "eiffel", "metric": "context_entity_recall", "labels": [0, 1, 1]}]
    )
    a = ev.with_labels(labels).trust()["context_entity_recall"].agreement
    assert a is not None
    assert (a.tp, a.fp, a.fn, a.tn) == (2, 0, 0, 1)
    assert a.accuracy == 1.0
    assert a.kappa == 1.0


def test_a_label_sheet_drawn_from_a_run_and_filled_in_is_a_labels_file(
    server: FakeOpenAI, tmp_path: Path, capsys: Any
) -> None:
    from ctxeval._output.folder import write_outputs
    from ctxeval.cli import main

    server.responder = ErringJudge(fp=0.1, fn=0.2)
    samples = pool(40, 3, base_rate=0.5, seed=13)
    data = tmp_path / "data.jsonl"
    data.write_text("\n".join(json.dumps(s) for s in samples) + "\n")
    ev = ctxeval.evaluate(samples, ["context_precision"], llm=judge(server), retry=FAST)
    write_outputs(ev, tmp_path / "run", title="t")
    argv = ["label-sheet", str(tmp_path / "run"), "-m", "context_precision", "-n", "10"]
    assert main([*argv, "--data", str(data)]) == 0
    sheet_path = tmp_path / "run" / "label-sheet.jsonl"
    assert "30 items of 10 samples to label" in capsys.readouterr().out
    with pytest.raises(SystemExit) as refused:  # never overwritten
        main([*argv, "--data", str(data)])
    assert refused.value.code == 2
    sheet = [json.loads(line) for line in sheet_path.read_text().splitlines()]
    by_id = {s["id"]: s for s in samples}
    for record in sheet:
        sample = by_id[record["sample_id"]]
        assert record["item"] == sample["retrieved_contexts"][record["index"]]
        assert record["question"] == sample["user_input"]
        assert record["label"] is None
        assert "verdict" not in record
    # the same draw for the same seed; a labels file once filled in (one item left blank)
    again = label_sheet(ev, PRECISION, samples={}, n=10)
    assert [(r["sample_id"], r["index"]) for r in again] == [
        (r["sample_id"], r["index"]) for r in sheet
    ]
    for record in sheet[1:]:
        record["label"] = truth_of(record["item"])
    sheet_path.write_text("\n".join(json.dumps(r) for r in sheet) + "\n")
    trust = ev.with_labels(sheet_path).trust()[PRECISION]
    assert trust.agreement is not None
    assert trust.agreement.n_items == 29
    assert trust.corrected is not None
    assert trust.corrected.n_labelled == 9
    assert trust.skipped == {"sample partly labelled (agreement only, not the corrected mean)": 1}


def test_trust_leaves_the_evidence_of_deterministic_rows_uncomputed() -> None:
    """summary.json asks every run what it says of its judges; the fast path's rows have no
    judge, and their evidence (computed when read) must stay unread."""
    from ctxeval._output.summary import summary_dict
    from ctxeval._results.results import LazyDetails

    rows = [
        {"id": str(i), "retrieved_context_ids": ["a", "b", str(i)], "reference_context_ids": ["a"]}
        for i in range(3000)
    ]
    ev = ctxeval.evaluate(rows, ["id_based_context_precision", "id_mrr"])
    lazy = [r.details for r in ev.results if isinstance(r.details, LazyDetails)]
    assert len(lazy) == len(ev.results)
    assert ev.trust() == {}
    assert "judge" not in summary_dict(ev)["metrics"]["id_mrr"]
    assert all(d._value is None for d in lazy)  # not one computed


def test_the_unsure_items_in_the_report_link_to_their_samples() -> None:
    from ctxeval._output.trust_section import trust_section

    votes = {"judge": [1, 0, 1]}
    summary = {
        "metrics": {
            PRECISION: {
                "judge": {
                    "repeatability": {
                        "n_items": 9,
                        "flip_rate": 0.2,
                        "disagreement": 0.3,
                        "unsure": [{"sample_id": "a&b c", "index": 2, "votes": votes}],
                        "n_unsure": 1,
                    }
                }
            }
        }
    }
    page = trust_section(summary)
    view = f"#metric={PRECISION}&amp;id=a%26b+c&amp;open=a%26b+c"
    assert f"<a href='{view}'><code>a&amp;b c</code></a>" in page
