"""Matcher ``embedding``: an item is supported when a candidate means about the same thing.

The similarity of two texts is the cosine of their vectors (from an embedder of the
``ctxeval.embedders`` group), clipped to [0, 1] (a negative cosine, unrelated texts, is 0):
that is the verdict's ``score``, and an item is matched when its best candidate's similarity
is ``>=`` the threshold (:func:`ctxeval.plugin.policy.is_match`, the one rule); the verdict's
``evidence`` is that candidate's index (the first of equal ones).

Options:
    embedder: the embedder's name (default ``wordllama``, offline, extra ``embed``), or an
        embedder object; built once, when the matcher is built.
    embedder_options: options for the embedder (e.g. ``{"dim": 128}``).
    threshold: the least similarity that counts as a match; default: the embedder's
        calibrated one, :data:`DEFAULT_THRESHOLDS` (an embedder not in the table may give
        its own as a ``default_threshold`` attribute; else the option is required).
    reference: which side holds the reference passages (``items``, the default, or
        ``candidates``). The cosine is symmetric, so it does not change a verdict; the
        similarity matrix is always computed reference side first, so that precision and
        recall over the same sample compare each pair with the same bits.

Two shapes, chosen when the matcher is built (:func:`embedding_matcher`, the registered
factory):

* over a :class:`~ctxeval.plugin.DeterministicEmbedder` (a model on this machine):
  :class:`DeterministicEmbeddingMatcher`, a :class:`~ctxeval.plugin.DeterministicMatcher`
  (``match_now``, ``match_batch``, ``match_both_batch``; ``itemwise``), so the non-LLM metrics
  keep the fast path. ``match_batch`` embeds every distinct text of all its pairs once, in one
  call, and computes each pair's similarity matrix with one matrix product. Its flags equal
  ``match_now``'s because the embedder's vector of a text depends on that text only (what a
  deterministic embedder must guarantee) and each pair's matrix is computed from the same rows
  in the same shape either way;
* over any other :class:`~ctxeval.plugin.Embedder` (an endpoint): :class:`EmbeddingMatcher`,
  with the async ``match`` only, which embeds the distinct texts of one call through
  ``embedder.aembed(texts, ctx)`` (the run's limits, retries, cache and usage).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import attrs

from ctxeval.plugin import (
    DeterministicEmbedder,
    Embedder,
    RunContext,
    Verdict,
    get_embedder,
    policy,
    validators,
)
from ctxeval.plugin.hooks import Fingerprinted, ReportsProvenance

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Vectors = npt.NDArray[np.float64]

__all__ = [
    "DEFAULT_THRESHOLDS",
    "DeterministicEmbeddingMatcher",
    "EmbeddingMatcher",
    "default_threshold",
    "embedding_matcher",
    "unit_vectors",
]

DEFAULT_THRESHOLDS: dict[str, float] = {
    # Calibrated on tests/data/paraphrase_pairs.jsonl (330 labelled pairs) by
    # bench/embedding_calibration.py: the threshold of best accuracy (0.809; precision 0.763,
    # recall 0.897); tests/test_embedding_calibration.py keeps it within 0.02 of the data.
    "wordllama": 0.67,
    "openai": 0.70,
}
"""The calibrated threshold of each embedder, by the embedder's name."""


def default_threshold(embedder: Embedder) -> float:
    """``embedder``'s calibrated threshold: :data:`DEFAULT_THRESHOLDS` by its name or the
    name's part before ``:`` (``openai:<model>`` takes ``openai``'s), else its own
    ``default_threshold`` attribute.

    Raises:
        ValueError: neither gives one (then the matcher's ``threshold`` must be given).
    """
    for name in (embedder.name, embedder.name.partition(":")[0]):  # "openai:<model>": openai
        if name in DEFAULT_THRESHOLDS:
            return DEFAULT_THRESHOLDS[name]
    own = getattr(embedder, "default_threshold", None)
    if isinstance(own, (int, float)) and not isinstance(own, bool) and 0.0 <= own <= 1.0:
        return float(own)
    raise ValueError(
        f"embedder {embedder.name!r} has no calibrated threshold (known: "
        f"{', '.join(sorted(DEFAULT_THRESHOLDS))}): give the threshold option"
    )


