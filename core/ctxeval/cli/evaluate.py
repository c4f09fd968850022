"""``ctxeval evaluate``: score a dataset, write the run folder, print the summary."""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from ctxeval._plugins.hooks import (
    EstimatesCallsByModel,
    EstimatesMetricCalls,
    PricedLLM,
    SharesCalls,
    TrecEvalAveraging,
    llm_model,
    needs_llm,
)
from ctxeval._version import __version__
from ctxeval.cli.render import (
    EXIT_ERRORS,
    EXIT_GATES,
    EXIT_OK,
    UsageError,
    console,
    fail,
    print_errors,
    print_summary,
    print_trust,
)
from ctxeval.cli.specs import build_metrics, count_rows, parse_metric, read_run_file

if TYPE_CHECKING:
    from ctxeval._run.settings import RunSettings

__all__ = ["DEFAULT_PROVIDER", "add_parser", "cmd_evaluate", "llm_provider"]

DEFAULT_PROVIDER = "auto"
"""The LLM provider (``ctxeval.llms`` group) used when neither --provider nor the run file
names one: the LLM plugin's OpenAI-compatible / litellm provider."""


def llm_provider(name: str) -> Any:
    """The LLM provider registered under ``name``."""
    from ctxeval._plugins.registry import default_registry

    return default_registry().get_llm_provider(name)


def _llm(args: argparse.Namespace, run: dict[str, Any]) -> tuple[Any, Any]:
    """The run's ``llm=`` made by the chosen provider, and the provider (both None without
    a model)."""
    model = args.model or run.get("model")
    if not model:
        return None, None
    return _configure(args, run, model)


def _with_judges(
    specs: list[tuple[str, dict[str, Any]]], args: argparse.Namespace, run: dict[str, Any]
) -> list[tuple[str, dict[str, Any]]]:
    """``specs`` with each judge given by model name (a metric's ``judges`` option) made by
    the run's provider, with ``--api-base`` and the run file's ``[llm]`` settings, as
    ``--model`` is."""
    out = []
    for name, options in specs:
        judges = options.get("judges")
        if isinstance(judges, list) and any(isinstance(j, str) for j in judges):
            made = [
                _configure(args, run, j, judge=True)[0] if isinstance(j, str) else j for j in judges
            ]
            options = {**options, "judges": made}
        out.append((name, options))
    return out


def _configure(
    args: argparse.Namespace, run: dict[str, Any], model: str, *, judge: bool = False
) -> tuple[Any, Any]:
    """The LLM settings of ``model`` made by the run's provider, and the provider. A price
    given (``--price``, ``price_per_million_tokens`` in ``[llm]``) is --model's: a judge named
    in a metric's options is priced by the provider."""
    provider = llm_provider(args.provider or run.get("provider") or DEFAULT_PROVIDER)
    settings = dict(run.get("llm", {}))
    if judge:
        settings.pop("price_per_million_tokens", None)
        settings.pop("context_window", None)  # --model's window, not another judge's
    else:
        if getattr(args, "price", None) is not None:
            settings["price_per_million_tokens"] = _price_option(args.price)
        window = getattr(args, "context_window", None)
        if window is not None:
            if window < 1:
                raise UsageError(
                    f"--context-window: give the window in tokens (>= 1), got {window}"
                )
            settings["context_window"] = window
    if args.timeout is not None:
        settings["timeout"] = args.timeout
    if _batch(args, run):
        settings["batch"] = True
    try:
        llm = provider.configure(
            model=model, api_base=args.api_base or run.get("api_base"), **settings
        )
    except (TypeError, ValueError) as exc:
        raise UsageError(f"bad [llm] settings for provider {provider.name!r}: {exc}") from None
    return llm, provider


def _price_option(text: str) -> tuple[float, float]:
    """``--price IN,OUT``: USD per million prompt and completion tokens."""
    parts = text.split(",")
    try:
        inp, out = (float(p) for p in parts)
    except ValueError:
        inp = out = math.nan
    if not (math.isfinite(inp) and math.isfinite(out) and inp >= 0 and out >= 0):
        raise UsageError(
            f"--price: give IN,OUT, USD per million prompt and completion tokens, e.g. "
            f"--price 0.15,0.60; got {text!r}"
        )
    return inp, out


RUN_FILE_KEYS = (
    "data", "metrics", "out", "shared", "model", "api_base", "provider", "llm", "lenient",
    "no_cache", "max_concurrency", "max_cost", "qrels", "run", "complete", "trec_eval_averaging",
    "unit", "doc_id_separator", "duplicates",
    "fail_under", "batch", "metric_timeout", "labels", "runner", "workers",
)  # fmt: skip
"""The keys a run file (``--config``) may hold."""

_OPTION_OF = {
    "max_concurrency": "--max-concurrency",
    "max_cost_usd": "--max-cost",
    "metric_timeout": "--metric-timeout",
    "timeout": "--timeout",
    "deadline": "--deadline",
}

BATCH_SAMPLES_IN_FLIGHT = 1_000_000
"""Samples in flight in the Batch API mode: every sample's requests go up together."""


def _batch(args: argparse.Namespace, run: dict[str, Any]) -> bool:
    return bool(getattr(args, "batch", False) or run.get("batch", False))


def _first(*values: Any) -> Any:
    """The first value that is not None (0 and false are values)."""
    return next((v for v in values if v is not None), None)


def _settings(
    args: argparse.Namespace, run: dict[str, Any], *, out: Any, cache: Any
) -> RunSettings:
    """The run's settings from the command line and the run file, each checked, a bad one
    named as the option it came from."""
    from ctxeval._errors import ConfigError
    from ctxeval._run.settings import RetryPolicy, RunSettings

    batch = _batch(args, run)
    try:
        deadline = getattr(args, "deadline", None)
        retry = RetryPolicy() if deadline is None else RetryPolicy(deadline=deadline)
        return RunSettings(
            retry=retry,
            max_concurrency=_first(args.max_concurrency, run.get("max_concurrency"), 16),
            journal=Path(out) / "journal.jsonl" if out else None,
            resume=args.resume,
            cache=cache,
            max_cost_usd=_first(args.max_cost, run.get("max_cost")),
            # a batch may take the provider's whole window: no metric timeout unless asked
            metric_timeout=_first(
                args.metric_timeout, run.get("metric_timeout"), None if batch else 3600.0
            ),
            samples_in_flight=BATCH_SAMPLES_IN_FLIGHT if batch else 256,
            lenient=bool(args.lenient or run.get("lenient", False)),
            timeout=_first(args.timeout, 60.0),  # (checked even when no metric calls out)
        )
    except ConfigError as exc:
        message = str(exc)
        for field, option in _OPTION_OF.items():
            message = message.replace(f"run setting {field} ", f"{option}: ")
        raise UsageError(message) from None


