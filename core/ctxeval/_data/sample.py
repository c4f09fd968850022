"""The unit of evaluation: :class:`Sample`, one question with what was retrieved for it.

Field names are those of ragas's ``SingleTurnSample`` so that existing datasets load
unchanged; the older ragas names (``question``, ``answer``, ``ground_truth``, ``contexts``) are
accepted by :meth:`Sample.from_dict`. Every field is optional: each metric declares the fields
it requires, and a sample without them gets an ``error`` row for that metric only.

Values are checked and normalised when a sample is built: lists become tuples, context IDs
(str or int) become strings, and anything else raises :class:`~ctxeval.DataError` naming the
field.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final, NamedTuple

import attrs
import orjson

from ctxeval._data.text import brief
from ctxeval._errors import DataError

__all__ = [
    "COLUMN_FIELDS",
    "FIELD_ALIASES",
    "SAMPLE_FIELDS",
    "SOURCE_FIELDS",
    "STEP_FIELDS",
    "GradedIDs",
    "RetrievalStep",
    "Sample",
    "checked_id_sample",
    "checked_samples",
    "field_converter",
    "grades_of",
    "steps_of",
    "union_of_steps",
]

TEXT_FIELDS: Final = ("user_input", "response", "reference")
TEXT_LIST_FIELDS: Final = ("retrieved_contexts", "reference_contexts")
SOURCE_FIELDS: Final = ("retrieved_context_sources", "reference_context_sources")
"""The document each retrieved / reference chunk comes from (retrieval units, #55)."""
ID_LIST_FIELDS: Final = ("retrieved_context_ids", "reference_context_ids", *SOURCE_FIELDS)
STEPS_FIELD: Final = "retrieval_steps"
SAMPLE_FIELDS: Final[tuple[str, ...]] = (
    *TEXT_FIELDS,
    *TEXT_LIST_FIELDS,
    *ID_LIST_FIELDS,
    "id",
    STEPS_FIELD,
)
"""The data fields of a sample, in the order they are written."""

FIELD_ALIASES: Final[Mapping[str, str]] = {
    "question": "user_input",
    "answer": "response",
    "ground_truth": "reference",
    "contexts": "retrieved_contexts",
}
"""Older ragas field names and the names they stand for."""


def _is_valid(text: str) -> bool:
    try:
        _valid(text, "")
    except DataError:
        return False
    return True


def id_for_message(value: object) -> str | None:
    """A sample's ``id`` as an error message may name it, whatever it holds (a huge integer,
    a deep list), or None when it has none."""
    if value is None:
        return None
    if isinstance(value, str) and len(value) <= 200 and _is_valid(value):
        return value
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() <= 64:
        return str(value)
    return brief(value)


def _type_name(value: object) -> str:
    return "null" if value is None else type(value).__name__


def _valid(text: str, field: str, what: str = "the text") -> str:
    """``text``, if it is valid Unicode (no lone surrogate, which no file can hold)."""
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            code = ord(text[exc.start])
            raise DataError(
                f"{what} holds a lone surrogate (U+{code:04X} at character {exc.start}), "
                "which is not valid Unicode",
                field=field,
                hint="fix the encoding where the text was produced (a cut surrogate pair)",
            ) from None
    return text


def _text(value: object, field: str) -> str | None:
    if value is None:
        return value
    if isinstance(value, str):
        return _valid(value, field)
    raise DataError(f"expected a string, got {_type_name(value)}", field=field)


def _texts(value: object, field: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):
        raise DataError(
            "expected a list of strings, got a single string",
            field=field,
            hint=f'wrap it in a list: "{field}": ["..."]',
        )
    if not isinstance(value, (list, tuple)):
        raise DataError(f"expected a list of strings, got {_type_name(value)}", field=field)
    for position, item in enumerate(value):
        if not isinstance(item, str):
            raise DataError(
                f"item {position} is {_type_name(item)}, expected a string", field=field
            )
        if not item.isascii():
            _valid(item, field, f"item {position}")
    return tuple(value)


MAX_ID_LENGTH: Final = 10_000
"""The longest ID (characters) a sample may hold."""


def _id_value(value: object, field: str = "id") -> str | None:
    """A context or sample ID as a string, or None when it is not a str or an int."""
    if isinstance(value, str):
        if len(value) > MAX_ID_LENGTH:
            raise DataError(
                f"an ID of {len(value)} characters (at most {MAX_ID_LENGTH})", field=field
            )
        return value if value.isascii() else _valid(value, field, "an ID")
    if isinstance(value, int) and not isinstance(value, bool):
        if value.bit_length() > 64:  # a 20-digit number is an ID; a 4 000-digit one is not
            raise DataError(
                f"an integer ID of {value.bit_length()} bits (at most 64); give long IDs "
                "as strings",
                field=field,
            )
        return str(value)
    return None


class GradedIDs(tuple[str, ...]):
    """Reference context IDs that carry a relevance grade each, as TREC qrels do: a tuple of
    the IDs (in the order given) with their :attr:`grades` beside them.

    A sample's ``reference_context_ids`` is one when it was given as a mapping
    ``{"doc_1": 2, "doc_7": 0}``; a plain list means grade 1 for every ID. A grade of 0 (or less)
    marks a document judged *not* relevant; which grades count as relevant is a metric's
    ``relevance_level`` (1 by default, as trec_eval's ``-l``).
    """

    grades: tuple[int, ...]
    """The grade of each ID, in the same order."""

    def __new__(cls, ids: tuple[str, ...], grades: tuple[int, ...]) -> GradedIDs:
        new = super().__new__(cls, ids)
        new.grades = grades
        return new

    def __eq__(self, other: object) -> bool:
        if isinstance(other, GradedIDs):
            return tuple.__eq__(self, other) and self.grades == other.grades
        return False  # a plain list of IDs means grade 1 each: not the same reference

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash((tuple(self), self.grades))

    def __repr__(self) -> str:
        return repr(dict(zip(self, self.grades, strict=True)))

    def __reduce__(self) -> tuple[Any, ...]:
        return (GradedIDs, (tuple(self), self.grades))

    def as_dict(self) -> dict[str, int]:
        """``{id: grade}``."""
        return dict(zip(self, self.grades, strict=True))


def grades_of(ids: tuple[str, ...] | None) -> tuple[int, ...] | None:
    """The grades of reference IDs, or None when they carry none (all grade 1)."""
    return ids.grades if isinstance(ids, GradedIDs) else None


def _graded(value: Mapping[Any, Any], field: str) -> GradedIDs:
    ids, grades = [], []
    for key, grade in value.items():
        as_id = _id_value(key, field)
        if as_id is None:
            raise DataError(
                f"key {brief(key)} is {_type_name(key)}; IDs must be strings or integers",
                field=field,
            )
        if isinstance(grade, bool) or not isinstance(grade, int):
            raise DataError(
                f"the grade of {as_id!r} is {_type_name(grade)} {brief(grade)}; grades are "
                "integers (0 or less: judged not relevant)",
                field=field,
            )
        ids.append(as_id)
        grades.append(grade)
    return GradedIDs(tuple(ids), tuple(grades))


def _ids(value: object, field: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, GradedIDs):
        return value
    if isinstance(value, Mapping):
        if field != "reference_context_ids":
            raise DataError(
                "expected a list of IDs, got a mapping (only reference_context_ids take grades)",
                field=field,
            )
        return _graded(value, field)
    if isinstance(value, (str, int)) and not isinstance(value, bool):
        raise DataError(
            f"expected a list of IDs, got a single {_type_name(value)}",
            field=field,
            hint=f'wrap it in a list: "{field}": [{_json_brief(value)}]',
        )
    if not isinstance(value, (list, tuple)):
        raise DataError(f"expected a list of IDs, got {_type_name(value)}", field=field)
    out = []
    for position, item in enumerate(value):
        as_id = _id_value(item, field)
        if as_id is None:
            raise DataError(
                f"item {position} is {_type_name(item)} {brief(item)}; IDs must be strings or "
                "integers",
                field=field,
            )
        out.append(as_id)
    return tuple(out)


# The steps of a multi-step search (#55): one RetrievalStep per search call, in order.
_new_step: Final = tuple.__new__
STEP_FIELDS: Final = ("query", "retrieved_context_ids", "retrieved_contexts")
"""The fields of a step, in the order they are written."""


def _query(value: object) -> str | None:
    return _text(value, "query")


def _step_ids(value: object) -> tuple[str, ...] | None:
    return _ids(value, "retrieved_context_ids")


def _step_texts(value: object) -> tuple[str, ...] | None:
    return _texts(value, "retrieved_contexts")


class _StepFields(NamedTuple):
    query: str | None
    retrieved_context_ids: tuple[str, ...] | None
    retrieved_contexts: tuple[str, ...] | None


class RetrievalStep(_StepFields):
    """One search call of a multi-step search: the query sent and what it returned.

    An immutable value (a named tuple of its three fields). Each field is optional, but a step
    holds its IDs or its texts (or both, then one ID per text); IDs (str or int) become
    strings, lists become tuples, as in :class:`Sample`.

    Example:
        >>> RetrievalStep(query="dune author", retrieved_context_ids=["d1", 7]).to_dict()
        {'query': 'dune author', 'retrieved_context_ids': ['d1', '7']}

    Raises:
        DataError: a field of the wrong type (naming it), neither IDs nor texts, or not one
            ID per text.
    """

    __slots__ = ()

    def __new__(
        cls,
        query: object = None,
        retrieved_context_ids: object = None,
        retrieved_contexts: object = None,
    ) -> RetrievalStep:
        ids = _step_ids(retrieved_context_ids)
        texts = _step_texts(retrieved_contexts)
        if ids is None and texts is None:
            raise DataError(
                "a step holds none of retrieved_context_ids and retrieved_contexts",
                hint="give what the search call returned (an empty list when it found nothing)",
            )
        if ids is not None and texts is not None and len(ids) != len(texts):
            raise DataError(
                f"{len(ids)} retrieved_context_ids but {len(texts)} retrieved_contexts",
                field="retrieved_context_ids",
                hint="give one ID per retrieved text, in the same order",
            )
        return _new_step(cls, (_query(query), ids, texts))

    def to_dict(self) -> dict[str, Any]:
        """The step as a dict; fields that are None are left out."""
        out: dict[str, Any] = {}
        for name in STEP_FIELDS:
            value = getattr(self, name)
            if value is not None:
                out[name] = list(value) if isinstance(value, tuple) else value
        return out


def steps_of(value: object, sample_id: str | None = None) -> tuple[RetrievalStep, ...] | None:
    """``value`` (a list of step mappings or :class:`RetrievalStep`) as steps, checked.

    Raises:
        DataError: naming the sample id, the step (``retrieval_steps[2].query``) and what
            was wrong.
    """
    if value is None:
        return None
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, (list, tuple)):
        raise DataError(
            f"expected a list of steps, got {_kind(value)}",
            field="retrieval_steps",
            sample_id=sample_id,
            hint='give [{"query": "...", "retrieved_context_ids": [...]}, ...], one per '
            "search call, in order",
        )
    if isinstance(value, RetrievalStep):
        raise DataError(
            "expected a list of steps, got a single step",
            field="retrieval_steps",
            sample_id=sample_id,
            hint="wrap it in a list: [step]",
        )
    if type(value) is tuple and all(type(step) is RetrievalStep for step in value):
        return value
    plain = _plain_steps(value)
    if plain is not None:
        return plain
    return tuple(_step(item, index, sample_id) for index, item in enumerate(value))


