"""Sample: ragas field names, older aliases, checks that name the field."""

from __future__ import annotations

import pytest

from ctxeval import DataError, Sample


def test_ragas_names_load_unchanged() -> None:
    row = {
        "user_input": "Where is the Eiffel Tower?",
        "response": "In Paris.",
        "reference": "The Eiffel Tower is located in Paris.",
        "retrieved_contexts": ["The Eiffel Tower is located in Paris."],
        "reference_contexts": ["Paris is the capital of France."],
        "retrieved_context_ids": ["doc_1"],
        "reference_context_ids": [1],
        "id": 7,
    }
    sample = Sample.from_dict(row)
    assert sample.user_input == row["user_input"]
    assert sample.retrieved_contexts == ("The Eiffel Tower is located in Paris.",)
    assert sample.reference_context_ids == ("1",)
    assert sample.id == "7"
    assert Sample.from_dict(sample.to_dict()) == sample


def test_older_names_are_accepted() -> None:
    sample = Sample.from_dict(
        {"question": "q", "answer": "a", "ground_truth": "g", "contexts": ["c1", "c2"]}
    )
    assert (sample.user_input, sample.response, sample.reference) == ("q", "a", "g")
    assert sample.retrieved_contexts == ("c1", "c2")


def test_a_field_given_under_both_names_is_an_error() -> None:
    with pytest.raises(DataError, match=r"given twice, as 'contexts' and as 'retrieved_contexts'"):
        Sample.from_dict({"contexts": ["a"], "retrieved_contexts": ["b"]})


def test_unknown_fields_are_kept_as_metadata() -> None:
    sample = Sample.from_dict({"reference": "r", "source": "wiki", "rank_model": 3})
    assert sample.metadata == {"source": "wiki", "rank_model": 3}
    assert Sample(reference="r") == sample  # metadata is not compared


@pytest.mark.parametrize(
    ("row", "field", "problem"),
    [
        ({"retrieved_contexts": "one string"}, "retrieved_contexts", "single string"),
        ({"retrieved_contexts": ["ok", 3]}, "retrieved_contexts", "item 1 is int"),
        ({"reference_contexts": {"a": 1}}, "reference_contexts", "got dict"),
        ({"user_input": 5}, "user_input", "expected a string"),
        ({"reference_context_ids": "doc_1"}, "reference_context_ids", "single str"),
        ({"retrieved_context_ids": [None]}, "retrieved_context_ids", "item 0 is null"),
        ({"id": 1.5}, "id", "string or an integer"),
    ],
)
def test_wrong_types_name_the_field(row: dict[str, object], field: str, problem: str) -> None:
    with pytest.raises(DataError) as info:
        Sample.from_dict(row)
    assert info.value.field == field
    assert problem in str(info.value)
    assert f"field {field!r}" in str(info.value)


def test_not_a_mapping() -> None:
    with pytest.raises(DataError, match="must be an object"):
        Sample.from_dict(["a", "b"])  # type: ignore[arg-type]


def test_repr_is_short() -> None:
    text = repr(Sample(reference="x" * 500, retrieved_context_ids=["a"]))
    assert len(text) < 120
    assert text.startswith("Sample(reference=")
