"""The optional hooks of a plugin, one runtime-checkable protocol each.

A plugin needs only what its kind's protocol (:mod:`ctxeval._plugins.protocols`) asks for; the
hooks here are extra attributes or methods that ctxeval uses when a plugin has them. Each
protocol's docstring says who calls the hook and when. ctxeval reads a hook only through its
protocol (``isinstance(part, EstimatesMatcherCalls)``), or through the typed helpers at the end
of this module, never by a bare ``getattr``.

Plugin authors import them from :mod:`ctxeval.plugin`; a plugin does not have to inherit from
them (they are protocols), but may, to have a type checker check its signature.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import (
    TYPE_CHECKING,
    Any,
    Final,
    Generic,
    Protocol,
    TypeGuard,
    TypeVar,
    runtime_checkable,
)

from ctxeval._errors import PluginError

if TYPE_CHECKING:
    from ctxeval._data.ranked import RankedColumns
    from ctxeval._data.sample import Sample
    from ctxeval._plugins.base import Dependency
    from ctxeval._plugins.protocols import RunContext
    from ctxeval._results.results import MetricResult, Usage

__all__ = [
    "AsyncCloseable",
    "ChecksReady",
    "DeclaresDependencies",
    "DescribesLLM",
    "EstimatesAttributorCalls",
    "EstimatesCallsByJudge",
    "EstimatesCallsByModel",
    "EstimatesExtractorCalls",
    "EstimatesMatcherCalls",
    "EstimatesMetricCalls",
    "Fingerprinted",
    "HasEmbedder",
    "HasOwnLLM",
    "HasPipeline",
    "HasRegistryName",
    "ItemwiseMatcher",
    "MatchesBothSides",
    "MembershipMatcher",
    "MetersUsage",
    "NamedByDefault",
    "NeedsLLM",
    "PipelineView",
    "PricedLLM",
    "RepeatedJudgement",
    "ReportsProvenance",
    "ScoresColumn",
    "ScoresColumnsTogether",
    "ScoresRankedColumns",
    "ScoresRankedEdges",
    "SharesCalls",
    "SpendsResource",
    "TrecEvalAveraging",
]
"""The hook protocols: the plugin API's (:mod:`ctxeval.plugin.hooks` hands on this list).
The typed readers at the end of this module are core's own, imported by name."""


# --- what a plugin class declares --------------------------------------------------------------


@runtime_checkable
class HasRegistryName(Protocol):
    """A plugin class's canonical name. The registry reads it when one target is registered
    under several names (:meth:`ctxeval.Registry.plugins`): the name equal to
    ``registry_name`` is canonical, the others are its aliases."""

    registry_name: str


@runtime_checkable
class NamedByDefault(Protocol):
    """A metric's row name when no ``name`` option is given (its registry name with the
    parameters that name it: ``id_ndcg_at_10``). Two metrics of one class with the same
    default name are the same metric, whatever their rows are called: a name of a metric
    given later (a gate, a labels file, ``assert_metric``) finds the rows of a metric renamed
    with ``name=`` through it (:mod:`ctxeval._plugins.metric_names`).
    :class:`~ctxeval.plugin.BaseMetric` has it."""

    def default_name(self) -> str: ...


@runtime_checkable
class DeclaresDependencies(Protocol):
    """A plugin class's optional modules (:class:`~ctxeval.plugin.Dependency`). The registry
    reads them before building the plugin (:meth:`ctxeval.Registry.load`) and when listing
    plugins: a missing one makes the plugin *unavailable*, with its install command."""

    dependencies: Sequence[Dependency]


# --- LLM use ----------------------------------------------------------------------------------


@runtime_checkable
class NeedsLLM(Protocol):
    """A part or metric that calls an LLM says so with ``needs_llm = True``. The pipeline and
    panels read it (with :class:`HasOwnLLM`) to tell whether the run's ``llm=`` is needed; the
    command line, to ask for ``--model``; the journal, to fingerprint the run's judge."""

    needs_llm: bool