def _plain_steps(value: list[Any] | tuple[Any, ...]) -> tuple[RetrievalStep, ...] | None:
    """The steps of ``value`` built without the converters when every step is a dict whose
    values already have their final type (what a JSON line holds: ASCII strings, lists of
    them); None when one needs converting or checking (the converters then say what is
    wrong). A file of many-step samples spends most of its loading time here."""
    out: list[RetrievalStep] = []
    append = out.append
    for item in value:
        if type(item) is not dict:
            return None
        query = item.get("query")
        ids = item.get("retrieved_context_ids")
        texts = item.get("retrieved_contexts")
        if len(item) != (query is not None) + (ids is not None) + (texts is not None):
            return None  # another key, or a None given: the converters decide
        if query is not None and (type(query) is not str or not query.isascii()):
            return None
        if ids is not None:
            if type(ids) is not list:
                return None
            try:
                joined = "".join(ids)
            except TypeError:
                return None
            if not joined.isascii() or len(joined) > MAX_ID_LENGTH:
                return None
            ids = tuple(ids)
            if texts is None:  # (the usual step: a query and its IDs)
                append(_new_step(RetrievalStep, (query, ids, None)))
                continue
        if texts is not None:
            if type(texts) is not list:
                return None
            try:
                if not "".join(texts).isascii():
                    return None
            except TypeError:
                return None
            texts = tuple(texts)
        if (ids is None and texts is None) or (
            ids is not None and texts is not None and len(ids) != len(texts)
        ):
            return None
        append(_new_step(RetrievalStep, (query, ids, texts)))
    return tuple(out)


