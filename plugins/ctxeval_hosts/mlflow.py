"""ctxeval's metrics as MLflow GenAI scorers (extra ``mlflow``; docs/hosts/mlflow.md).

::

    import mlflow
    from ctxeval_hosts.mlflow import scorers

    mlflow.genai.evaluate(data=rows, predict_fn=app,
                          scorers=scorers(["id_based_context_recall", "context_precision"],
                                          llm=llm, max_concurrency=16))

* :func:`scorers`: one :class:`CtxevalScorer` per metric, all on ONE :class:`ctxeval.Session`
  (one budget, cache and meter across MLflow's row and scorer threads; a row is scored once).
* :func:`registrable_scorers` / :func:`ctxeval_scorer`: the same as ``@scorer``-kind scorers,
  the only kind MLflow registers for production monitoring (their code is self-contained:
  the metric, the LLM model string and the settings are literals in it).
* :class:`TraceFields`: where each sample field is read (below).

Fields: the question from ``inputs`` (the first of ``question_keys``), the response from
``outputs`` (a string, or its ``response_key``), the retrieved texts **and document IDs** from
the trace's RETRIEVER span (the last one by default; ``retriever_span="first"``, ``"all"`` or
a span name), each document's text from ``page_content`` or ``content`` and its ID from
``id_keys`` (``id``, ``metadata.doc_uri``, ``metadata.id``); the reference answer from
``expectations["expected_response"]`` (else ``expected_facts``, one per line); the reference
contexts and their IDs from ``expectations["reference_contexts"]`` and
``expectations["reference_context_ids"]``, keys of their own: the retrieved contexts are never
taken as the reference. A trace without a RETRIEVER span is that row's error.

Results: a :class:`mlflow.entities.Feedback` per metric and row: the score (or, with a
threshold, ``yes``/``no`` with ``metadata["score"]``, as MLflow's ragas scorers do), the
rationale, the evidence in ``metadata`` (``ctxeval.verdicts``, ``ctxeval.provenance``, JSON),
``source`` CODE for ID and string metrics and LLM_JUDGE (the judge model) for LLM metrics.
An ``undefined`` row is not scored: ``value=None`` with an error of code
``CTXEVAL_UNDEFINED`` (MLflow leaves it out of the mean); an ``error`` row, code
``CTXEVAL_ERROR``.
"""

from __future__ import annotations

import linecache
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import ctxeval
from ctxeval import CtxevalError, DataError, MetricResult, MissingExtraError, Sample

from ._fields import DEFAULT_ID_KEYS, build_sample, read_documents, reference_ids, text_list
from ._results import HostResult, as_json, translate
from ._shared import SharedSession

try:
    import mlflow
    from mlflow.entities import AssessmentError, AssessmentSource, AssessmentSourceType, Feedback
    from mlflow.entities.span import SpanType
    from mlflow.genai.judges import CategoricalRating
    from mlflow.genai.scorers import Scorer
    from mlflow.genai.scorers import scorer as mlflow_scorer
except ImportError as exc:  # pragma: no cover - the extra is installed in the test suite
    raise MissingExtraError(
        f"ctxeval_hosts.mlflow needs MLflow ({exc})", install="pip install 'ctxeval[mlflow]'"
    ) from exc
from pydantic import BaseModel, PrivateAttr

__all__ = [
    "CtxevalScorer",
    "TraceFields",
    "ctxeval_scorer",
    "feedback_of",
    "registrable_scorers",
    "sample_from",
    "score_registered",
    "scorers",
]


