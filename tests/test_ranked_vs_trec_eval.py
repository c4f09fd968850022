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
    measures = {"recip_rank", "map", "Rprec"}
    for k in KS:
        measures |= {f"P_{k}", f"recall_{k}", f"success_{k}", f"ndcg_cut_{k}", f"map_cut_{k}"}
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


CASES = [
    ("id_mrr", {}, "recip_rank"),
    ("id_average_precision", {}, "map"),
    ("id_r_precision", {}, "Rprec"),
    ("RR", {}, "recip_rank"),  # ir_measures names
    ("AP", {}, "map"),
    ("Rprec", {}, "Rprec"),
]
for _k in KS:
    CASES += [
        ("id_precision_at_k", {"k": _k}, f"P_{_k}"),
        ("id_recall_at_k", {"k": _k}, f"recall_{_k}"),
        ("id_hit_rate_at_k", {"k": _k}, f"success_{_k}"),
        ("id_ndcg_at_k", {"k": _k}, f"ndcg_cut_{_k}"),
        ("id_average_precision_at_k", {"k": _k}, f"map_cut_{_k}"),
        (f"nDCG@{_k}", {}, f"ndcg_cut_{_k}"),
        (f"P@{_k}", {}, f"P_{_k}"),
        (f"R@{_k}", {}, f"recall_{_k}"),
        (f"Success@{_k}", {}, f"success_{_k}"),
        (f"AP@{_k}", {}, f"map_cut_{_k}"),
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


def _reciprocal_rank_at(k: int, ranked: list[str], relevant: set[str]) -> float:
    """RR@k by its definition (ranx ``mrr@k``): the first relevant rank within the top k."""
    top = list(dict.fromkeys(ranked))[:k]
    return next((1 / rank for rank, doc in enumerate(top, start=1) if doc in relevant), 0.0)


def _f1_at(k: int, ranked: list[str], relevant: set[str]) -> float:
    """F1@k by its definition (ranx ``f1@k``): the harmonic mean of P@k and R@k."""
    hits = sum(doc in relevant for doc in list(dict.fromkeys(ranked))[:k])
    p, r = hits / k, hits / len(relevant)
    return 0.0 if hits == 0 else 2 * p * r / (p + r)


@pytest.mark.parametrize("k", KS)
def test_rr_and_f1_at_k_equal_their_definitions(k: int) -> None:
    queries = random_queries(seed=7)
    rr = ours(ctxeval.get_metric(f"RR@{k}"), queries)
    f1 = ours(ctxeval.get_metric(f"F1@{k}"), queries)
    for qid, rel, ranked, _ in queries:
        assert rr[qid] == _reciprocal_rank_at(k, ranked, set(rel))
        assert f1[qid] == pytest.approx(_f1_at(k, ranked, set(rel)), rel=1e-15)


@pytest.mark.parametrize(
    ("name", "metric", "options"),
    [
        ("nDCG@10", "id_ndcg_at_k", {"k": 10}),
        ("ndcg_cut_10", "id_ndcg_at_k", {"k": 10}),
        ("precision@5", "id_precision_at_k", {"k": 5}),
        ("P_5", "id_precision_at_k", {"k": 5}),
        ("recall@100", "id_recall_at_k", {"k": 100}),
        ("hits@3", "id_hit_rate_at_k", {"k": 3}),
        ("MAP", "id_average_precision", {}),
        ("map@5", "id_average_precision_at_k", {"k": 5}),
        ("MRR", "id_mrr", {}),
        ("mrr@10", "id_reciprocal_rank_at_k", {"k": 10}),
        ("r-precision", "id_r_precision", {}),
        ("f1@5", "id_f1_at_k", {"k": 5}),
    ],
)
def test_ir_measure_names_stand_for_the_id_metrics(
    name: str, metric: str, options: dict[str, int]
) -> None:
    built = ctxeval.get_metric(name)
    plain = ctxeval.get_metric(metric, **options)
    assert built.name == name  # rows carry the name as written
    assert type(built) is type(plain)
    assert built.pipeline.formula == plain.pipeline.formula  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("name", "message"),
    [("nDCG", "needs a cut-off"), ("Rprec@5", "takes no cut-off"), ("recip_rank@3", "no cut-off")],
)
def test_ir_measure_names_refuse_a_missing_or_extra_cut_off(name: str, message: str) -> None:
    with pytest.raises(ctxeval.ConfigError, match=message):
        ctxeval.get_metric(name)


# --- graded relevance ------------------------------------------------------------------------


def graded_queries(seed: int) -> list[tuple[str, dict[str, int], list[str], dict[str, int]]]:
    """Like :func:`random_queries`, with qrels graded 0 (judged not relevant) to 3."""
    rng = random.Random(seed)
    out = []
    for qid, relevant, ranked, scored in random_queries(seed):
        judged = {doc: rng.randint(1, 3) for doc in relevant}
        for doc in rng.sample(sorted(scored), min(3, len(scored))):
            judged.setdefault(doc, 0)
        out.append((qid, judged, ranked, scored))
    return out


