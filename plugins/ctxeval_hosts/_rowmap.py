"""Where a host keeps a sample's fields: one explicit mapping rule set for every adapter.

A host hands its adapter a row in its own *places*: LangSmith ``inputs`` / ``outputs`` /
``reference_outputs``, Braintrust ``input`` / ``output`` / ``expected`` / ``metadata``, a Phoenix
DataFrame row, promptfoo's ``vars`` and ``output``, Inspect's task state and target. A
:class:`FieldMap` says, for each ctxeval :class:`~ctxeval.Sample` field, which *path* holds it:
``"outputs.retrieved_contexts"`` is the key ``retrieved_contexts`` of the place ``outputs``,
``"outputs.docs.hits"`` goes one dict deeper, ``"output"`` is the whole place (a plain string
output is the response). A path may also be a function of the places (a dict), for anything a
path cannot say. Nothing is guessed: the adapter's documented defaults apply unless a field is
given in ``fields=``, only the fields a metric requires (and those given explicitly) are read,
and a required field that is not there is that row's error, naming the path that was read and
the keys that were there.

Values are taken as they are, with the package's documented document rules
(:mod:`ctxeval_hosts._fields`): a list of contexts may hold documents whose text is their
``page_content`` or ``content`` (LangChain's and LlamaIndex's names, both read: MLflow's
groundedness scorer silently failed on the second); a list of context IDs may hold documents
whose ID is their ``id``, ``metadata.doc_uri`` or ``metadata.id``; a NaN (a DataFrame's empty
cell) is a missing value; a numpy array is a list. A single string where a list is expected
is an error (promptfoo's JSON-text vars aside, see :attr:`FieldMap.json_lists`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, Union

import attrs

import ctxeval
from ctxeval.plugin import Metric
from ctxeval_hosts._fields import DEFAULT_ID_KEYS, TEXT_KEYS, document_id, document_text

__all__ = [
    "FieldError",
    "FieldMap",
    "Path",
    "metric_names",
    "metrics_of",
    "required_fields",
]

Path = Union[str, Callable[[Mapping[str, Any]], Any]]  # noqa: UP007 (a runtime alias, Python 3.10)
"""Where a field is: ``"place"``, ``"place.key"``, ``"place.key.subkey"``, or a function of the
places (a dict of place name to its value) returning the field's value."""

TEXT_FIELDS: Final = ("user_input", "response", "reference")
CONTEXT_FIELDS: Final = ("retrieved_contexts", "reference_contexts")
ID_FIELDS: Final = ("retrieved_context_ids", "reference_context_ids")
FIELDS: Final = (*TEXT_FIELDS, *CONTEXT_FIELDS, *ID_FIELDS)


class FieldError(Exception):
    """A field a metric needs is missing or has the wrong shape (the row's error, not a crash)."""


def metrics_of(
    metrics: str | Metric | Sequence[str | Metric], registry: ctxeval.Registry | None
) -> list[Metric]:
    """The metrics built (a name with its default options), so their names and needs are known."""
    given = [metrics] if isinstance(metrics, str) or not isinstance(metrics, Sequence) else metrics
    if not given:
        raise ctxeval.ConfigError("no metric given: name at least one ctxeval metric")
    return [ctxeval.get_metric(m, registry=registry) if isinstance(m, str) else m for m in given]


def metric_names(metrics: Sequence[Metric]) -> tuple[str, ...]:
    return tuple(str(m.name) for m in metrics)


def required_fields(metrics: Sequence[Metric]) -> tuple[str, ...]:
    """The union of the fields the metrics require, in the sample's field order."""
    needed = {field for m in metrics for field in m.requires}
    return tuple(field for field in FIELDS if field in needed)


def _shown(path: Path) -> str:
    return path if isinstance(path, str) else getattr(path, "__name__", repr(path))


def _keys(value: Any) -> str:
    if isinstance(value, Mapping):
        return f"its keys are {sorted(map(str, value))}" if value else "it is empty"
    return f"it is a {type(value).__name__}, not a dict"


_PLAIN_TEXT: Final = (str,)
_PLAIN_ID: Final = (str, int)


def _lookup(places: Mapping[str, Any], path: str) -> Any:
    """The value at ``path`` in ``places`` (a :class:`FieldError` when it is missing or a
    step of the path is not a dict)."""
    place, *keys = path.split(".")
    if place not in places:
        raise FieldError(f"{path!r} names no place of this host (its places: {sorted(places)})")
    value = places[place]
    if callable(value):  # a place computed only when read (Inspect's output, target)
        value = value()
    walked = place
    for key in keys:
        if not isinstance(value, Mapping):
            raise FieldError(f"{path!r}: {walked} is a {type(value).__name__}, not a dict")
        if key not in value:
            raise FieldError(f"{path!r} is missing: {walked} has no key {key!r} ({_keys(value)})")
        value = value[key]
        walked = f"{walked}.{key}"
    return value


