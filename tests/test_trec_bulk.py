"""The bulk TREC reader (``ctxeval._data.trec_bulk``, the fast path of ``load_trec``) reads a
file to exactly the samples the line-by-line reader reads, and hands every file it cannot
prove so to that reader (which then names the file and line that is wrong)."""

from __future__ import annotations

import mmap
import random
from pathlib import Path

import pytest

import ctxeval
from ctxeval._data import trec, trec_arrow, trec_bulk
from ctxeval._data.trec import read_qrels, read_run, samples_from_dicts


@pytest.fixture(autouse=True)
def _always_in_bulk(monkeypatch: pytest.MonkeyPatch) -> None:
    """``load_trec`` reads these small files in bulk too (it reads small ones line by line)."""
    monkeypatch.setattr(trec, "BULK_FROM", 0)


def line_reader(qrels: Path, run: Path, *, complete: bool = False) -> list[ctxeval.Sample]:
    return samples_from_dicts(read_qrels(qrels), read_run(run), complete=complete)


def messy_files(folder: Path, seed: int) -> tuple[Path, Path]:
    """Qrels and a run in every shape trec_eval reads: comments, blank lines, tabs, CRLF, extra
    run columns, tied scores, negative and zero grades, IDs holding non-ASCII spaces and '#',
    queries not grouped, queries only in one file."""
    rng = random.Random(seed)
    docs = [f"D{i}" for i in range(30)] + ["d\u00a0x", "d\u3000y", "a#b", "ü-1", "D\u2028z"]
    qrels_lines, run_lines = ["# qrels of the test\n"], ["#run\n", "\n"]
    for q in rng.sample(range(40), 40):
        query = f"Q{q}" if q % 9 else f"q\u00a0{q}"
        if q % 7:
            for doc in rng.sample(docs, rng.randint(1, 8)):
                sep = rng.choice([" ", "\t", "  "])
                qrels_lines.append(
                    f"{query}{sep}0{sep}{doc}{sep}{rng.choice([-1, 0, 1, 2, '+3'])}\n"
                )
            qrels_lines.append(rng.choice(["\n", "   \n", "# a comment\n", ""]))
        if q % 5:
            for rank, doc in enumerate(rng.sample(docs, rng.randint(1, 12))):
                score = rng.choice(["1", "2.5", "-0.5", ".5", "1e1", "-0", "2.50", "+1.5E-1"])
                extra = rng.choice(["", " extra", "\tmore columns here"])
                end = rng.choice(["\n", "\r\n"])
                run_lines.append(f"{query} Q0 {doc} {rank} {score} run{extra}{end}")
    rng.shuffle(run_lines)  # queries interleaved: order within a query is by score anyway
    qrels_path, run_path = folder / "qrels.txt", folder / "run.txt"
    qrels_path.write_bytes("".join(qrels_lines).encode("utf-8"))
    run_path.write_bytes("".join(run_lines).encode("utf-8"))
    return qrels_path, run_path


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("block", [64, 1 << 20])
def test_bulk_reads_what_the_line_reader_reads(
    tmp_path: Path, seed: int, block: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(trec_bulk, "BLOCK", block)  # 64 bytes: many blocks, comments in each
    qrels, run = messy_files(tmp_path, seed)
    assert trec_bulk.read_qrels_bulk(qrels) is not None  # the fast path takes these files
    assert trec_bulk.read_run_bulk(run) is not None
    for complete in (False, True):
        fast = ctxeval.load_trec(qrels, run, complete=complete)
        slow = line_reader(qrels, run, complete=complete)
        assert fast == slow
        assert [s.id for s in fast] == [s.id for s in slow]
        assert all(
            type(s.reference_context_ids) is type(t.reference_context_ids)
            for s, t in zip(fast, slow, strict=True)
        )


def test_trec_eval_test_file_shapes(tmp_path: Path) -> None:
    """The shapes of trec_eval's own test/qrels.test and test/results.test: numeric query
    ids, grades 0/1, ``Q0``, integer ranks, scores with many digits, one run name."""
    qrels, run = tmp_path / "qrels.test", tmp_path / "results.test"
    qrels.write_text(
        "".join(
            f"{q} 0 CR93E-{q}{d:04d} {int(d % 3 == 0)}\n"
            for q in (351, 352, 353)
            for d in range(12)
        )
    )
    run.write_text(
        "".join(
            f"{q} Q0 CR93E-{q}{d:04d} {rank} {1000 - rank * 1.25:.6f} Brkly21\n"
            for q in (351, 353, 354)
            for rank, d in enumerate(range(11, -1, -1))
        )
    )
    assert trec_bulk.read_run_bulk(run) is not None
    assert ctxeval.load_trec(qrels, run) == line_reader(qrels, run)


@pytest.mark.parametrize(
    ("qrels", "run"),
    [
        ("1 0 d1 1\n1 0 d1 0\n", "1 Q0 d1 1 1.0 r\n"),  # judged twice
        ("1 0 d1\n", "1 Q0 d1 1 1.0 r\n"),  # 3 columns
        ("1 0 d1 1 x\n", "1 Q0 d1 1 1.0 r\n"),  # 5 columns
        ("1 0 d1 1.0\n", "1 Q0 d1 1 1.0 r\n"),  # no integer
        ("1 0 d1 1-\n", "1 Q0 d1 1 1.0 r\n"),  # the digits of one, not one
        ("1 0 d1 \u0661\n", "1 Q0 d1 1 1.0 r\n"),  # another script's digit
        ("1 0 d1 1\n", "1 Q0 d1 1 1.0\n"),  # 5 run columns
        ("1 0 d1 1\n", "1 Q0 d1 1 nan r\n"),
        ("1 0 d1 1\n", "1 Q0 d1 1 1e999 r\n"),  # not finite
        ("1 0 d1 1\n", "1 Q0 d1 1 1e5e r\n"),
        ("1 0 d1 1\n", "1 Q0 d1 1 1_0 r\n"),
        ("1 0 d1 1\n", "1 Q0 d1 1 1 r\n1 Q0 d1 2 0.5 r\n"),  # listed twice
        ("1 0 d1 1\n", "1 Q0 d1 1 1 r\r1 Q0 d2 2 0.5 r\n"),  # a lone CR ends a line
    ],
)
def test_what_bulk_cannot_prove_goes_to_the_line_reader(
    tmp_path: Path, qrels: str, run: str
) -> None:
    (tmp_path / "q").write_text(qrels, encoding="utf-8", newline="")
    (tmp_path / "r").write_text(run, encoding="utf-8", newline="")
    assert (
        trec_bulk.read_qrels_bulk(tmp_path / "q") is None
        or trec_bulk.read_run_bulk(tmp_path / "r") is None
    )
    try:
        expected: object = line_reader(tmp_path / "q", tmp_path / "r")
    except ctxeval.DataError as exc:
        expected = str(exc)
    try:
        got: object = ctxeval.load_trec(tmp_path / "q", tmp_path / "r")
    except ctxeval.DataError as exc:
        got = str(exc)
    assert got == expected


def test_not_utf8_and_long_ids_go_to_the_line_reader(tmp_path: Path) -> None:
    (tmp_path / "q").write_bytes(b"1 0 d\xff 1\n")
    assert trec_bulk.read_qrels_bulk(tmp_path / "q") is None
    (tmp_path / "r").write_bytes(b"1 Q0 d1 1 1 r\xff\n")  # even in a column not kept
    assert trec_bulk.read_run_bulk(tmp_path / "r") is None
    with pytest.raises(ctxeval.DataError, match="not UTF-8"):
        ctxeval.load_trec(tmp_path / "q", tmp_path / "r")
    (tmp_path / "q").write_text("1 0 " + "d" * 10_001 + " 1\n")
    assert trec_bulk.read_qrels_bulk(tmp_path / "q") is None
    (tmp_path / "q").write_text("1 0 d1 1\n")
    (tmp_path / "r").write_text("1 Q0 d1 1 1 r\n")
    with pytest.raises(ctxeval.DataError, match="no such file"):
        ctxeval.load_trec(tmp_path / "q", tmp_path / "missing")


def test_empty_and_comment_only_files(tmp_path: Path) -> None:
    (tmp_path / "q").write_text("# nothing judged\n\n")
    (tmp_path / "r").write_text("")
    assert ctxeval.load_trec(tmp_path / "q", tmp_path / "r") == []
    (tmp_path / "q").write_text("7 0 d1 -1\n7 0 d2 -2\n")  # a query judged, nothing kept
    (tmp_path / "r").write_text("7 Q0 d1 1 1 r\n")
    assert ctxeval.load_trec(tmp_path / "q", tmp_path / "r") == line_reader(
        tmp_path / "q", tmp_path / "r"
    )


@pytest.mark.parametrize("query_scale", [1, 1 << 60])  # a combined key of 64 bits, or three
def test_the_ranking_is_the_three_key_sort(query_scale: int) -> None:
    import numpy as np

    rng = np.random.default_rng(3)
    queries = np.sort(rng.integers(0, 50, 3000)) * query_scale
    scores = rng.choice([-1.5, -0.0, 0.0, 0.25, 2.0, 7.0], 3000)
    names = rng.integers(0, 40, 3000)
    expected = np.lexsort((-names, -scores, queries))
    got = trec_bulk._ranking(queries, scores, names)
    key = list(zip(queries.tolist(), (-scores).tolist(), (-names).tolist(), strict=True))
    assert [key[i] for i in got.tolist()] == [key[i] for i in expected.tolist()]
    ordered = trec_bulk._ranking(queries[expected], scores[expected], names[expected])
    assert [key[i] for i in expected[ordered].tolist()] == [key[i] for i in expected.tolist()]


@pytest.mark.parametrize("id_length", [3, 8, 9, 17, 64, 65, 300])
def test_ids_of_every_width_and_scores_of_every_shape(tmp_path: Path, id_length: int) -> None:
    """IDs numbered as 64-bit words (one, several: a hash checked row by row) or through a
    dict (over 64 bytes), IDs that differ only in their last byte or their length, and scores
    read with numpy (up to 15 digits) or by ``float`` (an exponent, more digits) read as the
    line reader reads them."""
    rng = random.Random(id_length)
    stem = "x" * max(0, id_length - 3)
    docs = [f"{stem}{i:03d}"[-id_length:] for i in range(40)] + [stem + "z", stem + "zé"]
    scores = ["0", "-0", "+7", "1.", ".25", "0.1", "12.340", "-3.5", "99999999999999.9",
              "123456789012345", "1234567890123456", "0.30000000000000004", "1e-3", "2.5E2",
              "-.5", "000.0100"]  # fmt: skip
    qrels_lines, run_lines = [], []
    for q in range(30):
        query = f"{stem}q{q}"
        for doc in rng.sample(docs, 6):
            qrels_lines.append(f"{query} 0 {doc} {rng.choice(['0', '1', '+2', '-1', '03'])}\n")
        for rank, doc in enumerate(rng.sample(docs, 10)):
            run_lines.append(f"{query} Q0 {doc} {rank} {rng.choice(scores)} r\n")
    (tmp_path / "q").write_text("".join(qrels_lines))
    (tmp_path / "r").write_text("".join(run_lines))
    assert trec_bulk.read_run_bulk(tmp_path / "r") is not None
    for complete in (False, True):
        fast = ctxeval.load_trec(tmp_path / "q", tmp_path / "r", complete=complete)
        assert fast == line_reader(tmp_path / "q", tmp_path / "r", complete=complete)


def test_decimals_read_with_numpy_are_what_float_reads() -> None:
    import numpy as np

    rng = random.Random(11)

    def decimal() -> str:
        whole = f"{rng.choice(['', '-', '+'])}{rng.randint(0, 10 ** rng.randint(0, 9))}"
        fraction = str(rng.randint(0, 10 ** rng.randint(0, 7))).zfill(rng.randint(1, 7))
        return whole + rng.choice(["", "."]) + rng.choice(["", fraction])

    tokens = [decimal() for _ in range(5000)]
    data = (" ".join(tokens) + "\n").encode()
    starts, ends = [], []
    at = 0
    for token in tokens:
        starts.append(at)
        ends.append(at + len(token))
        at += len(token) + 1
    file = trec_bulk._File(
        data, np.array(starts)[:, None].repeat(3, 1), np.array(ends)[:, None].repeat(3, 1)
    )
    values = trec_bulk._numbers(file, 2, float)
    assert values is not None
    expected = [float(t) for t in tokens]
    assert [v.hex() for v in values.tolist()] == [v.hex() for v in expected]


@pytest.mark.parametrize(
    "text",
    [
        b"q 0 d 1\n",
        b"q 0 d 1\n#c\n",
        b"q 0 d#1\n",
        b"q\t0 d 1\n",
        b"q 0 d 1\r\n",
        b"q 0 d 1\x0b\n",
        b"q  0 d 1\n",
        b"q 0 d 1\n\nq 0 e 1\n",
        b"q 0 d 1 \n",
        b" q 0 d 1\n",
        b"\xef\xbb\xbfq 0 d 1\n",
    ],
)
def test_a_mapped_file_is_regular_as_its_bytes_are(tmp_path: Path, text: bytes) -> None:
    """Files are mapped into memory, not copied, and read as their bytes would be (a map's
    ``in`` looks for one byte's value: the checks search)."""
    path = tmp_path / "file.txt"
    path.write_bytes(text)
    mapped = trec_bulk._mapped(path)
    assert isinstance(mapped, mmap.mmap)
    assert trec_arrow.regular(mapped) == trec_arrow.regular(text)
    assert (trec_bulk._data(path) is None) == (b"\r" in text and b"\r\n" not in text)


def test_an_empty_file_is_read_not_mapped(tmp_path: Path) -> None:
    (tmp_path / "empty.txt").write_bytes(b"")
    assert trec_bulk._data(tmp_path / "empty.txt") == b""


@pytest.mark.parametrize("size", [1, 7, 8, 9, 23])
def test_a_byte_past_ascii_is_found_anywhere_in_a_mapped_file(tmp_path: Path, size: int) -> None:
    path = tmp_path / "file.txt"
    path.write_bytes(b"a" * size)
    assert trec_bulk._ascii(trec_bulk._mapped(path))
    for at in range(size):
        raw = bytearray(b"a" * size)
        raw[at] = 0xE9
        path.write_bytes(bytes(raw))
        assert not trec_bulk._ascii(trec_bulk._mapped(path))
        assert trec_bulk._data(path) is None  # (no UTF-8: the line reader's)
