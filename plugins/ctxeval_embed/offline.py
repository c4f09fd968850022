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
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import attrs

from ctxeval.plugin import Dependency, RunContext

__all__ = ["DIMENSIONS", "INSTALL", "WordLlamaEmbedder", "load_model"]

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
        last = table.shape[0] - 1
        # WordLlama's own embed() pads each batch to its longest text and pools the padding
        # away; pooling each text's own tokens gives the same float32 vectors (the same sums
        # in the same order, without the padding's zeros) at half the cost.
        encodings = _unpadded_tokenizer(self.dim).encode_batch(
            texts, is_pretokenized=False, add_special_tokens=False
        )
        for row, encoding in enumerate(encodings):
            ids = np.asarray(encoding.ids, dtype=np.int32)
            if ids.size:
                np.clip(ids, 0, last, out=ids)
                out[row] = table[ids].sum(axis=0, dtype=np.float32) / np.float32(ids.size)
        return out

    async def aembed(self, texts: Sequence[str], ctx: RunContext) -> Any:
        """:meth:`embed`, in a worker thread under the run's CPU limit."""
        return await ctx.run_cpu(self.embed, list(texts))

    def describe(self) -> dict[str, Any]:
        return {"model": f"wordllama {_CONFIG}", "dim": self.dim}