@runtime_checkable
class HasOwnLLM(Protocol):
    """A part with an LLM of its own (``llm``, None for the run's). Read with
    :class:`NeedsLLM` (does the part use the run's LLM?), by the dry-run estimate (which
    model answers its requests) and by the journal's fingerprint."""

    llm: Any


@runtime_checkable
class DescribesLLM(Protocol):
    """An ``llm=`` value (what :meth:`~ctxeval.plugin.LLMProvider.configure` returns) that
    names its ``model``. Read for a judge's name in panels and dry-run prices, and by the
    journal's fingerprint."""

    model: str


@runtime_checkable
class PricedLLM(Protocol):
    """An ``llm=`` value that knows the price of its tokens (``ctxeval_llm.LLMConfig``: the
    price the user gave, else its provider's). Read by the cost-cap check before a run and by
    the dry-run estimate."""

    def price(self) -> Any: ...


@runtime_checkable
class SpendsResource(Protocol):
    """An ``llm=`` value that names the resource its requests spend (``model@endpoint``, the
    key of the run's limits). The journal's fingerprint prefers it to the model alone."""

    resource: str


# --- evidence and reproducibility -------------------------------------------------------------


@runtime_checkable
class Fingerprinted(Protocol):
    """A part or metric whose rows depend on more than its options (an LLM part: its prompt
    versions). The journal adds ``fingerprint_data`` to the run's fingerprint when a run
    starts, so a resumed run recomputes rows when it changes; a panel adds its judges'."""

    @property
    def fingerprint_data(self) -> str: ...


@runtime_checkable
class ReportsProvenance(Protocol):
    """A part that judges says who judged a row. A pipeline metric calls ``provenance(ctx)``
    on each part after scoring a sample that made requests, and puts the reports (one, or a
    list from a panel) in the row's ``details["provenance"]``."""

    def provenance(self, ctx: RunContext) -> Mapping[str, Any] | Sequence[Any] | None: ...


@runtime_checkable
class MetersUsage(Protocol):
    """A run context that knows what its row has spent so far (``usage``; None when
    nothing). A pipeline metric reads it after scoring: no usage, nobody judged the row."""

    @property
    def usage(self) -> Usage | None: ...


@runtime_checkable
class RepeatedJudgement(Protocol):
    """The run context a :class:`~ctxeval.plugin.Panel` hands each judgement
    (:class:`~ctxeval.plugin.JudgeContext`): which repeat it is (0-based) and the temperature
    to ask for (None: the judge's own). An LLM judge reads them so that repeats are
    distinct requests (not one cached answer)."""

    @property
    def repeat(self) -> int: ...

    @property
    def temperature(self) -> float | None: ...


# --- the dry-run estimate ---------------------------------------------------------------------


@runtime_checkable
class EstimatesExtractorCalls(Protocol):
    """An extractor that calls an LLM says what it would send: the prompt size (characters)
    of each request extracting ``texts`` would make. Called by a pipeline metric's
    :meth:`~ctxeval.plugin.PipelineMetric.estimate_calls`, for ``ctxeval evaluate --dry-run``."""

    def estimate_calls(self, texts: Sequence[str]) -> list[int]: ...


@runtime_checkable
class EstimatesMatcherCalls(Protocol):
    """A matcher that calls an LLM says what it would send for one sample (see
    :class:`EstimatesExtractorCalls`)."""

    def estimate_calls(
        self, items: Sequence[str], candidates: Sequence[str], sample: Sample | None = None
    ) -> list[int]: ...


@runtime_checkable
class EstimatesAttributorCalls(Protocol):
    """An attributor that calls an LLM says what it would send for one sample (see
    :class:`EstimatesExtractorCalls`)."""

    def estimate_calls(
        self, text: str, candidates: Sequence[str], sample: Sample | None = None
    ) -> list[int]: ...


