"""The scripted judge's answers: ctxeval's LLM-metric prompts answered by word overlap.

NOT A REAL JUDGE. It exists to try the plumbing (``ctxeval serve-judge``): every answer is
well formed and deterministic, derived from the request's own texts by a simple heuristic, so
scores vary from sample to sample without meaning much.

Which prompt a request is comes from the output schema it asks for (``response_format``'s
``json_schema``, or the schema written into the system message in JSON mode), else from the
shape of its last (user) message. The answers:

* ``entities``: the capitalised names (``Champ de Mars``) and the numbers of the text;
* ``usefulness`` / ``usefulness_batch``: verdict 1 when at least half the content words of the
  answer are in the context;
* ``attribution`` / ``attribution_given``: the text split into sentences, each attributed when
  at least half its content words are in the context;
* ``entity_presence``: 1 when every word of the entity is in the context;
* ``relevance`` / ``relevance_batch``: the grade (0 to 3) from the share of the query's content
  words in the passage: 0 for none, 1 for less than half, 2 for half or more, 3 for all;
* ``sufficiency``: 1 when at least half the question's content words are in the contexts;
  ``sufficiency_with_reference``: the same with the reference answer's words;
* ``nuggets``: each sentence of the reference material a nugget, vital when it holds half the
  question's content words or more, else okay (at most the number asked for);
* ``nugget_support`` / ``nugget_support_batch``: ``support`` when every content word of the
  nugget is in the context, ``partial_support`` for half or more, else ``not_support``;
* ``claims``: the text's sentences; ``claim_entailment``: ``entailment`` when at least half
  the claim's content words are in the passage, else ``neutral``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["KINDS", "UnknownPromptError", "answer", "prompt_kind"]

KINDS = (
    "entities",
    "usefulness",
    "usefulness_batch",
    "attribution",
    "attribution_given",
    "entity_presence",
    "relevance",
    "relevance_batch",
    "sufficiency",
    "sufficiency_with_reference",
    "nuggets",
    "nugget_support",
    "nugget_support_batch",
    "claims",
    "claim_entailment",
)
"""The prompts the scripted judge answers (ctxeval's LLM-metric prompts, by name)."""

SHARE = 0.5
"""The share of content words found in the context that makes a verdict 1."""

_LABEL = "scripted judge, not a real one"
_ONLY = "the scripted judge answers only ctxeval's LLM-metric prompts"

_STOPWORDS = frozenset(
    """a about above after again against all also am an and any are as at be because been
    before being below between both but by can could did do does doing down during each few
    for from further had has have having he her here hers him his how i if in into is it its
    itself just me more most my no nor not now of off on once only or other our ours out
    over own same she should so some such than that the their theirs them then there these
    they this those through to too under until up very was we were what when where which
    while who whom why will with would you your yours de du des la le""".split()  # noqa: SIM905
)
_WORD = re.compile(r"[^\W_]+(?:['\u2019][^\W_]+)*")
_NAME_WORD = r"(?:[A-Z][\w'\u2019-]*|\d[\d.,]*\d|\d)"
_NAME = re.compile(
    rf"{_NAME_WORD}(?:\s+(?:(?:of|de|du|des|la|le|van|von|der|del|the)\s+)?[A-Z][\w'\u2019-]*)*"
)
_NUMBERED = re.compile(r"^\[(\d+)\] ", re.MULTILINE)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=\S)")


class UnknownPromptError(ValueError):
    """The request is none of ctxeval's LLM-metric prompts (the server answers 400)."""


def _stem(word: str) -> str:
    if len(word) > 4 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def _words(text: str) -> list[tuple[str, str]]:
    """Each content word of ``text`` as (its key, as written in lower case), in order."""
    found = []
    for word in _WORD.findall(text):
        lower = word.lower().replace("\u2019", "'").removesuffix("'s")
        if lower not in _STOPWORDS:
            found.append((_stem(lower), lower))
    return found


def content_words(text: str) -> list[str]:
    """The words of ``text`` that carry meaning, as compared: lower-cased, without stop words,
    a possessive ``'s`` or a plural ``s``, in order (repeats kept)."""
    return [key for key, _ in _words(text)]


def _overlap(text: str, context: str) -> tuple[int, int, list[str]]:
    """How many distinct content words of ``text`` ``context`` holds, of how many, and which
    (as written in ``text``)."""
    wanted: dict[str, str] = {}  # key -> its first spelling in the text
    for key, shown in _words(text):
        wanted.setdefault(key, shown)
    have = set(content_words(context))
    found = [shown for key, shown in wanted.items() if key in have]
    return len(found), len(wanted), found