def check_run_file(path: str, run: dict[str, Any]) -> None:
    """Refuse a key a run file may not hold, with the closest one."""
    import difflib

    for key in run:
        if key not in RUN_FILE_KEYS:
            close = difflib.get_close_matches(key, RUN_FILE_KEYS, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise UsageError(
                f"{path}: unknown key {key!r}{hint} (the keys are: {', '.join(RUN_FILE_KEYS)})"
            )


def check_out(folder: Path, metrics: Sequence[Any], *, resume: bool, overwrite: bool) -> None:
    """An existing run folder is never overwritten silently: finish it with --resume (the
    same metrics), or replace it with --overwrite."""
    from ctxeval._run.journal import recorded_metrics

    if resume and overwrite:
        raise UsageError("--resume and --overwrite exclude each other")
    journal = folder / "journal.jsonl"
    held = [n for n in ("results.jsonl", "journal.jsonl", "summary.json") if (folder / n).exists()]
    if resume:
        if not journal.exists():
            raise UsageError(f"--resume: {folder} holds no run to resume (no journal.jsonl)")
        before = recorded_metrics(journal)
        now = [m.name for m in metrics]
        if before is not None and set(before) != set(now):
            raise UsageError(
                f"--resume: the run in {folder} scored {', '.join(before)}; give the same "
                "metrics to finish it, or --overwrite to start again"
            )
    elif held and not overwrite:
        raise UsageError(
            f"{folder} holds a run already ({', '.join(held)}): add --resume to finish it, "
            "--overwrite to replace it, or choose another --out"
        )


def _with_trec_eval_averaging(metric: Any) -> Any:
    """``metric`` with trec_eval's averaging (an option of the ID metrics)."""
    if not isinstance(metric, TrecEvalAveraging):
        raise UsageError(
            f"--trec-eval-averaging: metric {metric.name!r} has no trec_eval averaging (only "
            "the ID metrics and context_relevance do)"
        )
    import attrs

    evolved: Any = attrs.evolve(metric, trec_eval_averaging=True)  # type: ignore[misc]
    return evolved


def with_units(metrics: list[Any], args: argparse.Namespace, run: dict[str, Any]) -> list[Any]:
    """``metrics`` with the retrieval-unit options of ``--unit``, ``--doc-id-separator`` and
    ``--duplicates`` (or the run file's ``unit``, ``doc_id_separator``, ``duplicates``);
    ``--unit both`` gives each metric twice, NAME (chunks) then NAME@document."""
    import attrs

    from ctxeval._data.measure_names import DOCUMENT_SUFFIX

    unit = getattr(args, "unit", None) or run.get("unit")
    options: dict[str, Any] = {}
    for key in ("doc_id_separator", "duplicates"):
        value = getattr(args, key, None)
        value = run.get(key) if value is None else value
        if value is not None:
            options[key] = value
    if unit is None and not options:
        return metrics
    if unit not in (None, "chunk", "document", "both"):
        raise UsageError(f"unit: give chunk, document or both, not {unit!r}")
    out: list[Any] = []
    for metric in metrics:
        if not hasattr(metric, "unit"):
            raise UsageError(
                f"--unit/--doc-id-separator/--duplicates: metric {metric.name!r} has no retrieval "
                "unit (only the ID, string and LLM context metrics built on a pipeline do)"
            )
        try:
            chunk = attrs.evolve(metric, **options) if options else metric
            if unit in ("chunk", "document"):
                name = metric.name
                if unit == "document" and not name.endswith(DOCUMENT_SUFFIX):
                    name += DOCUMENT_SUFFIX
                out.append(attrs.evolve(chunk, unit=unit, name=name))
                continue
            out.append(chunk)
            if unit == "both":
                name = metric.name + DOCUMENT_SUFFIX
                out.append(attrs.evolve(chunk, unit="document", name=name))
        except (TypeError, ValueError) as exc:
            raise UsageError(f"--unit/--doc-id-separator/--duplicates: {exc}") from None
    return out


def _share(folder: Path, paths: Any) -> None:
    """Let others read ``folder`` and the run's output ``paths`` (``--shared``); the journal
    and the LLM cache stay the user's own."""
    folder.chmod(0o755)
    for path in paths:
        Path(path).chmod(0o644)


def _gates(args: argparse.Namespace, run: dict[str, Any], metrics: Sequence[Any]) -> list[Any]:
    """The run's gates (``--fail-under`` and the run file's ``fail_under`` table), checked
    against the metrics' row names before anything is scored."""
    from ctxeval._errors import ConfigError
    from ctxeval._output.gates import parse_gate

    specs = list(args.fail_under or [])
    table = run.get("fail_under", {})
    if not isinstance(table, dict):
        raise UsageError("fail_under in a run file is a table: [fail_under] with metric = value")
    specs += [f"{name}={value}" for name, value in table.items()]
    try:
        gates = [parse_gate(spec, on=args.gate_on) for spec in specs]
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    import attrs

    from ctxeval._plugins.metric_names import MetricNames

    names = MetricNames.of(metrics)
    resolved = []
    for gate in gates:
        try:
            name = names.resolve(gate.metric)
        except ConfigError as exc:
            raise UsageError(f"--fail-under {gate.metric}: {exc}") from None
        resolved.append(attrs.evolve(gate, metric=name))
    return resolved


def _formats(names: Sequence[str], out: Any) -> list[str]:
    """The extra writers of ``--format``, each checked (a missing extra says its command)."""
    from ctxeval._output.folder import DEFAULT_FORMATS
    from ctxeval._plugins.registry import default_registry

    if names and not out:
        raise UsageError("--format writes files into the run folder: add --out DIR")
    registry = default_registry()
    for name in names:
        registry.get_writer(name)  # raises for an unknown or unavailable writer
    return [n for n in dict.fromkeys(names) if n not in DEFAULT_FORMATS]


def _labels(path: str | None, metrics: Sequence[Any]) -> Any:
    """People's labels from ``--labels``, read and checked before anything is scored."""
    if not path:
        return None
    from ctxeval._judge.resolve import resolve_label_metrics
    from ctxeval._plugins.metric_names import MetricNames

    return resolve_label_metrics(path, MetricNames.of(metrics))


def _needs_llm(metrics: Sequence[Any]) -> bool:
    """Whether a metric calls an LLM and has none of its own (it then uses --model)."""
    return any(needs_llm(m) for m in metrics)


def _embeds_by_endpoint(metrics: Sequence[Any]) -> bool:
    """Whether a metric's matcher embeds through an endpoint (``matcher=embedding,
    embedder=openai``): its vectors are cached as the LLM answers are."""
    from ctxeval._plugins.hooks import embedder_of, pipeline_parts
    from ctxeval._plugins.protocols import DeterministicEmbedder

    for metric in metrics:
        for part in pipeline_parts(metric) or ():
            embedder = embedder_of(part)
            if embedder is not None and not isinstance(embedder, DeterministicEmbedder):
                return True
    return False


def _dry_run(samples: Any, metrics: Sequence[Any], llm: Any, provider: Any, out: Any) -> int:
    """Count the LLM calls of the run and estimate their tokens and cost, each judge's calls
    priced at its own model's price (a metric's own ``llm`` or jury; else ``--model``)."""
    from rich.markup import escape

    from ctxeval._data.optional import price_table_missing

    run_model = llm_model(llm)
    n, by_metric = _count_calls(samples, metrics, run_model)
    price = _Pricing(llm, provider, run_model)
    total_cost, per_model = _dry_run_table(n, metrics, by_metric, price, out)
    judges = {m: t for m, t in per_model.items() if t[0]}
    if len(judges) > 1:
        for model, (calls, chars) in judges.items():
            priced = price(model, calls, chars)
            out.print(
                f"  {escape(model or 'the run LLM')}: {calls} calls, "
                + ("cost unknown" if priced is None else f"${priced:.4f}"),
                soft_wrap=True,
            )
    total = sum(t[0] for t in per_model.values())
    missing = price_table_missing()
    unknown = (
        f"unknown ({missing} with --price IN,OUT)"
        if missing
        else "unknown (model not in the price table: give its price with --price IN,OUT)"
    )
    out.print(
        f"{total} LLM calls; estimated cost: "
        + (escape(unknown) if total_cost is None else f"${total_cost:.4f}")
        + " (tokens: characters / 4, 60 per answer)",
        soft_wrap=True,
    )
    return EXIT_OK


_Tally = dict[str | None, list[int]]
"""Per model (None: the run's LLM): [LLM calls, prompt characters]."""


def _count_calls(
    samples: Any, metrics: Sequence[Any], run_model: str | None
) -> tuple[int, dict[str, _Tally]]:
    """How many samples, and each metric's estimated calls per model (the calls of metrics
    that share them, :class:`~ctxeval.plugin.hooks.SharesCalls`, under the first only)."""
    by_metric: dict[str, _Tally] = {m.name: {} for m in metrics}
    counted = [m for m in metrics if shared_with(m, metrics) is None]
    n = 0
    for sample in samples:
        n += 1
        for metric in counted:
            if isinstance(metric, EstimatesCallsByModel):
                estimates = metric.estimate_calls_by_model(sample)
            elif isinstance(metric, EstimatesMetricCalls):
                estimates = {None: metric.estimate_calls(sample)}
            else:
                estimates = {}
            for model, sizes in estimates.items():
                # calls: count, characters
                tally = by_metric[metric.name].setdefault(model or run_model, [0, 0])
                tally[0] += len(sizes)
                tally[1] += sum(sizes)
    return n, by_metric


def shared_with(metric: Any, metrics: Sequence[Any]) -> Any:
    """The earlier metric of ``metrics`` whose LLM requests ``metric`` shares (equal
    :meth:`~ctxeval.plugin.hooks.SharesCalls.shared_calls_key`), or None."""
    if not isinstance(metric, SharesCalls):
        return None
    key = metric.shared_calls_key()
    for other in metrics:
        if other is metric:
            return None
        if isinstance(other, SharesCalls) and other.shared_calls_key() == key:
            return other
    return None


class _Pricing:
    """The estimated cost of a model's calls: the run LLM's own price (``--price``, else the
    provider's), else the provider's estimate for the model; None when unknown."""

    def __init__(self, llm: Any, provider: Any, run_model: str | None) -> None:
        self.llm, self.provider, self.run_model = llm, provider, run_model

    def __call__(self, model: str | None, calls: int, chars: int) -> float | None:
        if not calls:
            return 0.0
        llm = self.llm
        if model is not None and model == self.run_model and isinstance(llm, PricedLLM):
            known = llm.price()  # the price given with --price, else the provider's
            if known is not None:
                return float(known.cost(math.ceil(chars / 4), 60 * calls))
        if self.provider is None or not model:
            return None
        cost: float | None = self.provider.estimate_cost(model, math.ceil(chars / 4), 60 * calls)
        return cost


def _dry_run_table(
    n: int, metrics: Sequence[Any], by_metric: dict[str, _Tally], price: _Pricing, out: Any
) -> tuple[float | None, _Tally]:
    """Print the table of calls, tokens and cost per metric; the total cost (None: unknown)
    and the calls per model."""
    from rich.table import Table

    table = Table(title=f"dry run: {n} samples, nothing sent")
    table.add_column(
        "metric", no_wrap=True, min_width=max((len(m.name) for m in metrics), default=6)
    )
    for column in ("LLM calls", "prompt tokens (est.)", "cost USD (est.)"):
        table.add_column(column, justify="right")
    total_cost: float | None = 0.0
    per_model: _Tally = {}
    for metric in metrics:
        models = by_metric[metric.name]
        calls = sum(t[0] for t in models.values())
        chars = sum(t[1] for t in models.values())
        cost: float | None = 0.0
        for model, (model_calls, model_chars) in models.items():
            priced = price(model, model_calls, model_chars)
            cost = None if priced is None or cost is None else cost + priced
            kept = per_model.setdefault(model, [0, 0])
            kept[0] += model_calls
            kept[1] += model_chars
        total_cost = None if cost is None or total_cost is None else total_cost + cost
        table.add_row(
            metric.name,
            str(calls) if shared_with(metric, metrics) is None else "shared",
            str(math.ceil(chars / 4)),
            "unknown" if cost is None else f"{cost:.4f}",
        )
    out.print(table)
    for metric in metrics:
        first = shared_with(metric, metrics)
        if first is not None:
            out.print(
                f"{metric.name}: shares the requests of {first.name} (sent once)", soft_wrap=True
            )
    return total_cost, per_model


def _runner(args: argparse.Namespace, run: dict[str, Any]) -> Any:
    """The runner of ``--runner NAME [--workers N]`` (``--ray [ADDRESS]`` is ``--runner ray``),
    or of the run file's ``runner``/``workers``; None: the local runner."""
    from ctxeval._run.execute import get_runner

    name = args.runner or run.get("runner")
    if args.ray is not None:
        if name not in (None, "ray"):
            raise UsageError(f"--ray and --runner {name} do not go together")
        name = "ray"
    workers = _first(args.workers, args.ray_workers, run.get("workers"))
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int)):
        raise UsageError(f"--workers: must be a whole number >= 1, got {workers!r}")
    if workers is not None and workers < 1:
        raise UsageError(f"--workers: must be a whole number >= 1, got {workers}")
    if name is None or name == "local":
        if workers is not None:
            raise UsageError("--workers goes with --runner processes, ray or a runner plugin")
        return None
    if _batch(args, run):
        raise UsageError(
            f"--runner {name} and --batch do not go together (a batch needs no workers)"
        )
    options: dict[str, Any] = {} if workers is None else {"workers": workers}
    if name == "ray" and args.ray not in (None, "local"):
        options["address"] = args.ray
    master = getattr(args, "master", None)
    if master is not None:
        if name != "spark":
            raise UsageError(f"--master goes with --runner spark, not --runner {name}")
        options["master"] = master
    return get_runner(name, **options)


