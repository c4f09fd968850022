"""The kinds of plugin, as protocols.

Every metric of the seeds is one pipeline (:mod:`ctxeval._pipeline.parts`): reference *units*
(extracted from a text, or given as reference contexts or IDs) are *matched* against the
retrieved items, and the verdicts go into a *formula* (:mod:`ctxeval.policy`).

* An :class:`Extractor` turns many texts into units at once (batch-first, so that spaCy can
  run ``nlp.pipe`` and an LLM can share a prompt).
* A :class:`Matcher` decides, for each item, whether it is supported by (or relevant to) a
  list of candidates, returning one :class:`Verdict` per item. A :class:`DeterministicMatcher`
  (no I/O) also matches synchronously, and in bulk for many samples per call.
* An :class:`Attributor` does two steps in one call: it splits a text into units and judges
  each against the candidates (an LLM's split-and-attribute for context recall).
* A :class:`Metric` declares the sample fields it requires and scores one sample through a
  :class:`RunContext`, which gives it the scheduler's services. A :class:`DeterministicMetric`
  (no I/O) also scores synchronously, and a :class:`BatchMetric` many samples per call.
* An :class:`LLMProvider` turns a model name and endpoint into the run's ``llm=`` and prices
  requests (the command line reaches LLMs through it).
* A :class:`ChatTransport` sends one chat-completion request and returns a
  :class:`Completion` (an OpenAI-compatible endpoint over httpx, litellm, a company gateway).
* A :class:`Writer` writes one file of a run folder (``results.csv``, ``summary.md``...).
* A :class:`TraceReader` turns an application's traces (OpenTelemetry spans, MLflow traces...)
  into sample rows (``ctxeval.load_traces``).

A plugin is any object with these attributes; it does not have to inherit from anything.
Everything a plugin author needs is importable from :mod:`ctxeval.plugin`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

import attrs

if TYPE_CHECKING:
    from ctxeval._calls.limits import Limits
    from ctxeval._data.sample import Sample
    from ctxeval._results.results import MetricResult, Usage

__all__ = [
    "Attributor",
    "BatchMetric",
    "ChatTransport",
    "Completion",
    "DeterministicMatcher",
    "DeterministicMetric",
    "Extractor",
    "LLMProvider",
    "Matcher",
    "Metric",
    "PluginLookup",
    "Price",
    "PricedLLMProvider",
    "RowFile",
    "RunContext",
    "StreamingWriter",
    "SummaryWriter",
    "TraceReader",
    "Unit",
    "Verdict",
    "Votes",
    "Writer",
    "majority",
]

T = TypeVar("T")


@attrs.frozen(slots=True)
class Unit:
    """One thing extracted from a text: an entity, a sentence or a statement.

    Attributes:
        text: the unit as it appears (or as the extractor phrased it).
        label: its kind, e.g. ``PERSON`` or ``DATE`` for an entity; None when not typed.
        key: the normalised form units are compared by (case, spacing, punctuation folded);
            defaults to ``text``.
    """

    text: str
    label: str | None = None
    key: str = attrs.field(default=attrs.Factory(lambda self: self.text, takes_self=True))


@attrs.frozen(slots=True)
class Verdict:
    """A matcher's decision for one item.

    Attributes:
        matched: whether the item is supported by / relevant to the candidates.
        score: the similarity or confidence behind the decision, in [0, 1], when there is one.
        evidence: index of the candidate that supports the item (the best one), if any.
        reason: the matcher's explanation, when it gives one (an LLM judge does).
        votes: the judgements behind the verdict when a :class:`~ctxeval.plugin.Panel`
            judged the item more than once (repeats, or a jury of judges); None otherwise.
    """

    matched: bool
    score: float | None = None
    evidence: int | None = None
    reason: str | None = None
    votes: Votes | None = None


@attrs.frozen(slots=True)
class Votes:
    """The judgements behind one verdict of a :class:`~ctxeval.plugin.Panel`.

    Attributes:
        judges: ``(judge name, verdicts)`` pairs, in the panel's order; each judge's verdicts
            are 0 or 1, one per repeat (a judge that was not asked is left out).
        escalated: the item went to the panel's last judge (the ``escalate`` rule) because
            the first ones were unsure or disagreed.
    """

    judges: tuple[tuple[str, tuple[int, ...]], ...]
    escalated: bool = False

    @property
    def unsure(self) -> bool:
        """True when some judge's repeats did not all agree."""
        return any(len(set(votes)) > 1 for _, votes in self.judges)

    @property
    def disagree(self) -> bool:
        """True when the judges' own verdicts (each judge's majority) differ."""
        return len({majority(votes) for _, votes in self.judges}) > 1

    def to_dict(self) -> dict[str, Any]:
        return {
            "judges": {name: list(votes) for name, votes in self.judges},
            "unsure": self.unsure,
            "disagree": self.disagree,
            "escalated": self.escalated,
        }


