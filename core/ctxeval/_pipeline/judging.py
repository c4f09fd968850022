"""Judging an item more than once: :class:`Panel` (repeats and juries).

A :class:`Panel` is a matcher (and an attributor) made of one or more *judges*, each itself a
matcher, usually an LLM judge with its own model. It asks each judge ``repeats`` times and
combines the verdicts by a rule:

* ``majority``: every judge judges every item ``repeats`` times; a judge's own verdict is the
  majority of its repeats (a tie goes to its first judgement), and the panel's verdict the
  majority of the judges' verdicts (a tie goes to the judge listed last: list the strongest
  last).
* ``escalate``: the judges but the last judge every item ``repeats`` times; where one of
  them is unsure (its repeats disagree) or they disagree with each other, the last judge is
  asked, once, and its verdict decides. List a cheap judge first and a strong one last.

Each judgement of a judge gets its own :class:`JudgeContext`, which tells the judge which
repeat it is making (``repeat``) and at what temperature (``temperature``: None keeps the
judge's own). An LLM judge makes each repeat its own cache entry and request, so repeats are
real, independent judgements that a re-run reads back from the cache. Every request still goes
through the run's one scheduler (limits, budget, cost cap) and is counted against the row; the
panel also counts each judge's requests, tokens and cost apart, in the row's provenance.

Each verdict carries its :class:`~ctxeval.plugin.Votes`: which judge said what, whether a
judge was unsure, whether the judges disagreed, whether the item was escalated. From these, a
run reports flip rates and agreement between judges (:mod:`ctxeval._judge.trust`).
"""

from __future__ import annotations

import weakref
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeVar

import anyio
import attrs

from ctxeval._plugins.hooks import (
    DescribesLLM,
    EstimatesMatcherCalls,
    NeedsLLM,
    ReportsProvenance,
    fingerprint_of,
    needs_run_llm,
    own_llm,
)
from ctxeval._plugins.protocols import Attributor, RunContext, Unit, Verdict, Votes, majority
from ctxeval._plugins.validators import non_negative_number, one_of
from ctxeval._results.results import Usage

if TYPE_CHECKING:
    from ctxeval._data.sample import Sample

__all__ = [
    "DEFAULT_REPEAT_TEMPERATURE",
    "JudgeContext",
    "Panel",
    "Rule",
    "judge_name",
    "judge_part",
    "judges_option",
    "jury_option",
    "repeats_option",
    "temperature_option",
]

T = TypeVar("T")

Rule = Literal["majority", "escalate"]
_RULES = ("majority", "escalate")

DEFAULT_REPEAT_TEMPERATURE = 0.7
"""The temperature repeated judgements are made at, unless a panel says otherwise: repeats at
temperature 0 would mostly repeat the same answer and measure nothing."""


class JudgeContext:
    """The :class:`~ctxeval.RunContext` a :class:`Panel` hands one judge for one judgement.

    Everything is the row's context's (same scheduler, limits, cache, sample), plus what
    each judge spends counted apart, and:

    Attributes:
        judge: the judge's name in the panel.
        repeat: which judgement of the item this is, from 0. A judge that caches must make each
            repeat its own entry (the LLM judges put ``repeat`` in their cache key).
        temperature: the temperature to judge at, or None for the judge's own.
    """

    def __init__(
        self,
        parent: RunContext,
        *,
        judge: str,
        repeat: int,
        temperature: float | None,
        tally: dict[str, Usage],
    ) -> None:
        self._parent = parent
        self.judge = judge
        self.repeat = repeat
        self.temperature = temperature
        self._tally = tally

    def _count(self, usage: Usage) -> None:
        spent = self._tally.get(self.judge)
        self._tally[self.judge] = usage if spent is None else spent + usage

    def __getattr__(self, name: str) -> Any:
        # every other service (registry, llm, cache, run_folder, sample, run_cpu, shared,
        # limits) is the row's context's own
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._parent, name)

    async def call(
        self,
        func: Callable[[], Awaitable[T]],
        *,
        resource: str = "default",
        tokens: float = 0.0,
        timeout: float | None = None,
    ) -> T:
        async def counted() -> T:
            self._count(Usage(requests=1))
            return await func()

        return await self._parent.call(counted, resource=resource, tokens=tokens, timeout=timeout)

    def add_usage(self, usage: Usage) -> None:
        self._count(usage)
        self._parent.add_usage(usage)