@runtime_checkable
class EstimatesCallsByJudge(Protocol):
    """A matcher with several judges (a :class:`~ctxeval.plugin.Panel`) says what each judge
    would send: ``(model, sizes)`` per judge, model None for the run's. A pipeline metric's
    ``estimate_calls_by_model`` calls it, so that a dry run prices each judge at its price."""

    def estimate_calls_by_judge(
        self, items: Sequence[str], candidates: Sequence[str], sample: Sample | None = None
    ) -> list[tuple[str | None, list[int]]]: ...


@runtime_checkable
class EstimatesMetricCalls(Protocol):
    """A metric that calls an LLM says what scoring ``sample`` would send (prompt sizes in
    characters). ``ctxeval evaluate --dry-run`` calls it for each sample to estimate the
    run's requests and cost."""

    def estimate_calls(self, sample: Sample) -> list[int]: ...


@runtime_checkable
class EstimatesCallsByModel(Protocol):
    """:class:`EstimatesMetricCalls` by the model that would answer (None: the run's
    ``llm=``). The dry run prefers it, to price each judge of a jury at its own price."""

    def estimate_calls_by_model(self, sample: Sample) -> dict[str | None, list[int]]: ...


@runtime_checkable
class SharesCalls(Protocol):
    """A metric whose LLM requests other metrics of a run send alike (several measures of one
    judgement: the ``context_nugget_recall`` variants, ``claim_recall`` and
    ``claim_context_precision``): metrics with equal ``shared_calls_key()`` send them once
    (the run shares the answers), so ``ctxeval evaluate --dry-run`` counts them once, under
    the first such metric of the run."""

    def shared_calls_key(self) -> Any: ...


# --- matchers on the fast path ----------------------------------------------------------------


@runtime_checkable
class MembershipMatcher(Protocol):
    """A deterministic matcher that says ``membership = True``: an item is matched exactly
    when it is among the candidates (the ID matcher). The fast path then scores a batch with
    set lookups instead of calling ``match_batch``."""

    membership: bool


@runtime_checkable
class ItemwiseMatcher(Protocol):
    """A deterministic matcher that says ``itemwise = True``: an item's verdict depends on that
    item and the candidates only. The fast path then judges each distinct pair once for a run
    where several metrics match the same sides."""

    itemwise: bool


@runtime_checkable
class MatchesBothSides(Protocol):
    """A deterministic matcher that judges both sides in one pass: for each ``(reference
    items, retrieved items)`` pair, the reference flags and the retrieved flags (what
    ``match_batch`` gives each way). ``both_sides_key()`` says what decides the flags, so
    that the fast path matches a run's precision and recall over the same sides once."""

    def both_sides_key(self) -> Any: ...

    def match_both_batch(
        self, pairs: Sequence[tuple[Sequence[str], Sequence[str]]]
    ) -> list[tuple[list[bool], list[bool]]]: ...


# --- metrics ------------------------------------------------------------------------------------


class PipelineView(Protocol):
    """What is read of a metric's :class:`~ctxeval.plugin.Pipeline` through
    :class:`HasPipeline`: its parts and its formula."""

    @property
    def parts(self) -> Sequence[Any]: ...

    @property
    def formula(self) -> Any: ...


@runtime_checkable
class HasPipeline(Protocol):
    """A metric built from parts exposes its :class:`~ctxeval.plugin.Pipeline`
    (``pipeline``). Read for its formula (people's labels are scored through it) and its
    parts (the journal's fingerprint)."""

    @property
    def pipeline(self) -> PipelineView: ...


@runtime_checkable
class HasEmbedder(Protocol):
    """A matcher that compares through an embedder (``matcher=embedding``). The command line
    reads it (the vectors of an endpoint are cached as LLM answers are), and a metric's rows
    name it in their settings."""

    @property
    def embedder(self) -> Any: ...