def unit_vectors(vectors: Any, texts: Sequence[str]) -> Vectors:
    """``vectors`` (one row per text of ``texts``) as float64 rows of length 1; the zero row of
    a blank text (no token) stays zero, so its similarity to anything is 0.

    Raises:
        ValueError: the embedder gave another number of rows, not a matrix, a number that is
            not finite, or a zero vector for a text that is not blank (its cosine with anything
            is undefined: a malformed answer, as NaN is).
    """
    import numpy as np

    count = len(texts)
    array = np.asarray(vectors, dtype=np.float64)
    if array.ndim != 2 or array.shape[0] != count:
        raise ValueError(
            f"the embedder gave vectors of shape {array.shape} for {count} texts "
            f"(expected ({count}, dimensions))"
        )
    if not np.isfinite(array).all():
        raise ValueError("the embedder gave a vector that is not finite (NaN or infinity)")
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    for row in map(int, np.flatnonzero(norms[:, 0] == 0)):
        if texts[row].strip():
            raise ValueError(
                f"the embedder gave a zero vector for text {row + 1} of {count} "
                f"({texts[row][:60]!r}): its cosine with anything is undefined (a malformed "
                "answer)"
            )
    unit: Vectors = np.divide(array, norms, out=np.zeros_like(array), where=norms > 0)
    return unit


def _similarities(reference: Vectors, other: Vectors) -> Vectors:
    """Cosines of unit rows (reference side rows), clipped to [0, 1]."""
    import numpy as np

    matrix: Vectors = np.clip(reference @ other.T, 0.0, 1.0)
    return matrix


@attrs.frozen(kw_only=True)
class EmbeddingMatcher:
    """Matcher ``embedding`` over an embedder that may do I/O (see the module): async
    :meth:`match` only. Build it with :func:`embedding_matcher`."""

    registry_name: ClassVar[str] = "embedding"
    itemwise: ClassVar[bool] = True
    """(An item's verdict: whether some candidate is similar enough to it.)"""
    name: str = attrs.field(default="embedding", validator=validators.text)
    embedder: Embedder
    threshold: float = attrs.field(validator=validators.unit_interval)
    reference: Literal["items", "candidates"] = attrs.field(
        default="items", validator=validators.one_of("items", "candidates")
    )

    def verdicts(self, items: Vectors, candidates: Vectors) -> list[Verdict]:
        """One verdict per item row, from unit vectors: its best candidate, the similarity
        (the verdict's score) and whether it reaches the threshold."""
        if len(items) == 0:
            return []
        if len(candidates) == 0:
            return [Verdict(False, 0.0, None) for _ in range(len(items))]
        if self.reference == "items":
            matrix, axis = _similarities(items, candidates), 1
        else:
            matrix, axis = _similarities(candidates, items), 0
        best = matrix.argmax(axis=axis).tolist()
        scores = matrix.max(axis=axis).tolist()
        return [
            Verdict(policy.is_match(score, self.threshold), score, index)
            for score, index in zip(scores, best, strict=True)
        ]

    async def match(
        self, items: Sequence[str], candidates: Sequence[str], ctx: RunContext
    ) -> list[Verdict]:
        """One verdict per item; the distinct texts of the call are embedded in one request."""
        texts = list(dict.fromkeys([*items, *candidates]))
        if not texts:
            return []
        vectors = unit_vectors(await self.embedder.aembed(texts, ctx), texts)
        where = {text: i for i, text in enumerate(texts)}
        return self.verdicts(
            vectors[[where[t] for t in items]], vectors[[where[t] for t in candidates]]
        )

    def describe(self) -> Mapping[str, Any]:
        return {"embedder": self.embedder.name, "threshold": self.threshold}

    @property
    def fingerprint_data(self) -> str:
        """What changes the verdicts, for the journal: the embedder (its own
        ``fingerprint_data`` when it has one: an endpoint's model, endpoint and dimensions;
        else its name and :meth:`describe`), the threshold and the reference side."""
        embedder: Any = self.embedder
        own = embedder.fingerprint_data if isinstance(embedder, Fingerprinted) else None
        if not isinstance(own, str):
            describe = getattr(embedder, "describe", None)
            own = f"{embedder.name}:{sorted(describe().items()) if callable(describe) else ''}"
        return f"embedding:{own}:{self.threshold!r}:{self.reference}"

    def provenance(self, ctx: RunContext) -> Mapping[str, Any] | None:
        """Who embedded (the embedder's own ``provenance(ctx)``: an endpoint's model and
        URL), or None when the embedder says nothing."""
        if not isinstance(self.embedder, ReportsProvenance):
            return None
        provenance: Mapping[str, Any] | None = self.embedder.provenance(ctx)  # type: ignore[assignment]
        return provenance


