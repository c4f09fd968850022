"""The rows of the queries a ranked measure leaves on the columnar path (#58: nothing
retrieved, nothing relevant) made without a sample per query (``ScoresRankedEdges``): one
sample scored per class of equal queries and its row shared, equal to the sample path's rows
byte for byte; a metric whose rows may read more of a sample stays on the sample path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest

import ctxeval
from ctxeval._data.ranked import RankedColumns
from ctxeval._data.sample import GradedIDs
from ctxeval._data.trec_columns import open_trec
from ctxeval._run import columnar, fastpath
from ctxeval.cli import main
from ctxeval.plugin import DeterministicPipelineMetric, Judgement, Sample
from ctxeval.plugin.hooks import ScoresRankedEdges
from ctxeval_ids.metrics import IDAveragePrecision, IDBasedContextPrecision, IDBasedContextRecall
from test_trec_columns import _in_columns, columnar_calls, metrics, rows_of, write_files

__all__ = ["_in_columns"]  # (small files read as columns, in chunks of a few queries)


def sample_path(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The ids of the queries the columnar path sends through the sample path."""
    seen: list[str] = []
    original = fastpath.chunk_columns

    async def counted(run: Any, samples: Any, ids: list[str], **kwargs: Any) -> Any:
        seen.extend(ids)
        return await original(run, samples, ids, **kwargs)

    monkeypatch.setattr(columnar, "chunk_columns", counted)  # (imported there)
    return seen