def _unwritable(exc: OSError, folder: Path, *, begun: bool = True) -> NoReturn:
    """Stop with what could not be written and how to finish the run (exit 1); ``begun``:
    whether the run had begun (else nothing was scored, and no journal can be there)."""
    import errno

    where = exc.filename or folder
    fix = {
        errno.ENOSPC: "free some space",
        errno.EDQUOT: "free some space (a disk quota)",
        errno.ELOOP: f"remove the symbolic link at {where} (ctxeval never writes through one)",
        errno.EACCES: "give yourself write access to the folder",
        errno.EPERM: "give yourself write access to the folder",
        errno.EROFS: "choose a folder on a writable disk",
    }.get(exc.errno or 0, "fix it")
    if not begun:
        fail(
            f"cannot write the run folder ({where}): {exc.strerror or exc}; nothing was "
            f"scored or written: {fix} (or choose another --out) and run the command again",
            EXIT_ERRORS,
        )
    fail(
        f"could not write the run folder ({where}): {exc.strerror or exc}; the files begun "
        f"were removed and the judged rows are kept in {folder / 'journal.jsonl'}: {fix} "
        "(or choose another --out) and run the same command with --resume",
        EXIT_ERRORS,
    )


def _totals(names: list[str], labels: Any, metrics: Sequence[Any]) -> Any:
    """What the run keeps of its rows: its numbers (with people's labels, when given)."""
    from ctxeval._output.totals import RunTotals

    if labels is None:
        return RunTotals(names)
    from ctxeval._judge.formulas import formulas_of

    return RunTotals(names, labels=labels, formulas=formulas_of(metrics))