@runtime_checkable
class ScoresColumn(Protocol):
    """A deterministic metric that scores a chunk of samples as a column of numbers, for
    the fast path of a run whose metrics are all deterministic (a built-in pipeline metric
    does this through its judging; this is the hook for any other metric).

    ``score_column(samples)`` gives, per sample in order, the score of its ``ok`` row as a
    ``float`` in [0, 1] (no reason, no usage; its details are ``column_details(sample)``,
    computed only when someone reads them) or the sample's whole row (any other status, or
    an ``ok`` row with a reason). The fast path keeps the floats as a column and builds no
    row object for them until one is read. The rows must be those ``score`` gives (status,
    score to the last bit, reason, details): ctxeval's property tests check its own metrics
    so. A ``score_column`` that fails, or gives a different number of values, is replaced
    for that chunk by ``score_batch`` or ``score``."""

    def score_column(self, samples: Sequence[Sample]) -> Sequence[Any]: ...

    def column_details(self, sample: Sample) -> Mapping[str, Any]: ...


@runtime_checkable
class ScoresColumnsTogether(ScoresColumn, Protocol):
    """A :class:`ScoresColumn` metric that can score the columns of several metrics in one
    pass over the samples (several measures of the same judgement: the ``search_*``
    metrics find where each relevant ID was first returned once for all of them).

    The metrics of a run with equal ``column_group()`` (and equal ``requires``) are scored
    by one call ``score_columns(metrics, samples)`` on the first of them: per metric, in
    the order given, what its own ``score_column(samples)`` would give. A call that fails
    falls back to each metric's ``score_batch``."""

    def column_group(self) -> Any: ...

    def score_columns(
        self, metrics: Sequence[Any], samples: Sequence[Sample]
    ) -> Sequence[Sequence[Any]]: ...


@runtime_checkable
class ScoresRankedColumns(Protocol):
    """A deterministic ranked measure that scores a chunk of queries from their columns
    (:class:`~ctxeval._data.ranked.RankedColumns`: per query, the grade of each
    retrieved document in rank order, and the judged grades), without a sample per query:
    what the command line's ``--qrels``/``--run`` source gives. The ID metrics of the ranked
    measures have it (through :class:`~ctxeval.plugin.DeterministicPipelineMetric`).

    A run whose metrics all say ``takes_ranked_columns()`` (checked once, when it starts),
    over a source that gives ranked columns, calls ``score_ranked_columns(columns)`` per
    chunk: per query, the score of its plain ``ok`` row (a float in [0, 1]: no reason, no
    usage; its details ``ranked_details(sample)``, computed only when someone reads them,
    ``ranked_details_batch(samples, memo)`` for many) or NaN, where the run builds the
    query's sample and scores it as any sample. The rows must be those ``score`` gives, to
    the last bit (ctxeval's property tests check its own metrics so); a call that fails
    sends the chunk through the sample path."""

    def takes_ranked_columns(self) -> bool: ...

    def score_ranked_columns(self, columns: RankedColumns) -> Sequence[float]: ...

    def ranked_details(self, sample: Sample) -> Mapping[str, Any]: ...

    def ranked_details_batch(
        self, samples: Sequence[Sample], memo: dict[Any, Any] | None
    ) -> Sequence[Mapping[str, Any]]: ...


@runtime_checkable
class ScoresRankedEdges(Protocol):
    """A :class:`ScoresRankedColumns` metric that also gives the rows of the queries its
    ``score_ranked_columns`` leaves (NaN: nothing retrieved, nothing relevant) without a
    sample per query: ``ranked_edge_rows(columns, positions)`` gives, by position in the
    chunk, the row ``score`` gives that query's sample (unlabelled: the run labels it), for
    the positions it can; the run builds the samples of the others (and of every position,
    when the call fails or gives None) and scores them as any sample. The rows must be
    those ``score`` gives, byte for byte (:class:`~ctxeval.plugin.DeterministicPipelineMetric`
    has it: one row per class of equal queries, when its rows of such queries read nothing
    else of the sample)."""

    def ranked_edge_rows(
        self, columns: RankedColumns, positions: Sequence[int]
    ) -> Mapping[int, MetricResult] | None: ...


