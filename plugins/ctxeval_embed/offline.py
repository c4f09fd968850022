"""Embedder ``wordllama``: static word embeddings that ship in a wheel, offline (extra ``embed``).

`WordLlama <https://github.com/dleemiller/WordLlama>`_ 0.4 (``l2_supercat``) averages the
token embeddings of a text (a 32 000-token vocabulary taken from Llama 2 70B, trained to 1024
dimensions and truncatable, Matryoshka-style, to 512, 256, 128 or 64). The wheel ships the
256-dimension weights (``wordllama/weights/l2_supercat_256.safetensors``, 16 MB) and the
tokenizer (``wordllama/tokenizers/l2_supercat_tokenizer_config.json``), and embedding 1 000
short texts takes about 20 ms on one CPU.

How it is loaded with no network: plain ``WordLlama.load()`` finds the weights in the
package folder, but looks for the tokenizer in ``<package>/tokenizer/`` (singular; the wheel
has it in ``tokenizers/``), then in ``~/.cache/wordllama/tokenizers/``, and else downloads it
from the Hugging Face hub. So it is loaded as ``WordLlama.load("l2_supercat", dim=256,
trunc_dim=..., cache_dir=<the wordllama package folder>, disable_download=True)``: the
package folder, taken as the cache folder, has ``tokenizers/`` and ``weights/`` in the layout
the cache lookup expects, and ``disable_download=True`` makes a missing file an error instead
of a download. Nothing is fetched, whatever the environment (no ``HF_HUB_OFFLINE`` needed).

Importing ``wordllama`` calls ``logging.basicConfig(level=logging.INFO)``; the root logger's
handlers and level are put back as they were right after the import, so loading the model
changes no logging setup of the program that uses ctxeval.

The model is loaded on first use, once per process and dimension.

Speed: WordLlama's tokenizer (Llama 2's SentencePiece BPE in Hugging Face ``tokenizers``)
costs about 50-150 us a text of 400 characters, most of it the library's per-text
machinery (normalised strings with alignments, the encoding objects), not the merges. The
embedder tokenizes through :class:`WordTokens` instead, with the same ids: the tokenizer
(normalizer ``"▁" + text.replace(" ", "▁")``, no pre-tokenizer) has no merge that joins a
symbol ending in another character to one starting with ``▁``, so a text's ids are the
concatenation of its words' ids (``"▁" + word``), and each distinct word is tokenized once
per process (a dictionary of a million words at most). Texts that could differ (holding
``▁``, an added token such as ``<s>``, two spaces in a row or a leading space) take the
regular expression path or the tokenizer itself. The pooling sums each text's own rows of
the table in token order, as WordLlama does (the same float32 bits).
"""

from __future__ import annotations

import functools
import json
import logging
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import attrs

from ctxeval.plugin import Dependency, RunContext

__all__ = ["DIMENSIONS", "INSTALL", "WordLlamaEmbedder", "WordTokens", "load_model", "word_tokens"]

INSTALL = "pip install 'ctxeval[embed]'"
"""The command that installs the offline embedder's model."""

DIMENSIONS = (64, 128, 256)
"""The dimensions the shipped 256-dimension weights can be truncated to."""

_CONFIG = "l2_supercat"
_SHIPPED_DIM = 256


def _import_wordllama() -> Any:
    """``wordllama.WordLlama``, imported with the root logger left as it was."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        from wordllama import WordLlama
    finally:
        for handler in root.handlers[:]:
            if handler not in handlers:
                root.removeHandler(handler)
        root.setLevel(level)
    return WordLlama


@functools.cache
def load_model(dim: int = _SHIPPED_DIM) -> Any:
    """The ``WordLlamaInference`` of the shipped weights truncated to ``dim``, loaded from
    the ``wordllama`` package folder with downloads disabled (once per process and ``dim``).

    Raises:
        FileNotFoundError: the wheel lacks the weights or the tokenizer (never downloads).
    """
    wordllama = _import_wordllama()
    import wordllama as package

    folder = Path(package.__file__).resolve().parent
    return wordllama.load(
        _CONFIG,
        dim=_SHIPPED_DIM,
        trunc_dim=None if dim == _SHIPPED_DIM else dim,
        cache_dir=folder,
        disable_download=True,
    )


@functools.cache
def _unpadded_tokenizer(dim: int = _SHIPPED_DIM) -> Any:
    """The model's tokenizer without its padding (it pads a batch to its longest text)."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_str(load_model(dim).tokenizer.to_str())
    tokenizer.no_padding()
    return tokenizer