def _step(item: object, index: int, sample_id: str | None) -> RetrievalStep:
    where = f"retrieval_steps[{index}]"
    if isinstance(item, RetrievalStep):
        return item
    if not isinstance(item, Mapping):
        raise DataError(
            f"step {index} is {_kind(item)}, expected an object with the fields "
            f"{', '.join(STEP_FIELDS)}",
            field=where,
            sample_id=sample_id,
        )
    unknown = [key for key in item if key not in STEP_FIELDS]
    if unknown:
        raise DataError(
            f"step {index} has the field {brief(unknown[0])}, which a step does not have",
            field=f"{where}.{unknown[0]}",
            sample_id=sample_id,
            hint=f"a step's fields are {', '.join(STEP_FIELDS)}",
        )
    try:
        return RetrievalStep(**item)
    except DataError as exc:
        field = f"{where}.{exc.field}" if exc.field else where
        raise DataError(
            f"step {index}: {exc.problem}", field=field, sample_id=sample_id, hint=exc.hint
        ) from None


def _kind(value: object) -> str:
    return "null" if value is None else f"{type(value).__name__} {brief(value)}"


def union_of_steps(
    steps: tuple[RetrievalStep, ...],
) -> tuple[tuple[str, ...] | None, tuple[str, ...] | None]:
    """``(ids, texts)``: what every step returned, in step order, each item once (the first
    time it was returned). Items are the same when their IDs are (when every step has IDs),
    else when their texts are. ``ids`` is None when a step has none, ``texts`` when a step
    has none."""
    with_ids = all(step.retrieved_context_ids is not None for step in steps)
    with_texts = all(step.retrieved_contexts is not None for step in steps)
    seen: dict[str, str | None] = {}
    for step in steps:
        if with_ids:
            ids = step.retrieved_context_ids or ()
            texts: tuple[str | None, ...] = step.retrieved_contexts or (None,) * len(ids)
            for key, text in zip(ids, texts, strict=True):
                seen.setdefault(key, text)
        else:
            for text in step.retrieved_contexts or ():
                seen.setdefault(text, text)
    if with_ids:
        ids_out: tuple[str, ...] | None = tuple(seen)
        texts_out = tuple(t for t in seen.values() if t is not None) if with_texts else None
        return ids_out, texts_out
    return None, (tuple(seen) if with_texts else None)


