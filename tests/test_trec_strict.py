"""TREC files are read as trec_eval reads them: columns split on ASCII white space only (an id
may hold any other space), scores finite numbers in ASCII digits, each refusal naming file and
line."""

from __future__ import annotations

from pathlib import Path

import pytest

import ctxeval
from ctxeval import DataError


@pytest.mark.parametrize("space", ["\u00a0", "\u2028", "\u3000", "\u2009", "\x85"])
def test_an_id_holding_a_unicode_space_is_one_id(tmp_path: Path, space: str) -> None:
    doc = f"d{space}1"
    qrels = tmp_path / "qrels.txt"
    qrels.write_text(f"q1 0 {doc} 1\nq1 0 d2 0\n", encoding="utf-8")
    run = tmp_path / "run.txt"
    run.write_text(f"q1 Q0 {doc} 1 2.0 r\nq1 Q0 d2 2 1.0 r\n", encoding="utf-8")
    [sample] = list(ctxeval.load_trec(qrels, run))
    assert list(sample.retrieved_context_ids) == [doc, "d2"]
    ev = ctxeval.evaluate([sample], ["AP"])
    assert ev.results[0].score == 1.0  # trec_eval's map: the relevant document first


@pytest.mark.parametrize("score", ["nan", "NaN", "inf", "-inf", "1e999", "1_0", "\u0661", "0x1"])
def test_a_score_that_is_no_finite_number_is_refused_with_its_line(
    tmp_path: Path, score: str
) -> None:
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("q1 0 d1 1\n", encoding="utf-8")
    run = tmp_path / "run.txt"
    run.write_text(f"q1 Q0 d0 1 3.0 r\nq1 Q0 d1 2 {score} r\n", encoding="utf-8")
    with pytest.raises(DataError) as raised:
        list(ctxeval.load_trec(qrels, run))
    message = str(raised.value)
    assert f"{run}:2" in message
    assert "not a finite number" in message


@pytest.mark.parametrize("grade", ["\u00b2", "\u0661", "1.0", "1_0"])
def test_a_grade_that_is_no_ascii_integer_is_refused(tmp_path: Path, grade: str) -> None:
    qrels = tmp_path / "qrels.txt"
    qrels.write_text(f"q1 0 d1 {grade}\n", encoding="utf-8")
    run = tmp_path / "run.txt"
    run.write_text("q1 Q0 d1 1 3.0 r\n", encoding="utf-8")
    with pytest.raises(DataError, match=f"{qrels}:1.*is not an integer"):
        list(ctxeval.load_trec(qrels, run))


def test_numbers_trec_eval_reads_still_read(tmp_path: Path) -> None:
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("q1 0 d1 +1\nq1 0 d2 -1\n", encoding="utf-8")
    run = tmp_path / "run.txt"
    run.write_text("q1\tQ0\td1\t1\t-1.5e-3\tr\r\nq1 Q0 d2 2 .5 r extra\n", encoding="utf-8")
    [sample] = list(ctxeval.load_trec(qrels, run))
    assert list(sample.retrieved_context_ids) == ["d2", "d1"]  # by score: .5 > -0.0015