@pytest.mark.parametrize("seed", range(3))
def test_left_queries_are_scored_without_the_sample_path(
    tmp_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    qrels, run = write_files(tmp_path, seed)
    for complete in (False, True):
        # (the set metrics' evidence names the reference IDs missed: their rows of such
        # queries read more of the sample, and rightly take the sample path)
        chosen = [
            m
            for m in metrics()
            if not isinstance(m, IDBasedContextPrecision | IDBasedContextRecall)
        ]
        expected = rows_of(ctxeval.load_trec(qrels, run, complete=complete), chosen)
        through = sample_path(monkeypatch)
        calls = columnar_calls(monkeypatch)
        assert rows_of(open_trec(qrels, run, complete=complete), chosen) == expected
        assert calls
        assert through == []
        assert any(r'"status":"undefined"' in row.decode() for row in expected[0])


@attrs.frozen(kw_only=True)
class _NamesItsReference(IDAveragePrecision):
    """An ID metric whose evidence reads the reference IDs: its rows of queries with nothing
    retrieved differ query by query."""

    def evidence(self, judgement: Judgement) -> dict[str, Any]:
        return {"reference": list(judgement.reference)}


def test_a_metric_whose_rows_read_more_stays_on_the_sample_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    qrels, run = write_files(tmp_path, 4)
    mrr = ctxeval.get_metric("id_mrr")
    assert isinstance(mrr, DeterministicPipelineMetric)
    assert mrr.ranked_edges_shared()
    assert not _NamesItsReference(name="ap_ids").ranked_edges_shared()
    chosen = [_NamesItsReference(name="ap_ids"), mrr]
    expected = rows_of(ctxeval.load_trec(qrels, run, complete=True), chosen)
    through = sample_path(monkeypatch)
    assert rows_of(open_trec(qrels, run, complete=True), chosen) == expected
    assert through  # (the left queries of ap_ids)
    nothing_retrieved = [r for r in expected[0] if b'"ap_ids"' in r and b'"reference":["' in r]
    assert len(set(nothing_retrieved)) > 1


def test_a_failing_edge_call_sends_its_queries_through_samples(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    qrels, run = write_files(tmp_path, 5)
    chosen = metrics()
    expected = rows_of(ctxeval.load_trec(qrels, run, complete=True), chosen)

    def broken(self: Any, columns: RankedColumns, positions: Any) -> Any:
        raise RuntimeError("broken")

    monkeypatch.setattr(
        "ctxeval._pipeline.deterministic.DeterministicPipelineMetric.ranked_edge_rows", broken
    )
    through = sample_path(monkeypatch)
    assert rows_of(open_trec(qrels, run, complete=True), chosen) == expected
    assert through


def test_samples_that_may_carry_a_plain_list_share_no_row() -> None:
    """A plain list of reference IDs counts as grade 1 and says so in its reason: the grades
    of the columns alone do not tell the two rows apart."""
    metric = ctxeval.get_metric("id_average_precision", relevance_level=2)
    assert isinstance(metric, ScoresRankedEdges)
    assert isinstance(metric, DeterministicPipelineMetric)
    plain = Sample(id="a", retrieved_context_ids=[], reference_context_ids=["d1"])
    graded = Sample(
        id="b", retrieved_context_ids=[], reference_context_ids=GradedIDs(("d1",), (1,))
    )
    assert metric.score(plain).reason != metric.score(graded).reason

    def chunk(samples: list[Sample], *, graded: bool) -> RankedColumns:
        ones = np.ones(len(samples), np.int64)
        return RankedColumns(
            [s.id or "" for s in samples],
            np.zeros(len(samples) + 1, np.int64),
            np.zeros(0, np.int64),
            np.concatenate(([0], np.cumsum(ones))).astype(np.int64),
            ones,
            samples,
            graded=graded,
        )

    assert metric.ranked_edge_rows(chunk([plain, graded], graded=False), [0, 1]) is None
    rows = metric.ranked_edge_rows(chunk([graded, graded], graded=True), [0, 1])
    assert rows is not None
    assert rows[0] is rows[1]
    assert rows[0] == metric.score(graded)


def _odd_files(folder: Path) -> tuple[Path, Path]:
    """Queries judging every document 0, or below relevance level 2, some not in the run,
    some retrieving nothing judged."""
    qrels, run = [], []
    for q in range(40):
        grades = [[0, 0, 0], [1, 0, 1], [2, 1, 0], [3], [0, 1]][q % 5]
        for d, grade in enumerate(grades):
            qrels.append(f"q{q} 0 d{q}-{d} {grade}\n")
        if q % 3:
            for rank in range(1, q % 7 + 2):
                doc = f"d{q}-{rank}" if q % 4 else f"x{rank}"
                run.append(f"q{q} Q0 {doc} {rank} {10 - rank} r\n")
    (folder / "qrels.txt").write_text("".join(qrels))
    (folder / "run.txt").write_text("".join(run))
    return folder / "qrels.txt", folder / "run.txt"


@pytest.mark.parametrize("averaging", [False, True])
def test_the_command_line_gives_the_same_files_and_output_for_odd_queries(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    averaging: bool,
) -> None:
    qrels, run = _odd_files(tmp_path)
    names = ["nDCG@10", "AP:relevance_level=2,name=APL2", "P@5", "RR", "R@100:relevance_level=2"]
    command = ["evaluate", "--qrels", str(qrels), "--run", str(run), "--complete"]
    command += [part for name in names for part in ("-m", name)]
    command += ["--out", "out", "--per-query", "per-query.tsv"]
    command += ["--trec-eval-averaging"] if averaging else []
    through = sample_path(monkeypatch)
    made: dict[str, bytes] = {}
    for way in ("columns", "samples"):
        (tmp_path / way).mkdir()
        monkeypatch.chdir(tmp_path / way)
        if way == "samples":
            monkeypatch.setattr("ctxeval._run.local.ranked_scorers", lambda run, samples: None)
        assert main(command) == 0
        made[way] = capsys.readouterr().out.encode()
        for name in ("out/results.jsonl", "out/summary.json", "per-query.tsv"):
            made[way] += (tmp_path / way / name).read_bytes()
        if way == "columns":
            assert through == []
    assert made["columns"] == made["samples"]
    said = b"scored 0 (trec_eval averaging)" if averaging else b"grade below relevance_level 2"
    assert said in made["columns"]