# attrs converters must be named functions for type checkers: one per field.
def _user_input(value: object) -> str | None:
    return _text(value, "user_input")


def _response(value: object) -> str | None:
    return _text(value, "response")


def _reference(value: object) -> str | None:
    return _text(value, "reference")


def _retrieved_contexts(value: object) -> tuple[str, ...] | None:
    return _texts(value, "retrieved_contexts")


def _reference_contexts(value: object) -> tuple[str, ...] | None:
    return _texts(value, "reference_contexts")


def _retrieved_context_ids(value: object) -> tuple[str, ...] | None:
    return _ids(value, "retrieved_context_ids")


def _reference_context_ids(value: object) -> tuple[str, ...] | None:
    return _ids(value, "reference_context_ids")


def _retrieved_context_sources(value: object) -> tuple[str, ...] | None:
    return _ids(value, "retrieved_context_sources")


def _reference_context_sources(value: object) -> tuple[str, ...] | None:
    return _ids(value, "reference_context_sources")


def _check_sources(sample: Sample) -> None:
    """Each ``*_context_sources`` holds one document ID per chunk of its side: as many as the
    side's contexts and IDs (whichever the sample has)."""
    for field, chunks in _SOURCES_OF.items():
        sources = getattr(sample, field)
        if sources is None:
            continue
        for chunk_field in chunks:
            given = getattr(sample, chunk_field)
            if given is not None and len(given) != len(sources):
                raise DataError(
                    f"{len(sources)} document IDs for {len(given)} {chunk_field}: one per "
                    "chunk, in the same order",
                    field=field,
                    sample_id=id_for_message(sample.id),
                    hint=f"give one document ID for each item of {chunk_field}",
                )