@dataclass(frozen=True)
class TraceFields:
    """Where each sample field is read from MLflow's ``inputs``, ``outputs``,
    ``expectations`` and trace (every default is documented in docs/hosts/mlflow.md)."""

    question_keys: tuple[str, ...] = ("question", "query", "user_input", "input")
    """``inputs`` keys tried in order for the question (``inputs`` may be the string itself)."""
    response_key: str = "response"
    """``outputs`` key of the generated answer (``outputs`` may be the string itself)."""
    retriever_span: str = "last"
    """Which RETRIEVER span: ``"last"`` (the one that started last), ``"first"``, ``"all"``
    (their documents in start order) or a span name (the last span of that name)."""
    id_keys: tuple[str, ...] = DEFAULT_ID_KEYS
    """Where a document's ID is read, in order (dotted keys read nested mappings)."""
    reference_key: str = "expected_response"
    facts_key: str = "expected_facts"
    reference_contexts_key: str = "reference_contexts"
    reference_ids_key: str = "reference_context_ids"

    def to_dict(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TraceFields:
        values: dict[str, Any] = {
            k: tuple(v) if isinstance(v, list) else v for k, v in data.items()
        }
        return cls(**values)


def _question(inputs: Any, keys: Sequence[str]) -> Any:
    if isinstance(inputs, str) or inputs is None:
        return inputs
    if isinstance(inputs, Mapping):
        for key in keys:
            if inputs.get(key) is not None:
                return inputs[key]
    return None


def _response(outputs: Any, key: str) -> Any:
    if isinstance(outputs, str) or outputs is None:
        return outputs
    if isinstance(outputs, Mapping):
        return outputs.get(key)
    return None


def _retriever_documents(trace: Any, which: str) -> tuple[list[Any], str]:
    """The documents of the chosen RETRIEVER span(s) and a name for messages."""
    if trace is None:
        raise DataError(
            "no trace: the retrieved contexts are read from the trace's RETRIEVER span",
            field="trace",
            hint="evaluate with predict_fn, or pass traces made with "
            '@mlflow.trace(span_type="RETRIEVER") in data',
        )
    spans = sorted(
        trace.search_spans(span_type=SpanType.RETRIEVER), key=lambda s: s.start_time_ns or 0
    )
    if which not in ("last", "first", "all"):
        spans = [s for s in spans if s.name == which]
    if not spans:
        named = "" if which in ("last", "first", "all") else f" named {which!r}"
        raise DataError(
            f"the trace has no RETRIEVER span{named}, so there are no retrieved contexts",
            field="trace",
            hint='trace the retriever with @mlflow.trace(span_type="RETRIEVER") returning its '
            "documents",
        )
    chosen = spans if which == "all" else [spans[0] if which == "first" else spans[-1]]
    documents: list[Any] = []
    for span in chosen:
        outputs = span.outputs
        if outputs is None:
            outputs = []
        if not isinstance(outputs, Sequence) or isinstance(outputs, (str, bytes)):
            raise DataError(
                f"RETRIEVER span {span.name!r} returned {type(outputs).__name__}, not a list "
                "of documents",
                field="trace",
            )
        documents.extend(outputs)
    where = chosen[0].name if len(chosen) == 1 else f"{len(chosen)} RETRIEVER spans"
    return documents, f"trace: RETRIEVER span {where!r}"


def sample_from(
    *,
    inputs: Any = None,
    outputs: Any = None,
    expectations: Mapping[str, Any] | None = None,
    trace: Any = None,
    fields: TraceFields | None = None,
) -> Sample:
    """The :class:`ctxeval.Sample` of one MLflow row (see the module's docstring).

    Raises:
        DataError: a field cannot be read (no RETRIEVER span, a document without text...).
    """
    fields = fields or TraceFields()
    documents, where = _retriever_documents(trace, fields.retriever_span)
    retrieved = read_documents(documents, field=where, id_keys=fields.id_keys)
    expectations = expectations or {}
    reference = expectations.get(fields.reference_key)
    facts = expectations.get(fields.facts_key)
    if reference is None and facts is not None:
        reference = "\n".join(map(str, facts)) if isinstance(facts, Sequence) else facts
    sample_id = trace.info.trace_id if getattr(trace, "info", None) is not None else None
    return build_sample(
        id=sample_id,
        user_input=_question(inputs, fields.question_keys),
        response=_response(outputs, fields.response_key),
        reference=reference,
        retrieved_contexts=retrieved.texts,
        retrieved_context_ids=retrieved.ids,
        reference_contexts=text_list(
            expectations.get(fields.reference_contexts_key),
            field=f"expectations.{fields.reference_contexts_key}",
        ),
        reference_context_ids=reference_ids(
            expectations.get(fields.reference_ids_key),
            field=f"expectations.{fields.reference_ids_key}",
        ),
    )


def feedback_of(
    result: MetricResult | HostResult, *, name: str | None = None, threshold: float | None = None
) -> Feedback:
    """A ctxeval row as an MLflow :class:`~mlflow.entities.Feedback` (see the module)."""
    host = result if isinstance(result, HostResult) else translate(result, threshold=threshold)
    metadata = {
        key: value if isinstance(value, str) else as_json(value)
        for key, value in host.metadata.items()
        if key != "ctxeval.details" or host.status == "ok"
    }
    metadata["mlflow.scorer.framework"] = "ctxeval"
    if host.llm_judged:
        source = AssessmentSource(
            source_type=AssessmentSourceType.LLM_JUDGE, source_id=host.judge or "ctxeval"
        )
    else:
        source = AssessmentSource(
            source_type=AssessmentSourceType.CODE, source_id=f"ctxeval/{host.metric}"
        )
    common: dict[str, Any] = {
        "name": name or host.metric,
        "source": source,
        "rationale": host.rationale,
        "metadata": metadata,
    }
    if host.status != "ok":
        error = AssessmentError(error_code=host.error_code or "", error_message=host.error)
        return Feedback(value=None, error=error, **common)
    value: Any = host.score
    if host.passed is not None:
        value = CategoricalRating.YES if host.passed else CategoricalRating.NO
    return Feedback(value=value, **common)


def _score(
    shared: SharedSession,
    metric: str,
    threshold: float | None,
    fields: TraceFields,
    name: str,
    row: Mapping[str, Any],
) -> Feedback:
    try:
        sample = sample_from(fields=fields, **row)
    except DataError as exc:
        trace = row.get("trace")
        sample_id = getattr(getattr(trace, "info", None), "trace_id", "") or ""
        [result] = [r for r in shared.error_rows(str(exc), sample_id) if r.metric == metric]
    else:
        try:
            result = shared.result(sample, metric)
        except CtxevalError as exc:
            # (a closed session...: this row's error feedback, never an exception, which
            # MLflow would re-run through its own retry, outside the session's budget)
            result = MetricResult.error(str(exc)).labelled(sample.id or "", metric)
    host = translate(result, threshold=threshold, llm_judged=shared.llm_judged(metric))
    return feedback_of(host, name=name)


class CtxevalScorer(Scorer):
    """One ctxeval metric as an MLflow scorer, on a session shared with its siblings.

    Made by :func:`scorers` (several metrics, one session); ``CtxevalScorer.of(shared,
    metric)`` for a :class:`~ctxeval_hosts.SharedSession` of your own.
    """

    metric: str
    threshold: float | None = None
    _shared: SharedSession = PrivateAttr()
    _fields: TraceFields = PrivateAttr(default_factory=TraceFields)
    _definition: dict[str, Any] | None = PrivateAttr(default=None)

    @classmethod
    def of(
        cls,
        shared: SharedSession,
        metric: str,
        *,
        name: str | None = None,
        threshold: float | None = None,
        fields: TraceFields | None = None,
    ) -> CtxevalScorer:
        made = cls(name=name or metric, metric=shared.want(metric), threshold=threshold)
        made._shared = shared
        made._fields = fields or TraceFields()
        return made

    def __call__(  # type: ignore[override]
        self,
        *,
        inputs: Any = None,
        outputs: Any = None,
        expectations: dict[str, Any] | None = None,
        trace: Any = None,
    ) -> Feedback:
        row = {"inputs": inputs, "outputs": outputs, "expectations": expectations, "trace": trace}
        return _score(self._shared, self.metric, self.threshold, self._fields, self.name, row)

    @property
    def session(self) -> SharedSession:
        """The shared session (``.evaluation()`` gives the rows scored so far)."""
        return self._shared

    def model_dump(self, **kwargs: Any) -> dict[str, Any]:
        """The scorer's definition as plain JSON values (with arguments: pydantic's dump).

        MLflow hashes a scorer's definition into every feedback it stores
        (``mlflow.assessment.scorerDigest``). It cannot serialise a ``Scorer`` subclass, and
        its fallback reads and parses this module's source to hash the class: about 60 ms of
        CPU per row, under the interpreter lock that MLflow's row threads share. This
        definition (the class, ctxeval's version, the metric, the threshold and the field
        map) is made once and hashes in microseconds."""
        if kwargs:
            return BaseModel.model_dump(self, **kwargs)
        if self._definition is None:
            self._definition = {
                "scorer": f"{type(self).__module__}.{type(self).__qualname__}",
                "ctxeval": ctxeval.__version__,
                "name": self.name,
                "metric": self.metric,
                "threshold": self.threshold,
                "fields": {k: list(v) if isinstance(v, tuple) else v
                           for k, v in asdict(self._fields).items()},
            }  # fmt: skip
        return dict(self._definition)


def scorers(
    metrics: Sequence[Any],
    *,
    llm: Any = None,
    threshold: float | None = None,
    fields: TraceFields | None = None,
    registry: Any = None,
    settings: Any = None,
    **overrides: Any,
) -> list[CtxevalScorer]:
    """One :class:`CtxevalScorer` per metric, all on ONE new :class:`ctxeval.Session` (the
    arguments as :func:`ctxeval.evaluate` takes them). ``scorers(...)[0].session.close()``
    closes it; ``.session.evaluation()`` holds the rows scored."""
    shared = SharedSession.build(
        metrics, llm=llm, registry=registry, settings=settings, **overrides
    )
    return [CtxevalScorer.of(shared, m, threshold=threshold, fields=fields) for m in shared.metrics]


# --- @scorer-kind scorers (registrable) -------------------------------------------------------

_SOURCE = """def {function}(inputs, outputs, expectations, trace):
    from ctxeval_hosts.mlflow import score_registered

    return score_registered(
        {config!r},
        globals(),
        inputs=inputs,
        outputs=outputs,
        expectations=expectations,
        trace=trace,
    )
"""
_SHARED_KEY = "_ctxeval_shared_session"
_LOCK_KEY = "_ctxeval_shared_lock"


def _literal(value: Any, what: str) -> Any:
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, (list, tuple)):
        return [_literal(v, what) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _literal(v, what) for k, v in value.items()}
    raise TypeError(
        f"{what} must be plain values (str, numbers, lists, dicts) to be written into a "
        f"registrable scorer's code, got {type(value).__name__}"
    )


