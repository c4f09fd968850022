"""``ctxeval metrics`` and ``ctxeval compare`` at 80 columns: lines that fit, no trailing white
space, metric names never wrapped; what a composed metric needs."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ctxeval.cli import build_parser, main
from ctxeval.cli.compare import table_lines
from ctxeval.cli.metrics import wrap

LONG = "non_llm_context_precision_with_reference"


def check_lines(text: str, width: int = 80) -> list[str]:
    lines = text.splitlines()
    assert [line for line in lines if line != line.rstrip()] == []
    assert [line for line in lines if len(line) > width] == []
    return lines


def test_metrics_listing_fits_80_columns(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["metrics"]) == 0
    lines = check_lines(capsys.readouterr().out)
    # the options of context_entity_recall wrap under the first option, not under "options:"
    at = lines.index("context_entity_recall")
    options = next(i for i in range(at, len(lines)) if lines[i].startswith("  options: "))
    assert lines[options + 1].startswith(" " * len("  options: ") + "mode")
    assert LONG in lines  # a metric name on a line of its own, whole
    assert "needs: nothing" not in "\n".join(lines)


def test_wrap_hangs_under_the_text_and_never_cuts_a_word() -> None:
    lines = wrap("options:", ", ".join(["abc"] * 30), 40)
    assert lines[0].startswith("  options: abc")
    assert all(line.startswith(" " * 11 + "abc") for line in lines[1:])
    assert all(len(line) <= 40 and line == line.rstrip() for line in lines)
    assert wrap("", "x" * 100, 40) == ["  " + "x" * 100]


COMPOSED = '''
from ctxeval.plugin import Extracted, Items, compose, get_extractor, get_matcher, policy


def keyword_recall(threshold: float = 0.85):
    """Share of the reference's entities an LLM finds, matched fuzzily."""
    return compose(
        "keyword_recall",
        reference=Extracted(field="reference", extractor=get_extractor("llm"),
                            what="reference entities"),
        retrieved=Items(field="retrieved_contexts", what="retrieved contexts"),
        matcher=get_matcher("fuzzy", threshold=threshold),
        formula=policy.Recall(),
    )


def id_hits():
    """Reference IDs retrieved."""
    return compose(
        "id_hits",
        reference=Items(field="reference_context_ids", what="reference IDs"),
        retrieved=Items(field="retrieved_context_ids", what="retrieved IDs"),
        matcher=get_matcher("id"),
        formula=policy.Recall(),
    )


def needs_an_option(field):
    """Cannot be built without its option."""
    raise TypeError("field is required")