def _begin_qrels(args: argparse.Namespace, data: str) -> Any:
    """The file of ``--write-qrels`` (None without it), checked before anything is scored:
    a file there is replaced only with --overwrite or --resume."""
    if not getattr(args, "write_qrels", None):
        return None
    from ctxeval._output.qrels import QrelsFile

    target = Path(args.write_qrels)
    if target.is_dir():
        raise UsageError(f"--write-qrels {target}: a folder is there; give a file name")
    from ctxeval._errors import ConfigError
    from ctxeval._output.files import check_writable_name

    try:
        check_writable_name(target)
    except ConfigError as exc:
        raise UsageError(f"--write-qrels {exc}") from None
    if target.exists() and not (args.overwrite or args.resume):
        raise UsageError(
            f"--write-qrels {target}: the file exists; add --overwrite to replace it, or "
            "choose another file"
        )
    folder = target.parent
    if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(f"--write-qrels {target}: cannot write in {folder}")
    return QrelsFile(target, provenance={"data": data})


def _finish_qrels(qrels: Any) -> bool:
    """Write the ``--write-qrels`` file, its notes on stderr; False when it could not be."""
    if qrels is None:
        return True
    if qrels.error is None:
        try:
            qrels.finish()
        except OSError as exc:
            qrels.error = exc
    from rich.markup import escape

    error = qrels.error
    if error is not None:
        console(stderr=True).print(
            f"[bold red]error:[/] could not write --write-qrels {escape(str(qrels.path))}: "
            f"{escape(error.strerror or str(error))}; fix it and run the command again "
            "(with --resume when the run has --out)",
            soft_wrap=True,
        )
        return False
    for note in qrels.notes:
        console(stderr=True).print(f"[yellow]qrels:[/] {escape(note)}", soft_wrap=True)
    return True


def _check_trace_options(args: argparse.Namespace, trec: bool) -> None:
    """``--map``, ``--references`` and ``--join-on`` go with ``--from``; ``--from`` with DATA."""
    if not args.from_format:
        if args.references:
            raise UsageError("--references goes with --from FORMAT (DATA holds traces)")
        if args.join_on:
            raise UsageError("--join-on goes with --from FORMAT and --references FILE")
    elif trec:
        raise UsageError("--from reads DATA as traces: give DATA, not --qrels/--run")
    elif args.join_on and not args.references:
        raise UsageError("--join-on names what to join --references on: add --references FILE")


def _trace_mapping(specs: Sequence[str] | None) -> dict[str, str]:
    """``--map FIELD=PATH ...`` as a dict."""
    mapping: dict[str, str] = {}
    for spec in specs or ():
        field, sep, value = spec.partition("=")
        if not sep or not field.strip() or not value.strip():
            raise UsageError(f"--map: give FIELD=PATH, e.g. --map retrieval=last; got {spec!r}")
        mapping[field.strip()] = value.strip()
    return mapping


def _traces(args: argparse.Namespace, path: Path, *, strict: bool = True) -> Any:
    """The samples of the traces in ``path`` (``--from FORMAT``), references joined."""
    from ctxeval._errors import ConfigError
    from ctxeval._run.api import load_traces

    try:
        return load_traces(
            path,
            format=args.from_format,
            mapping=_trace_mapping(args.map),
            references=args.references,
            join_on=args.join_on,
            strict=strict,
        )
    except ConfigError as exc:
        raise UsageError(f"--from {args.from_format}: {exc}") from None