def _text_of(item: Any, field: str, index: int) -> str:
    text = document_text(item)
    if text is None:
        raise FieldError(
            f"{field}[{index}] has no text: a context is a string or a document with "
            f"{' or '.join(TEXT_KEYS)} ({_keys(item)})"
        )
    return text


def _id_of(item: Any, field: str, index: int) -> str | int:
    if isinstance(item, (str, int)) and not isinstance(item, bool):
        return item
    found = document_id(item)
    if found is None:
        raise FieldError(
            f"{field}[{index}] has no ID: an ID is a string, an integer or a document with "
            f"{', '.join(DEFAULT_ID_KEYS)} ({_keys(item)})"
        )
    return found


def _json_list(text: str, field: str) -> Any:
    """The list a JSON text holds; other text is left as it is (one context) for contexts and
    refused for IDs."""
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if isinstance(value, list):
        return value
    if field in ID_FIELDS and not (field == "reference_context_ids" and isinstance(value, dict)):
        raise FieldError(f"{field} is text that is not a JSON list of IDs: {text[:80]!r}")
    if field in CONTEXT_FIELDS:
        return [text]  # one context, as promptfoo's own context metrics read vars.context
    return value


def _missing(value: Any) -> bool:
    """None, or a float NaN (a DataFrame's empty cell)."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def convert(field: str, value: Any) -> Any:
    """``value`` as the sample field ``field`` takes it (the conversions in the module's doc)."""
    if type(value) is list:  # the usual case first: a list of plain texts or IDs, as it is
        plain = _PLAIN_TEXT if field in CONTEXT_FIELDS else _PLAIN_ID
        if all(type(item) in plain for item in value):
            return value
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        value = value.tolist()  # a numpy array (a DataFrame cell read from Parquet)
    if field in TEXT_FIELDS:
        if not isinstance(value, str):
            raise FieldError(f"{field} is a {type(value).__name__}, expected text")
        return value
    if field == "reference_context_ids" and isinstance(value, Mapping):
        return dict(value)  # graded: ID -> grade, as a qrels line has it
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
        raise FieldError(f"{field} is a {type(value).__name__}, expected a list")
    each = _text_of if field in CONTEXT_FIELDS else _id_of
    return [each(item, field, index) for index, item in enumerate(value)]


@attrs.frozen
class FieldMap:
    """Which path holds each sample field, for one host: its defaults, then the user's own.

    ``fields`` (the user's) overrides ``defaults`` field by field; a field given in ``fields``
    is read even when no metric requires it. Unknown field names are refused when the map is
    built (a typo would otherwise be a field silently never read).
    """

    host: str
    defaults: Mapping[str, Path]
    fields: Mapping[str, Path] = attrs.field(factory=dict)
    example: str = "PLACE.KEY"
    """How a path looks for this host, in the hint of a missing field's message."""
    json_lists: bool = False
    """A list field given as a string holding a JSON list is that list, other text one
    context (promptfoo: a var that is a YAML list makes one test case per item, so lists
    travel as JSON text; its own context metrics read ``vars.context`` as one text)."""

    def __attrs_post_init__(self) -> None:
        unknown = sorted(set(self.fields) - set(FIELDS))
        if unknown:
            raise ctxeval.ConfigError(
                f"{self.host}: fields= names {unknown}, which are not sample fields; "
                f"the fields are {list(FIELDS)}"
            )
        for field, path in self.fields.items():
            if not (isinstance(path, str) and path) and not callable(path):
                raise ctxeval.ConfigError(
                    f"{self.host}: fields[{field!r}] must be a path such as "
                    f"'outputs.{field}' or a function of the host's row, got {path!r}"
                )

    def path(self, field: str) -> Path | None:
        return self.fields.get(field, self.defaults.get(field))

    def sample(self, places: Mapping[str, Any], required: Sequence[str]) -> dict[str, Any]:
        """The sample dict read from ``places``: every required field (a :class:`FieldError`
        when one is missing) and every field given explicitly."""
        out: dict[str, Any] = {}
        for field in FIELDS:
            if field not in required and field not in self.fields:
                continue
            path = self.path(field)
            if path is None:
                raise FieldError(
                    f"{field} is required and {self.host} has no default place for it: "
                    f"give it, e.g. fields={{{field!r}: ...}}"
                )
            try:
                value = _lookup(places, path) if isinstance(path, str) else path(places)
            except FieldError as exc:
                raise FieldError(
                    f"{field} (read from {_shown(path)}): {exc}; map it with "
                    f"fields={{{field!r}: '{self.example}'}}"
                ) from None
            if _missing(value) and field in required:
                raise FieldError(
                    f"{field} (read from {_shown(path)}) is missing (None or NaN): the metrics "
                    f"need it; map it with fields={{{field!r}: '{self.example}'}}"
                )
            if not _missing(value):
                if self.json_lists and field not in TEXT_FIELDS and isinstance(value, str):
                    value = _json_list(value, field)
                out[field] = convert(field, value)
        return out
