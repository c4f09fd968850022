"""The report in a real browser: headless Chromium loads report.html, the explorer's script
filters, searches, sorts and pages as the address's ``#`` says, and the test reads what is
shown (the DOM after the script ran).

Chromium is Debian's ``chromium`` package; ``.ci/run`` installs it when missing and sets
``CTXEVAL_REQUIRE_BROWSER=1``, which turns a missing browser into a failure instead of a skip.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from browser_dom import BROWSER, Shown, dump_dom
from ctxeval.cli import main

if BROWSER is None:
    if os.environ.get("CTXEVAL_REQUIRE_BROWSER") == "1":
        raise RuntimeError("CTXEVAL_REQUIRE_BROWSER=1 but no chromium: apt-get install -y chromium")
    pytest.skip("no chromium (apt-get install -y chromium)", allow_module_level=True)

HOSTILE = '</script><script>document.title="pwned"</script><img src=x onerror="document.title=1">'


def samples() -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for i in range(120):
        row: dict[str, object] = {
            "id": f"q{i:03d}",
            "user_input": f"question number {i}",
            "retrieved_context_ids": [f"d{(i + j) % 7}" for j in range(3)],
            "retrieved_contexts": [f"chunk {i}-{j} about topic{i % 5}" for j in range(3)],
            "reference_contexts": [f"chunk {i}-0 about topic{i % 5}"],
        }
        row["reference_context_ids"] = (
            [] if i % 10 == 0 else [f"d{i % 7}"] if i % 4 else ["d6"]
        )  # nothing to recall (undefined) for every tenth
        rows.append(row)
    rows[7]["retrieved_contexts"] = ["a zebra-crossing lives here", HOSTILE, "third"]
    return rows


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("report")
    data = folder / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in samples()))
    code = main(["evaluate", str(data), "-m", "RR", "-m", "non_llm_context_recall",
                 "--out", str(folder / "run"), "-q"])  # fmt: skip
    assert code == 0
    return folder / "run" / "report.html"


def shown(report: Path, view: str = "") -> Shown:
    return dump_dom(f"{report.as_uri()}#{view}")


def test_every_sample_is_there_fifty_at_a_time(report: Path) -> None:
    page = shown(report)
    assert page.count == "120 of 120 samples · page 1 of 3"
    assert page.ids == [f"q{i:03d}" for i in range(50)]
    last = shown(report, "page=3")
    assert last.ids == [f"q{i:03d}" for i in range(100, 120)]


def test_search_finds_a_sample_by_the_text_of_a_chunk(report: Path) -> None:
    page = shown(report, "q=zebra-crossing")
    assert page.count.startswith("1 of 120 samples")
    assert page.ids == ["q007"]


def test_filters_by_metric_status_and_score(report: Path) -> None:
    undefined = shown(report, "metric=RR&status=undefined")
    assert undefined.ids == [f"q{i:03d}" for i in range(0, 120, 10)]  # empty reference
    perfect = shown(report, "metric=RR&min=1")
    rows = [json.loads(line) for line in (report.parent / "results.jsonl").open()]
    expected = [r["sample_id"] for r in rows if r["metric"] == "RR" and r["score"] == 1.0]
    assert perfect.count.startswith(f"{len(expected)} of 120")
    assert perfect.ids == expected[:50]
    misses = shown(report, "metric=RR&max=0&status=ok")
    assert misses.ids
    assert all(int(i[1:]) % 4 == 0 for i in misses.ids)  # the reference was d6, not retrieved


def test_sorting_puts_the_lowest_scores_first(report: Path) -> None:
    page = shown(report, "metric=RR&sort=asc&status=ok")
    first = int(page.ids[0][1:])
    assert first % 4 == 0  # an RR of 0: d6 was not retrieved
    assert page.count.startswith("108 of 120")


def test_an_opened_sample_shows_its_texts_and_evidence(report: Path) -> None:
    page = shown(report, "q=question number 21&open=q021")
    assert page.opened == ["q021"]
    assert "chunk 21-1 about topic1" in page.text
    assert "non_llm_context_recall: ✓ similarity 1.000 (best: chunk 1)" in page.text
    assert "RR: first relevant at rank 1" in page.text


def test_a_link_to_one_sample_shows_it_alone_and_opened(report: Path) -> None:
    """The view the trust section's item tables link to (``#metric=..&id=..&open=..``): that
    sample only, even where its id is part of others' text (q012 is in no other id, but "12"
    would be), opened."""
    page = shown(report, "metric=RR&id=q012&open=q012")
    assert page.ids == ["q012"]
    assert page.opened == ["q012"]
    assert page.count == "1 of 120 samples · page 1 of 1 · sample q012 only"
    assert "RR: first relevant at rank" in page.text
    assert shown(report, "id=nope").ids == []


def test_hostile_text_is_shown_as_text(report: Path) -> None:
    page = shown(report, "q=zebra&open=q007")
    assert page.title == "ctxeval: data.jsonl"  # no script of the data ran
    assert HOSTILE in page.text
    html = report.read_text(encoding="utf-8")
    assert html.count("<script") == 2  # the data block and the explorer, nothing injected
    assert re.search(r"https?://", html) is None  # self-contained: nothing fetched


PROTOTYPE_NAMES = [
    "constructor", "toString", "__proto__", "valueOf", "hasOwnProperty", "isPrototypeOf",
    "propertyIsEnumerable", "toLocaleString", "__defineGetter__",
]  # fmt: skip


def test_ids_named_like_object_prototype_members_are_data(tmp_path: Path) -> None:
    """Sample and document ids that are the names of ``Object.prototype``'s members render
    like any other (every id-keyed lookup of the explorer reads own properties or a Map)."""
    rows = [
        {
            "id": name,
            "user_input": f"question {name}",
            "retrieved_context_ids": [name, "plain", PROTOTYPE_NAMES[(i + 1) % 9]],
            "reference_context_ids": [name],
        }
        for i, name in enumerate(PROTOTYPE_NAMES)
    ]
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    code = main(["evaluate", str(data), "-m", "id_based_context_precision", "-m", "RR",
                 "--out", str(tmp_path / "run"), "-q"])  # fmt: skip
    assert code == 0
    report = tmp_path / "run" / "report.html"
    page = shown(report)
    assert page.ids == PROTOTYPE_NAMES
    opened = shown(report, "id=constructor")
    assert opened.ids == ["constructor"]
    assert opened.opened == ["constructor"]
    assert "id_based_context_precision: ✓ relevant" in opened.text
    assert "id_based_context_precision: ✗ not relevant" in opened.text


def test_runs_side_by_side_after_compare(tmp_path: Path) -> None:
    rows = samples()
    worse = [{**r, "retrieved_context_ids": list(reversed(r["retrieved_context_ids"]))}  # type: ignore[arg-type]
             for r in rows]  # fmt: skip
    for name, data in (("A", rows), ("B", worse)):
        path = tmp_path / f"{name}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in data))
        assert main(["evaluate", str(path), "-m", "RR", "--out", str(tmp_path / name), "-q"]) == 0
    page_path = tmp_path / "compare.html"
    assert main(["compare", str(tmp_path / "A"), str(tmp_path / "B"), "--report",
                 str(page_path), "--json"]) == 0  # fmt: skip
    html = page_path.read_text(encoding="utf-8")
    assert "Which samples got better or worse" in html
    assert "<code>RR</code>: B against A" in html
    # q001: d1 at rank 1 in A, at rank 3 in B (reversed): 1.0 -> 0.333
    assert "<code>q001</code></td><td class='num'>1.000</td><td class='num'>0.333</td>" in html
    page = shown(page_path, "metric=RR [B]&sort=asc&status=ok")
    assert page.count.startswith("108 of 120")
    both = shown(page_path, "q=q001&open=q001")
    assert "RR [A]: first relevant at rank 1" in both.text
    assert "RR [B]: first relevant at rank 3" in both.text


def test_a_multi_step_search_shows_its_steps_and_where_evidence_was_first_found(
    tmp_path: Path,
) -> None:
    """#55: a sample's ``retrieval_steps`` are shown step by step (query, what it returned),
    a relevant ID marked in the step that first returned it, and found by the search."""
    rows = [
        {
            "id": "q1",
            "user_input": "Who wrote Dune?",
            "reference_context_ids": ["d1", "d2"],
            "retrieval_steps": [
                {"query": "dune author", "retrieved_context_ids": ["d5", "d6"]},
                {"query": "frank herbert novel", "retrieved_context_ids": ["d1", "d5"]},
                {"query": "herbert sequels", "retrieved_context_ids": ["d2", "d1"]},
            ],
        },
        {"id": "q2", "user_input": "Other?", "reference_context_ids": ["d9"],
         "retrieval_steps": [{"query": "elsewhere", "retrieved_context_ids": ["d8"]}]},
    ]  # fmt: skip
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    code = main(["evaluate", str(data), "-m", "search_evidence_recall", "--out",
                 str(tmp_path / "run"), "-q"])  # fmt: skip
    assert code == 0
    page = shown(tmp_path / "run" / "report.html", "q=frank herbert&open=q1")
    assert page.ids == ["q1"]  # a step's query is searched
    text = " ".join(page.text.split())
    assert "search steps" in text
    assert "dune author · 2 returned[d5] [d6] frank" in text
    assert "frank herbert novel · 2 returned[d1] relevant[d5] herbert" in text
    # d2 first found at step 3, d1 at step 2 (not marked again)
    assert "herbert sequels · 2 returned[d2] relevant[d1] reference IDs" in text
