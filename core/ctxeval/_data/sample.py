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

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

import attrs
import orjson

from ctxeval._data.text import brief
from ctxeval._errors import DataError

__all__ = [
    "FIELD_ALIASES",
    "SAMPLE_FIELDS",
    "GradedIDs",
    "Sample",
    "checked_id_sample",
    "grades_of",
]

TEXT_FIELDS: Final = ("user_input", "response", "reference")
TEXT_LIST_FIELDS: Final = ("retrieved_contexts", "reference_contexts")
ID_LIST_FIELDS: Final = ("retrieved_context_ids", "reference_context_ids")
SAMPLE_FIELDS: Final[tuple[str, ...]] = (*TEXT_FIELDS, *TEXT_LIST_FIELDS, *ID_LIST_FIELDS, "id")
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


def _sample_id(value: object) -> str | None:
    if value is None:
        return None
    as_id = _id_value(value)
    if as_id is None:
        raise DataError(
            f"expected a string or an integer, got {_type_name(value)} {brief(value)}", field="id"
        )
    return as_id


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
    id: str | None = attrs.field(default=None, converter=_sample_id)
    """The sample's id; without one, a sample is known by its 0-based position in the input."""
    metadata: Mapping[str, Any] = attrs.field(factory=dict, converter=_metadata, eq=False)
    """Fields of the input that are not sample fields, kept as they were (not compared)."""

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
_new_sample: Final = object.__new__


_ID_FIELDS: Final = frozenset({"retrieved_context_ids", "reference_context_ids"})
_SET_ID, _SET_RETRIEVED_IDS, _SET_REFERENCE_IDS = (
    dict(_SETTERS)[name] for name in ("id", "retrieved_context_ids", "reference_context_ids")
)
_OTHER_FIELDS: Final = tuple(
    setter for name, setter in _SETTERS if name not in _ID_FIELDS and name != "id"
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
    lines += ["    set_metadata(sample, {})", "    return sample"]
    namespace: dict[str, Any] = {
        "new": _new_sample,
        "Sample": Sample,
        "set_metadata": _set_metadata,
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
