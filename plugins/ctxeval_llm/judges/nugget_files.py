"""Nuggets as TREC RAG's ``nuggetizer`` writes them (#55): the scores of one sample's
judged nuggets, and the nuggetizer's JSON lines in and out.

A nuggetizer file holds one JSON object a line, ``{"qid": ..., "query": ..., "nuggets":
[{"text": ..., "importance": "vital" | "okay"}, ...]}``; a judged one gives each nugget an
``"assignment"`` too (``support``, ``partial_support`` or ``not_support``). ``qid`` is the
sample's id.

The scores (:func:`nugget_scores`) are those of the AutoNuggetizer papers (Pradeep et al.,
arXiv 2411.09607 §3 and 2504.15068): a nugget scores 1 when supported, 0.5 when partially
supported and 0 otherwise; the *strict* variants count full support only. ``all`` averages
over every nugget, ``vital`` over the vital ones (``vital_strict`` is the TREC 2024 RAG
track's primary measure), ``weighted`` gives a vital nugget weight 1 and an okay one 0.5:
``sum(w_i * s_i) / sum(w_i)``. The four unweighted ones equal ``nuggetizer`` 0.0.5's
``calculate_nugget_scores`` (``strict_vital_score``, ``vital_score``, ``strict_all_score``,
``all_score``), except that a sample with nothing to average over is None here (the row is
``undefined``) where the nuggetizer writes 0.0.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from ctxeval.plugin import DataError

from .fact_prompts import IMPORTANCES, SUPPORT_LEVELS

__all__ = [
    "NUGGET_VARIANTS",
    "Nugget",
    "NuggetsFile",
    "nugget_scores",
    "nuggets_of",
    "read_nuggets",
    "records_of",
    "write_nuggets",
]

NUGGET_VARIANTS = ("vital_strict", "vital", "all_strict", "all", "weighted_strict", "weighted")
"""The scores of a sample's nuggets, TREC's names in ctxeval's spelling (``V_strict``, ``V``,
``A_strict``, ``A``, ``W_strict``, ``W``)."""

_HALVES = {"support": 2, "partial_support": 1, "not_support": 0}
"""A nugget's credit in halves: support 1, partial support 0.5, none 0."""


@attrs.frozen(slots=True)
class Nugget:
    """One nugget: an atomic fact of the reference material and its importance."""

    text: str
    importance: str = "vital"

    def as_dict(self) -> dict[str, str]:
        return {"text": self.text, "importance": self.importance}


def nugget_scores(
    importances: Sequence[str], assignments: Sequence[str]
) -> dict[str, float | None]:
    """Every variant's score of a sample's nuggets (one importance and one assignment each),
    None where there is nothing to average over (no nugget, or no vital nugget).

    Example:
        >>> scores = nugget_scores(["vital", "vital", "okay"],
        ...                        ["support", "partial_support", "support"])
        >>> scores["vital_strict"], scores["vital"], scores["all_strict"], scores["weighted"]
        (0.5, 0.75, 0.6666666666666666, 0.8)
    """
    if len(importances) != len(assignments):
        raise ValueError(f"{len(importances)} importances for {len(assignments)} assignments")
    for importance in importances:
        if importance not in IMPORTANCES:
            raise ValueError(f"importance must be vital or okay, got {importance!r}")
    for assignment in assignments:
        if assignment not in _HALVES:
            raise ValueError(f"assignment must be one of {', '.join(_HALVES)}, got {assignment!r}")
    # in halves, integers: one correctly rounded division each (all supported is exactly 1.0)
    vital = [i == "vital" for i in importances]
    weights = [2 if v else 1 for v in vital]
    out: dict[str, float | None] = {}
    for strict in (True, False):
        credit = [_HALVES[a] if not strict or a == "support" else 0 for a in assignments]
        suffix = "_strict" if strict else ""
        n_vital = sum(vital)
        found = sum(c for c, v in zip(credit, vital, strict=True) if v)
        out[f"vital{suffix}"] = _ratio(found, 2 * n_vital)
        out[f"all{suffix}"] = _ratio(sum(credit), 2 * len(credit))
        weighted = sum(w * c for w, c in zip(weights, credit, strict=True))
        out[f"weighted{suffix}"] = _ratio(weighted, 2 * sum(weights))
    return {name: out[name] for name in NUGGET_VARIANTS}


def _ratio(part: int, whole: int) -> float | None:
    return None if whole == 0 else part / whole


# --- nuggets given with a sample or in a file --------------------------------------------------


def _nugget(item: Any, field: str) -> Nugget:
    if isinstance(item, str):
        item = {"text": item}
    if not isinstance(item, Mapping):
        raise DataError(
            f'a nugget must be an object {{"text", "importance"}}, got {type(item).__name__}',
            field=field,
        )
    text = item.get("text")
    if not isinstance(text, str) or not text.strip():
        raise DataError(f'a nugget needs a non-empty "text" string, got {text!r}', field=field)
    importance = item.get("importance", "vital")
    if importance not in IMPORTANCES:
        raise DataError(
            f'"importance" must be "vital" or "okay", got {importance!r}',
            field=field,
            hint="label each nugget as the TREC RAG track does (vital or okay)",
        )
    assignment = item.get("assignment")
    if assignment is not None and assignment not in SUPPORT_LEVELS:
        raise DataError(
            f'"assignment" must be one of {", ".join(SUPPORT_LEVELS)}, got {assignment!r}',
            field=field,
        )
    return Nugget(text.strip(), importance)