def _grade(query: str, passage: str) -> tuple[int, str]:
    """The grade (0 to 3) of ``passage`` for ``query`` and its reason."""
    found, total, words = _overlap(query, passage)
    if found == 0:
        grade = 0
    elif found == total:
        grade = 3
    else:
        grade = 2 if found / total >= SHARE else 1
    shown = f" ({', '.join(words[:6])})" if words else ""
    reason = f"{_LABEL}: {found} of {total} words of the query are in the passage{shown}"
    return grade, reason


def _judge(text: str, context: str, what: str) -> tuple[int, str]:
    """The verdict on ``text`` against ``context`` and its reason."""
    found, total, words = _overlap(text, context)
    verdict = int(total > 0 and found / total >= SHARE)
    shown = f" ({', '.join(words[:6])})" if words else ""
    reason = f"{_LABEL}: {found} of {total} words of the {what} are in the context{shown}"
    return verdict, reason


def entities_of(text: str) -> list[str]:
    """The capitalised names and numbers of ``text``, each once, in order (a leading stop
    word such as ``The`` dropped)."""
    found: dict[str, str] = {}
    for match in _NAME.finditer(text):
        words = match.group(0).split()
        while words and words[0].lower() in _STOPWORDS:
            words.pop(0)
        name = " ".join(words).removesuffix("'s").removesuffix("\u2019s").rstrip(".,")
        if name:
            found.setdefault(name.lower(), name)
    return list(found.values())


def sentences_of(text: str) -> list[str]:
    """``text`` split into sentences (the whole text when it has no sentence end)."""
    parts = [part.strip() for part in _SENTENCE_END.split(text.strip())]
    return [part for part in parts if part] or [text.strip() or text]


def _numbered(listing: str) -> list[str]:
    """The items of a ``[1] ...\\n[2] ...`` listing (an item may span lines)."""
    items: list[str] = []
    starts = list(_NUMBERED.finditer(listing))
    expected = 1
    cuts: list[tuple[int, int]] = []
    for match in starts:
        if int(match.group(1)) == expected:
            cuts.append((match.start(), match.end()))
            expected += 1
    for index, (_, body_start) in enumerate(cuts):
        end = cuts[index + 1][0] - 1 if index + 1 < len(cuts) else len(listing)
        items.append(listing[body_start:end])
    return items


def _between(text: str, start: str, *markers: str) -> list[str]:
    """``text`` (which begins with ``start``) cut at each marker in turn."""
    if not text.startswith(start):
        raise UnknownPromptError(f"{_ONLY}: the user message does not start with {start!r}")
    rest = text[len(start) :]
    parts = []
    for marker in markers:
        head, found, rest = rest.partition(marker)
        if not found:
            raise UnknownPromptError(f"{_ONLY}: the user message has no {marker.strip()!r}")
        parts.append(head)
    return [*parts, rest]


# --- which prompt -------------------------------------------------------------------------


def _kind_of_schema(schema: Any) -> str | None:
    if not isinstance(schema, Mapping):
        return None
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return None
    keys = set(properties)
    simple = {
        frozenset({"entities"}): "entities",
        frozenset({"present"}): "entity_presence",
        frozenset({"classifications"}): "attribution",
        frozenset({"reason", "verdict"}): "usefulness",
        frozenset({"reason", "grade"}): "relevance",
        frozenset({"grades"}): "relevance_batch",
        frozenset({"reason", "sufficient"}): "sufficiency",
        frozenset({"nuggets"}): "nuggets",
        frozenset({"reason", "support"}): "nugget_support",
        frozenset({"assignments"}): "nugget_support_batch",
        frozenset({"claims"}): "claims",
        frozenset({"labels"}): "claim_entailment",
    }
    if frozenset(keys) in simple:
        return simple[frozenset(keys)]
    if keys == {"verdicts"}:
        verdicts = properties["verdicts"]
        items = verdicts.get("items") if isinstance(verdicts, Mapping) else None
        item_keys = set(items.get("properties") or {}) if isinstance(items, Mapping) else set()
        if "verdict" in item_keys:
            return "usefulness_batch"
        if "attributed" in item_keys:
            return "attribution_given"
    return None


def _schema_in_text(text: str) -> Any:
    """The JSON schema written into a system message (JSON mode), or None."""
    marker = "JSON schema:"
    at = text.find(marker)
    if at < 0:
        return None
    try:
        schema, _ = json.JSONDecoder().raw_decode(text[at + len(marker) :].lstrip())
    except ValueError:
        return None
    return schema