def majority(votes: Sequence[int]) -> int:
    """The verdict most of ``votes`` give; a tie goes to the first vote."""
    ones = sum(votes)
    if 2 * ones == len(votes):
        return votes[0]
    return int(2 * ones > len(votes))


class PluginLookup(Protocol):
    """Where a run resolves plugin names: what :attr:`RunContext.registry` gives a plugin
    (a :class:`ctxeval.Registry`; typed here as what a plugin may ask of it)."""

    def names(self, group: str = ...) -> list[str]:
        """Every name registered in ``group`` (an entry-point group), sorted."""
        ...

    def get_metric(self, name: str, /, **options: Any) -> Metric:
        """Build the metric registered under ``name`` with ``options``."""
        ...

    def get_extractor(self, name: str, /, **options: Any) -> Extractor:
        """Build the extractor registered under ``name`` with ``options``."""
        ...

    def get_matcher(self, name: str, /, **options: Any) -> Matcher:
        """Build the matcher registered under ``name`` with ``options``."""
        ...

    def get_llm_provider(self, name: str, /, **options: Any) -> LLMProvider:
        """Build the LLM provider registered under ``name`` with ``options``."""
        ...

    def get_writer(self, name: str, /, **options: Any) -> Writer:
        """Build the writer registered under ``name`` with ``options``."""
        ...


@runtime_checkable
class RunContext(Protocol):
    """The services a run gives to the plugins it calls (one context per metric and sample).

    A plugin never owns a semaphore or a retry loop: it passes each request to a shared
    resource to :meth:`call` and its blocking work to :meth:`run_cpu`, and the run applies its
    limits, timeouts, retries and accounting.
    """

    @property
    def registry(self) -> PluginLookup:
        """The registry this run resolves plugin names in."""
        ...

    @property
    def llm(self) -> Any:
        """The run's LLM configuration (``llm=`` of :func:`ctxeval.evaluate`), or None."""
        ...

    @property
    def cache(self) -> Any:
        """The run's cache, or None."""
        ...

    @property
    def run_folder(self) -> Path | None:
        """The folder of the run's journal, where a plugin keeps state that must survive an
        interruption (the Batch API mode keeps its batch ids there); None when the run has no
        journal (it cannot be resumed then)."""
        ...

    @property
    def sample(self) -> Sample | None:
        """The sample being scored (None outside a metric call). Parts that need more of it
        than the texts they are handed read it here (an LLM judge reads the question)."""
        ...

    async def call(
        self,
        func: Callable[[], Awaitable[T]],
        *,
        resource: str = "default",
        tokens: float = 0.0,
        timeout: float | None = None,
    ) -> T:
        """Await ``func()`` (one request) under the shared limits of ``resource``.

        Transient failures (429, 5xx, timeouts, malformed answers up to a cap) are retried with
        backoff by calling ``func`` again; fatal ones (authentication, bad request) are raised
        at once.
        """
        ...

    async def run_cpu(self, func: Callable[..., T], *args: Any) -> T:
        """Run blocking ``func(*args)`` off the event loop, under the run's CPU limit."""
        ...

    def add_usage(self, usage: Usage) -> None:
        """Count tokens, cost and cache hits against the current row (requests are counted
        by :meth:`call`)."""
        ...

    def shared(self, key: str, factory: Callable[[], T]) -> T:
        """A run-wide object (an HTTP client, a loaded model), made once by ``factory``;
        objects with ``aclose()`` are closed when the run ends."""
        ...

    def limits(self, resource: str) -> Limits:
        """The limits the run applies to ``resource`` (to size a connection pool, say)."""
        ...