def _lookup(args: argparse.Namespace, path: Path, samples: Any, *, trec: bool) -> Any:
    """Where the report finds each sample's texts: the samples of TREC files, the traces read
    again (``--from``), or DATA read again with its ``--map`` columns."""
    from ctxeval._output.rebuild import file_lookup

    if trec:
        return file_lookup(samples)
    if args.from_format:
        return file_lookup(_TraceSamples(args, path))
    return file_lookup(path, column_map=_column_map(args))


class _TraceSamples:
    """The traces' samples read again (the report finds samples by id in them), quietly:
    a trace that gives no sample keeps its place, as it does in a lenient run."""

    def __init__(self, args: argparse.Namespace, path: Path) -> None:
        self._args = args
        self._path = path

    def __iter__(self) -> Any:
        from ctxeval._data.sample import Sample

        stream = _traces(self._args, self._path)
        for item in stream._samples_and_errors():
            yield item if isinstance(item, Sample) else None


def _per_query(args: argparse.Namespace, out: Any) -> Any:
    """The per-query file of ``--per-query [FILE]`` (FILE, else OUT/per-query.tsv), or None."""
    if args.per_query is None:
        return None
    from ctxeval.cli.per_query import PerQueryFile

    if args.per_query:
        path = Path(args.per_query)
    elif out:
        path = Path(out) / "per-query.tsv"
    else:
        raise UsageError(
            "--per-query: give the file to write (--per-query FILE), or --out DIR to write "
            "DIR/per-query.tsv"
        )
    try:
        return PerQueryFile(path)
    except OSError as exc:
        raise UsageError(f"--per-query: cannot write {path}: {exc.strerror or exc}") from None


def _print_per_query(per_query: Any, metrics: Sequence[str], out: Any) -> None:
    """The table of ``--per-query`` (its first queries) and where the file is."""
    if per_query is None:
        return
    from ctxeval.cli.per_query import per_query_table

    table, queries = per_query_table(per_query.path, metrics)
    out.print(table)
    out.print(f"{'per query:':<11}{per_query.path} ({queries} queries)", soft_wrap=True)


def _column_map(args: argparse.Namespace) -> dict[str, str] | None:
    """``--map FIELD=COLUMN`` (repeated), checked; None without one."""
    from ctxeval._data.column_map import parse_map_options
    from ctxeval._errors import ConfigError

    if not args.map:
        return None
    if args.qrels or args.run:
        raise UsageError("--map reads the columns of DATA; --qrels/--run have no columns to map")
    try:
        return parse_map_options(args.map)
    except ConfigError as exc:  # (a trace reader's FIELD=PATH, given without --from?)
        raise UsageError(
            f"{exc}; to read DATA as traces, add --from FORMAT: --map then says where the "
            "trace reader finds FIELD (--map retrieval=first)"
        ) from None


EVALUATE_EXAMPLES = """\
examples:
  ctxeval evaluate traces.jsonl -m id_based_context_precision \\
      -m id_ndcg_at_k:k=5 --out run1
  ctxeval evaluate traces.jsonl -m context_entity_recall:extractor=spacy
  ctxeval evaluate traces.jsonl -m context_precision -m context_recall \\
      --model openai/gpt-4o-mini --out run2 --max-cost 2.50
  ctxeval evaluate traces.jsonl -m context_recall \\
      --model openai/gpt-4o-mini --dry-run
  ctxeval evaluate --config run.toml --resume
  ctxeval evaluate --qrels qrels.txt --run run.txt -m nDCG@10 -m AP -m P@5
  ctxeval evaluate traces.jsonl -m id_mrr -m P@5 \\
      --fail-under id_mrr=0.6 --gate-on ci-low
  ctxeval evaluate traces.jsonl -m context_precision \\
      --model openai/gpt-4o-mini --labels run2/label-sheet.jsonl --out run3

metric options go after a colon, comma-separated: NAME:key=value,key=value
(values are read as JSON when they parse: k=5, batch=true, labels=["PERSON"])
"""


def add_parser(commands: Any) -> None:
    """Declare ``ctxeval evaluate`` and its options on ``commands`` (the
    subparsers of the ``ctxeval`` parser)."""
    parser = commands.add_parser(
        "evaluate",
        help="score a dataset",
        epilog=EVALUATE_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Score every sample of DATA (JSONL, JSON, CSV or Parquet) with every metric.",
    )
    for options in (
        _what_to_score,
        _llm_and_folder,
        _calls_and_runner,
        _cost_and_outputs,
        _gates_and_input,
    ):
        options(parser)
    parser.set_defaults(command_module="evaluate")


def _what_to_score(parser: argparse.ArgumentParser) -> None:
    """DATA (or TREC files, or traces), the metrics, a run file, column names."""
    parser.add_argument("data", nargs="?", help="the samples: .jsonl, .json, .csv or .parquet")
    parser.add_argument(
        "-m",
        "--metric",
        action="append",
        metavar="METRIC",
        help="a metric, NAME or NAME:key=value,...; repeat for more",
    )
    parser.add_argument(
        "--config", metavar="RUN.toml", help="a run file with data, out, model, [[metrics]] ..."
    )
    parser.add_argument(
        "--map",
        action="append",
        default=[],
        metavar="FIELD=COLUMN",
        help="read sample field FIELD from column COLUMN of DATA (repeat for more), e.g. "
        "--map user_input=query --map retrieved_contexts=chunks; with --from, where the "
        "trace reader finds FIELD (question=root, retrieval=last, id_key=metadata.doc_id)",
    )
    parser.add_argument("--qrels", metavar="QRELS", help="TREC qrels (instead of DATA; with --run)")
    parser.add_argument(
        "--run", metavar="RUN", help="a TREC run, ranked by score as trec_eval does"
    )
    parser.add_argument(
        "--complete",
        action="store_true",
        help="with --qrels: also the qrels' queries the run misses (trec_eval -c)",
    )
    parser.add_argument(
        "--per-query",
        nargs="?",
        const="",
        metavar="FILE",
        help="every query's value of every metric, as trec_eval -q: a table, and the file FILE "
        "(default: OUT/per-query.tsv with --out)",
    )
    parser.add_argument(
        "--unit",
        choices=("chunk", "document", "both"),
        help="what the context metrics count: each retrieved chunk (the default), each "
        "document once (at its best chunk), or both side by side (NAME and NAME@document)",
    )
    parser.add_argument(
        "--doc-id-separator",
        metavar="SEP",
        help="chunk IDs name their document before SEP (TREC RAG's doc#segment: --doc-id-"
        "separator '#'); without it, --unit document reads retrieved_context_sources",
    )
    parser.add_argument(
        "--duplicates",
        type=float,
        metavar="SIM",
        help="drop retrieved chunks that repeat an earlier one before judging: 1 identical "
        "texts, below 1 near-duplicates at least SIM alike (Levenshtein similarity)",
    )
    parser.add_argument(
        "--trec-eval-averaging",
        action="store_true",
        help="score a query with nothing retrieved or nothing relevant 0, as trec_eval does",
    )