def _sufficiency_kind(text: str) -> str:
    """``sufficiency`` or ``sufficiency_with_reference`` (one output schema): the second has
    a reference answer before the contexts."""
    head = text.partition("\nRetrieved contexts:\n")[0]
    return "sufficiency_with_reference" if "\nReference answer: " in head else "sufficiency"


def _kind_of_user_text(text: str) -> str | None:
    if text.startswith("Query: "):
        if "\nPassages:\n" in text:
            return "relevance_batch"
        return "relevance" if "\nPassage: " in text else None
    if text.startswith("Question: ") and "\nRetrieved contexts:\n" in text:
        return _sufficiency_kind(text)
    if text.startswith("Text: "):
        return "entities"
    if text.startswith("Entities:\n") and "\nContext: " in text:
        return "entity_presence"
    if not text.startswith("Question: "):
        return None
    fact = _fact_kind(text)
    if fact is not None:
        return fact
    if "\nStatements:\n" in text:
        return "attribution_given"
    if "\nContexts:\n" in text:
        return "usefulness_batch"
    answer_at, context_at = text.find("\nAnswer: "), text.find("\nContext: ")
    if 0 <= answer_at < context_at:
        return "usefulness"
    if 0 <= context_at < answer_at:
        return "attribution"
    return None


def _fact_kind(text: str) -> str | None:
    """The nugget and claim prompts, by their user message (which begins ``Question: ``)."""
    for marker, kind in (
        ("\nReference material:\n", "nuggets"),
        ("\nNuggets:\n", "nugget_support_batch"),
        ("\nNugget: ", "nugget_support"),
        ("\nClaims:\n", "claim_entailment"),
        ("\nText: ", "claims"),
    ):
        if marker in text:
            return kind
    return None