@functools.cache
def word_tokens(dim: int = _SHIPPED_DIM) -> WordTokens:
    """The model's :class:`WordTokens` (once per process and dimension)."""
    return WordTokens(_unpadded_tokenizer(dim))


_SPACE = "\u2581"  # "▁", SentencePiece's word mark
_PIECES = re.compile(f"{_SPACE}*[^{_SPACE}]+|{_SPACE}+")
"""A normalised text's pieces: a run of marks and the word after it (or trailing marks)."""
_MAX_WORDS = 1 << 20


def _splits_at_words(config: dict[str, Any]) -> bool:
    """Whether the tokenizer ``config`` (its JSON) gives a text the concatenated ids of its
    pieces: the normalizer exactly ``Prepend("▁")`` and ``Replace(" ", "▁")``, no
    pre-tokenizer, a BPE model without dropout, suffixes or prefixes, and no merge of a
    symbol ending in another character with one starting with ``▁`` (so no merge crosses
    the start of a piece)."""
    model = config.get("model") or {}
    normalizers = (config.get("normalizer") or {}).get("normalizers")
    expected = [
        {"type": "Prepend", "prepend": _SPACE},
        {"type": "Replace", "pattern": {"String": " "}, "content": _SPACE},
    ]
    if (
        normalizers != expected
        or config.get("pre_tokenizer") is not None
        or model.get("type") != "BPE"
        or model.get("dropout") is not None
        or model.get("continuing_subword_prefix")
        or model.get("end_of_word_suffix")
        or model.get("ignore_merges")
    ):
        return False
    for merge in model.get("merges") or ():
        left, right = merge if isinstance(merge, list) else str(merge).split(" ", 1)
        if right.startswith(_SPACE) and not left.endswith(_SPACE):
            return False
    return True


class WordTokens:
    """WordLlama's token ids, each distinct word tokenized once (see the module).

    ``ids(texts)`` gives what ``tokenizer.encode_batch(texts, add_special_tokens=False)``
    gives (``tests/test_embedding_matcher.py`` checks it), as one array of all the ids and
    each text's offsets. A tokenizer whose configuration is not the one this relies on is
    used as it is, text by text (the same ids, at its own speed).

    Attributes:
        by_words: whether the words are cached (set from the tokenizer's configuration;
            False: the tokenizer on every text, as ``bench/embedding_speed.py`` compares).
        words, pieces: the ids of the words (and of the pieces of texts with runs of
            spaces) seen so far; emptied past a million entries.
    """

    def __init__(self, tokenizer: Any) -> None:
        from tokenizers import Tokenizer

        self.tokenizer = tokenizer
        config = json.loads(tokenizer.to_str())
        self.by_words = _splits_at_words(config)
        bare = Tokenizer.from_str(tokenizer.to_str())
        bare.no_padding()
        bare.no_truncation()
        bare.normalizer = None  # the pieces come normalised
        self.bare = bare
        self.added = tuple(
            token["content"] for token in config.get("added_tokens") or () if token["content"]
        )
        self.words: dict[str, list[int]] = {}
        """``word`` -> the ids of ``"▁" + word``."""
        self.pieces: dict[str, list[int]] = {}
        """A normalised piece (its marks included) -> its ids."""

    def _encode(self, tokenizer: Any, texts: list[str]) -> list[list[int]]:
        encode = getattr(tokenizer, "encode_batch_fast", None) or tokenizer.encode_batch
        return [e.ids for e in encode(texts, add_special_tokens=False)]

    def ids(self, texts: Sequence[str]) -> tuple[Any, list[int]]:
        """All the ids of ``texts`` in one int32 array, and the offsets of each text's
        (``len(texts) + 1`` of them)."""
        import numpy as np

        if not self.by_words:
            flat: list[int] = []
            offsets = [0]
            for row in self._encode(self.tokenizer, list(texts)):
                flat += row
                offsets.append(len(flat))
            return np.array(flat, dtype=np.int32), offsets
        if len(self.words) > _MAX_WORDS or len(self.pieces) > _MAX_WORDS:
            self.words, self.pieces = {}, {}  # (new dicts: a thread still reading keeps its)
        words, pieces = self.words, self.pieces
        added = self.added
        firsts = {token[0] for token in added}  # ("<": a text without one holds no <s>)
        whole = {
            number: text
            for number, text in enumerate(texts)
            if _SPACE in text
            or (any(c in text for c in firsts) and any(token in text for token in added))
        }
        done = dict(zip(whole, self._encode(self.tokenizer, list(whole.values())), strict=True))
        while True:  # once when every word is known, else twice
            flat = []
            extend = flat.extend
            offsets = [0]
            new_words: set[str] = set()
            new_pieces: set[str] = set()
            for number, text in enumerate(texts):
                if not text:
                    pass
                elif number in done:
                    extend(done[number])
                elif "  " not in text and text[0] != " ":
                    parts = text.split(" ")
                    try:
                        for part in parts:
                            extend(words[part])
                    except KeyError:
                        new_words.update(part for part in parts if part not in words)
                else:
                    parts = _PIECES.findall(_SPACE + text.replace(" ", _SPACE))
                    try:
                        for part in parts:
                            extend(pieces[part])
                    except KeyError:
                        new_pieces.update(part for part in parts if part not in pieces)
                offsets.append(len(flat))
            if not new_words and not new_pieces:
                return np.array(flat, dtype=np.int32), offsets
            for table, new, prefix in ((words, new_words, _SPACE), (pieces, new_pieces, "")):
                if new:
                    keys = list(new)
                    ids = self._encode(self.bare, [prefix + key for key in keys])
                    table.update(zip(keys, ids, strict=True))


