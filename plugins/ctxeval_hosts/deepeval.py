"""ctxeval's metrics as DeepEval metrics (extra ``deepeval``; docs/hosts/deepeval.md).

::

    from deepeval import evaluate
    from ctxeval_hosts.deepeval import metrics

    evaluate(test_cases, metrics(["id_based_context_recall", "context_precision"],
                                 llm=llm, threshold=0.5, max_concurrency=16))

* :func:`metrics`: one :class:`CtxevalMetric` per ctxeval metric, all on ONE
  :class:`ctxeval.Session` (one budget, cache and meter for DeepEval's tasks; a test case is
  scored once whatever the number of metrics). ``measure`` works from any thread,
  ``a_measure`` on DeepEval's loop (its async mode).
* :class:`CtxevalMetric`: one metric (``CtxevalMetric("id_mrr")`` builds its own session).

Fields: ``input`` is the question, ``actual_output`` the response, ``expected_output`` the
reference answer, ``context`` the reference contexts, ``retrieval_context`` the retrieved
contexts (strings, or ``RetrievedContextData`` whose ``source`` becomes the document ID: all
of them or none), ``metadata["reference_context_ids"]`` the reference IDs (DeepEval has no
field for them), ``name`` the sample id.

Results: ``score``, ``reason`` (the rationale), ``success`` (``score >= threshold``),
``score_breakdown`` (the per-chunk verdicts and the judge's provenance), ``evaluation_cost``,
``input_tokens``/``output_tokens``, ``evaluation_model``. An ``undefined`` row is **not
scored**, never 0: ``score`` None, ``success`` False and ``error`` saying
``not scored (undefined): ...`` (or, with ``undefined="skip"``, ``skipped``: DeepEval then
leaves the metric out of that test case); an ``error`` row sets ``error``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from ctxeval import ConfigError, DataError, MetricResult, MissingExtraError, Sample

from ._fields import build_sample, reference_ids, text_list
from ._results import HostResult, translate
from ._shared import SharedSession

try:
    from deepeval.metrics import BaseMetric
    from deepeval.test_case import LLMTestCase, RetrievedContextData
except ImportError as exc:  # pragma: no cover - the extra is installed in the test suite
    raise MissingExtraError(
        f"ctxeval_hosts.deepeval needs DeepEval ({exc})",
        install="pip install 'ctxeval[deepeval]'",
    ) from exc

__all__ = ["REFERENCE_IDS_KEY", "CtxevalMetric", "metrics", "sample_from"]

REFERENCE_IDS_KEY = "reference_context_ids"
"""The ``LLMTestCase.metadata`` key of the reference context IDs."""

Undefined = Literal["error", "skip"]


def _retrieved(items: Sequence[Any] | None) -> tuple[list[str] | None, list[str] | None]:
    if items is None:
        return None, None
    texts: list[str] = []
    sources: list[str] = []
    for position, item in enumerate(items):
        if isinstance(item, RetrievedContextData):
            texts.append(item.context)
            sources.append(item.source)
        elif isinstance(item, str):
            texts.append(item)
        else:
            raise DataError(
                f"item {position} is {type(item).__name__}, expected a string or "
                "RetrievedContextData",
                field="retrieval_context",
            )
    if sources and len(sources) != len(texts):
        raise DataError(
            f"{len(sources)} of {len(texts)} items are RetrievedContextData with a source, "
            "the others plain strings: the document IDs would not line up",
            field="retrieval_context",
            hint="give every item a source (RetrievedContextData), or none",
        )
    return texts, sources or None


def sample_from(test_case: LLMTestCase, *, reference_ids_key: str = REFERENCE_IDS_KEY) -> Sample:
    """The :class:`ctxeval.Sample` of one DeepEval test case (see the module's docstring).

    Raises:
        DataError: a field cannot be read (the message names it).
    """
    texts, ids = _retrieved(test_case.retrieval_context)
    metadata = test_case.metadata or {}
    return build_sample(
        id=test_case.name,
        user_input=test_case.input,
        response=test_case.actual_output,
        reference=test_case.expected_output,
        retrieved_contexts=texts,
        retrieved_context_ids=ids,
        reference_contexts=text_list(test_case.context, field="context"),
        reference_context_ids=reference_ids(
            metadata.get(reference_ids_key), field=f"metadata.{reference_ids_key}"
        ),
    )


class CtxevalMetric(BaseMetric):  # type: ignore[no-untyped-call]
    """One ctxeval metric as a DeepEval metric.

    Args:
        metric: the ctxeval metric's name (as in ``shared.metrics`` when ``shared`` is given).
        threshold: ``success`` is ``score >= threshold`` (ctxeval's one threshold rule).
        shared: the session shared with other metrics (:func:`metrics` makes it); None: a new
            session of this metric alone, built with ``llm`` and ``settings``.
        undefined: ``"error"`` (default): an undefined row sets ``error`` (not scored, not
            successful); ``"skip"``: it sets ``skipped`` (DeepEval leaves the metric out).
        reference_ids_key: the ``metadata`` key of the reference context IDs.
        llm, settings: for a new session (as :func:`ctxeval.evaluate` takes them).
    """

    def __init__(
        self,
        metric: str,
        threshold: float = 0.5,
        *,
        shared: SharedSession | None = None,
        undefined: Undefined = "error",
        reference_ids_key: str = REFERENCE_IDS_KEY,
        llm: Any = None,
        settings: Any = None,
        async_mode: bool = True,
    ) -> None:
        if undefined not in ("error", "skip"):
            raise ConfigError(f"undefined must be 'error' or 'skip', got {undefined!r}")
        self.shared = (
            shared
            if shared is not None
            else SharedSession.build([metric], llm=llm, settings=settings)
        )
        self.metric = self.shared.want(metric if shared is not None else self.shared.metrics[0])
        self.threshold = threshold
        self.undefined: Undefined = undefined
        self.reference_ids_key = reference_ids_key
        self.async_mode = async_mode
        self.verbose_mode = False
        self.include_reason = True
        self.strict_mode = False
        self.score_breakdown = {}
        self.evaluation_model = None

    @property
    def __name__(self) -> str:
        return self.metric

    def _sample(self, test_case: LLMTestCase) -> Sample | MetricResult:
        try:
            return sample_from(test_case, reference_ids_key=self.reference_ids_key)
        except DataError as exc:
            return MetricResult.error(str(exc)).labelled(test_case.name or "", self.metric)

    def measure(  # type: ignore[override]
        self, test_case: LLMTestCase, *args: Any, **kwargs: Any
    ) -> float | None:
        """Score ``test_case`` (from any thread; blocks until the shared session answers)."""
        sample = self._sample(test_case)
        result = (
            sample if isinstance(sample, MetricResult) else self.shared.result(sample, self.metric)
        )
        return self._take(result)

    async def a_measure(  # type: ignore[override]
        self, test_case: LLMTestCase, *args: Any, **kwargs: Any
    ) -> float | None:
        """Score ``test_case`` on the running loop (DeepEval's async mode)."""
        sample = self._sample(test_case)
        if isinstance(sample, MetricResult):
            return self._take(sample)
        return self._take(await self.shared.aresult(sample, self.metric))

    def _take(self, result: MetricResult) -> float | None:
        host: HostResult = translate(
            result, threshold=self.threshold, llm_judged=self.shared.llm_judged(self.metric)
        )
        self.score = host.score
        self.reason = host.rationale
        self.score_breakdown = {
            k.removeprefix("ctxeval."): v
            for k, v in host.metadata.items()
            if k != "ctxeval.details"
        }
        self.evaluation_model = host.judge
        self.evaluation_cost = host.cost_usd if host.llm_judged else None
        self.input_tokens = host.prompt_tokens or None
        self.output_tokens = host.completion_tokens or None
        if host.status == "undefined" and self.undefined == "skip":
            self.skipped = True
            self.error = None
            self.success = None
        elif host.status != "ok":
            self.error = host.error
            self.success = False
        else:
            self.error = None
            self.success = bool(host.passed)
        return self.score

    def is_successful(self) -> bool:
        if self.error is not None or self.score is None or self.threshold is None:
            self.success = False
        else:
            self.success = self.score >= self.threshold
        return bool(self.success)


def metrics(
    names: Sequence[Any],
    *,
    llm: Any = None,
    threshold: float = 0.5,
    undefined: Undefined = "error",
    reference_ids_key: str = REFERENCE_IDS_KEY,
    registry: Any = None,
    settings: Any = None,
    **overrides: Any,
) -> list[CtxevalMetric]:
    """One :class:`CtxevalMetric` per metric, all on ONE new :class:`ctxeval.Session` (the
    arguments as :func:`ctxeval.evaluate` takes them; ``metrics(...)[0].shared`` holds it:
    ``.evaluation()``, ``.close()``)."""
    shared = SharedSession.build(names, llm=llm, registry=registry, settings=settings, **overrides)
    return [
        CtxevalMetric(
            name,
            threshold,
            shared=shared,
            undefined=undefined,
            reference_ids_key=reference_ids_key,
        )
        for name in shared.metrics
    ]