def _llm_and_folder(parser: argparse.ArgumentParser) -> None:
    """The LLM, and the run folder."""
    parser.add_argument(
        "--model", help="LLM for the LLM metrics, a litellm model string (openai/gpt-4o-mini)"
    )
    parser.add_argument("--api-base", help="the LLM endpoint, for OpenAI-compatible servers")
    parser.add_argument(
        "--provider",
        metavar="NAME",
        help="the LLM provider plugin that reaches --model (default: auto; see ctxeval plugins)",
    )
    parser.add_argument(
        "--out",
        metavar="DIR",
        help="write results.jsonl, summary.json, report.html and a journal here",
    )
    parser.add_argument("--resume", action="store_true", help="finish an interrupted run in --out")
    parser.add_argument("--overwrite", action="store_true", help="replace the run already in --out")
    parser.add_argument(
        "--shared",
        action="store_true",
        help="let others read the run folder's results and report (0755/0644, not 0700/0600): "
        "to publish them as a CI artifact or from a web server",
    )


def _calls_and_runner(parser: argparse.ArgumentParser) -> None:
    """The LLM calls' limits and cache, and where the run executes."""
    parser.add_argument(
        "--max-concurrency", type=int, metavar="N", help="LLM calls in flight at once (16)"
    )
    parser.add_argument(
        "--timeout", type=float, metavar="S", help="seconds one LLM request may take"
    )
    parser.add_argument(
        "--deadline",
        type=float,
        metavar="S",
        help="seconds one LLM call may take, its retries included (150)",
    )
    parser.add_argument(
        "--metric-timeout",
        type=float,
        metavar="S",
        help="seconds one metric may take on one sample, retries included (default 3600)",
    )
    parser.add_argument(
        "--batch",
        action="store_true",
        help="send the LLM requests through the Batch API (OpenAI-compatible; half the price, "
        "answers within 24 h); resumable with --out",
    )
    parser.add_argument(
        "--no-cache", action="store_true", help="do not read or write the LLM answer cache"
    )
    parser.add_argument(
        "--runner",
        metavar="NAME",
        help="where the run executes: local (this process, the default), processes (every "
        "core of this machine), ray (a Ray cluster, pip install 'ctxeval[ray]'), spark "
        "(Spark tasks, pip install 'ctxeval[spark]'), or a runner plugin's name (see: "
        "ctxeval plugins)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="worker processes or actors of --runner (default: processes, the CPU count; ray, 2)",
    )
    parser.add_argument(
        "--ray",
        nargs="?",
        const="local",
        metavar="ADDRESS",
        help="--runner ray on the Ray cluster at ADDRESS (auto: the one this machine is "
        "in), or a local one when no ADDRESS is given",
    )
    parser.add_argument("--ray-workers", type=int, metavar="N", help=argparse.SUPPRESS)
    parser.add_argument(
        "--master",
        metavar="URL",
        help="--runner spark on the Spark master at URL (spark://HOST:7077, yarn, local[8]); "
        "default: local mode with --workers tasks",
    )


def _cost_and_outputs(parser: argparse.ArgumentParser) -> None:
    """The cost, the model's price and window, the extra output files."""
    parser.add_argument(
        "--max-cost",
        type=float,
        metavar="USD",
        help="stop cleanly once the run has spent this much",
    )
    parser.add_argument(
        "--price",
        metavar="IN,OUT",
        help="the price of --model in USD per million prompt (IN) and completion (OUT) tokens, "
        "e.g. 0.15,0.60: for a model the provider has no price for (needed with --max-cost); "
        "overrides the provider's price",
    )
    parser.add_argument(
        "--context-window",
        type=int,
        metavar="N",
        help="the context window of --model in tokens: a prompt that would not fit (estimated, "
        "with max_tokens for the answer) is an error row, not sent (default: the provider's "
        "known window, or a local llama.cpp server's n_ctx)",
    )
    parser.add_argument(
        "--format",
        action="append",
        metavar="FMT",
        help="also write this format in --out: csv, parquet, markdown, or a writer plugin's",
    )
    parser.add_argument(
        "--write-qrels",
        metavar="FILE",
        help="write the run's graded judgements (details.qrels of a metric that grades "
        "documents, such as context_relevance) to FILE as TREC qrels, to read with --qrels",
    )