def score_registered(
    config: Mapping[str, Any],
    namespace: dict[str, Any],
    *,
    inputs: Any = None,
    outputs: Any = None,
    expectations: dict[str, Any] | None = None,
    trace: Any = None,
) -> Feedback:
    """The body of a registrable scorer: its session lives in the scorer function's own
    namespace (made on the first call where MLflow rebuilt the scorer from its code)."""
    shared = namespace.get(_SHARED_KEY)
    if shared is None:
        with namespace.setdefault(_LOCK_KEY, threading.Lock()):
            shared = namespace.get(_SHARED_KEY)
            if shared is None:
                shared = SharedSession.build(
                    [config["metric"]], llm=config.get("llm"), **config.get("settings", {})
                )
                namespace[_SHARED_KEY] = shared
    metric = config["metric"]
    shared.want(metric)
    fields = TraceFields.from_dict(config.get("fields") or {})
    row = {"inputs": inputs, "outputs": outputs, "expectations": expectations, "trace": trace}
    return _score(shared, metric, config.get("threshold"), fields, config["name"], row)


def _make_registrable(config: dict[str, Any], shared: SharedSession | None) -> Scorer:
    function = "ctxeval_" + re.sub(r"\W", "_", config["name"])
    source = _SOURCE.format(function=function, config=config)
    namespace: dict[str, Any] = {"__name__": __name__}
    filename = f"<ctxeval_hosts.mlflow scorer {id(namespace):x}: {config['name']}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    if shared is not None:
        namespace[_SHARED_KEY] = shared
    exec(compile(source, filename, "exec"), namespace)
    return mlflow_scorer(namespace[function], name=config["name"])  # type: ignore[no-any-return]