@pytest.fixture(scope="module")
def graded_and_trec() -> tuple[list, dict[int, dict[str, dict[str, float]]]]:
    queries = graded_queries(seed=4242)
    qrels = {qid: judged for qid, judged, _, _ in queries}
    runs = {qid: {d: float(s) for d, s in scored.items()} for qid, _, _, scored in queries}
    measures = {"map", "Rprec", "recip_rank", "bpref"}
    for k in KS:
        measures |= {f"P_{k}", f"recall_{k}", f"ndcg_cut_{k}", f"map_cut_{k}", f"success_{k}"}
    by_level = {
        level: pytrec_eval.RelevanceEvaluator(qrels, measures, relevance_level=level).evaluate(runs)
        for level in (1, 2)
    }
    return queries, by_level


def graded_ours(metric: ctxeval.Metric, queries: list) -> dict[str, float | None]:
    samples = [
        {"id": qid, "retrieved_context_ids": ranked, "reference_context_ids": judged}
        for qid, judged, ranked, _ in queries
    ]
    evaluation = ctxeval.evaluate(samples, metrics=[metric])
    return {row.sample_id: row.score for row in evaluation.results}


GRADED_CASES = [(f"nDCG@{k}", f"ndcg_cut_{k}") for k in KS]


@pytest.mark.parametrize(("name", "measure"), GRADED_CASES)
def test_ndcg_uses_the_grades_as_trec_eval_does(
    name: str, measure: str, graded_and_trec: tuple
) -> None:
    queries, trec = graded_and_trec
    got = graded_ours(ctxeval.get_metric(name), queries)
    mismatches = [
        (qid, got[qid], trec[1][qid][measure])
        for qid, _, _, _ in queries
        if got[qid] != pytest.approx(trec[1][qid][measure], rel=1e-12, abs=1e-12)
    ]
    assert not mismatches, mismatches[:5]
    # the grades matter: binary gains would give other values on most queries
    binary = graded_ours(ctxeval.get_metric(name), [
        (qid, dict.fromkeys([d for d, g in judged.items() if g > 0], 1), ranked, scored)
        for qid, judged, ranked, scored in queries
    ])  # fmt: skip
    assert sum(binary[q] != got[q] for q in got) > len(got) // 20


BINARY_AT_LEVEL = [("AP", "map"), ("Rprec", "Rprec"), ("RR", "recip_rank"), ("bpref", "bpref")]
for _k in KS:
    BINARY_AT_LEVEL += [
        (f"P@{_k}", f"P_{_k}"),
        (f"R@{_k}", f"recall_{_k}"),
        (f"AP@{_k}", f"map_cut_{_k}"),
        (f"Success@{_k}", f"success_{_k}"),
    ]


@pytest.mark.parametrize("level", [1, 2])
@pytest.mark.parametrize(("name", "measure"), BINARY_AT_LEVEL)
def test_binary_measures_at_a_relevance_level_equal_trec_eval(
    name: str, measure: str, level: int, graded_and_trec: tuple
) -> None:
    queries, trec = graded_and_trec
    got = graded_ours(ctxeval.get_metric(name, relevance_level=level), queries)
    mismatches = []
    for qid, judged, _, _ in queries:
        if not any(g >= level for g in judged.values()):
            # nothing relevant at this level: undefined here, 0 in trec_eval (see the docs)
            assert got[qid] is None
            continue
        if got[qid] != pytest.approx(trec[level][qid][measure], rel=1e-12, abs=1e-12):
            mismatches.append((qid, got[qid], trec[level][qid][measure]))
    assert not mismatches, mismatches[:5]


def test_graded_ids_load_from_every_input_form() -> None:
    sample = ctxeval.Sample.from_dict(
        {"retrieved_context_ids": ["a", "b"], "reference_context_ids": {"a": 2, "b": 0, 7: 1}}
    )
    assert tuple(sample.reference_context_ids) == ("a", "b", "7")
    assert sample.reference_context_ids.grades == (2, 0, 1)  # type: ignore[union-attr]
    assert sample.to_dict()["reference_context_ids"] == {"a": 2, "b": 0, "7": 1}
    with pytest.raises(ctxeval.DataError, match="grades are integers"):
        ctxeval.Sample(reference_context_ids={"a": "high"})
    with pytest.raises(ctxeval.DataError, match="only reference_context_ids take grades"):
        ctxeval.Sample(retrieved_context_ids={"a": 1})
    # judged not relevant (grade 0) does not count, at any relevance level
    [row] = ctxeval.evaluate([sample], ["P@2"]).results
    assert row.score == 0.5