def _positive(instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{attribute.name} must be a whole number >= 1, got {value!r}")


def _judges(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not value:
        raise ValueError("a panel needs at least one judge")
    for judge in value:
        if not callable(getattr(judge, "match", None)):
            raise TypeError(
                f"every judge of a panel is a matcher (with async match()); got {judge!r}"
            )


@attrs.frozen(kw_only=True)
class Panel:
    """A matcher (and attributor) that asks several judges, several times (see the module).

    Attributes:
        judges: the judges, matchers; for use as an attributor (context recall), the first is
            also an attributor (it splits the text) and the others judge its units by ``match``.
        names: each judge's name (its model, say), unique; default ``judge1``, ``judge2``...
        repeats: judgements per judge and item (the last judge of ``escalate`` judges once).
        rule: ``majority`` or ``escalate``.
        temperature: the temperature of repeated judgements (``repeats`` > 1); with one
            judgement per judge, each judge keeps its own.
    """

    name: ClassVar[str] = "panel"

    judges: tuple[Any, ...] = attrs.field(converter=tuple, validator=_judges)
    names: tuple[str, ...] = attrs.field(converter=tuple, default=())
    repeats: int = attrs.field(default=1, validator=_positive)
    rule: Rule = attrs.field(default="majority")
    temperature: float = attrs.field(default=DEFAULT_REPEAT_TEMPERATURE)
    _tallies: weakref.WeakKeyDictionary[Any, dict[str, Usage]] = attrs.field(
        init=False, factory=weakref.WeakKeyDictionary, eq=False, repr=False
    )

    @rule.validator
    def _check_rule(self, attribute: attrs.Attribute[Any], value: Any) -> None:
        if value not in _RULES:
            raise ValueError(f"rule must be 'majority' or 'escalate', got {value!r}")
        if value == "escalate":
            if len(self.judges) < 2:
                raise ValueError("the escalate rule needs two judges or more: a cheap one first")
            if len(self.judges) == 2 and self.repeats == 1:
                raise ValueError(
                    "with two judges, escalate asks the second where the first is unsure, "
                    "which one judgement cannot show: set repeats >= 2 (3 is usual), or add "
                    "a judge"
                )

    @temperature.validator
    def _check_temperature(self, attribute: attrs.Attribute[Any], value: Any) -> None:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
            raise ValueError(f"temperature must be a number >= 0, got {value!r}")

    def __attrs_post_init__(self) -> None:
        if not self.names:
            object.__setattr__(
                self, "names", tuple(f"judge{i}" for i in range(1, len(self.judges) + 1))
            )
        if len(self.names) != len(self.judges):
            raise ValueError(f"{len(self.judges)} judges need {len(self.judges)} names")
        if len(set(self.names)) != len(self.names):
            raise ValueError(f"the judges of a panel need distinct names, got {self.names}")

    # --- what the run reads --------------------------------------------------------------------

    @property
    def needs_llm(self) -> bool:
        """True when a judge calls the run's LLM (it has no ``llm`` of its own)."""
        return any(needs_run_llm(j) for j in self.judges)

    llm: ClassVar[None] = None
    """A panel has no LLM of its own (its judges have theirs)."""

    @property
    def fingerprint_data(self) -> str:
        """The judges' own fingerprints and names, the repeats, rule and temperature."""
        own = [f"{n}={fingerprint_of(j)}" for n, j in self._named()]
        return f"panel:{self.rule}:{self.repeats}:{self.temperature}:" + ";".join(own)

    def provenance(self, ctx: RunContext) -> list[dict[str, Any]]:
        """Each judge's own provenance, with its name, the panel's rule and repeats, and what
        it spent on the row (``usage``)."""
        tally = self._tallies.get(ctx, {})
        out = []
        for name, judge in self._named():
            said = dict(judge.provenance(ctx) or {}) if isinstance(judge, ReportsProvenance) else {}
            spent = tally.get(name)
            said.update(
                judge=name,
                rule=self.rule,
                repeats=1 if self._once(name) else self.repeats,
                usage=(spent or Usage()).to_dict(),
            )
            out.append(said)
        return out

    def estimate_calls(
        self, items: Sequence[str], candidates: Sequence[str], sample: Sample | None = None
    ) -> list[int]:
        """The prompt sizes of the requests judging ``items`` would send: every judge's, times
        its repeats (``escalate``: as if every item went to the last judge, an upper bound)."""
        return [
            size
            for _, sizes in self.estimate_calls_by_judge(items, candidates, sample)
            for size in sizes
        ]

    def estimate_calls_by_judge(
        self, items: Sequence[str], candidates: Sequence[str], sample: Sample | None = None
    ) -> list[tuple[str | None, list[int]]]:
        """:meth:`estimate_calls` judge by judge: each judge's model (its ``llm``'s name; None
        for the run's) with the sizes of its requests."""
        out: list[tuple[str | None, list[int]]] = []
        for name, judge in self._named():
            if not isinstance(judge, EstimatesMatcherCalls):
                continue
            times = 1 if self._once(name) else self.repeats
            own = own_llm(judge)
            model = judge_name(own) if own is not None else None
            out.append((model, list(judge.estimate_calls(items, candidates, sample)) * times))
        return out

    def _named(self) -> list[tuple[str, Any]]:
        return list(zip(self.names, self.judges, strict=True))

    def _once(self, name: str) -> bool:
        """Whether ``name`` judges once: the last judge under ``escalate``."""
        return self.rule == "escalate" and name == self.names[-1]

    # --- judging -------------------------------------------------------------------------------

    async def match(
        self, items: Sequence[str], candidates: Sequence[str], ctx: RunContext
    ) -> list[Verdict]:
        """One verdict per item, each with its :class:`~ctxeval.plugin.Votes`."""
        if not items:
            return []
        return await self._decide(items, candidates, ctx, {})

    async def attribute(
        self, text: str, candidates: Sequence[str], ctx: RunContext
    ) -> list[tuple[Unit, Verdict]]:
        """The first judge splits ``text`` into units and judges them (its first judgement);
        every other judgement judges those same units with ``match``."""
        first = self.judges[0]
        if not isinstance(first, Attributor):
            raise TypeError(
                f"the first judge of a panel used as an attributor must split texts "
                f"(attribute()); {first!r} cannot"
            )
        tally = self._tallies.setdefault(ctx, {})
        pairs = await first.attribute(text, candidates, self._context(ctx, 0, 0, tally))
        if not pairs:
            return []
        units = [unit for unit, _ in pairs]
        given = {(0, 0): [verdict for _, verdict in pairs]}
        verdicts = await self._decide([u.text for u in units], candidates, ctx, given)
        return list(zip(units, verdicts, strict=True))

    def _context(self, ctx: RunContext, judge: int, repeat: int, tally: dict[str, Usage]) -> Any:
        once = self._once(self.names[judge])
        return JudgeContext(
            ctx,
            judge=self.names[judge],
            repeat=repeat,
            temperature=self.temperature if self.repeats > 1 and not once else None,
            tally=tally,
        )

    async def _ask(
        self,
        jobs: Sequence[tuple[int, int]],
        items: Sequence[str],
        candidates: Sequence[str],
        ctx: RunContext,
        out: dict[tuple[int, int], list[Verdict]],
    ) -> None:
        """Each ``(judge, repeat)`` job judges ``items``, concurrently, into ``out``."""
        tally = self._tallies.setdefault(ctx, {})

        async def one(judge: int, repeat: int) -> None:
            matcher = self.judges[judge]
            verdicts = list(
                await matcher.match(items, candidates, self._context(ctx, judge, repeat, tally))
            )
            if len(verdicts) != len(items):
                raise ValueError(
                    f"judge {self.names[judge]!r} gave {len(verdicts)} verdicts for "
                    f"{len(items)} items"
                )
            out[judge, repeat] = verdicts

        async with anyio.create_task_group() as group:
            for judge, repeat in jobs:
                group.start_soon(one, judge, repeat, name="ctxeval: a judge")

    async def _decide(
        self,
        items: Sequence[str],
        candidates: Sequence[str],
        ctx: RunContext,
        given: dict[tuple[int, int], list[Verdict]],
    ) -> list[Verdict]:
        asked = dict(given)
        first_round = (
            range(len(self.judges)) if self.rule == "majority" else range(len(self.judges) - 1)
        )
        jobs = [(j, r) for j in first_round for r in range(self.repeats) if (j, r) not in asked]
        await self._ask(jobs, items, candidates, ctx, asked)
        panel = list(first_round)
        if self.rule == "majority":
            return [self._combine(i, panel, asked) for i in range(len(items))]
        votes = [self._votes(i, panel, asked) for i in range(len(items))]
        escalate = [i for i, v in enumerate(votes) if v.unsure or v.disagree]
        last = len(self.judges) - 1
        decided: dict[int, Verdict] = {}
        if escalate:
            strong: dict[tuple[int, int], list[Verdict]] = {}
            await self._ask([(last, 0)], [items[i] for i in escalate], candidates, ctx, strong)
            for position, index in enumerate(escalate):
                verdict = strong[last, 0][position]
                decided[index] = attrs.evolve(
                    verdict,
                    score=float(verdict.matched),
                    votes=Votes(
                        (*votes[index].judges, (self.names[last], (int(verdict.matched),))),
                        escalated=True,
                    ),
                )
        return [
            decided[i] if i in decided else self._combine(i, panel, asked)
            for i in range(len(items))
        ]

    def _votes(
        self, item: int, judges: Sequence[int], asked: dict[tuple[int, int], list[Verdict]]
    ) -> Votes:
        return Votes(
            tuple(
                (
                    self.names[j],
                    tuple(int(asked[j, r][item].matched) for r in range(self.repeats)),
                )
                for j in judges
            )
        )

    def _combine(
        self,
        item: int,
        judges: Sequence[int],
        asked: dict[tuple[int, int], list[Verdict]],
    ) -> Verdict:
        votes = self._votes(item, judges, asked)
        own = [majority(v) for _, v in votes.judges]
        final = majority(own[::-1])  # a tie between judges goes to the one listed last
        every = [v for _, judge_votes in votes.judges for v in judge_votes]
        reason = next(
            (
                asked[j, r][item].reason
                for j in reversed(judges)
                for r in range(self.repeats)
                if asked[j, r][item].matched == bool(final)
            ),
            None,
        )
        return Verdict(bool(final), sum(every) / len(every), None, reason, votes)


# --- the judging options of a metric ----------------------------------------------------------


def _judge_list(value: Any) -> tuple[Any, ...]:
    if value is None:
        return ()
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise ValueError(
            f"judges must be a list of LLMs (model strings, settings or callables), got {value!r}"
        )
    return tuple(value)


def judges_option() -> Any:
    """The ``judges`` option of a judged metric: two or more LLMs make a jury (see
    :func:`judge_part`)."""
    return attrs.field(factory=tuple, converter=_judge_list)


def repeats_option() -> Any:
    """The ``repeats`` option: judgements per judge and item (majority verdict used)."""
    return attrs.field(default=1, validator=_positive)


def jury_option() -> Any:
    """The ``jury`` option: how a panel's verdicts combine, ``majority`` or ``escalate``."""
    return attrs.field(default="majority", validator=one_of(*_RULES, what="jury"))


def temperature_option() -> Any:
    """The ``repeat_temperature`` option: the temperature of repeated judgements."""
    return attrs.field(default=DEFAULT_REPEAT_TEMPERATURE, validator=non_negative_number)


def judge_name(llm: Any) -> str | None:
    """A readable name for a judge's LLM: a model string as it is, a settings mapping's or
    object's ``model``, a function's name; None when it has none."""
    if isinstance(llm, str):
        return llm
    if isinstance(llm, dict):
        model = llm.get("model")
    else:
        model = llm.model if isinstance(llm, DescribesLLM) else None
    if isinstance(model, str) and model != "custom":
        return model
    name = getattr(llm, "__name__", None)
    return name if isinstance(name, str) else None


def judge_part(
    make: Callable[[Any], Any],
    *,
    llm: Any,
    judges: Sequence[Any],
    repeats: int,
    rule: str,
    temperature: float,
) -> Any:
    """The judging part of a metric from its options: ``make(llm)`` when one judge judges
    each item once, else a :class:`Panel` of ``make(judge)`` for each judge (``llm`` alone
    when ``judges`` is empty: a single judge that repeats).

    Raises:
        ValueError: both ``llm`` and ``judges``; a judge that is not a matcher; a rule that
            cannot work (``escalate`` with one judge).
    """
    if judges and llm is not None:
        raise ValueError("give llm (one judge) or judges (a jury), not both")
    if rule not in _RULES:
        raise ValueError(f"jury must be 'majority' or 'escalate', got {rule!r}")
    if not judges and repeats == 1:
        if rule == "escalate":
            raise ValueError("jury='escalate' needs judges=[cheap, ..., strong]")
        return make(llm)
    chosen = tuple(judges) or (llm,)
    names: list[str] = []
    for position, judge in enumerate(chosen, start=1):
        name = judge_name(judge) or ("judge" if len(chosen) == 1 else f"judge{position}")
        names.append(name if name not in names else f"{name}#{position}")
    parts = [make(judge) for judge in chosen]
    for part in parts:
        if not (isinstance(part, NeedsLLM) and part.needs_llm):
            raise ValueError(
                f"repeats and juries are for judges that call an LLM; {part.name!r} does not"
            )
    return Panel(judges=parts, names=names, repeats=repeats, rule=rule, temperature=temperature)  # type: ignore[arg-type]