_SOURCES_OF: Final = {
    "retrieved_context_sources": ("retrieved_contexts", "retrieved_context_ids"),
    "reference_context_sources": ("reference_contexts", "reference_context_ids"),
}


def _sample_id(value: object) -> str | None:
    if value is None:
        return None
    as_id = _id_value(value)
    if as_id is None:
        raise DataError(
            f"expected a string or an integer, got {_type_name(value)} {brief(value)}", field="id"
        )
    return as_id


def _retrieval_steps(value: object) -> tuple[RetrievalStep, ...] | None:
    """The steps as given: checked after the other fields (``__attrs_post_init__``), so that
    an error names the sample's id."""
    return value  # type: ignore[return-value]


def _metadata(value: object) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise DataError(f"expected a mapping, got {_type_name(value)}", field="metadata")
    if value:  # it goes to the report and the digest as JSON: it must be writable
        try:
            orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS, default=repr)
        except (TypeError, orjson.JSONEncodeError) as exc:
            raise DataError(
                f"cannot be written as JSON ({exc})",
                field="metadata",
                hint="keep metadata to JSON values: strings of valid Unicode, numbers within "
                "64 bits, nesting under 255 levels",
            ) from None
    return value


@attrs.frozen(slots=True, repr=False)
class Sample:
    """One question with what a RAG system retrieved for it, and the reference to compare to.

    Example:
        >>> s = Sample(retrieved_context_ids=["doc_1", 2], reference_context_ids=[2])
        >>> s.retrieved_context_ids
        ('doc_1', '2')
    """

    user_input: str | None = attrs.field(default=None, converter=_user_input)
    """The question asked."""
    response: str | None = attrs.field(default=None, converter=_response)
    """The answer the RAG system generated."""
    reference: str | None = attrs.field(default=None, converter=_reference)
    """The reference (ground-truth) answer."""
    retrieved_contexts: tuple[str, ...] | None = attrs.field(
        default=None, converter=_retrieved_contexts
    )
    """The retrieved chunks, best-ranked first."""
    reference_contexts: tuple[str, ...] | None = attrs.field(
        default=None, converter=_reference_contexts
    )
    """The chunks that should have been retrieved."""
    retrieved_context_ids: tuple[str, ...] | None = attrs.field(
        default=None, converter=_retrieved_context_ids
    )
    """IDs of the retrieved chunks, best-ranked first (ints become strings)."""
    reference_context_ids: tuple[str, ...] | None = attrs.field(
        default=None, converter=_reference_context_ids
    )
    """IDs of the chunks that should have been retrieved (ints become strings); given as a
    mapping ``{id: grade}``, a :class:`GradedIDs` with a relevance grade each."""
    retrieved_context_sources: tuple[str, ...] | None = attrs.field(
        default=None, converter=_retrieved_context_sources
    )
    """The document each retrieved chunk comes from, one ID per chunk (as many as
    ``retrieved_contexts`` and ``retrieved_context_ids``): what ``unit="document"`` counts."""
    reference_context_sources: tuple[str, ...] | None = attrs.field(
        default=None, converter=_reference_context_sources
    )
    """The document each reference chunk comes from, one ID per chunk (as many as
    ``reference_contexts`` and ``reference_context_ids``)."""
    id: str | None = attrs.field(default=None, converter=_sample_id)
    """The sample's id; without one, a sample is known by its 0-based position in the input."""
    retrieval_steps: tuple[RetrievalStep, ...] | None = attrs.field(
        default=None, converter=_retrieval_steps
    )
    """The steps of a multi-step search, in the order they were made: one
    :class:`RetrievalStep` per search call (given as a list of ``{query,
    retrieved_context_ids, retrieved_contexts}``)."""
    metadata: Mapping[str, Any] = attrs.field(factory=dict, converter=_metadata, eq=False)
    """Fields of the input that are not sample fields, kept as they were (not compared)."""

    def __attrs_post_init__(self) -> None:
        if self.retrieved_context_sources is not None or self.reference_context_sources is not None:
            _check_sources(self)
        steps = self.retrieval_steps
        if steps is not None:
            _set_steps(self, steps_of(steps, self.id))

    def with_steps_as_context(self) -> Sample:
        """This sample with the union of its :attr:`retrieval_steps` as its retrieved context
        (:func:`union_of_steps`: each item once, in the order first returned); the sample as
        it is when it has no steps."""
        if self.retrieval_steps is None:
            return self
        ids, texts = union_of_steps(self.retrieval_steps)
        return attrs.evolve(self, retrieved_context_ids=ids, retrieved_contexts=texts)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Sample:
        """Build a sample from a dict with ragas field names (older names accepted).

        Keys that are not sample fields go to :attr:`metadata`. A key given under both its old
        and its new name is an error, as is a value of the wrong type.

        Raises:
            DataError: naming the field that is wrong.
        """
        if type(data) is dict and data.keys() <= _FIELD_SET:  # the common case, checked fast
            fast = _prebuilt(data)
            if fast is not None:
                return fast
        if not isinstance(data, Mapping):
            raise DataError(f"a sample must be an object with named fields, got {_type_name(data)}")
        fields: dict[str, Any] = {}
        metadata: dict[str, Any] = {}
        for key, value in data.items():
            if not isinstance(key, str):
                raise DataError(f"field names must be strings, got {_type_name(key)} {brief(key)}")
            name = FIELD_ALIASES.get(key, key)
            if name in _FIELD_SET:
                if name in fields:
                    old = key if key != name else _old_name(name)
                    raise DataError(
                        f"given twice, as {old!r} and as {name!r}",
                        field=name,
                        hint="keep one of the two",
                    )
                fields[name] = value
            elif key == "metadata" and isinstance(value, Mapping):
                metadata.update(value)
            else:
                metadata[key] = value
        return cls(**fields, metadata=metadata)

    def to_dict(self) -> dict[str, Any]:
        """The sample as a dict with ragas field names; fields that are None are left out."""
        out: dict[str, Any] = {}
        for name in SAMPLE_FIELDS:
            value = getattr(self, name)
            if isinstance(value, GradedIDs):
                out[name] = value.as_dict()
            elif name == STEPS_FIELD and value is not None:
                out[name] = [step.to_dict() for step in value]
            elif value is not None:
                out[name] = list(value) if isinstance(value, tuple) else value
        if self.metadata:
            out["metadata"] = dict(self.metadata)
        return out

    def missing(self, fields: Iterable[str]) -> list[str]:
        """The fields among ``fields`` that this sample does not have (None)."""
        return [name for name in fields if getattr(self, name) is None]

    def __repr__(self) -> str:
        shown = ", ".join(
            f"{name}={_short(getattr(self, name))}"
            for name in SAMPLE_FIELDS
            if getattr(self, name) is not None
        )
        return f"Sample({shown})"