def _dimension(instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if isinstance(value, bool) or value not in DIMENSIONS:
        raise ValueError(
            f"{attribute.name} must be one of {', '.join(map(str, DIMENSIONS))}, got {value!r}"
        )


@attrs.frozen(kw_only=True)
class WordLlamaEmbedder:
    """Embedder ``wordllama``: WordLlama's static embeddings, offline, deterministic.

    A :class:`~ctxeval.plugin.DeterministicEmbedder`: a text's vector depends on that text
    only (not on the others embedded with it), so the ``embedding`` matcher built on it is a
    deterministic matcher and the non-LLM metrics keep their fast path.

    Options:
        dim: the dimensions kept (64, 128 or 256, the default): fewer are faster and a little
            less accurate.
    """

    registry_name: ClassVar[str] = "wordllama"
    dependencies: ClassVar[tuple[Dependency, ...]] = (Dependency("wordllama", INSTALL),)
    batch_size: ClassVar[int] = 256
    name: str = "wordllama"
    dim: int = attrs.field(default=_SHIPPED_DIM, validator=_dimension)

    def embed(self, texts: Sequence[str]) -> Any:
        """The vectors of ``texts`` (float32, ``(len(texts), dim)``, not normalised; a text
        with no token, the empty one, gets the zero vector)."""
        import numpy as np

        texts = list(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        model = load_model(self.dim)
        table = model.embedding
        # WordLlama's own embed() pads each batch to its longest text and pools the padding
        # away; pooling each text's own tokens gives the same float32 vectors (the same sums
        # in the same order, without the padding's zeros) at half the cost.
        flat, offsets = word_tokens(self.dim).ids(texts)
        np.clip(flat, 0, table.shape[0] - 1, out=flat)
        for row in range(len(texts)):
            start, end = offsets[row], offsets[row + 1]
            if end > start:
                out[row] = table[flat[start:end]].sum(axis=0, dtype=np.float32) / np.float32(
                    end - start
                )
        return out

    async def aembed(self, texts: Sequence[str], ctx: RunContext) -> Any:
        """:meth:`embed`, in a worker thread under the run's CPU limit."""
        return await ctx.run_cpu(self.embed, list(texts))

    def describe(self) -> dict[str, Any]:
        return {"model": f"wordllama {_CONFIG}", "dim": self.dim}