def ranked_column_scorer(metric: object) -> ScoresRankedColumns | None:
    """``metric`` when it scores ranked columns (:class:`ScoresRankedColumns`) and says it
    takes them, else None."""
    if isinstance(metric, ScoresRankedColumns) and metric.takes_ranked_columns():
        return metric
    return None


@runtime_checkable
class TrecEvalAveraging(Protocol):
    """A ranked metric with trec_eval's averaging as an option (``trec_eval_averaging``: a
    query with nothing retrieved scores 0). The command line's ``--trec-eval`` sets it on the
    metrics that have it."""

    trec_eval_averaging: bool


# --- transports and run-wide objects ----------------------------------------------------------


@runtime_checkable
class ChecksReady(Protocol):
    """A :class:`~ctxeval.plugin.ChatTransport` that checks, once before its first request,
    that it can work (credentials, the endpoint reachable); it raises a
    :class:`~ctxeval.plugin.CallError` when not. The LLM plugin awaits ``ready(ctx)``
    before the first request of a run."""

    async def ready(self, ctx: RunContext) -> None: ...


@runtime_checkable
class AsyncCloseable(Protocol):
    """A run-wide object (:meth:`~ctxeval.plugin.RunContext.shared`) that holds resources.
    The scheduler awaits ``aclose()`` once when the run ends."""

    async def aclose(self) -> None: ...


# --- typed readers ------------------------------------------------------------------------------


def own_llm(part: object) -> Any:
    """``part``'s own ``llm`` (:class:`HasOwnLLM`), else None."""
    return part.llm if isinstance(part, HasOwnLLM) else None


def needs_llm(part: object) -> bool:
    """Whether ``part`` (a metric, part or judge) calls an LLM (:class:`NeedsLLM`)."""
    return isinstance(part, NeedsLLM) and bool(part.needs_llm)


def llm_model(llm: object) -> str | None:
    """The model an ``llm=`` value names (:class:`DescribesLLM`), else None."""
    return llm.model if isinstance(llm, DescribesLLM) and isinstance(llm.model, str) else None


def pipeline_parts(metric: object) -> Sequence[Any] | None:
    """The parts of ``metric``'s pipeline (:class:`HasPipeline`), or None when it has none."""
    return metric.pipeline.parts if isinstance(metric, HasPipeline) else None


def needs_run_llm(part: object) -> bool:
    """Whether ``part`` calls an LLM (:class:`NeedsLLM`) and has none of its own: it uses the
    run's ``llm=``."""
    return isinstance(part, NeedsLLM) and bool(part.needs_llm) and own_llm(part) is None


def fingerprint_of(part: object) -> str:
    """``part``'s ``fingerprint_data`` (:class:`Fingerprinted`), else ``""``."""
    return (part.fingerprint_data or "") if isinstance(part, Fingerprinted) else ""


def is_membership(matcher: object) -> bool:
    """Whether ``matcher`` says ``membership = True`` (:class:`MembershipMatcher`)."""
    return isinstance(matcher, MembershipMatcher) and matcher.membership is True


def is_itemwise(matcher: object) -> bool:
    """Whether ``matcher`` says ``itemwise = True`` (:class:`ItemwiseMatcher`)."""
    return isinstance(matcher, ItemwiseMatcher) and matcher.itemwise is True


def embedder_of(matcher: object) -> Any:
    """``matcher``'s embedder (:class:`HasEmbedder`), else None."""
    return matcher.embedder if isinstance(matcher, HasEmbedder) else None


P = TypeVar("P")