_FIELD_SET: Final = frozenset(SAMPLE_FIELDS)
_LIST_FIELDS: Final = frozenset((*TEXT_LIST_FIELDS, *ID_LIST_FIELDS))
_SETTERS: Final = tuple((name, getattr(Sample, name).__set__) for name in SAMPLE_FIELDS)
_set_metadata: Final = Sample.metadata.__set__  # type: ignore[attr-defined,misc]
_set_steps: Final = Sample.retrieval_steps.__set__  # type: ignore[union-attr,misc]
_new_sample: Final = object.__new__


_ID_FIELDS: Final = frozenset(ID_LIST_FIELDS)
_SOURCE_SET: Final = frozenset(SOURCE_FIELDS)
_SET_ID, _SET_RETRIEVED_IDS, _SET_REFERENCE_IDS = (
    dict(_SETTERS)[name] for name in ("id", "retrieved_context_ids", "reference_context_ids")
)
_OTHER_FIELDS: Final = tuple(
    setter
    for name, setter in _SETTERS
    if name not in ("id", "retrieved_context_ids", "reference_context_ids")
)


def checked_id_sample(
    sample_id: str, retrieved: tuple[str, ...], reference: tuple[str, ...]
) -> Sample:
    """A sample of an id and the two ID fields whose values a reader has already checked
    (strings of valid Unicode, none longer than :data:`MAX_ID_LENGTH`; ``reference`` a tuple or
    a :class:`GradedIDs`), built without the converters: equal to ``Sample(id=...,
    retrieved_context_ids=..., reference_context_ids=...)``. The TREC reader builds one per
    query."""
    sample = _new_sample(Sample)
    for setter in _OTHER_FIELDS:
        setter(sample, None)
    _SET_ID(sample, sample_id)
    _SET_RETRIEVED_IDS(sample, retrieved)
    _SET_REFERENCE_IDS(sample, reference)
    _set_metadata(sample, {})
    return sample


