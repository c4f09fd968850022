"""ctxeval's metrics as an Inspect AI scorer, and Inspect's own model as ctxeval's judge.

``Task(dataset=..., solver=..., scorer=ctxeval_scorer("id_based_context_recall"))``: a
``@scorer`` with the metrics ``mean()`` and ``stderr()``, one :class:`ctxeval.Session` per
scorer object, shared by every sample and epoch of the eval (their LLM calls coalesce in one
scheduler: one budget, one cache, one meter).

Where the fields are by default (``fields=`` maps any other path, see docs/hosts/inspect.md):

=========================  ===================================================================
sample field               default path
=========================  ===================================================================
``user_input``             ``input`` (``state.input_text``)
``response``               ``output`` (``state.output.completion``)
``reference``              ``target`` (the sample's target; a target of several strings is an
                           error for a text field: map ``target_list`` or a metadata key)
``retrieved_contexts``     ``metadata.retrieved_contexts`` (``state.metadata``)
``retrieved_context_ids``  ``metadata.retrieved_context_ids``
``reference_contexts``     ``metadata.reference_contexts``
``reference_context_ids``  ``metadata.reference_context_ids``
=========================  ===================================================================

The other places: ``store`` (``state.store``: what a solver retrieved at run time, e.g.
``fields={"retrieved_contexts": "store.retrieved_contexts"}``) and ``target_list`` (the
target's strings as a list, e.g. reference IDs as targets).

The result is an Inspect ``Score``: ``value`` the score, ``explanation`` the rationale,
``metadata`` the evidence, the judge's provenance and the usage (ctxeval's
``ctxeval.*`` keys). An undefined row is ``Score.unscored(reason="undefined")`` and an error
row (a field missing, an LLM that never answered) ``Score.unscored(reason="scoring_failed")``,
the reason in ``explanation``: Inspect keeps them in the log and leaves them out of ``mean``
and ``stderr`` (never 0).

:class:`InspectJudge` is ctxeval's ``llm=`` served by an Inspect model (``get_model()``: the
model under evaluation, or ``model=`` / ``role=``), called on Inspect's own event loop, so
Inspect's ``max_connections``, retries, model configuration and API logging hold.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any, Final

from inspect_ai.model import (
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageUser,
    GenerateConfig,
    Model,
    ModelOutput,
    ResponseSchema,
    get_model,
)
from inspect_ai.scorer import Score, Scorer, Target, mean, scorer, stderr
from inspect_ai.solver import TaskState
from inspect_ai.util import JSONSchema

import ctxeval
from ctxeval.plugin import Metric
from ctxeval_hosts._outcome import Adapter, Outcome
from ctxeval_hosts._rowmap import FieldError, Path

__all__ = ["DEFAULT_FIELDS", "InspectJudge", "ctxeval_scorer", "score_of"]

DEFAULT_FIELDS: Final[Mapping[str, Path]] = {
    "user_input": "input",
    "response": "output",
    "reference": "target",
    "retrieved_contexts": "metadata.retrieved_contexts",
    "retrieved_context_ids": "metadata.retrieved_context_ids",
    "reference_contexts": "metadata.reference_contexts",
    "reference_context_ids": "metadata.reference_context_ids",
}

UNSCORED_REASONS: Final = {"undefined": "undefined", "error": "scoring_failed"}
"""``Score.reason`` of an unscored row: ctxeval's ``undefined``, or Inspect's own reason for a
scorer that could not run."""


def score_of(outcome: Outcome) -> Score:
    """One outcome as an Inspect ``Score`` (unscored unless ``ok``)."""
    if outcome.score is not None:
        return Score(value=outcome.score, explanation=outcome.comment, metadata=outcome.metadata)
    return Score.unscored(
        reason=UNSCORED_REASONS[outcome.status],
        explanation=outcome.comment,
        metadata=outcome.metadata,
    )


def _one_target(target: Target) -> str:
    if len(target) != 1:
        raise FieldError(
            f"the target holds {len(target)} strings, one text was expected: map this field "
            "to 'target_list' (a list field) or to a metadata key"
        )
    return target[0]


def places_of(state: TaskState, target: Target) -> dict[str, Any]:
    """The places of one sample (the computed ones read only when a field needs them)."""
    return {
        "input": lambda: state.input_text,
        "output": lambda: state.output.completion,
        "target": lambda: _one_target(target),
        "target_list": lambda: list(target),
        "metadata": state.metadata,
        "store": lambda: dict(state.store.items()),
    }


def sample_id_of(state: TaskState) -> str:
    """The sample's id in the session's rows (with its epoch after the first)."""
    return str(state.sample_id) if state.epoch <= 1 else f"{state.sample_id}@{state.epoch}"


def ctxeval_scorer(
    metric: str | Metric,
    *,
    fields: Mapping[str, Path] | None = None,
    session: Any = None,
    llm: Any = None,
    registry: ctxeval.Registry | None = None,
    settings: ctxeval.RunSettings | None = None,
    **overrides: Any,
) -> Scorer:
    """An Inspect scorer of ``metric`` (``mean()`` and ``stderr()`` over the scored samples).

    Args:
        metric: a ctxeval metric name (or a :func:`ctxeval.get_metric` metric); the score's
            name in the log is the metric's name.
        fields: sample field -> path, in place of :data:`DEFAULT_FIELDS` for those fields
            (places: ``input``, ``output``, ``target``, ``target_list``, ``metadata``,
            ``store``), or a function of those places.
        session: a :class:`ctxeval.Session` to share (else one is built from the rest).
        llm: ctxeval's judge for LLM metrics: a model string, an ``LLMConfig``, or an
            :class:`InspectJudge` (Inspect's own model).
        registry, settings, overrides: as :func:`ctxeval.evaluate` takes them.

    The scorer's session is ``scorer.ctxeval_session`` (``.evaluation()`` has the rows).
    """
    judge = llm if isinstance(llm, InspectJudge) else None
    adapter = Adapter.for_host(
        "Inspect scorer", metric, DEFAULT_FIELDS, fields,
        one="an Inspect scorer made here scores one metric",
        session=session,
        # (named, so the rows' provenance says which Inspect model judged)
        llm={"model": judge.name, "completion": judge} if judge is not None else llm,
        registry=registry, settings=settings, overrides=overrides,
    )  # fmt: skip

    def ctxeval_metric() -> Scorer:
        async def score(state: TaskState, target: Target) -> Score:
            if judge is not None:
                judge.bind()
            [outcome] = await adapter.ascore(places_of(state, target), sample_id_of(state))
            return score_of(outcome)

        return score

    made = scorer(metrics=[mean(), stderr()], name=adapter.names[0])(ctxeval_metric)()
    made.ctxeval_session = adapter.session  # type: ignore[attr-defined]
    return made


# --- Inspect's model as ctxeval's judge -----------------------------------------------------

_ROLES: Final[Mapping[str, Callable[[str], ChatMessage]]] = {
    "system": lambda text: ChatMessageSystem(content=text),
    "user": lambda text: ChatMessageUser(content=text),
    "assistant": lambda text: ChatMessageAssistant(content=text),
}


def _messages(request: Mapping[str, Any]) -> list[ChatMessage]:
    return [_ROLES[m.get("role", "user")](str(m["content"])) for m in request["messages"]]


def _config(request: Mapping[str, Any], base: GenerateConfig | None) -> GenerateConfig:
    """ctxeval's request settings (temperature, max_tokens, the answer's JSON schema) as an
    Inspect ``GenerateConfig`` over ``base``."""
    given: dict[str, Any] = {}
    if request.get("temperature") is not None:
        given["temperature"] = request["temperature"]
    if request.get("max_tokens") is not None:
        given["max_tokens"] = request["max_tokens"]
    schema = (request.get("response_format") or {}).get("json_schema")
    if isinstance(schema, Mapping) and isinstance(schema.get("schema"), Mapping):
        given["response_schema"] = ResponseSchema(
            name=str(schema.get("name", "answer")),
            json_schema=JSONSchema.model_validate(schema["schema"]),
            strict=schema.get("strict"),
        )
    return (base or GenerateConfig()).merge(GenerateConfig(**given))


def _answer(output: ModelOutput) -> dict[str, Any]:
    if output.error:
        raise ctxeval.ServiceError(f"the Inspect model answered with an error: {output.error}")
    usage = output.usage
    return {
        "content": output.completion,
        "prompt_tokens": usage.input_tokens if usage else 0,
        "completion_tokens": usage.output_tokens if usage else 0,
    }


def _on_loop(
    loop: asyncio.AbstractEventLoop, make: Callable[[], Coroutine[Any, Any, Any]]
) -> concurrent.futures.Future[Any]:
    """Run ``make()`` as a task of ``loop`` (another thread's), in a context of its own (no
    sample's), cancelled when the returned future is."""
    future: concurrent.futures.Future[Any] = concurrent.futures.Future()

    def start() -> None:
        if not future.set_running_or_notify_cancel():
            return
        task = loop.create_task(make())

        def done(task: asyncio.Task[Any]) -> None:
            if task.cancelled():
                future.cancel()
            elif task.exception() is not None:
                future.set_exception(task.exception())
            else:
                future.set_result(task.result())

        task.add_done_callback(done)
        future.add_done_callback(
            lambda f: loop.call_soon_threadsafe(task.cancel) if f.cancelled() else None
        )

    loop.call_soon_threadsafe(start, context=contextvars.Context())
    return future


class InspectJudge:
    """ctxeval's ``llm=``: an async callable that asks an Inspect model.

    Args:
        model: an Inspect model name or ``Model``; None: ``get_model(role=role)``, the model
            under evaluation unless ``role`` names another (``"grader"``).
        role: the Inspect model role to ask (``--model-role grader=...``).
        config: an Inspect ``GenerateConfig`` under ctxeval's own request settings.

    The model is resolved when the scorer first runs (inside the eval), and every request is
    made on the eval's own event loop: Inspect's ``max_connections`` for that model, its
    retries and its API logging apply. The judge's calls are not attributed to a sample's
    transcript (one call may serve several samples); ctxeval meters them in each score's
    ``metadata["ctxeval.usage"]``.
    """

    def __init__(
        self,
        model: str | Model | None = None,
        *,
        role: str | None = None,
        config: GenerateConfig | None = None,
    ) -> None:
        self.model = model
        self.role = role
        self.config = config
        self._resolved: Model | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def name(self) -> str:
        """The judge's name in ctxeval's provenance: ``inspect/`` and the model, or its role."""
        if self.model is not None:
            return f"inspect/{self.model}"
        return f"inspect/role:{self.role}" if self.role else "inspect/model-under-evaluation"

    def bind(self) -> None:
        """Called by the scorer, in the eval's task: the model and the eval's loop."""
        if self._resolved is None:
            self._resolved = get_model(self.model, role=self.role)
        self._loop = asyncio.get_running_loop()

    async def __call__(self, request: Mapping[str, Any]) -> dict[str, Any]:
        model, loop = self._resolved, self._loop
        if model is None or loop is None:
            raise ctxeval.ConfigError(
                "InspectJudge asks Inspect's model, which exists inside an Inspect eval only: "
                "use it as the llm= of ctxeval_scorer(...) in a Task"
            )
        messages, config = _messages(request), _config(request, self.config)

        def generate() -> Coroutine[Any, Any, ModelOutput]:
            return model.generate(messages, config=config)

        try:
            here: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            here = None
        if here is loop:
            return _answer(await generate())
        return _answer(await _await(_on_loop(loop, generate)))


def _await(future: concurrent.futures.Future[Any]) -> Awaitable[Any]:
    """``future`` awaited in the session's loop (asyncio), its cancellation passed on."""
    return asyncio.wrap_future(future)