def _messages(request: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    messages = request.get("messages")
    if not isinstance(messages, list) or not messages:
        raise UnknownPromptError(f"{_ONLY}: messages must be a non-empty list")
    if not all(isinstance(m, Mapping) and isinstance(m.get("content"), str) for m in messages):
        raise UnknownPromptError(f"{_ONLY}: every message must be an object with a text content")
    return messages


def prompt_kind(request: Mapping[str, Any]) -> str:
    """Which of ctxeval's LLM-metric prompts ``request`` is (one of :data:`KINDS`).

    Raises:
        UnknownPromptError: it is none of them.
    """
    messages = _messages(request)
    response_format = request.get("response_format")
    if isinstance(response_format, Mapping) and response_format.get("type") == "json_schema":
        given = response_format.get("json_schema")
        kind = _kind_of_schema(given.get("schema") if isinstance(given, Mapping) else None)
        if kind is None:
            raise UnknownPromptError(
                f"{_ONLY} ({', '.join(KINDS)}); this json_schema is none of their output schemas"
            )
        return _refined(kind, messages)
    system = " ".join(str(m["content"]) for m in messages if m.get("role") == "system")
    kind = _kind_of_schema(_schema_in_text(system)) or _kind_of_user_text(
        str(messages[-1]["content"])
    )
    if kind is None:
        raise UnknownPromptError(f"{_ONLY} ({', '.join(KINDS)}); this request is none of them")
    return _refined(kind, messages)


def _refined(kind: str, messages: Sequence[Mapping[str, Any]]) -> str:
    """``kind``, told apart from a prompt with the same output schema by its user message."""
    if kind != "sufficiency":
        return kind
    users = [str(m["content"]) for m in messages if m.get("role") == "user"]
    return _sufficiency_kind(users[0]) if users else kind


# --- the answers --------------------------------------------------------------------------


def _statements(statements: Sequence[str], context: str) -> list[tuple[str, int, str]]:
    judged = []
    for statement in statements:
        verdict, reason = _judge(statement, context, "statement")
        judged.append((statement, verdict, reason))
    return judged


def answer(request: Mapping[str, Any]) -> dict[str, Any]:
    """The scripted judge's answer to a chat-completion request: the JSON object the prompt's
    output schema asks for, derived from the request's texts.

    Raises:
        UnknownPromptError: the request is none of ctxeval's LLM-metric prompts.
    """
    kind = prompt_kind(request)
    text = str(_messages(request)[-1]["content"])
    if kind in _FACT_KINDS:
        return _fact_answer(kind, text)
    if kind == "entities":
        (body,) = _between(text, "Text: ")
        return {"entities": entities_of(body)}
    if kind == "entity_presence":
        listing, context = _between(text, "Entities:\n", "\nContext: ")
        have = set(content_words(context)) | {w.lower() for w in _WORD.findall(context)}
        present = []
        for entity in _numbered(listing):
            words = content_words(entity) or [w.lower() for w in _WORD.findall(entity)]
            present.append(int(bool(words) and all(w in have for w in words)))
        return {"present": present}
    if kind == "usefulness":
        _, answer_text, context = _between(text, "Question: ", "\nAnswer: ", "\nContext: ")
        verdict, reason = _judge(answer_text, context, "answer")
        return {"reason": reason, "verdict": verdict}
    if kind == "usefulness_batch":
        _, answer_text, listing = _between(text, "Question: ", "\nAnswer: ", "\nContexts:\n")
        verdicts = []
        for context in _numbered(listing):
            verdict, reason = _judge(answer_text, context, "answer")
            verdicts.append({"reason": reason, "verdict": verdict})
        return {"verdicts": verdicts}
    if kind == "attribution":
        _, context, reference = _between(text, "Question: ", "\nContext: ", "\nAnswer: ")
        judged = _statements(sentences_of(reference), context)
        return {
            "classifications": [
                {"statement": s, "reason": r, "attributed": v} for s, v, r in judged
            ]
        }
    if kind == "relevance":
        query, passage = _between(text, "Query: ", "\nPassage: ")
        grade, reason = _grade(query, passage)
        return {"reason": reason, "grade": grade}
    if kind == "relevance_batch":
        query, listing = _between(text, "Query: ", "\nPassages:\n")
        grades = []
        for passage in _numbered(listing):
            grade, reason = _grade(query, passage)
            grades.append({"reason": reason, "grade": grade})
        return {"grades": grades}
    if kind == "sufficiency":
        question, listing = _between(text, "Question: ", "\nRetrieved contexts:\n")
        sufficient, reason = _judge(question, "\n".join(_numbered(listing)), "question")
        return {"reason": reason, "sufficient": sufficient}
    if kind == "sufficiency_with_reference":
        _, reference, listing = _between(
            text, "Question: ", "\nReference answer: ", "\nRetrieved contexts:\n"
        )
        sufficient, reason = _judge(reference, "\n".join(_numbered(listing)), "reference answer")
        return {"reason": reason, "sufficient": sufficient}
    # attribution_given
    _, context, listing = _between(text, "Question: ", "\nContext: ", "\nStatements:\n")
    judged = _statements(_numbered(listing), context)
    return {"verdicts": [{"reason": r, "attributed": v} for _, v, r in judged]}


_FACT_KINDS = ("nuggets", "nugget_support", "nugget_support_batch", "claims", "claim_entailment")


def _support(nugget: str, context: str) -> dict[str, str]:
    found, total, _ = _overlap(nugget, context)
    if total and found == total:
        label = "support"
    elif total and found / total >= SHARE:
        label = "partial_support"
    else:
        label = "not_support"
    return {"reason": f"{_LABEL}: {found} of {total} words of the nugget are in the context",
            "support": label}  # fmt: skip


def _fact_answer(kind: str, text: str) -> dict[str, Any]:
    """The answers to the nugget and claim prompts (#55)."""
    if kind == "nuggets":
        question, most, material = _between(
            text, "Question: ", "\nAt most: ", "\nReference material:\n"
        )
        count = int(most.split()[0]) if most.split() and most.split()[0].isdigit() else 30
        nuggets = []
        for part in _numbered(material) or [material]:
            for sentence in sentences_of(part):
                vital, _ = _judge(question, sentence, "question")
                nuggets.append({"text": sentence, "importance": "vital" if vital else "okay"})
        return {"nuggets": nuggets[:count]}
    if kind == "nugget_support":
        _, nugget, context = _between(text, "Question: ", "\nNugget: ", "\nContext:\n")
        return _support(nugget, context)
    if kind == "nugget_support_batch":
        _, context, listing = _between(text, "Question: ", "\nContext:\n", "\nNuggets:\n")
        return {"assignments": [_support(n, context) for n in _numbered(listing)]}
    if kind == "claims":
        _, body = _between(text, "Question: ", "\nText: ")
        return {"claims": sentences_of(body)}
    _, passage, listing = _between(text, "Question: ", "\nPassage: ", "\nClaims:\n")
    labels = []
    for claim in _numbered(listing):
        entailed, reason = _judge(claim, passage, "claim")
        labels.append({"reason": reason, "label": "entailment" if entailed else "neutral"})
    return {"labels": labels}