@runtime_checkable
class Extractor(Protocol):
    """Turns texts into units, many texts at a time."""

    @property
    def name(self) -> str:
        """The extractor's name."""
        ...

    async def extract(self, texts: Sequence[str], ctx: RunContext) -> list[list[Unit]]:
        """Return the units of each text, one list per text, in the order of ``texts``."""
        ...


@runtime_checkable
class Matcher(Protocol):
    """Decides, for each item, whether the candidates support it."""

    @property
    def name(self) -> str:
        """The matcher's name (in messages)."""
        ...

    async def match(
        self, items: Sequence[str], candidates: Sequence[str], ctx: RunContext
    ) -> list[Verdict]:
        """Return one verdict per item, in the order of ``items``."""
        ...


@runtime_checkable
class DeterministicMatcher(Matcher, Protocol):
    """A matcher that needs no I/O: it also matches at once, and many samples per call.

    The deterministic fast path calls :meth:`match_batch` for a chunk of samples and reads
    only the flags; the evidence (:meth:`match_now`) is computed when a row's details are read.
    Both must agree: ``match_batch(pairs)[i] == [v.matched for v in match_now(*pairs[i])]``.
    """

    def match_now(self, items: Sequence[str], candidates: Sequence[str]) -> list[Verdict]:
        """:meth:`match` without a run context."""
        ...

    def match_batch(self, pairs: Sequence[tuple[Sequence[str], Sequence[str]]]) -> list[list[bool]]:
        """For each ``(items, candidates)`` pair (one per sample): one flag per item."""
        ...


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors (entry-point group ``ctxeval.embedders``), for the
    ``embedding`` matcher and any plugin that compares texts by meaning.

    Rows of the result are in the order of ``texts``, one per text, all of one dimension
    (``numpy.ndarray`` of shape ``(len(texts), dimensions)``, float32 or float64; need not
    be normalised). An embedder that calls a service makes its requests through ``ctx``
    (limits, retries, cache, usage).
    """

    @property
    def name(self) -> str:
        """The embedder's name (in messages and the matcher's evidence)."""
        ...

    async def aembed(self, texts: Sequence[str], ctx: RunContext) -> Any:
        """The vectors of ``texts``."""
        ...


@runtime_checkable
class DeterministicEmbedder(Embedder, Protocol):
    """An embedder that needs no I/O (a model on this machine): it also embeds at once,
    without a run context, so a matcher built on it is deterministic (the fast path)."""

    def embed(self, texts: Sequence[str]) -> Any:
        """:meth:`aembed` without a run context."""
        ...


@runtime_checkable
class Attributor(Protocol):
    """Splits a text into units and judges each against the candidates, in one step.

    It takes the place of an extractor and a matcher together, where one request does both
    (an LLM splitting a reference answer into statements and attributing each to the
    retrieved contexts). See :class:`ctxeval._pipeline.sources.SplitAndAttribute`.
    """

    @property
    def name(self) -> str:
        """The attributor's name."""
        ...

    async def attribute(
        self, text: str, candidates: Sequence[str], ctx: RunContext
    ) -> list[tuple[Unit, Verdict]]:
        """The units of ``text``, each with its verdict against ``candidates``, in order."""
        ...


