"""TREC files read by pyarrow's CSV reader (#58): a *regular* file (single spaces, one line
break per line) reads to exactly the samples the line reader reads, and every other file, or
value Arrow does not read as the line reader does, goes to the numpy reader or the line
reader, which names the line that is wrong."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

import ctxeval
from ctxeval._data import trec, trec_arrow, trec_bulk
from ctxeval._data.trec import read_qrels, read_run, samples_from_dicts

pytest.importorskip("pyarrow")


@pytest.fixture(autouse=True)
def _always_in_bulk(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trec, "BULK_FROM", 0)


def arrow_reads(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether each call of the Arrow reader read its file."""
    read: list[bool] = []
    original = trec_arrow.arrow_table

    def spied(*args: Any) -> Any:
        found = original(*args)
        read.append(found is not None)
        return found

    monkeypatch.setattr(trec_bulk, "arrow_table", spied)
    return read


def outcome(qrels: Path, run: Path) -> Any:
    """The samples of the two files, or the error's message."""
    try:
        return ctxeval.load_trec(qrels, run, complete=True)
    except ctxeval.DataError as exc:
        return str(exc)


def line_outcome(qrels: Path, run: Path) -> Any:
    try:
        return samples_from_dicts(read_qrels(qrels), read_run(run), complete=True)
    except ctxeval.DataError as exc:
        return str(exc)


def regular_files(folder: Path, seed: int) -> tuple[Path, Path]:
    rng = random.Random(seed)
    docs = [f"D{i}" for i in range(40)] + ["d\u00a0x", "d\u3000y", "a#b", "ü-1", "\u2028z", '"q"']
    qrels_lines, run_lines = [], []
    for q in range(25):
        query = f"Q{q}" if q % 4 else f"q\u00a0{q}"
        if q % 6:
            for doc in rng.sample(docs, rng.randint(1, 8)):
                qrels_lines.append(f"{query} 0 {doc} {rng.choice([-1, 0, 1, 2, 3, '-0', '007'])}\n")
        if q % 5:
            for rank, doc in enumerate(rng.sample(docs, rng.randint(1, 15))):
                score = rng.choice(["1", "2.5", "-0.5", ".5", "1e1", "-0", "+1.5E-1", "5.", "3"])
                run_lines.append(f"{query} Q0 {doc} {rank} {score} run\n")
    rng.shuffle(run_lines)
    (folder / "qrels.txt").write_text("".join(qrels_lines), encoding="utf-8")
    (folder / "run.txt").write_text("".join(run_lines).rstrip("\n"), encoding="utf-8")
    return folder / "qrels.txt", folder / "run.txt"


@pytest.mark.parametrize("seed", range(5))
def test_regular_files_are_read_by_arrow_as_by_the_line_reader(
    tmp_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    read = arrow_reads(monkeypatch)
    qrels, run = regular_files(tmp_path, seed)
    assert outcome(qrels, run) == line_outcome(qrels, run)
    assert read == [True, True]


QRELS = "q1 0 d1 1\nq1 0 d2 0\nq2 0 d1 2\n"
RUN = "q1 Q0 d1 1 2.5 r\nq1 Q0 d2 2 1 r\nq2 Q0 d3 1 0.5 r\n"


@pytest.mark.parametrize(
    ("qrels", "run"),
    [
        (QRELS, RUN.replace("2.5", "nan")),
        (QRELS, RUN.replace("2.5", "inf")),
        (QRELS, RUN.replace("2.5", "-Infinity")),
        (QRELS, RUN.replace("2.5", "1e999")),
        (QRELS, RUN.replace("2.5", "1_0")),
        (QRELS, RUN.replace("2.5", "0x10")),
        (QRELS, RUN.replace("2.5", "1e")),
        (QRELS, RUN.replace("2.5", ".")),
        (QRELS, RUN.replace("2.5", "NA")),
        (QRELS, RUN.replace("2.5", "\u0661")),
        (QRELS, RUN.replace("2.5", "12345678901234567890.123456789e-3")),
        (QRELS, RUN.replace("2.5", "4.9e-324")),
        (QRELS.replace("d2 0", "d2 1.0"), RUN),
        (QRELS.replace("d2 0", "d2 +0"), RUN),
        (QRELS.replace("d2 0", "d2 99999999999999999999"), RUN),
        (QRELS.replace("d2 0", "d2 nan"), RUN),
        (QRELS, RUN.replace("q1 Q0 d2 2 1 r", "q1 Q0 d2  1 r")),  # an empty column
        (QRELS, RUN.replace("q1 Q0 d2 2 1 r", " q1 Q0 d2 1 r")),
        (QRELS, RUN.replace("q1 Q0 d2 2 1 r", "q1 Q0 d2 2 1 r ")),
        (QRELS, RUN.replace("q1 Q0 d2 2 1 r", "q1 Q0 d2 2 1 r extra")),
        (QRELS, RUN.replace("q1 Q0 d2 2 1 r", "q1 Q0 d2 2 1")),
        (QRELS, RUN + "\n"),
        (QRELS, "# run\n" + RUN),
        (QRELS + "# a b c\n", RUN),
        (QRELS, RUN.replace("q1 Q0 d2", "q1 Q0 d1")),  # listed twice
        (QRELS + "q1 0 d1 3\n", RUN),  # judged twice
        (QRELS, "\ufeff" + RUN),
        (QRELS, RUN.replace("d3", "d\tx")),
        (QRELS, RUN.replace("d3", "d\x0bx")),
        (QRELS, RUN.replace("d3", "x" * 10_001)),
        (QRELS, RUN.replace("d3", '"d 3"')),
        ("", RUN),
    ],
)
def test_odd_files_read_as_the_line_reader_reads_them(tmp_path: Path, qrels: str, run: str) -> None:
    (tmp_path / "qrels.txt").write_bytes(qrels.encode("utf-8"))
    (tmp_path / "run.txt").write_bytes(run.encode("utf-8"))
    files = tmp_path / "qrels.txt", tmp_path / "run.txt"
    assert outcome(*files) == line_outcome(*files)


def test_what_makes_a_file_irregular() -> None:
    assert trec_arrow.regular(b"a b\nc d\n")
    assert trec_arrow.regular(b"a b\nc d")
    for odd in (b"", b" a b\n", b"a b \n", b"a  b\n", b"a b\n\nc d\n", b"a\tb\n", b"#a b\n",
                b"a b\n#c d\n", b"a b\r\n", b"\xef\xbb\xbfa b\n", b"a b\n "):  # fmt: skip
        assert not trec_arrow.regular(odd), odd
    long = (b"q Q0 d 1 1 r\n" * 100_000)[:-1] + b"  "
    assert not trec_arrow.regular(long)  # (found in the last part)
