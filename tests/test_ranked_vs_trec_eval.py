"""The ranked ID metrics equal trec_eval's values (through pytrec_eval) on random queries.

Runs carry tied scores (trec_eval breaks ties by document id, descending) and repeated
documents (ctxeval keeps a repeated ID at its first rank; pytrec_eval's dict can hold each
document once, at that rank).
"""

from __future__ import annotations

import random

import pytest

import ctxeval

pytrec_eval = pytest.importorskip("pytrec_eval")

QUERIES = 600
KS = (1, 3, 5, 10)


def trec_order(scored: dict[str, int]) -> list[str]:
    """trec_eval's ranking: score descending, ties by document id descending."""
    return sorted(scored, key=lambda doc: (scored[doc], doc), reverse=True)


def random_queries(seed: int) -> list[tuple[str, dict[str, int], list[str], dict[str, int]]]:
    rng = random.Random(seed)
    pool = [f"d{i:02d}" for i in range(40)]
    queries = []
    for q in range(QUERIES):
        relevant = rng.sample(pool, rng.randint(1, 9))
        scored = {doc: rng.randint(0, 6) for doc in rng.sample(pool, rng.randint(1, 25))}
        ranked = trec_order(scored)
        with_repeats = list(ranked)
        for _ in range(rng.randint(0, 4)):  # a repeat never comes before its first rank
            doc = rng.choice(ranked)
            position = rng.randint(with_repeats.index(doc) + 1, len(with_repeats))
            with_repeats.insert(position, doc)
        queries.append((f"q{q}", dict.fromkeys(relevant, 1), with_repeats, scored))
    return queries


@pytest.fixture(scope="module")
def queries_and_trec() -> tuple[list, dict[str, dict[str, float]]]:
    queries = random_queries(seed=20261122)
    qrels = {qid: rel for qid, rel, _, _ in queries}
    runs = {
        qid: {doc: float(score) for doc, score in scored.items()} for qid, _, _, scored in queries
    }
    measures = {"recip_rank", "map"}
    for k in KS:
        measures |= {f"P_{k}", f"recall_{k}", f"success_{k}", f"ndcg_cut_{k}"}
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, measures)
    return queries, evaluator.evaluate(runs)


def ours(metric: ctxeval.Metric, queries: list) -> dict[str, float | None]:
    samples = [
        {"id": qid, "retrieved_context_ids": ranked, "reference_context_ids": list(rel)}
        for qid, rel, ranked, _ in queries
    ]
    evaluation = ctxeval.evaluate(samples, metrics=[metric])
    assert evaluation.ok
    return {row.sample_id: row.score for row in evaluation.results}


CASES = [("id_mrr", {}, "recip_rank"), ("id_average_precision", {}, "map")]
for _k in KS:
    CASES += [
        ("id_precision_at_k", {"k": _k}, f"P_{_k}"),
        ("id_recall_at_k", {"k": _k}, f"recall_{_k}"),
        ("id_hit_rate_at_k", {"k": _k}, f"success_{_k}"),
        ("id_ndcg_at_k", {"k": _k}, f"ndcg_cut_{_k}"),
    ]


@pytest.mark.parametrize(("metric", "options", "measure"), CASES)
def test_ranked_metric_equals_trec_eval(
    metric: str, options: dict[str, int], measure: str, queries_and_trec: tuple
) -> None:
    queries, trec = queries_and_trec
    assert len(queries) >= 500
    got = ours(ctxeval.get_metric(metric, **options), queries)
    mismatches = [
        (qid, got[qid], trec[qid][measure])
        for qid, _, _, _ in queries
        if got[qid] != pytest.approx(trec[qid][measure], rel=1e-12, abs=1e-12)
    ]
    assert not mismatches, mismatches[:5]


def test_the_fixture_really_has_ties_and_repeats() -> None:
    queries = random_queries(seed=20261122)
    assert sum(len(set(s.values())) < len(s) for _, _, _, s in queries) > 100
    assert sum(len(set(r)) < len(r) for _, _, r, _ in queries) > 100