def nuggets_of(value: Any, *, sample_id: str | None = None) -> tuple[Nugget, ...]:
    """The nuggets of a sample's ``nuggets`` field (a list of ``{"text", "importance"}``, or of
    strings: vital nuggets), checked.

    Raises:
        DataError: naming the sample and the nugget that is wrong.
    """
    try:
        if not isinstance(value, list | tuple):
            raise DataError(
                f'must be a list of {{"text", "importance"}} objects, got {type(value).__name__}',
                field="nuggets",
            )
        return tuple(_nugget(item, f"nuggets[{i}]") for i, item in enumerate(value))
    except DataError as exc:
        raise exc.located(sample_id=sample_id) from None


def read_nuggets(path: str | Path) -> dict[str, tuple[Nugget, ...]]:
    """The nuggets of a nuggetizer JSON-lines file, by ``qid`` (the sample id), all in memory
    (:class:`NuggetsFile` keeps only where each line is).

    Raises:
        DataError: naming the file, the line and the qid of what is wrong.
    """
    index = NuggetsFile.index(path)
    return {qid: index.get(qid) or () for qid in index.offsets}


@attrs.frozen
class NuggetsFile:
    """A nuggetizer JSON-lines file, checked whole once (a bad line is an error at once) and
    read line by line after: it holds where each ``qid``'s line starts, not the nuggets (a
    million samples of five nuggets: about 100 MB of offsets instead of over a gigabyte)."""

    path: str
    offsets: Mapping[str, int] = attrs.field(repr=False)
    digest: str = ""
    """A hash of the file's bytes (a resumed run whose nuggets changed recomputes its rows)."""

    @classmethod
    def index(cls, path: str | Path) -> NuggetsFile:
        """Check every line of ``path`` and note where each qid's line starts.

        Raises:
            DataError: naming the file, the line and the qid of what is wrong.
        """
        name = str(path)
        offsets: dict[str, int] = {}
        try:
            handle = Path(path).open("rb")  # noqa: SIM115 (closed by the with below)
        except OSError as exc:
            raise DataError(
                f"cannot read the nuggets file: {exc.strerror or exc}", path=name
            ) from exc
        content = hashlib.blake2b(digest_size=8)
        with handle:
            offset = 0
            for number, line in enumerate(handle, start=1):
                content.update(line)
                if line.strip():
                    qid, _ = _record(line, name, number, offsets)
                    offsets[qid] = offset
                offset += len(line)
        return cls(name, offsets, content.hexdigest())

    def get(self, qid: str) -> tuple[Nugget, ...] | None:
        """The nuggets of ``qid``, None when the file has no line for it."""
        offset = self.offsets.get(qid)
        if offset is None:
            return None
        with Path(self.path).open("rb") as handle:
            handle.seek(offset)
            line = handle.readline()
        return _record(line, self.path, None, {})[1]


def _record(
    line: str | bytes, path: str, number: int | None, seen: Mapping[str, Any]
) -> tuple[str, tuple[Nugget, ...]]:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        raise DataError(f"not JSON ({exc.msg})", path=path, line=number) from exc
    if not isinstance(record, Mapping) or "qid" not in record:
        raise DataError('a nuggetizer record needs a "qid" (the sample id)', path=path, line=number)
    qid = str(record["qid"])
    if qid in seen:
        raise DataError(
            "the qid is given twice", path=path, line=number, sample_id=qid, hint="one per line"
        )
    if "nuggets" not in record:
        raise DataError(
            'the record has no "nuggets"', path=path, line=number, sample_id=qid, field="nuggets"
        )
    try:
        return qid, nuggets_of(record["nuggets"], sample_id=qid)
    except DataError as exc:
        raise exc.located(path=path, line=number) from None


def write_nuggets(path: str | Path, records: Iterable[Mapping[str, Any]]) -> int:
    """Write ``records`` (``{"qid", "query"?, "nuggets": [{"text", "importance",
    "assignment"?}]}``) as a nuggetizer JSON-lines file; the number of records written."""
    count = 0
    with Path(path).open("w", encoding="utf-8") as out:
        for record in records:
            out.write(json.dumps(dict(record), ensure_ascii=False) + "\n")
            count += 1
    return count


def records_of(rows: Iterable[Any]) -> Iterator[dict[str, Any]]:
    """The nuggetizer records of ``context_nugget_recall`` rows (``MetricResult``s, or the
    rows of a run's ``results.jsonl`` as dicts): each judged row's nuggets, importance and
    assignment."""
    for row in rows:
        if isinstance(row, Mapping):
            details, sample_id = row.get("details") or {}, row.get("sample_id")
        else:
            details, sample_id = getattr(row, "details", None) or {}, row.sample_id
        nuggets = details.get("nuggets")
        if not nuggets:
            continue
        record: dict[str, Any] = {"qid": str(sample_id)}
        if details.get("query"):
            record["query"] = details["query"]
        record["nuggets"] = [
            {"text": n["text"], "importance": n["importance"], "assignment": n["assignment"]}
            for n in nuggets
        ]
        yield record
