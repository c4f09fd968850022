"""Retrieval units (#55): what a context metric counts, chunks or documents, in one place.

A chunker cuts a document into overlapping windows and a reranker returns several chunks of one
document: counted chunk by chunk, precision punishes the overlap and recall rewards the
duplicates. :class:`RetrievalUnits` holds a metric's three options and is applied around the
judging, the same way for every pipeline metric (IDs, strings, LLM judges), never inside a
metric's own loop:

* **before judging** (:meth:`RetrievalUnits.prepare`, a sample in, a sample out):

  - ``duplicates``: retrieved chunks whose text equals an earlier one (``1.0``), or is at least
    that similar to it (Levenshtein similarity, as the ``similarity`` matcher's ``levenshtein``
    measure), are dropped with their IDs and sources, so a judge is not paid twice for one
    text; a duplicate counts once, at its first rank (as a repeated ID does);
  - ``unit="document"`` on an ID side: every chunk ID becomes its document's ID (from
    ``retrieved_context_sources`` / ``reference_context_sources``, or the part before the last
    ``doc_id_separator``; a reference ID that was retrieved takes the retrieved chunk's source,
    and one without a source is a document ID already), each
    document once, at its best (first) chunk's rank; a graded reference gives a document the
    best grade of its chunks. The ID metrics then score the document-level run and qrels, as
    trec_eval does on them.

* **after judging** (:meth:`RetrievalUnits.collapse`, a judgement in, a judgement out), for a
  text side judged chunk by chunk: the verdicts of one document's chunks become one verdict,
  the best (a document is relevant when any of its chunks is), at the document's first rank.

``unit="chunk"`` without ``duplicates`` changes nothing (the ragas numbers).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Final

import attrs

from ctxeval._data.measure_names import DOCUMENT_SUFFIX
from ctxeval._data.sample import GradedIDs, Sample, id_for_message
from ctxeval._errors import DataError
from ctxeval._pipeline.judgement import Judgement
from ctxeval._plugins.protocols import Verdict

__all__ = ["DOCUMENT_SUFFIX", "UNITS", "RetrievalUnits", "document_of", "kept_chunks"]

UNITS: Final = ("chunk", "document")
"""The retrieval units a context metric counts."""


def document_of(chunk_id: str, separator: str) -> str:
    """The document of ``chunk_id``: the part before the last ``separator`` (``doc#3`` →
    ``doc``); an ID without one is a document ID already."""
    document, found, _ = chunk_id.rpartition(separator)
    return document if found and document else chunk_id


def _unit(instance: Any, attribute: Any, value: Any) -> None:
    if value not in UNITS:
        raise ValueError(f"{attribute.name} must be 'chunk' or 'document', got {value!r}")


def _separator(instance: Any, attribute: Any, value: Any) -> None:
    if value is not None and (not isinstance(value, str) or not value):
        raise ValueError(f"{attribute.name} must be a non-empty string, got {value!r}")


def _similarity(instance: Any, attribute: Any, value: Any) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise ValueError(
            f"{attribute.name} must be a similarity in (0, 1] (1: identical texts only), "
            f"got {value!r}"
        )


@attrs.frozen(kw_only=True)
class RetrievalUnits:
    """A metric's retrieval-unit options (see the module)."""

    suffix: ClassVar[str] = DOCUMENT_SUFFIX
    """What a document-level metric's default row name ends with."""

    unit: str = attrs.field(default="chunk", validator=_unit)
    doc_id_separator: str | None = attrs.field(default=None, validator=_separator)
    duplicates: float | None = attrs.field(default=None, validator=_similarity)

    @classmethod
    def bind(cls, metric: Any, name_it: Callable[[], object]) -> RetrievalUnits:
        """The units of ``metric`` (from its ``unit``, ``doc_id_separator`` and ``duplicates``
        options), set as its ``units``, as every context metric applies them: ``name_it`` (the
        base class's ``__attrs_post_init__``, which gives a metric without a name its default
        one) is run, then a metric not given a name that counts documents takes
        :attr:`suffix`, so that the two levels side by side have two names."""
        units = cls(
            unit=metric.unit, doc_id_separator=metric.doc_id_separator, duplicates=metric.duplicates
        )
        object.__setattr__(metric, "units", units)
        named = bool(metric.name)
        name_it()
        if units.by_document and not named:
            object.__setattr__(metric, "name", metric.name + cls.suffix)
        return units

    @property
    def active(self) -> bool:
        """False when the options change nothing (chunks, duplicates kept)."""
        return self.unit == "document" or self.duplicates is not None

    @property
    def by_document(self) -> bool:
        return self.unit == "document"

    def settings(self) -> dict[str, Any]:
        """What a row's details show of the options (nothing at their defaults)."""
        out: dict[str, Any] = {}
        if self.unit != "chunk":
            out["unit"] = self.unit
        if self.duplicates is not None:
            out["duplicates"] = self.duplicates
        return out

    # --- before judging --------------------------------------------------------------------

    def prepare(self, sample: Sample, fields: Sequence[str]) -> Sample:
        """``sample`` as a metric reading ``fields`` judges it (see the module); the sample
        itself when the options change nothing. Idempotent.

        Raises:
            DataError: document level, and the documents of the retrieved chunks cannot be
                told (no ``retrieved_context_sources``, no ``doc_id_separator``).
        """
        if not self.active:
            return sample
        changes: dict[str, Any] = {}
        if self.duplicates is not None and sample.retrieved_contexts:
            changes.update(self._without_duplicates(sample))
        if self.by_document:
            current = _replaced(sample, changes) if changes else sample
            changes.update(self._retrieved_documents(current, fields))
            changes.update(self._reference_documents(current, fields))
        return _replaced(sample, changes) if changes else sample

    def _without_duplicates(self, sample: Sample) -> dict[str, Any]:
        contexts = sample.retrieved_contexts
        assert contexts is not None
        keep = kept_chunks(contexts, self.duplicates or 1.0)
        if len(keep) == len(contexts):
            return {}
        changes: dict[str, Any] = {"retrieved_contexts": [contexts[i] for i in keep]}
        for field in ("retrieved_context_ids", "retrieved_context_sources"):
            given = getattr(sample, field)
            if given is not None and len(given) == len(contexts):
                changes[field] = [given[i] for i in keep]
        return changes

    def _retrieved_documents(self, sample: Sample, fields: Sequence[str]) -> dict[str, Any]:
        ids, contexts = sample.retrieved_context_ids, sample.retrieved_contexts
        if "retrieved_context_ids" in fields and ids is not None:
            documents = self._documents(sample, ids, "retrieved")
            unique = list(dict.fromkeys(documents))
            return {
                "retrieved_context_ids": unique,
                "retrieved_context_sources": unique,
                "retrieved_contexts": None,
            }
        if "retrieved_contexts" in fields and contexts:
            chunk_ids = ids if ids is not None and len(ids) == len(contexts) else None
            documents = self._documents(sample, chunk_ids, "retrieved")
            return {"retrieved_context_sources": documents, "retrieved_context_ids": chunk_ids}
        return {}

    def _reference_documents(self, sample: Sample, fields: Sequence[str]) -> dict[str, Any]:
        ids = sample.reference_context_ids
        if "reference_context_ids" in fields and ids is not None:
            given = sample.reference_context_sources
            sources: Sequence[str] = (
                given if given is not None else self._split(ids) if self.doc_id_separator else ids
            )
            known = _retrieved_sources(sample) if given is None else None
            if known:  # a reference chunk that was retrieved: the document its source names
                sources = [known.get(i, d) for i, d in zip(ids, sources, strict=True)]
            grades = ids.grades if isinstance(ids, GradedIDs) else None
            best: dict[str, int] = {}
            for position, document in enumerate(sources):
                grade = grades[position] if grades is not None else 1
                if document not in best or grade > best[document]:
                    best[document] = grade
            unique = list(best)
            value: Any = GradedIDs(tuple(unique), tuple(best.values())) if grades else unique
            return {
                "reference_context_ids": value,
                "reference_context_sources": unique,
                "reference_contexts": None,
            }
        contexts = sample.reference_contexts
        if (
            "reference_contexts" in fields
            and contexts
            and sample.reference_context_sources is None
            and ids is not None
            and len(ids) == len(contexts)
            and self.doc_id_separator
        ):
            return {"reference_context_sources": self._split(ids)}
        return {}  # (without sources, each reference chunk counts alone)

    def _documents(self, sample: Sample, ids: Sequence[str] | None, side: str) -> list[str]:
        field = f"{side}_context_sources"
        sources = getattr(sample, field)
        if sources is not None:
            return list(sources)
        if self.doc_id_separator and ids is not None:
            return self._split(ids)
        raise DataError(
            f"unit='document' needs the document of each {side} chunk",
            field=field,
            sample_id=id_for_message(sample.id),
            hint=f"give {field} (one document ID per chunk), or the option doc_id_separator "
            f"for chunk IDs such as doc#segment (with {side}_context_ids)",
        )

    def _split(self, ids: Sequence[str]) -> list[str]:
        """:func:`document_of` of each ID (written out: this runs for every sample)."""
        separator = self.doc_id_separator
        assert separator is not None
        return [i.rpartition(separator)[0] or i for i in ids]

    # --- after judging ---------------------------------------------------------------------

    @staticmethod
    def groups(sources: Sequence[str]) -> list[list[int]]:
        """The positions of each document's chunks, documents in the order of their first
        chunk (``["a", "b", "a"]`` → ``[[0, 2], [1]]``): what a metric with its own judging
        (graded chunks) collapses by, best of each group at its first position."""
        out: dict[str, list[int]] = {}
        for position, document in enumerate(sources):
            out.setdefault(document, []).append(position)
        return list(out.values())

    def collapse(self, judgement: Judgement, sample: Sample) -> Judgement:
        """``judgement`` with one verdict per document on its judged side (the best of the
        document's chunks, at its first rank), when that side is text with sources; as it is
        otherwise (an ID side was collapsed by :meth:`prepare`; extracted units are no
        chunks)."""
        if not self.by_document:
            return judgement
        if judgement.judged == "retrieved":
            sources = sample.retrieved_context_sources
            items = judgement.retrieved
        else:
            sources = sample.reference_context_sources
            items = judgement.reference
        if sources is None or len(sources) != len(items) or len(set(sources)) == len(sources):
            return judgement
        groups = self.groups(sources)
        firsts = [positions[0] for positions in groups]
        verdicts, gains = _best(judgement, groups)
        kept = [items[i] for i in firsts]
        if judgement.judged == "retrieved":
            return attrs.evolve(judgement, retrieved=kept, verdicts=verdicts, gains=gains)
        grades = judgement.reference_grades
        return attrs.evolve(
            judgement,
            reference=kept,
            verdicts=verdicts,
            reference_grades=None if grades is None else [grades[i] for i in firsts],
        )