@attrs.frozen(kw_only=True)
class DeterministicEmbeddingMatcher(EmbeddingMatcher):
    """Matcher ``embedding`` over a :class:`~ctxeval.plugin.DeterministicEmbedder`: a
    :class:`~ctxeval.plugin.DeterministicMatcher` (the fast path). See the module."""

    embedder: DeterministicEmbedder

    def _embedded(self, texts: Sequence[str]) -> tuple[Vectors, dict[str, int]]:
        unique = list(dict.fromkeys(texts))
        if not unique:
            import numpy as np

            return np.zeros((0, 0)), {}
        vectors = unit_vectors(self.embedder.embed(unique), unique)
        return vectors, {text: i for i, text in enumerate(unique)}

    def match_now(self, items: Sequence[str], candidates: Sequence[str]) -> list[Verdict]:
        """:meth:`match` without a run context (the embedder needs no I/O)."""
        vectors, where = self._embedded([*items, *candidates])
        if not items:
            return []
        return self.verdicts(
            vectors[[where[t] for t in items]], vectors[[where[t] for t in candidates]]
        )

    def _rows(self, pairs: Sequence[tuple[Sequence[str], Sequence[str]]]) -> Any:
        """Each pair's two blocks of unit vectors, the distinct texts of all pairs embedded
        once in one call."""
        vectors, where = self._embedded([t for a, b in pairs for t in (*a, *b)])
        for a, b in pairs:
            yield vectors[[where[t] for t in a]], vectors[[where[t] for t in b]]

    def match_batch(self, pairs: Sequence[tuple[Sequence[str], Sequence[str]]]) -> list[list[bool]]:
        """For each ``(items, candidates)``: :meth:`match_now`'s flags, every distinct text of
        all pairs embedded once."""
        threshold = self.threshold
        out: list[list[bool]] = []
        for items, candidates in self._rows(pairs):
            if len(items) == 0 or len(candidates) == 0:
                out.append([False] * len(items))
            elif self.reference == "items":
                out.append((_similarities(items, candidates).max(axis=1) >= threshold).tolist())
            else:
                out.append((_similarities(candidates, items).max(axis=0) >= threshold).tolist())
        return out

    def both_sides_key(self) -> tuple[Any, ...]:
        """What decides :meth:`match_both_batch`: the embedder and the threshold (not
        :attr:`reference`, which only says which side is judged)."""
        embedder: Any = self.embedder
        try:
            hash(embedder)
        except TypeError:
            embedder = id(embedder)
        return ("embedding", embedder, self.threshold)

    def match_both_batch(
        self, pairs: Sequence[tuple[Sequence[str], Sequence[str]]]
    ) -> list[tuple[list[bool], list[bool]]]:
        """For each ``(reference passages, retrieved chunks)``: whether each passage has a
        chunk similar enough and whether each chunk has such a passage, from one matrix."""
        threshold = self.threshold
        out: list[tuple[list[bool], list[bool]]] = []
        for references, chunks in self._rows(pairs):
            if len(references) == 0 or len(chunks) == 0:
                out.append(([False] * len(references), [False] * len(chunks)))
                continue
            matrix = _similarities(references, chunks)
            out.append(
                (
                    (matrix.max(axis=1) >= threshold).tolist(),
                    (matrix.max(axis=0) >= threshold).tolist(),
                )
            )
        return out

    async def match(
        self, items: Sequence[str], candidates: Sequence[str], ctx: RunContext
    ) -> list[Verdict]:
        """:meth:`match_now` (the embedder needs no I/O)."""
        return self.match_now(items, candidates)


def embedding_matcher(
    *,
    embedder: str | Embedder = "wordllama",
    embedder_options: Mapping[str, Any] | None = None,
    threshold: float | None = None,
    reference: Literal["items", "candidates"] = "items",
    name: str = "embedding",
) -> EmbeddingMatcher:
    """Matcher ``embedding`` (the registered factory): a
    :class:`DeterministicEmbeddingMatcher` over a deterministic embedder, else an
    :class:`EmbeddingMatcher`. See the module for the options."""
    if isinstance(embedder, str):
        built = get_embedder(embedder, **dict(embedder_options or {}))
    elif embedder_options:
        raise ValueError("embedder_options go with an embedder name, not an embedder object")
    elif isinstance(embedder, Embedder):
        built = embedder
    else:
        raise ValueError(f"embedder must be a name or an Embedder, got {type(embedder).__name__}")
    if threshold is None:
        threshold = default_threshold(built)
    if isinstance(built, DeterministicEmbedder):
        return DeterministicEmbeddingMatcher(
            name=name, embedder=built, threshold=threshold, reference=reference
        )
    return EmbeddingMatcher(name=name, embedder=built, threshold=threshold, reference=reference)