COLUMN_FIELDS: Final = frozenset(
    (*TEXT_FIELDS, *TEXT_LIST_FIELDS, "retrieved_context_ids", "reference_context_ids", "id")
)
"""The fields :func:`checked_samples` builds samples of (no sources, steps or metadata: those
are checked across fields, or kept as they are)."""


def checked_samples(columns: Mapping[str, Sequence[Any]], size: int) -> list[Sample]:
    """``size`` samples whose fields are given as columns (per field among
    :data:`COLUMN_FIELDS`, its ``size`` values in order), each value already what the field's
    converter makes of it (:func:`field_converter`; None: no value), built without the
    converters, a field at a time: sample ``i`` equal to ``Sample(**{field: column[i]})``.
    How the batch scorer builds the samples of an Arrow batch it read by columns."""
    unknown = set(columns) - COLUMN_FIELDS
    if unknown:
        raise ValueError(f"checked_samples builds no {sorted(unknown)} (only {COLUMN_FIELDS})")
    samples: list[Sample] = list(map(_new_sample, itertools.repeat(Sample, size)))
    for name, setter in _SETTERS:
        values = columns.get(name)
        if values is not None and len(values) != size:
            raise ValueError(f"{len(values)} values of {name} for {size} samples")
        deque(map(setter, samples, itertools.repeat(None) if values is None else values), 0)
    for sample in samples:
        _set_metadata(sample, {})
    return samples


def field_converter(name: str) -> Callable[[Any], Any]:
    """What building a sample makes of a value of its field ``name`` (a :class:`DataError`
    for a value it refuses): one cell at a time, as :meth:`Sample.from_dict` does."""
    converter: Callable[[Any], Any] = getattr(attrs.fields(Sample), name).converter
    return converter


def _prebuilt(data: dict[str, Any]) -> Sample | None:
    """The sample of ``data`` (sample fields only), built without the converters when every
    value already has its final type (strings, lists of strings: what a JSON line usually
    holds); None when one needs converting or checking, and the converters must run.

    Loading a large file spends most of its time building samples; this path is several times
    faster and gives an equal sample. Its code is written once per order of the keys (a file's
    lines have one or a few), straight-line, as attrs writes its ``__init__``.
    """
    keys = tuple(data)
    build = _BUILDERS.get(keys)
    if build is None:
        if len(_BUILDERS) >= _MAX_BUILDERS:
            return _prebuilt_slowly(data)
        build = _BUILDERS[keys] = _builder(keys)
    return build(data)