class _PerClass(Generic[P]):
    """The check ``isinstance(obj, protocol)`` made once per class (the first object of a
    class decides for its class): for a hook read on every row, where a runtime-checkable
    protocol's ``isinstance`` costs too much to repeat."""

    __slots__ = ("_known", "protocol")

    def __init__(self, protocol: Any) -> None:
        self.protocol = protocol
        self._known: dict[type, bool] = {}

    def __call__(self, obj: object) -> TypeGuard[P]:
        known = self._known.get(type(obj))
        if known is None:
            known = self._known[type(obj)] = isinstance(obj, self.protocol)
        return known


_METERS_USAGE: Final = _PerClass[MetersUsage](MetersUsage)
_REPORTS_PROVENANCE: Final = _PerClass[ReportsProvenance](ReportsProvenance)


def usage_of(ctx: object) -> Usage | None:
    """What a row's context has metered (:class:`MetersUsage`), else None: nobody judged."""
    return ctx.usage if _METERS_USAGE(ctx) else None


def reports_provenance(part: object) -> TypeGuard[ReportsProvenance]:
    """Whether ``part`` reports who judged a row (:class:`ReportsProvenance`)."""
    return _REPORTS_PROVENANCE(part)


# --- hooks checked when a plugin is built -------------------------------------------------------

CALLED_HOOKS: Final[Mapping[str, tuple[type, ...]]] = {
    "ctxeval.metrics": (
        NamedByDefault,
        Fingerprinted,
        ReportsProvenance,
        EstimatesMetricCalls,
        EstimatesCallsByModel,
        SharesCalls,
        ScoresColumn,
        ScoresColumnsTogether,
        ScoresRankedColumns,
        ScoresRankedEdges,
    ),
    "ctxeval.matchers": (
        Fingerprinted,
        ReportsProvenance,
        EstimatesMatcherCalls,
        EstimatesCallsByJudge,
        MatchesBothSides,
    ),
    "ctxeval.extractors": (Fingerprinted, ReportsProvenance, EstimatesExtractorCalls),
}
"""The method hooks ctxeval calls on the plugins of a group (by entry-point group): a plugin
with a method of a hook's name has its signature checked when it is built
(:func:`check_hook_signatures`)."""


def _methods(protocol: type) -> list[tuple[str, inspect.Signature]]:
    """The methods a hook protocol declares (not its properties), with their signatures."""
    return [
        (name, inspect.signature(value))
        for name, value in vars(protocol).items()
        if inspect.isfunction(value) and not name.startswith("_")
    ]


def _takes(method: Callable[..., Any], declared: inspect.Signature) -> bool:
    """Whether the bound ``method`` can be called as ctxeval calls the hook: with the
    arguments ``declared`` requires (``self`` aside), by position."""
    try:
        signature = inspect.signature(method)
    except (TypeError, ValueError):
        return True  # (a builtin or a C callable: nothing to check)
    required = [
        p
        for p in list(declared.parameters.values())[1:]
        if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    try:
        signature.bind(*([None] * len(required)))
    except TypeError:
        return False
    return True


def check_hook_signatures(plugin: object, group: str, what: str) -> None:
    """Raise :class:`~ctxeval.PluginError` when ``plugin`` of ``group`` (``what``: the
    plugin, as a message names it) has a method named as one of the group's hooks
    (:data:`CALLED_HOOKS`) that cannot be called as ctxeval calls it: when it is built, not
    mid-run."""
    kind = type(plugin)
    for protocol in CALLED_HOOKS.get(group, ()):
        for name, declared in _methods(protocol):
            if not callable(inspect.getattr_static(kind, name, None)):
                continue
            method = getattr(plugin, name)
            if not _takes(method, declared):
                shown = str(declared).replace("(self, ", "(", 1).replace("(self)", "()", 1)
                raise PluginError(
                    f"{what}: its hook {name}() does not take what ctxeval passes: the hook "
                    f"is {protocol.__name__}.{name}{shown} (see ctxeval.plugin.hooks."
                    f"{protocol.__name__}); {kind.__qualname__}.{name} is "
                    f"{name}{inspect.signature(method)}"
                )