@runtime_checkable
class LLMProvider(Protocol):
    """Reaches LLMs: turns a model name and endpoint into the run's ``llm=`` value, and prices
    requests. Registered in the ``ctxeval.llms`` entry-point group; the command line's
    ``--model``, ``--api-base`` and ``--provider`` and its dry-run estimate go through it.
    A provider that also has ``price(model)`` (:class:`PricedLLMProvider`, optional) prices
    the run's live requests and lets a cost cap be enforced."""

    @property
    def name(self) -> str:
        """The provider's name."""
        ...

    def configure(self, *, model: str, api_base: str | None = None, **settings: Any) -> Any:
        """The ``llm=`` value for ``model`` at ``api_base`` (``settings`` from a run file's
        ``[llm]`` table and the command line, e.g. ``timeout``). Raises ``TypeError`` or
        ``ValueError`` for a setting it does not take."""
        ...

    def estimate_cost(self, model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
        """The price in USD of one request of this size, or None when it is not known."""
        ...


def _price_value(instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise ValueError(f"price: {attribute.name} must be a number >= 0, got {value!r}")
    if value == float("inf"):
        raise ValueError(f"price: {attribute.name} must be finite, got {value!r}")


@attrs.frozen(slots=True)
class Price:
    """What a model's tokens cost, in USD per token.

    Attributes:
        prompt: USD per prompt (input) token.
        completion: USD per completion (output) token.
    """

    prompt: float = attrs.field(validator=_price_value)
    completion: float = attrs.field(validator=_price_value)

    @classmethod
    def per_million(cls, prompt: float, completion: float) -> Price:
        """The price from USD per million prompt and per million completion tokens (as
        providers list them): ``Price.per_million(0.15, 0.60)``."""
        fields = attrs.fields(cls)
        _price_value(None, fields.prompt, prompt)
        _price_value(None, fields.completion, completion)
        return cls(prompt / 1_000_000, completion / 1_000_000)

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        """The price in USD of one request of this size."""
        return prompt_tokens * self.prompt + completion_tokens * self.completion


@runtime_checkable
class PricedLLMProvider(LLMProvider, Protocol):
    """An :class:`LLMProvider` that also knows the price of its models' tokens (an optional
    capability: a provider without :meth:`price` still works, but ``max_cost_usd`` then needs
    a price given by the user, and costs show as unknown)."""

    def price(self, model: str) -> Price | None:
        """The price of ``model``'s tokens (USD per prompt and per completion token), or None
        when it is not known. Live requests are priced with it, the cost cap
        (``max_cost_usd``) counts it, and a run with a cost cap refuses a model whose price is
        None unless the user gives one."""
        ...


@attrs.frozen(slots=True)
class Completion:
    """The answer to one chat-completion request.

    Attributes:
        content: the assistant message's text.
        prompt_tokens: tokens of the request, as the service counted them (0 when unknown).
        completion_tokens: tokens of the answer (0 when unknown).
        finish_reason: why the model stopped, as the service said (``stop``; ``length`` when
            the answer was cut at ``max_tokens``), or None when it did not say.
        model: the model that answered, as the service named it (a local server names the
            file it loaded), or None when it did not say.
    """

    content: str = attrs.field(validator=attrs.validators.instance_of(str))
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str | None = None
    model: str | None = None


@runtime_checkable
class ChatTransport(Protocol):
    """Sends one chat-completion request (in the shape of httpx's transports: a request in, a
    response out, :meth:`aclose` at the end).

    The request is an OpenAI chat-completion body (``model``, ``messages``, ``temperature``,
    ``max_tokens``, ``response_format``...). Failures are raised as :class:`ctxeval.CallError`
    subclasses (:func:`ctxeval.plugin.error_for_status` makes the right one from an HTTP
    status), with no secret in their message; the scheduler retries and times the call, so a
    transport makes one attempt and keeps no retry loop of its own.
    """

    @property
    def name(self) -> str:
        """What it talks to, for messages (e.g. ``"openai-compatible"``, ``"litellm"``)."""
        ...

    async def complete(self, ctx: RunContext, request: Mapping[str, Any]) -> Completion:
        """Send ``request`` once and return the answer."""
        ...

    async def aclose(self) -> None:
        """Release connections (called once when the run ends)."""
        ...


@runtime_checkable
class RunnerPlugin(Protocol):
    """What the registry checks a plugin of the ``ctxeval.runners`` group to be: an object
    with a ``name`` and an async ``run(plan, samples, sink)``. The runner SPI itself, with the
    plan and the sink typed, is :class:`ctxeval.runners.Runner`."""

    @property
    def name(self) -> str:
        """The runner's name (``--runner NAME``)."""
        ...

    def run(self, plan: Any, samples: Any, sink: Any) -> Awaitable[None]:
        """Score ``samples`` as ``plan`` says and hand the rows to ``sink``."""
        ...


@runtime_checkable
class Writer(Protocol):
    """Writes one file of a run folder (entry-point group ``ctxeval.writers``)."""

    @property
    def name(self) -> str:
        """The writer's name (``--format NAME``)."""
        ...

    @property
    def filename(self) -> str:
        """The file it writes in the run folder."""
        ...

    def write(
        self, evaluation: Any, summary: Mapping[str, Any], folder: Path, *, title: str
    ) -> Path:
        """Write the file for ``evaluation`` (and ``summary``, ``summary.json``'s content) in
        ``folder``; return its path."""
        ...


@runtime_checkable
class TraceReader(Protocol):
    """Reads an application's traces as samples (entry-point group ``ctxeval.traces``):
    ``ctxeval.load_traces(source, format=NAME)``, ``ctxeval evaluate FILE --from NAME``.

    :meth:`read` yields, lazily, one ``(position, row)`` per trace: ``position`` is where the
    trace is in ``source`` (the 1-based line of a file where it ends, or its row), ``row`` the
    sample as a dict of sample fields (``id``, ``user_input``, ``retrieved_contexts``...; other
    keys go to the sample's metadata), or a :class:`~ctxeval.DataError` saying why this trace
    gives no sample (its ``sample_id`` the trace id, its message naming the span): a lenient
    run makes it that sample's error rows, a strict read raises it. ``mapping`` holds the
    user's choices (``--map FIELD=PATH``), checked by the reader (a :class:`~ctxeval.ConfigError`
    for a key it does not know, raised when :meth:`read` is called).
    """

    @property
    def name(self) -> str:
        """The format's name (``--from NAME``)."""
        ...

    def read(self, source: Any, mapping: Mapping[str, str]) -> Iterator[tuple[int, Any]]:
        """The samples of the traces in ``source`` (a file, a folder, a DataFrame...)."""
        ...


@runtime_checkable
class RowFile(Protocol):
    """A file a :class:`StreamingWriter` is writing, a part of the rows at a time."""

    def add(self, rows: Sequence[Any], /) -> None:
        """Write ``rows`` (whole samples' rows, in input order; :class:`~ctxeval.MetricResult`
        objects, built when read)."""
        ...

    def finish(self) -> Path:
        """Finish the file (every row added); return its path."""
        ...

    def abort(self) -> None:
        """The run failed: remove what was written (a finished file is never half there)."""
        ...


@runtime_checkable
class StreamingWriter(Protocol):
    """A :class:`Writer` that writes its file as the rows come, in constant memory
    (``results.jsonl``, ``results.csv``, ``results.parquet``): ``ctxeval evaluate --out`` then
    never holds every row. A writer with only :meth:`Writer.write` is given, at the end of the
    run, an :class:`~ctxeval.Evaluation` read back from ``results.jsonl`` (every row in
    memory)."""

    def open(self, folder: Path, *, title: str, metrics: Sequence[str]) -> RowFile:
        """Start the file in ``folder`` for a run of ``metrics`` (row names)."""
        ...


@runtime_checkable
class SummaryWriter(Protocol):
    """A :class:`Writer` whose file holds the summary only (``summary.json``,
    ``summary.md``): it is given ``summary.json``'s content, never the rows."""

    def write_summary(self, summary: Mapping[str, Any], folder: Path, *, title: str) -> Path:
        """Write the file for ``summary`` in ``folder``; return its path."""
        ...


@runtime_checkable
class Metric(Protocol):
    """Scores one sample.

    Attributes:
        name: the name its rows carry in the results (unique within one evaluation).
        requires: the :class:`~ctxeval.Sample` fields it needs; a sample lacking one gets an
            ``error`` row without the metric being called.
    """

    @property
    def name(self) -> str:
        """The name its rows carry."""
        ...

    @property
    def requires(self) -> tuple[str, ...]:
        """The sample fields it needs."""
        ...

    async def ascore(self, sample: Sample, ctx: RunContext) -> MetricResult:
        """Score ``sample``; return a :class:`~ctxeval.MetricResult` (never raise for bad data)."""
        ...


@runtime_checkable
class DeterministicMetric(Metric, Protocol):
    """A metric that needs no I/O: it also scores synchronously, without a run context.

    The runner calls :meth:`score` directly, which saves a task per sample on large inputs.
    """

    def score(self, sample: Sample) -> MetricResult:
        """Score ``sample`` at once."""
        ...


@runtime_checkable
class BatchMetric(DeterministicMetric, Protocol):
    """A deterministic metric that also scores many samples in one call (optional, for speed).

    When every metric of a run is deterministic, the runner hands them samples in chunks and
    calls :meth:`score_batch` where a metric has it, which saves the per-call overhead on large
    inputs (the built-in ID and string metrics have it).
    """

    def score_batch(self, samples: Sequence[Sample]) -> Sequence[MetricResult]:
        """Score ``samples`` (each has every field in ``requires``): one result per sample, in
        order, each as :meth:`score` would give it.

        If it raises, or returns a different number of results, the runner scores the chunk
        again sample by sample with :meth:`score`, so that a failure stays with its sample.
        """
        ...
