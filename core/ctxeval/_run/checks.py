"""Checks of a run's arguments, made before any row: a wrong argument is one
:class:`~ctxeval.ConfigError` that names it and says what to do, never a raw
AttributeError/TypeError in the middle of the run.

A table held in memory is taken as samples (a pandas or polars ``DataFrame``, a dict of columns
``{"user_input": [...], "retrieved_contexts": [...]}``, a ``datasets.Dataset``, a ragas
``EvaluationDataset``: see :mod:`ctxeval._data.frames`): :func:`check_run_inputs` returns them
as rows read lazily, one dict per row.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import AsyncIterable, Iterable, Mapping, Sequence
from typing import Any

from ctxeval._data.frames import table_rows
from ctxeval._data.optional import price_table_missing
from ctxeval._data.sample import Sample
from ctxeval._errors import ConfigError, CtxevalError
from ctxeval._judge.labels import Labels
from ctxeval._pipeline.judging import Panel, judge_name
from ctxeval._plugins.hooks import PricedLLM, llm_model, needs_llm, own_llm, pipeline_parts
from ctxeval._plugins.protocols import Metric, Price, PricedLLMProvider
from ctxeval._plugins.registry import Registry

__all__ = ["check_backend", "check_metrics_have_llm", "check_run_inputs", "check_runner_options"]

BACKENDS = ("asyncio", "trio")
"""The event loops a run can run on."""

DEFAULT_PROVIDER = "auto"
"""The LLM provider that prices a model given by name (as the command line's default)."""

_LLM_EXAMPLE = "llm='openai/gpt-4o-mini'"


def check_run_inputs(samples: Any, *, llm: Any, registry: Any, labels: Any) -> Any:
    """Raise :class:`~ctxeval.ConfigError` when an argument of a run is wrong (called before
    the metrics are resolved); return the samples to use (a table held in memory, such as a
    pandas ``DataFrame`` or a dict of columns, becomes rows read lazily, one dict each;
    anything else is returned as it is)."""
    samples = _checked_samples(samples)
    _check_llm(llm)
    if registry is not None and not isinstance(registry, Registry):
        raise ConfigError(
            f"registry must be a ctxeval.Registry or None, got {_shown(registry)}; use "
            "ctxeval.default_registry() (or its .copy()), or leave it out"
        )
    if labels is not None and not isinstance(labels, (Labels, str, os.PathLike)):
        raise ConfigError(
            f"labels must be a ctxeval.Labels, the path of a labels file, or None; got "
            f"{_shown(labels)} (read a file with ctxeval.Labels.load(path), or pass the path)"
        )
    return samples


def check_metrics_have_llm(
    metrics: Sequence[Metric],
    llm: Any,
    *,
    max_cost_usd: float | None = None,
    registry: Registry | None = None,
) -> None:
    """Raise :class:`~ctxeval.ConfigError` when a metric needs an LLM and the run has none,
    or, with a cost cap (``max_cost_usd``), when the price of an LLM the run calls is not known
    (its requests would not count against the cap). Called once the metrics are resolved,
    before any row."""
    needing = [m.name for m in metrics if _needs_llm(m)]
    if needing and llm is None:
        raise ConfigError(
            f"llm: {_names(needing)} {'needs' if len(needing) == 1 else 'need'} an LLM and the "
            f"run has none: pass {_LLM_EXAMPLE} (any litellm model string, an "
            "ctxeval_llm.LLMConfig, or an async callable) to evaluate(), or --model on the "
            "command line"
        )
    if max_cost_usd is None:
        return
    used: list[Any] = []
    for metric in metrics:
        for value in _llms_of(metric, llm):
            if value is not None and not any(value is u or _same(value, u) for u in used):
                used.append(value)
    unpriced = [value for value in used if _price_of(value, registry) is None]
    if unpriced:
        shown = ", ".join(repr(judge_name(v) or type(v).__name__) for v in unpriced)
        missing = price_table_missing()
        raise ConfigError(
            f"max_cost_usd: the price of {shown} is not known"
            + (f" ({missing})" if missing else "")
            + ", so the cost cap could not count "
            "its requests and would never stop the run; give the price in USD per million "
            "prompt and completion tokens: llm=LLMConfig(model=..., "
            "price_per_million_tokens=(input, output)), or --price IN,OUT on the command line "
            "(price_per_million_tokens in the run file's [llm] table); or run without a cost cap"
        )


def check_backend(backend: Any) -> None:
    """Raise :class:`~ctxeval.ConfigError` when ``backend`` is not one ctxeval runs on (or
    is ``trio`` and trio is not installed)."""
    if not isinstance(backend, str) or backend not in BACKENDS:
        raise ConfigError(
            f"backend must be 'asyncio' or 'trio', got {_shown(backend)}"
            + ("; did you mean 'asyncio'?" if backend == "curio" or backend == "async" else "")
        )
    if backend == "trio" and "trio" not in sys.modules and importlib.util.find_spec("trio") is None:
        raise ConfigError("backend='trio' needs trio, which is not installed: pip install trio")


# --- samples ---------------------------------------------------------------------------------


def _checked_samples(samples: Any) -> Any:
    hint = "pass a list of samples (dicts or ctxeval.Sample), or ctxeval.load_samples(path)"
    if samples is None:
        raise ConfigError(f"samples is None: {hint}")
    if isinstance(samples, (str, bytes, os.PathLike)):
        raise ConfigError(
            f"samples is a {type(samples).__name__} ({_shown(samples)}), not samples: to score a "
            "file, pass ctxeval.load_samples(path)"
        )
    if isinstance(samples, Sample):
        raise ConfigError(f"samples is one Sample: wrap it in a list, [sample] ({hint})")
    rows = table_rows(samples)  # a DataFrame, a dict of columns, a Dataset, a ragas dataset
    if rows is not None:
        return rows
    if isinstance(samples, Mapping):
        raise ConfigError(
            "samples is one dict (a single sample): wrap it in a list, [sample]; a dict of "
            "columns needs a list of equal length for every field"
        )
    if not isinstance(samples, (Iterable, AsyncIterable)):
        raise ConfigError(f"samples must be an iterable of samples, got {_shown(samples)}: {hint}")
    return samples


# --- the LLM ---------------------------------------------------------------------------------


def _check_llm(llm: Any) -> None:
    if llm is None or isinstance(llm, Mapping) or callable(llm):
        return
    if isinstance(llm, str):
        if llm.strip():
            return
        raise ConfigError(f"llm is an empty model name: pass a model, e.g. {_LLM_EXAMPLE}")
    if llm_model(llm) is not None:  # an LLM configuration (LLMConfig)
        return
    raise ConfigError(
        f"llm must be a model name ({_LLM_EXAMPLE}), a ctxeval_llm.LLMConfig, a dict of its "
        f"fields, an async callable (request dict -> answer), or None; got {_shown(llm)}"
    )


def _needs_llm(metric: Any) -> bool:
    try:
        return needs_llm(metric)
    except Exception:  # a property that fails: the run will say it, not this check
        return False


def _llms_of(metric: Any, run_llm: Any) -> list[Any]:
    """The LLMs ``metric`` calls: the run's for its parts without one of their own, the own
    ones of the others (each judge of a panel)."""
    parts = pipeline_parts(metric)
    if parts is None:
        return _llms_of_part(metric, run_llm)
    return [value for part in parts for value in _llms_of_part(part, run_llm)]


def _llms_of_part(part: Any, run_llm: Any) -> list[Any]:
    if isinstance(part, Panel):
        return [value for judge in part.judges for value in _llms_of_part(judge, run_llm)]
    own = own_llm(part)
    if own is not None:
        return [own]
    return [run_llm] if _needs_llm(part) else []


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:
        return False


def _price_of(value: Any, registry: Registry | None) -> Price | None:
    """The price of an ``llm=`` value's tokens: its own ``price()`` (an LLMConfig's: the
    user's price, else its provider's), else the default provider's price of its model."""
    if isinstance(value, Mapping):
        given = value.get("price_per_million_tokens")
        if isinstance(given, Price):
            return given
        if isinstance(given, (list, tuple)) and len(given) == 2:
            try:
                return Price.per_million(*given)
            except (TypeError, ValueError):
                return None
        model = value.get("model")
    elif isinstance(value, str):
        model = value
    else:
        if isinstance(value, PricedLLM):
            try:
                found = value.price()
            except Exception:
                return None
            return found if isinstance(found, Price) else None
        return None
    if not isinstance(model, str):
        return None
    try:
        from ctxeval._plugins.registry import default_registry

        provider = (registry or default_registry()).get_llm_provider(DEFAULT_PROVIDER)
    except CtxevalError:
        return None
    found = provider.price(model) if isinstance(provider, PricedLLMProvider) else None
    return found if isinstance(found, Price) else None


# --- messages --------------------------------------------------------------------------------


def _names(names: Sequence[str]) -> str:
    shown = ", ".join(repr(n) for n in names[:5])
    more = f" and {len(names) - 5} more" if len(names) > 5 else ""
    return ("metric " if len(names) == 1 else "metrics ") + shown + more


def _shown(value: Any) -> str:
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{type(value).__name__} {text}"


def check_runner_options(
    runner: str,
    *,
    whole: Mapping[str, object] | None = None,
    flags: Mapping[str, object] | None = None,
) -> None:
    """The checks every runner makes of its options, in one place (the ``processes``,
    ``ray`` and ``spark`` runners', and a third party's: ``ctxeval.runners``): each option of
    ``whole`` a whole number of at least 1, each of ``flags`` True or False.

    Raises:
        ConfigError: naming the runner, the option and the value given.
    """
    for label, value in (whole or {}).items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(
                f"runner {runner!r}: {label} must be a whole number of at least 1, got {value!r}"
            )
    for label, value in (flags or {}).items():
        if not isinstance(value, bool):
            raise ConfigError(f"runner {runner!r}: {label} must be True or False, got {value!r}")
