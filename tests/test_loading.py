"""load_samples: every format, errors with file, line and field, strict and lenient modes."""

from __future__ import annotations

import csv
import json
import tracemalloc
from pathlib import Path

import pytest

import ctxeval
from ctxeval import ConfigError, DataError, Sample, load_samples

ROWS = [
    {
        "id": "a",
        "user_input": "q1",
        "retrieved_contexts": ["x", "y"],
        "reference_context_ids": [1, "2"],
    },
    {"question": "q2", "contexts": ["z"], "ground_truth": "g"},
]


def write_jsonl(path: Path, rows: list[object]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_jsonl(tmp_path: Path) -> None:
    samples = list(load_samples(write_jsonl(tmp_path / "d.jsonl", ROWS)))
    assert samples[0].reference_context_ids == ("1", "2")
    assert samples[1].user_input == "q2"
    assert samples[1].retrieved_contexts == ("z",)


def test_jsonl_skips_blank_lines_and_a_bom(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + b'{"reference": "r1"}\n\n   \n{"reference": "r2"}')
    assert [s.reference for s in load_samples(path)] == ["r1", "r2"]


def test_json_array_and_columns(tmp_path: Path) -> None:
    array = tmp_path / "a.json"
    array.write_text(json.dumps(ROWS, indent=2))
    assert len(list(load_samples(array))) == 2
    columns = tmp_path / "c.json"
    columns.write_text(json.dumps({"question": ["q1", "q2"], "contexts": [["a"], ["b", "c"]]}))
    samples = list(load_samples(columns))
    assert [s.retrieved_contexts for s in samples] == [("a",), ("b", "c")]


def test_json_errors_name_the_line(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    path.write_text('[\n  {"reference": "ok"},\n  {"retrieved_contexts": "oops"}\n]')
    stream = load_samples(path)
    assert next(stream).reference == "ok"
    with pytest.raises(DataError) as info:
        next(stream)
    assert str(info.value).startswith(f"{path}:3: field 'retrieved_contexts'")
    bad = tmp_path / "bad.json"
    bad.write_text('[{"reference": "ok"},\n {"reference": ]')
    with pytest.raises(DataError, match=r"not valid JSON.*line 2"):
        list(load_samples(bad))
    columns = tmp_path / "cols.json"
    columns.write_text('{"question": ["a", "b"], "contexts": [["x"]]}')
    with pytest.raises(DataError, match="different lengths"):
        list(load_samples(columns))


def test_csv_with_json_list_fields(tmp_path: Path) -> None:
    path = tmp_path / "d.csv"
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(
            ["id", "user_input", "retrieved_contexts", "reference_context_ids", "reference"]
        )
        writer.writerow(["s1", "q, with comma", json.dumps(["a", "b\nc"]), json.dumps([1, 2]), ""])
        writer.writerow(["s2", "q2", json.dumps([]), "", "r"])
    first, second = load_samples(path)
    assert first.retrieved_contexts == ("a", "b\nc")
    assert first.reference_context_ids == ("1", "2")
    assert first.reference is None  # an empty cell is null
    assert second.retrieved_contexts == ()
    assert second.reference_context_ids is None


def test_csv_bad_list_names_line_and_field(tmp_path: Path) -> None:
    path = tmp_path / "d.csv"
    path.write_text('id,contexts\ns1,"[""ok""]"\ns2,not a list\ns3,a,b\n', encoding="utf-8")
    stream = load_samples(path)
    assert next(stream).id == "s1"
    with pytest.raises(DataError) as info:
        next(stream)
    message = str(info.value)
    assert message.startswith(
        f"{path}:3: field 'retrieved_contexts': a list field must hold a JSON array or a Python "
        "list literal"
    )
    assert "json.dumps" in message
    with pytest.raises(DataError, match=r"d.csv:4: the row has 1 cell\(s\) more than the header"):
        next(stream)


def test_parquet(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    table = pa.Table.from_pylist(
        [
            {"id": "p1", "retrieved_context_ids": ["a", "b"], "reference_context_ids": ["b"]},
            {"id": "p2", "retrieved_context_ids": [], "reference_context_ids": ["c"]},
        ]
    )
    path = tmp_path / "d.parquet"
    pq.write_table(table, path)
    samples = list(load_samples(path))
    assert [s.id for s in samples] == ["p1", "p2"]
    assert samples[0].retrieved_context_ids == ("a", "b")


def test_strict_stops_at_the_first_bad_row(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "d.jsonl", [{"reference": "a"}, {"id": "s2", "reference": 3}, {"reference": "c"}]
    )
    stream = load_samples(path)
    assert next(stream).reference == "a"  # rows before the bad one were already served
    with pytest.raises(DataError) as info:
        next(stream)
    error = info.value
    assert (error.path, error.line, error.field, error.sample_id) == (
        str(path),
        2,
        "reference",
        "s2",
    )
    assert str(error) == f"{path}:2: sample 's2': field 'reference': expected a string, got int"


def test_lenient_reports_bad_rows_and_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "d.jsonl"
    path.write_bytes(
        b'{"reference": "a"}\n'
        b"not json\n"
        b'{"reference": "\xff\xfe"}\n'
        b'["a list"]\n'
        b'{"retrieved_contexts": [1]}\n'
        b'{"reference": "f"}\n'
    )
    stream = load_samples(path, strict=False)
    assert [s.reference for s in stream] == ["a", "f"]
    assert [e.line for e in stream.errors] == [2, 3, 4, 5]
    assert "not valid JSON" in str(stream.errors[0])
    assert "UTF-8" in str(stream.errors[1])
    assert "must be an object" in str(stream.errors[2])
    assert stream.errors[3].field == "retrieved_contexts"
    assert stream.rows_read == 6
    assert stream.bad_rows == 4
    assert "skipping a bad row" in caplog.text


def test_a_lenient_stream_keeps_the_first_errors_and_counts_them_all(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """However many rows are bad, a lenient stream holds at most KEPT_ERRORS of them and logs
    LOGGED_ERRORS one by one, then one line saying the rest are counted."""
    from ctxeval._data.loading import KEPT_ERRORS, LOGGED_ERRORS

    bad = KEPT_ERRORS + 50
    path = tmp_path / "d.jsonl"
    with path.open("w") as handle:
        for i in range(bad):
            handle.write(json.dumps({"id": f"b{i}", "retrieved_contexts": 5}) + "\n")
            if i % 100 == 0:
                handle.write(json.dumps({"id": f"g{i}", "reference": "ok"}) + "\n")
    caplog.set_level("WARNING", logger="ctxeval")
    stream = load_samples(path, strict=False)
    assert [s.id for s in stream] == [f"g{i}" for i in range(0, bad, 100)]
    assert stream.bad_rows == bad
    assert len(stream.errors) == KEPT_ERRORS
    assert [e.sample_id for e in stream.errors[:2]] == ["b0", "b1"]  # the first ones
    assert stream.errors[-1].sample_id == f"b{KEPT_ERRORS - 1}"
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == LOGGED_ERRORS + 1
    assert f"more than {LOGGED_ERRORS} bad rows" in warnings[-1]
    assert "SampleStream.bad_rows counts them all" in warnings[-1]


def test_file_level_errors(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="no such file"):
        load_samples(tmp_path / "missing.jsonl")
    with pytest.raises(DataError, match="directory"):
        load_samples(tmp_path, format="jsonl")
    (tmp_path / "data.txt").write_text("{}")
    with pytest.raises(ConfigError, match="cannot tell the format"):
        load_samples(tmp_path / "data.txt")
    with pytest.raises(ConfigError, match="unknown format"):
        load_samples(tmp_path / "data.txt", format="xml")
    assert list(load_samples(tmp_path / "data.txt", format="jsonl")) == [Sample()]


def test_jsonl_streams_without_holding_the_file(tmp_path: Path) -> None:
    """A 60 MB file is read with a peak far below its size."""
    path = tmp_path / "big.jsonl"
    row = json.dumps({"reference": "r" * 2000, "retrieved_contexts": ["c" * 2000] * 4}) + "\n"
    with path.open("w") as handle:
        for _ in range(6000):
            handle.write(row)
    assert path.stat().st_size > 55_000_000
    tracemalloc.start()
    try:
        count = sum(1 for _ in load_samples(path))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == 6000
    assert peak < 5_000_000, peak


def test_evaluate_reads_a_stream_lazily(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "d.jsonl",
        [{"retrieved_context_ids": ["a"], "reference_context_ids": ["a"]}] * 3,
    )
    evaluation = ctxeval.evaluate(load_samples(path), metrics=["id_based_context_recall"])
    assert evaluation.scores("id_based_context_recall") == [1.0, 1.0, 1.0]


def test_csv_written_by_ragas_to_csv_loads(tmp_path: Path) -> None:
    """ragas's ``EvaluationDataset.to_csv()`` writes list columns as Python reprs (pandas)."""
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(
        {
            "user_input": ["Who built it?", "Where?"],
            "retrieved_contexts": [["Eiffel's company built it.", 'He said "yes".'], []],
            "reference_context_ids": [["d1", "d2"], ["d3"]],
            "reference": ["Gustave Eiffel", "Paris"],
        }
    )
    path = tmp_path / "ragas.csv"
    frame.to_csv(path, index=False)  # what ragas's to_csv() does: lists become their repr
    assert "['d1', 'd2']" in path.read_text()
    first, second = load_samples(path)
    assert first.retrieved_context_ids is None
    assert first.retrieved_contexts == ("Eiffel's company built it.", 'He said "yes".')
    assert first.reference_context_ids == ("d1", "d2")
    assert second.retrieved_contexts == ()


@pytest.mark.parametrize(
    "cell",
    ["__import__('os').system('echo hacked')", "[1, 2] + [3]", "{'a': 1}", "[" * 5000],
)
def test_csv_list_cells_are_literals_only(tmp_path: Path, cell: str) -> None:
    path = tmp_path / "d.csv"
    path.write_text(f'id,contexts\ns1,"{cell}"\n', encoding="utf-8")
    with pytest.raises(DataError, match="a list field must hold a JSON array or a Python list"):
        list(load_samples(path))


def test_csv_an_unterminated_quote_swallows_no_good_row(tmp_path: Path) -> None:
    path = tmp_path / "u.csv"
    path.write_text(
        "id,retrieved_context_ids,reference_context_ids\n"
        'g1,"[""a""]","[""a""]"\n'
        'g2,"[""a""]","[""a""\n'  # the quote never closes
        'g3,"[""a""]","[""a""]"\n'
        'g4,"[""a""]","[""a""]"\n'
    )
    loaded = ctxeval.load_samples(path, strict=False)
    assert [s.id for s in loaded] == ["g1", "g3", "g4"]
    assert [e.line for e in loaded.errors] == [3]
    assert "not valid CSV" in str(loaded.errors[0])


def test_csv_a_byte_that_is_not_utf8_rejects_its_row_only_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "b.csv"
    path.write_bytes(
        b'id,retrieved_context_ids,reference_context_ids\ng1,"[""a""]","[""a""]"\n'
        b'g2,"[""\xff""]","[""a""]"\ng3,"[""a""]","[""a""]"\n'
    )
    loaded = ctxeval.load_samples(path, strict=False)
    assert [s.id for s in loaded] == ["g1", "g3"]
    assert [e.line for e in loaded.errors] == [3]
    assert "not valid UTF-8 at byte 7 of line 3" in str(loaded.errors[0])
    with pytest.raises(ctxeval.DataError, match=r"b.csv:3: not valid UTF-8"):
        list(ctxeval.load_samples(path))


def test_csv_a_column_named_twice_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "d.csv"
    path.write_text('id,retrieved_context_ids,id\ng1,"[""a""]",x\n')
    with pytest.raises(ctxeval.DataError, match="column 'id' appears twice"):
        list(ctxeval.load_samples(path, strict=False))


def test_csv_line_numbers_count_physical_lines(tmp_path: Path) -> None:
    path = tmp_path / "m.csv"
    path.write_text(
        "id,reference,retrieved_contexts\n"
        'a,"two\nlines","[""x""]"\n'  # a legitimate quoted newline: lines 2-3
        "b,ref,not a list\n"  # line 4
        '\ufeffc,ref,"[""x""]"\n'
    )
    loaded = ctxeval.load_samples(path, strict=False)
    samples = list(loaded)
    assert samples[0].reference == "two\nlines"
    assert [e.line for e in loaded.errors] == [4]