def _retrieved_sources(sample: Sample) -> dict[str, str] | None:
    """Each retrieved chunk ID's document, from ``retrieved_context_sources``; None without."""
    ids, sources = sample.retrieved_context_ids, sample.retrieved_context_sources
    if ids is None or sources is None or len(ids) != len(sources):
        return None
    return dict(zip(ids, sources, strict=True))


_SETTERS: Final = tuple((name, getattr(Sample, name).__set__) for name in attrs.fields_dict(Sample))
_new: Final = object.__new__


def _replaced(sample: Sample, changes: dict[str, Any]) -> Sample:
    """``sample`` with ``changes`` (values made here from its own checked ones, lists of
    strings or :class:`GradedIDs`), built without running every converter again (this runs
    for every sample of a large run); the sources are checked as a sample's are."""
    new: Sample = _new(Sample)
    for name, setter in _SETTERS:
        value = changes[name] if name in changes else getattr(sample, name)
        setter(new, tuple(value) if type(value) is list else value)
    return new  # (the sources made here have one document per item of their side)


def _best(judgement: Judgement, groups: list[list[int]]) -> tuple[list[Verdict], list[int] | None]:
    """The best verdict (and gain) of each group of judged positions; a group past the judged
    ones (cut at the formula's depth) is left out."""
    verdicts, gains = judgement.verdicts, judgement.gains
    out: list[Verdict] = []
    out_gains: list[int] | None = None if gains is None else []
    judged = len(verdicts)
    for positions in groups:
        within = [i for i in positions if i < judged]
        if not within:
            continue
        best = max(within, key=lambda i: (verdicts[i].matched, verdicts[i].score or 0.0, -i))
        out.append(verdicts[best])
        if out_gains is not None and gains is not None:
            out_gains.append(max(gains[i] for i in within))
    return out, out_gains


def kept_chunks(texts: Sequence[str], similarity: float) -> list[int]:
    """The positions of ``texts`` that are no duplicate of an earlier kept one: equal
    (``similarity`` 1.0), or at least ``similarity`` alike (Levenshtein similarity, rapidfuzz's
    ``Levenshtein.normalized_similarity``, the ``similarity`` matcher's ``levenshtein``)."""
    seen: dict[str, int] = {}
    keep: list[int] = []
    near = similarity < 1.0
    if near:
        from rapidfuzz.distance import Levenshtein

        alike = Levenshtein.normalized_similarity
    for position, text in enumerate(texts):
        if text in seen:
            continue
        if near and any(alike(text, texts[k], score_cutoff=similarity) >= similarity for k in keep):
            continue
        seen[text] = position
        keep.append(position)
    return keep
