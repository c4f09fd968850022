"""String similarity between reference passages and retrieved chunks, in bulk (rapidfuzz).

Every measure gives a similarity in [0, 1]. The matrix of a sample is computed in one
:func:`rapidfuzz.process.cdist` call, not pair by pair in Python.

=================  ===========================================================================
measure            similarity of a reference passage ``r`` and a retrieved chunk ``c``
=================  ===========================================================================
``levenshtein``    ``1 - edit distance / max(len(r), len(c))`` (ragas's default)
``hamming``        ``1 - Hamming distance / max length`` (the shorter string is padded)
``jaro``           Jaro similarity
``jaro_winkler``   Jaro-Winkler similarity
``indel``          ``1 - (insertions + deletions) / (len(r) + len(c))`` (``fuzz.ratio``)
``partial``        best alignment of the shorter string inside the longer one
                   (``fuzz.partial_ratio``); symmetric, so a tiny chunk inside the reference
                   also scores high
``containment``    how much of ``r`` is found in ``c``: the best alignment of ``r`` inside
                   ``c``, scaled by ``min(1, len(c) / len(r))``. A chunk that holds the whole
                   passage plus other text scores 1.0; a chunk holding only part of the passage
                   scores at most that part. Asymmetric, and the measure to use when chunks
                   and reference passages differ in size.
=================  ===========================================================================

The character-level measures (all but ``containment`` and ``partial``) penalise any size
difference: a retrieved chunk that contains the reference passage plus as much other text
scores about 0.5 with ``levenshtein``, and ragas scores such a chunk as irrelevant.

Sizes: ``partial`` and ``containment`` grow with about the cube of the shorter text (rapidfuzz's
``partial_ratio``: 0.3 s at 2 000 characters, 4.4 s at 5 000, on the machine of the
benchmarks), so they compare texts of at most :data:`MAX_PARTIAL_CHARS` characters (the
shorter of the two); ``levenshtein`` and ``indel`` grow with ``len(a) / 64 x len(b)`` (a 1 MB
pair: 70 s) and stop at :data:`MAX_EDIT_WORK`. A pair past its limit makes the row an
``error`` that says so, instead of holding the run for minutes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Final, Literal

import attrs

from ctxeval.plugin import RunContext, Verdict, policy, validators

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "MAX_EDIT_WORK",
    "MAX_PARTIAL_CHARS",
    "MEASURES",
    "SimilarityMatcher",
    "TextTooLargeError",
    "best_matches",
    "normalize_text",
    "pair_matches",
    "pair_similarity",
    "similarity_matrix",
]

MEASURES: Final = (
    "levenshtein",
    "hamming",
    "jaro",
    "jaro_winkler",
    "indel",
    "partial",
    "containment",
)
"""The similarity measures, by name."""

MAX_PARTIAL_CHARS: Final = 5_000
"""The longest text (the shorter of a pair) ``partial`` and ``containment`` compare."""

MAX_EDIT_WORK: Final = 300_000_000
"""The most ``ceil(len(a) / 64) x len(b)`` ``levenshtein`` and ``indel`` take on (about a
second)."""

_QUICK: Final = 2_000  # pairs whose texts are both shorter skip the size check


def _too_large(measure: str, reference: str, chunk: str) -> str | None:
    """Why the pair is too large for ``measure``, or None."""
    short, long = sorted((len(reference), len(chunk)))
    if measure in ("partial", "containment") and short > MAX_PARTIAL_CHARS:
        return (
            f"measure {measure!r} compares texts of at most {MAX_PARTIAL_CHARS} characters "
            f"(the shorter of the two; its time grows with the cube), got {short} and {long}: "
            "split the passages into smaller ones, or use 'indel' or 'levenshtein'"
        )
    if measure in ("levenshtein", "indel") and (short // 64 + 1) * long > MAX_EDIT_WORK:
        return (
            f"measure {measure!r} on texts of {short} and {long} characters would take minutes "
            f"(limit: ceil(shorter / 64) x longer <= {MAX_EDIT_WORK}); split the passages"
        )
    return None


class TextTooLargeError(ValueError):
    """A pair of texts is past the size a measure takes (see the module's description)."""


def _scorer(measure: str) -> tuple[Callable[..., float], float]:
    """The rapidfuzz scorer for ``measure`` and the factor that brings it to [0, 1]."""
    from rapidfuzz import fuzz
    from rapidfuzz.distance import Hamming, Indel, Jaro, JaroWinkler, Levenshtein

    table: dict[str, tuple[Callable[..., float], float]] = {
        "levenshtein": (Levenshtein.normalized_similarity, 1.0),
        "hamming": (Hamming.normalized_similarity, 1.0),
        "jaro": (Jaro.normalized_similarity, 1.0),
        "jaro_winkler": (JaroWinkler.normalized_similarity, 1.0),
        "indel": (Indel.normalized_similarity, 1.0),
        "partial": (fuzz.partial_ratio, 0.01),
        "containment": (fuzz.partial_ratio, 0.01),
    }
    return table[measure]


check_measure = validators.one_of(*MEASURES, what="similarity measure")
"""attrs validator: ``value`` names a measure."""


def normalize_text(text: str) -> str:
    """Lower-case ``text``, turn punctuation into spaces and fold white space to one space."""
    from rapidfuzz import utils

    return " ".join(utils.default_process(text).split())


def similarity_matrix(
    references: Sequence[str],
    retrieved: Sequence[str],
    *,
    measure: str = "levenshtein",
    normalize: bool = False,
) -> npt.NDArray[np.float64]:
    """Similarities of every reference passage (rows) to every retrieved chunk (columns).

    Args:
        measure: one of :data:`MEASURES`.
        normalize: compare lower-cased text with punctuation and runs of white space folded
            to single spaces instead of the raw text.
    """
    import numpy as np

    if normalize:
        references = [normalize_text(r) for r in references]
        retrieved = [normalize_text(c) for c in retrieved]
    # pair by pair, with the function the batch scorers use, so that both give the same bits
    # (rapidfuzz's cdist can differ from its scalar scorers in the last bit, e.g. for jaro)
    similarity = pair_similarity(measure)
    matrix = np.zeros((len(references), len(retrieved)), dtype=np.float64)
    for i, reference in enumerate(references):
        for j, chunk in enumerate(retrieved):
            matrix[i, j] = similarity(reference, chunk)
    return matrix


def pair_similarity(measure: str) -> Callable[[str, str], float]:
    """The similarity of one reference passage to one retrieved chunk, as a function; equal
    to the entry :func:`similarity_matrix` gives for the pair (without numpy)."""
    scorer, factor = _scorer(measure)
    similarity: Callable[[str, str], float]
    if measure == "containment":

        def similarity(reference: str, chunk: str) -> float:
            share = min(1.0, len(chunk) / len(reference)) if reference else 1.0
            return min(max(scorer(reference, chunk) * factor * share, 0.0), 1.0)

    elif factor != 1.0:

        def similarity(reference: str, chunk: str) -> float:
            return min(max(scorer(reference, chunk) * factor, 0.0), 1.0)

    else:

        def similarity(reference: str, chunk: str) -> float:
            return min(max(scorer(reference, chunk), 0.0), 1.0)

    if measure not in ("partial", "containment", "levenshtein", "indel"):
        return similarity

    def bounded(reference: str, chunk: str) -> float:
        if len(reference) > _QUICK or len(chunk) > _QUICK:
            why = _too_large(measure, reference, chunk)
            if why is not None:
                raise TextTooLargeError(why)
        return similarity(reference, chunk)

    return bounded


def pair_matches(measure: str, threshold: float) -> Callable[[str, str], bool]:
    """Whether a reference passage and a retrieved chunk match: exactly
    ``policy.is_match(pair_similarity(measure)(reference, chunk), threshold)``, without the
    exact similarity of the pairs that rapidfuzz's ``score_cutoff`` rules out first (most
    pairs of a run; those it does not rule out are computed exactly and compared)."""
    similarity = pair_similarity(measure)
    is_match = policy.is_match
    scorer, factor = _scorer(measure)
    # below the threshold by 1e-6 (on the scorer's scale): rapidfuzz's cut-off rounds, and
    # rules out a pair up to about 1e-8 above it (Levenshtein of "a" and "aaaaa": 0.2 - 4e-17
    # is ruled out by a cut-off of 0.2 - 1.2e-9)
    cutoff = (threshold - 1e-6) / factor
    if cutoff <= 0:
        return lambda reference, chunk: is_match(similarity(reference, chunk), threshold)
    checked = measure in ("partial", "containment", "levenshtein", "indel")

    def matches(reference: str, chunk: str) -> bool:
        if checked and (len(reference) > _QUICK or len(chunk) > _QUICK):
            return is_match(similarity(reference, chunk), threshold)  # (checks the size)
        if not scorer(reference, chunk, score_cutoff=cutoff):
            return False  # below the cut-off: below the threshold
        return is_match(similarity(reference, chunk), threshold)

    return matches


def best_matches(
    matrix: npt.NDArray[np.float64], threshold: float, axis: int
) -> list[dict[str, Any]]:
    """For each row (``axis=1``) or column (``axis=0``): its best counterpart and verdict.

    Returns one dict per item: ``index``, ``matched`` (best similarity ``>=`` threshold),
    ``similarity`` (the best one) and ``evidence`` (the counterpart's index, or None).
    """
    count = matrix.shape[0] if axis == 1 else matrix.shape[1]
    if matrix.size == 0:
        return [
            {"index": i, "matched": False, "similarity": 0.0, "evidence": None}
            for i in range(count)
        ]
    best = matrix.argmax(axis=axis).tolist()
    scores = matrix.max(axis=axis).tolist()
    return [
        {
            "index": i,
            "matched": policy.is_match(score, threshold),
            "similarity": score,
            "evidence": evidence,
        }
        for i, (score, evidence) in enumerate(zip(scores, best, strict=False))
    ]


@attrs.frozen(kw_only=True)
class SimilarityMatcher:
    """Matcher ``similarity``: an item is supported when some candidate is similar enough.

    A :class:`~ctxeval.plugin.DeterministicMatcher`: the non-LLM metrics run through its
    batch form on the fast path, where a verdict stops at the first candidate that matches.

    Options:
        measure: one of :data:`MEASURES` (default ``levenshtein``).
        threshold: the least similarity that counts as a match (default 0.5; ``>=``).
        normalize: compare case- and punctuation-folded text (default False).
        reference: which side holds the reference passages, for the asymmetric
            ``containment`` measure (how much of the *reference* passage a chunk holds):
            ``items`` (default; recall judges reference passages against chunks) or
            ``candidates`` (precision judges chunks against reference passages).
    """

    registry_name: ClassVar[str] = "similarity"
    itemwise: ClassVar[bool] = True
    """(An item's verdict: whether some candidate is similar enough to it.)"""
    name: str = "similarity"
    measure: str = attrs.field(default="levenshtein", validator=check_measure)
    threshold: float = attrs.field(default=0.5, validator=validators.unit_interval)
    normalize: bool = attrs.field(default=False, validator=validators.boolean)
    reference: Literal["items", "candidates"] = attrs.field(
        default="items", validator=validators.one_of("items", "candidates")
    )

    def match_now(self, items: Sequence[str], candidates: Sequence[str]) -> list[Verdict]:
        """:meth:`match` without a run context (it needs no I/O): each item's best candidate,
        its similarity and whether it reaches the threshold."""
        if self.reference == "items":
            matrix = similarity_matrix(
                items, candidates, measure=self.measure, normalize=self.normalize
            )
            best = best_matches(matrix, self.threshold, axis=1)
        else:
            matrix = similarity_matrix(
                candidates, items, measure=self.measure, normalize=self.normalize
            )
            best = best_matches(matrix, self.threshold, axis=0)
        return [Verdict(row["matched"], row["similarity"], row["evidence"]) for row in best]

    def match_batch(self, pairs: Sequence[tuple[Sequence[str], Sequence[str]]]) -> list[list[bool]]:
        """For each ``(items, candidates)``: whether each item has a candidate similar enough
        (stopping at the first; equal to :meth:`match_now`'s verdicts)."""
        matches = pair_matches(self.measure, self.threshold)
        reference_first = self.reference == "items"
        out = []
        for items, candidates in pairs:
            if self.normalize:
                items = [normalize_text(text) for text in items]
                candidates = [normalize_text(text) for text in candidates]
            if reference_first:
                flags = [any(matches(item, other) for other in candidates) for item in items]
            else:
                flags = [any(matches(other, item) for other in candidates) for item in items]
            out.append(flags)
        return out

    def both_sides_key(self) -> tuple[str, str, float, bool]:
        """What decides :meth:`match_both_batch`: the measure, threshold and normalisation
        (not :attr:`reference`, which only says which side is judged), so that a run's
        precision and recall over the same sides compare each pair once."""
        return ("similarity", self.measure, self.threshold, self.normalize)

    def match_both_batch(
        self, pairs: Sequence[tuple[Sequence[str], Sequence[str]]]
    ) -> list[tuple[list[bool], list[bool]]]:
        """For each ``(reference passages, retrieved chunks)``: whether each passage has a
        chunk similar enough, and whether each chunk has such a passage (the flags
        :meth:`match_batch` gives each way), comparing a pair only while one of its two
        flags is still open."""
        matches = pair_matches(self.measure, self.threshold)
        out = []
        for references, chunks in pairs:
            if self.normalize:
                references = [normalize_text(text) for text in references]
                chunks = [normalize_text(text) for text in chunks]
            of_references = [False] * len(references)
            of_chunks = [False] * len(chunks)
            for i, reference in enumerate(references):
                for j, chunk in enumerate(chunks):
                    if of_references[i] and of_chunks[j]:
                        continue  # neither flag can change
                    if matches(reference, chunk):
                        of_references[i] = of_chunks[j] = True
            out.append((of_references, of_chunks))
        return out

    async def match(
        self, items: Sequence[str], candidates: Sequence[str], ctx: RunContext
    ) -> list[Verdict]:
        """One verdict per item: matched when its best candidate reaches the threshold."""
        return self.match_now(items, candidates)

    def describe(self) -> Mapping[str, Any]:
        return {"measure": self.measure, "threshold": self.threshold, "normalize": self.normalize}