def registrable_scorers(
    metrics: Sequence[str],
    *,
    llm: str | None = None,
    threshold: float | None = None,
    fields: TraceFields | None = None,
    **settings: Any,
) -> list[Scorer]:
    """One ``@scorer``-kind scorer per metric (registrable for production monitoring).

    In this process they share ONE session, as :func:`scorers` do. Their code holds the
    metric name, ``llm`` (a model string such as ``"openai/gpt-4o-mini"``; the key comes from
    the environment where they run), the threshold, the fields and ``settings`` (keyword
    arguments of :class:`ctxeval.RunSettings`) as literals, so MLflow can rebuild them where
    it runs them; each rebuilt scorer then has a session of its own.
    """
    plain_settings = _literal(settings, "settings")
    shared = SharedSession.build(list(metrics), llm=llm, **plain_settings)
    made = []
    for metric in shared.metrics:
        config = {
            "name": metric,
            "metric": metric,
            "llm": _literal(llm, "llm"),
            "threshold": threshold,
            "fields": (fields or TraceFields()).to_dict(),
            "settings": plain_settings,
        }
        shared.want(metric)
        made.append(_make_registrable(config, shared))
    return made


def ctxeval_scorer(
    metric: str,
    *,
    llm: str | None = None,
    threshold: float | None = None,
    fields: TraceFields | None = None,
    **settings: Any,
) -> Scorer:
    """One metric as a registrable ``@scorer``-kind scorer (see :func:`registrable_scorers`)."""
    [made] = registrable_scorers([metric], llm=llm, threshold=threshold, fields=fields, **settings)
    return made


_ = mlflow  # the package is the host; imported here so a missing extra fails at once