'''


def test_composed_metrics_list_the_fields_of_their_parts(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "composed_metrics.py").write_text(COMPOSED)
    dist = site / "composed-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: composed\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[ctxeval.metrics]\nkeyword_recall = composed_metrics:keyword_recall\n"
        "id_hits = composed_metrics:id_hits\nneeds_an_option = composed_metrics:needs_an_option\n"
    )
    env = {**os.environ, "PYTHONPATH": str(site), "COLUMNS": "80"}

    def cli(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "ctxeval", "metrics", *args],
            capture_output=True, text=True, env=env, timeout=120, check=True,
        )  # fmt: skip
        return done.stdout

    entries: dict[str, Any] = {e["name"]: e for e in json.loads(cli("--json"))}
    assert entries["keyword_recall"]["requires"] == ["reference", "retrieved_contexts"]
    assert entries["keyword_recall"]["needs_llm"] is True
    assert entries["id_hits"]["requires"] == ["reference_context_ids", "retrieved_context_ids"]
    assert entries["id_hits"]["needs_llm"] is False
    assert entries["needs_an_option"]["requires"] is None
    lines = check_lines(cli())
    after = {name: lines[lines.index(name) + 2] for name in entries if name in lines}
    assert after["keyword_recall"] == "  needs: reference, retrieved_contexts; an LLM (--model)"
    assert after["id_hits"] == "  needs: reference_context_ids, retrieved_context_ids"
    assert after["needs_an_option"].startswith("  needs: unknown")


def comparison(runs: list[str], metrics: list[str]) -> dict[str, Any]:
    rows = []
    for metric in metrics:
        for run in runs:
            rows.append(
                {"metric": metric, "run": run, "n": 1000, "mean_a": 0.30000000000000004,
                 "mean_b": 0.5, "difference": 0.19999999999999996, "ci95_low": -0.123,
                 "ci95_high": 0.456, "p_randomization": 0.01, "p_holm": 0.02}
            )  # fmt: skip
    return {"baseline": "A", "runs": runs, "comparisons": rows, "missing": {}}


@pytest.mark.parametrize("runs", [["B"], ["B1", "B2", "B3"]])
def test_compare_table_fits_80_columns_with_names_whole(runs: list[str]) -> None:
    metrics = [LONG, "llm_context_precision_without_reference", "P@5", "nDCG@10"]
    labels = {run: run for run in runs}
    lines = table_lines(comparison(runs, metrics), labels, 80)
    check_lines("\n".join(lines))
    for metric in metrics:  # each name once, whole, at the start of a line
        assert sum(line.startswith(metric) for line in lines) == 1
    assert "0.300" in lines[3] or "0.300" in lines[2]  # rounded, never 0.30000000000000004
    assert "0000000" not in "\n".join(lines)
    assert ("Holm" in lines[0]) == (len(runs) > 1)  # with one run, Holm's p is p
    short = [line for line in lines if line.startswith("P@5")]
    assert short
    assert short[0].split()[0] == "P@5"  # a short name keeps its row
    wide = table_lines(comparison(runs, metrics), labels, 200)
    assert len(wide) == 2 + len(metrics) * len(runs)  # wide enough: one line per row


def test_compare_command_at_80_columns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    folders = []
    for name, shift in (("A", 0.0), ("B", 0.1)):
        folder = tmp_path / name
        folder.mkdir()
        lines = [
            json.dumps({"sample_id": f"s{i}", "metric": metric, "status": "ok",
                        "score": min(1.0, 0.2 + 0.02 * i + shift), "reason": None,
                        "details": {}})
            for metric in (LONG, "P@5")
            for i in range(20)
        ]  # fmt: skip
        (folder / "results.jsonl").write_text("\n".join(lines) + "\n")
        folders.append(name)  # as typed in the folder that holds them (a path is never cut)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["compare", *folders]) == 0
    lines = check_lines(capsys.readouterr().out)
    assert LONG in lines
    assert any(line.startswith("P@5 ") for line in lines)


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    [commands] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(commands.choices)


def _examples(text: str) -> list[list[str]]:
    """The example commands of a help text (a line ending in ``\\`` goes on on the next)."""
    found: list[list[str]] = []
    joined = text.replace("\\\n", " ")
    for line in joined.splitlines():
        words = line.split()
        if words[:1] == ["ctxeval"]:
            found.append(words[1:])
    return found


def test_every_help_fits_80_columns_and_its_examples_parse(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    parser = build_parser()
    helps = {"ctxeval": parser.format_help()}
    helps.update({name: sub.format_help() for name, sub in _subparsers(parser).items()})
    for name, text in helps.items():
        wide = [line for line in text.splitlines() if len(line) > 80]
        assert not wide, f"ctxeval {name} --help: {wide}"
    top = _examples(helps["ctxeval"])
    evaluate = _examples(helps["evaluate"])
    assert len(top) >= 5
    assert len(evaluate) >= 5
    # one example per command at the top, evaluate's own below it: none repeated
    assert not {tuple(e) for e in top} & {tuple(e) for e in evaluate}
    commands = set(_subparsers(parser))
    assert {e[0] for e in top} >= commands - {"metrics", "plugins"}
    for words in top + evaluate:
        parser.parse_args(words)  # (exits 2 on an example that does not parse)