def _gates_and_input(parser: argparse.ArgumentParser) -> None:
    """Gates, labels, a dry run, bad rows, traces; quiet."""
    parser.add_argument(
        "--fail-under",
        action="append",
        metavar="METRIC=VALUE",
        help="exit 3 when METRIC scores below VALUE (repeat for more): a gate for CI",
    )
    parser.add_argument(
        "--gate-on",
        choices=("mean", "ci-low"),
        default="mean",
        help="what --fail-under compares: the mean, or the lower bound of its 95%% CI",
    )
    parser.add_argument(
        "--labels",
        metavar="FILE",
        help="people's labels of judged items (JSONL/CSV): the judge's agreement with them "
        "and the mean corrected by them (PPI) are reported",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="count the LLM calls and estimate the cost; send nothing",
    )
    parser.add_argument(
        "--lenient",
        action="store_true",
        help="make each bad input row error rows (exit 1) and score the others, not stop",
    )
    parser.add_argument(
        "--from",
        dest="from_format",
        metavar="FORMAT",
        help="DATA holds traces, not samples: openinference (OTLP JSON), mlflow, langsmith, "
        "phoenix, or a trace reader plugin's name; one trace is one sample (docs/traces.md)",
    )
    parser.add_argument(
        "--references",
        metavar="FILE",
        help="with --from: reference data (qrels, or samples with an id and reference fields) "
        "joined to the traces on --join-on",
    )
    parser.add_argument(
        "--join-on",
        metavar="ATTRIBUTE",
        help="the trace attribute whose value is a reference's id (default trace_id)",
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress and no summary")


@dataclasses.dataclass
class _Inputs:
    """What ``ctxeval evaluate`` was asked to score, decided and checked before any row."""

    run: dict[str, Any]
    """The run file's settings (empty without ``--config``)."""
    trec: bool
    """Whether the samples are TREC files (``--qrels`` and ``--run``), not DATA."""
    path: Path
    """DATA, or the TREC run file."""
    samples: Any
    metrics: list[Any]
    llm: Any
    provider: Any
    runner: Any
    labels: Any
    out: str | None
    where: str
    """The input as messages name it: DATA, or both TREC files."""


@dataclasses.dataclass
class _Outputs:
    """Where the rows of a run go: the run folder (or its totals alone), ``--write-qrels``,
    ``--per-query``; each aborted together when the run fails."""

    totals: Any
    folder: Any = None
    qrels: Any = None
    per_query: Any = None

    def consume(self) -> Any:
        """The function the run hands each batch of rows to."""
        consume = self.folder.add if self.folder is not None else self.totals.add
        if self.per_query is not None:
            consume = self.per_query.feeding(consume)
        return consume if self.qrels is None else self.qrels.feeding(consume)

    def abort(self) -> None:
        """Remove what was begun (the journal stays, for --resume)."""
        if self.folder is not None:
            self.folder.abort()
        if self.qrels is not None:
            self.qrels.abort()


def _read_run_file(args: argparse.Namespace) -> dict[str, Any]:
    """The run file of ``--config`` (checked), its TREC settings merged into ``args``."""
    run = read_run_file(args.config) if args.config else {}
    if args.config:
        check_run_file(args.config, run)
    args.qrels = args.qrels or run.get("qrels")
    args.run = args.run or run.get("run")
    args.complete = args.complete or bool(run.get("complete", False))
    args.trec_eval_averaging = args.trec_eval_averaging or bool(
        run.get("trec_eval_averaging", False)
    )
    return run


def _check_input(args: argparse.Namespace, data: Any) -> bool:
    """Whether the input is TREC files; a UsageError for DATA and TREC files mixed, or
    neither."""
    trec = bool(args.qrels or args.run)
    if trec:
        if not (args.qrels and args.run):
            raise UsageError("TREC files come in pairs: give both --qrels QRELS and --run RUN")
        if data:
            raise UsageError("give either DATA or --qrels/--run, not both")
    elif not data:
        raise UsageError(
            "give the data file: ctxeval evaluate DATA -m METRIC (or data= in the run file), "
            "or TREC files: --qrels QRELS --run RUN"
        )
    elif args.complete:
        raise UsageError("--complete goes with --qrels/--run (it adds the qrels' queries)")
    _check_trace_options(args, trec)
    return trec


def _specs(args: argparse.Namespace, run: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The metrics of ``-m`` and of the run file's ``[[metrics]]``, as (name, options)."""
    specs = [parse_metric(m) for m in (args.metric or [])]
    for entry in run.get("metrics", []):
        if not isinstance(entry, dict) or "name" not in entry:
            raise UsageError(f"{args.config}: each [[metrics]] table needs a name")
        entry = dict(entry)
        specs.append((entry.pop("name"), entry))
    if not specs:
        raise UsageError("give at least one metric: -m NAME (see: ctxeval metrics)")
    return specs


def _samples(args: argparse.Namespace, data: Any, *, trec: bool) -> tuple[Any, Path]:
    """The samples to score, and the file they are read from (the TREC run's)."""
    if trec:
        from ctxeval._data.trec_columns import open_trec  # (columns: see _run.columnar)

        return open_trec(args.qrels, args.run, complete=args.complete), Path(args.run)
    path = Path(str(data))
    # (with --lenient, the run makes each bad row's error rows: the stream stays strict)
    if args.from_format:
        return _traces(args, path), path
    from ctxeval._data.loading import load_samples

    return load_samples(path, column_map=_column_map(args)), path


def _inputs(args: argparse.Namespace) -> _Inputs:
    """Everything the run scores, read from the command line and the run file, each option
    checked before anything is read or written."""
    run = _read_run_file(args)
    data = args.data or run.get("data")
    trec = _check_input(args, data)
    specs = _specs(args, run)
    out = args.out or run.get("out")
    if args.resume and not out:
        raise UsageError("--resume needs --out DIR (the folder of the run to resume)")
    llm, provider = _llm(args, run)
    runner = _runner(args, run)
    if not args.quiet:  # long waits (a Batch API batch) report under ctxeval.progress
        import logging

        logging.getLogger("ctxeval.progress").setLevel(logging.INFO)
    metrics = build_metrics(_with_judges(specs, args, run))
    if args.trec_eval_averaging:
        metrics = [_with_trec_eval_averaging(m) for m in metrics]
    metrics = with_units(metrics, args, run)
    labels = _labels(args.labels or run.get("labels"), metrics)
    samples, path = _samples(args, data, trec=trec)
    where = f"{args.qrels} and {args.run}" if trec else str(path)
    return _Inputs(run, trec, path, samples, metrics, llm, provider, runner, labels, out, where)


def _cache(args: argparse.Namespace, job: _Inputs) -> Any:
    """The LLM answer cache (None when no metric calls out, or with ``--no-cache``)."""
    calls_out = _needs_llm(job.metrics) or _embeds_by_endpoint(job.metrics)
    if not calls_out or args.no_cache or job.run.get("no_cache", False):
        return None
    from ctxeval._calls.cache import SQLiteCache

    home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return SQLiteCache(home / "ctxeval" / "llm.sqlite")


def _claim(args: argparse.Namespace, job: _Inputs) -> Any:
    """The claim on ``--out`` (one run per folder), taken before anything in it is read or
    written, and the folder checked; None without ``--out``."""
    if not job.out:
        return None
    from ctxeval._output.folder import UnwritableFolderError, claim_folder

    out = Path(job.out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out}: a file is there, not a folder; choose another --out")
    try:
        claim = claim_folder(job.out)
    except UnwritableFolderError as exc:
        _unwritable(exc, out, begun=False)
    try:
        check_out(out, job.metrics, resume=args.resume, overwrite=args.overwrite)
    except BaseException:
        claim.release()
        raise
    return claim


def _open_outputs(args: argparse.Namespace, job: _Inputs, formats: list[str]) -> _Outputs:
    """The run's outputs begun (``--out``'s folder claimed first): every output's error is
    raised before a row is scored."""
    from ctxeval._output.folder import RunFolder, UnwritableFolderError

    claim = _claim(args, job)
    outputs = _Outputs(totals=None)
    try:
        outputs.qrels = _begin_qrels(args, job.where)
        names = [m.name for m in job.metrics]
        outputs.totals = _totals(names, job.labels, job.metrics)
        if job.out:
            try:
                outputs.folder = RunFolder(
                    job.out,
                    names,
                    title=f"ctxeval: {job.path.name}",
                    formats=formats,
                    totals=outputs.totals,
                    lookup=_lookup(args, job.path, job.samples, trec=job.trec),
                    lock=claim,
                )
            except UnwritableFolderError as exc:  # its files cannot be begun (a link...)
                _unwritable(exc, Path(job.out), begun=False)
    except BaseException:
        if claim is not None and outputs.folder is None:
            claim.release()  # (the folder, once made, releases it when it ends)
        if outputs.qrels is not None:
            outputs.qrels.abort()
        raise
    outputs.per_query = _per_query(args, job.out)
    return outputs


def _score(args: argparse.Namespace, job: _Inputs, settings: Any, outputs: _Outputs) -> Any:
    """Run the metrics over the samples with the progress view, every row to ``outputs``;
    why the run stopped early (its cost limit), or None."""
    from ctxeval._output.folder import UnwritableFolderError
    from ctxeval.cli.progress import run_with_progress

    try:
        total: int | None
        if job.trec:
            total = len(job.samples)
        else:
            counted = job.path.exists() and not args.from_format
            total = count_rows(job.path) if counted else None
        stopped = run_with_progress(
            job.samples,
            job.metrics,
            llm=job.llm,
            settings=settings,
            quiet=args.quiet,
            total=None if total is None else total * len(job.metrics),
            consume=outputs.consume(),
            runner=job.runner,
        )
        if not outputs.totals.rows_added and stopped is None:
            raise UsageError(
                f"{job.where}: no samples to score"
                + (" (no query is in both files)" if job.trec else " (the input is empty)")
            )
    except UnwritableFolderError as exc:  # (a full disk, say; not an error reading the input)
        assert outputs.folder is not None
        outputs.abort()
        _unwritable(exc, outputs.folder.path)
    except BaseException:
        outputs.abort()
        raise
    return stopped


def _finish(
    args: argparse.Namespace, job: _Inputs, outputs: _Outputs, gates: list[Any]
) -> tuple[dict[str, Any], list[Any], dict[str, Any]]:
    """The run's summary (with its gates' verdicts), the verdicts, and the files of the run
    folder once finished (empty without ``--out``)."""
    from ctxeval._output.folder import UnwritableFolderError
    from ctxeval._output.gates import check_gates
    from ctxeval._output.summary import summary_dict

    summary = summary_dict(outputs.totals, extra={"data": str(job.path), "ctxeval": __version__})
    verdicts = check_gates(gates, outputs.totals.summary())
    if verdicts:
        summary["gates"] = [v.to_dict() for v in verdicts]
    folder = outputs.folder
    if folder is None:
        return summary, verdicts, {}
    try:
        paths: dict[str, Any] = folder.finish(summary)
        if args.shared or job.run.get("shared", False):
            _share(folder.path, paths.values())
    except UnwritableFolderError as exc:
        folder.abort()
        _unwritable(exc, folder.path)
    except BaseException:
        folder.abort()
        raise
    return summary, verdicts, paths


def _print_outcome(
    args: argparse.Namespace,
    job: _Inputs,
    outputs: _Outputs,
    summary: dict[str, Any],
    paths: dict[str, Any],
    *,
    formats: list[str],
    qrels_written: bool,
) -> None:
    """The summary, the judge's trust, the errors, the files written (not with ``--quiet``)."""
    from ctxeval.cli.per_query import averaging_hint

    stdout = console()
    print_summary(summary, stdout)
    print_trust(summary, stdout)
    print_errors(outputs.totals.error_groups(), stdout)
    if outputs.folder is not None:
        for kind in ("results", "summary", "report", *formats):
            stdout.print(f"{kind + ':':<10}{paths[kind]}", soft_wrap=True)
    else:
        stdout.print(
            ("only the per-query file was saved" if outputs.per_query is not None else "nothing "
             "was saved") + ": add --out DIR to keep the rows, summary.json and the report"
        )  # fmt: skip
    if outputs.qrels is not None and qrels_written:
        stdout.print(f"{'qrels:':<10}{outputs.qrels.path}", soft_wrap=True)
    _print_per_query(outputs.per_query, [m.name for m in job.metrics], stdout)
    hint = averaging_hint(summary, args.trec_eval_averaging) if job.trec else None
    if hint:
        stdout.print(hint, highlight=False)


def cmd_evaluate(args: argparse.Namespace) -> int:
    """``ctxeval evaluate``: the run's inputs, checked; its outputs begun; the run (through
    ``ctxeval.stream``, as ``evaluate()``); its outputs finished; what the terminal shows."""
    job = _inputs(args)
    if args.dry_run:
        provider = job.provider or llm_provider(
            args.provider or job.run.get("provider") or DEFAULT_PROVIDER
        )
        return _dry_run(job.samples, job.metrics, job.llm, provider, console())
    if _needs_llm(job.metrics) and job.llm is None:
        raise UsageError("these metrics need an LLM: add --model (e.g. --model openai/gpt-4o-mini)")
    gates = _gates(args, job.run, job.metrics)
    formats = _formats(args.format or [], job.out)
    settings = _settings(args, job.run, out=job.out, cache=_cache(args, job))
    outputs = _open_outputs(args, job, formats)
    stopped = _score(args, job, settings, outputs)
    qrels_written = _finish_qrels(outputs.qrels)
    if outputs.per_query is not None:
        outputs.per_query.close()
    summary, verdicts, paths = _finish(args, job, outputs, gates)
    if not args.quiet:
        _print_outcome(
            args, job, outputs, summary, paths, formats=formats, qrels_written=qrels_written
        )
    for verdict in verdicts:  # shown even with --quiet: they decide the exit code
        mark = "[green]pass[/]" if verdict.passed else "[bold red]FAIL[/]"
        console(stderr=not verdict.passed).print(f"gate {mark} {verdict.describe()}")
    if stopped is not None:
        fail(f"{stopped}; continue with --resume and a higher --max-cost", EXIT_ERRORS)
    if not outputs.totals.ok or not qrels_written:
        return EXIT_ERRORS
    return EXIT_GATES if any(not v.passed for v in verdicts) else EXIT_OK