_BUILDERS: Final[dict[tuple[str, ...], Callable[[dict[str, Any]], Sample | None]]] = {}
"""The builders of :func:`_prebuilt`, by key order (a cache of generated code: the same for
every caller, so shared)."""
_MAX_BUILDERS: Final = 256


def _builder(keys: tuple[str, ...]) -> Callable[[dict[str, Any]], Sample | None]:
    """The code of :func:`_prebuilt_slowly` for dicts with ``keys`` in this order."""
    lines = ["def build(data):"]
    for i, key in enumerate(keys):
        value = f"v{i}"
        lines.append(f"    {value} = data[{key!r}]")
        if key in _LIST_FIELDS:
            limit = f" or len(joined) > {MAX_ID_LENGTH}" if key in _ID_FIELDS else ""
            lines += [
                f"    if type({value}) is list:",
                "        try:",
                f"            joined = ''.join({value})",
                "        except TypeError:",
                "            return None",
                f"        if not joined.isascii(){limit}:",
                "            return None",
                f"        {value} = tuple({value})",
                f"    elif {value} is not None:",
                "        return None",
            ]
        elif key == STEPS_FIELD:  # plain steps built at once, the others by the converters
            lines += [
                f"    if {value} is not None:",
                f"        if type({value}) is not list:",
                "            return None",
                f"        {value} = plain_steps({value})",
                f"        if {value} is None:",
                "            return None",
            ]
        else:
            limit = f" or len({value}) > {MAX_ID_LENGTH}" if key == "id" else ""
            lines += [
                f"    if {value} is not None and (",
                f"        type({value}) is not str or not {value}.isascii(){limit}",
                "    ):",
                "        return None",
            ]
    lines.append("    sample = new(Sample)")
    for number, (name, _) in enumerate(_SETTERS):
        given = f"v{keys.index(name)}" if name in keys else "None"
        lines.append(f"    set{number}(sample, {given})")
    lines.append("    set_metadata(sample, {})")
    if not _SOURCE_SET.isdisjoint(keys):
        lines.append("    check_sources(sample)")
    lines.append("    return sample")
    namespace: dict[str, Any] = {
        "new": _new_sample,
        "Sample": Sample,
        "set_metadata": _set_metadata,
        "check_sources": _check_sources,
        "plain_steps": _plain_steps,
        **{f"set{number}": setter for number, (_, setter) in enumerate(_SETTERS)},
    }
    exec(compile("\n".join(lines), f"<ctxeval sample builder {keys}>", "exec"), namespace)
    built: Callable[[dict[str, Any]], Sample | None] = namespace["build"]
    return built


def _prebuilt_slowly(data: dict[str, Any]) -> Sample | None:
    """:func:`_prebuilt`, read as a loop (for key orders past the builders' cache)."""
    for name, value in data.items():
        if type(value) is list:
            if name not in _LIST_FIELDS:
                return None
            try:
                joined = "".join(value)  # C speed: raises TypeError unless every item is a str
            except TypeError:
                return None
            if not joined.isascii() or (name in _ID_FIELDS and len(joined) > MAX_ID_LENGTH):
                return None  # the converters check it (a lone surrogate, an absurd ID)
        elif value is not None and (
            type(value) is not str
            or name in _LIST_FIELDS
            or name == STEPS_FIELD
            or not value.isascii()
            or (name == "id" and len(value) > MAX_ID_LENGTH)
        ):
            return None
    sample: Sample = _new_sample(Sample)
    get = data.get
    for name, setter in _SETTERS:
        value = get(name)
        setter(sample, tuple(value) if type(value) is list else value)
    _set_metadata(sample, {})
    if not _SOURCE_SET.isdisjoint(data):
        _check_sources(sample)
    return sample


def _old_name(name: str) -> str:
    return next(old for old, new in FIELD_ALIASES.items() if new == name)


def _short(value: object, limit: int = 40) -> str:
    text = brief(value)
    return text if len(text) <= limit else text[: limit - 4] + "...)"


def _json_brief(value: object) -> str:
    """``value`` as JSON (a hint quotes it as the file should hold it), cut like
    :func:`brief`."""
    import json

    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return brief(value)
    return text if len(text) <= 60 else text[:59] + "…"
