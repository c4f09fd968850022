"""Assertions for test suites: make a retriever's quality a test that fails with evidence.

::

    import ctxeval
    from ctxeval.testing import assert_metric

    def test_retriever_keeps_its_quality():
        ev = ctxeval.evaluate(load_my_samples(), ["nDCG@10", "id_based_context_recall"])
        assert_metric(ev, "nDCG@10", at_least=0.6)
        assert_metric(ev, "id_based_context_recall", at_least=0.8, on="ci-low")

A failure says the metric, its mean and 95% confidence interval, how many rows were ok,
undefined or errors, and the worst samples with their reasons and evidence, so a red build
shows *why*. Installed with ctxeval, the pytest plugin (entry point ``pytest11``) also offers it
as the fixture ``ctxeval_assert``.
"""

from __future__ import annotations

from typing import Any

from ctxeval._output.evaluation import Evaluation
from ctxeval._output.gates import Gate
from ctxeval._results.judges import SCRIPTED_WARNING

__all__ = ["assert_metric", "ctxeval_assert"]

_SHOWN = 5


def _short(value: Any, limit: int = 160) -> str:
    text = str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def assert_metric(
    evaluation: Evaluation, metric: str, *, at_least: float, on: str = "mean"
) -> None:
    """Fail (``AssertionError``) unless ``metric`` (its row name, or any name ``-m`` takes
    for it: an alias, an IR name in any case) reaches ``at_least`` on its ``mean`` or on
    the lower bound of its 95% CI (``on="ci-low"``).

    Raises:
        AssertionError: with the metric's summary and its worst samples.
        ConfigError: ``metric`` is not in ``evaluation``, or a bad threshold or basis.
    """
    __tracebackhide__ = True  # a failing gate shows the test's line, not ctxeval's source
    metric = evaluation.metric_names.resolve(metric)
    gate = Gate(metric=metric, threshold=at_least, on=on)  # type: ignore[arg-type]
    summary = evaluation.summary()[metric]
    verdict = gate.check(summary)
    if verdict.passed:
        return
    rows = evaluation.rows(metric)
    ci = "none" if summary.ci95 is None else f"[{summary.ci95[0]:.3f}, {summary.ci95[1]:.3f}]"
    mean = "none" if summary.mean is None else f"{summary.mean:.3f}"
    lines = [
        f"ctxeval gate failed: {verdict.describe()}",
        *([f"  {SCRIPTED_WARNING}"] if evaluation.judges().scripted else []),
        f"  {metric}: mean {mean}, 95% CI {ci} ({summary.ci95_method or 'n/a'}); "
        f"{summary.n_ok} ok, {summary.n_undefined} undefined, {summary.n_error} error",
    ]
    errors = [r for r in rows if r.status.value == "error"]
    worst = sorted((r for r in rows if r.score is not None), key=lambda r: r.score or 0.0)
    if errors:
        lines.append(f"  errors ({len(errors)}):")
        lines += [f"    {r.sample_id}: {_short(r.reason)}" for r in errors[:_SHOWN]]
    if worst:
        lines.append(f"  worst samples ({min(_SHOWN, len(worst))} of {len(worst)}):")
        for row in worst[:_SHOWN]:
            evidence = ", ".join(f"{k}={v}" for k, v in dict(row.details).items())
            lines.append(f"    {row.sample_id}: {row.score:.3f}  {_short(evidence)}")
    raise AssertionError("\n".join(lines))


try:  # the pytest plugin: only when pytest is the one importing this module
    import pytest
except ImportError:  # pragma: no cover - pytest is not installed
    pass
else:

    @pytest.fixture
    def ctxeval_assert() -> Any:
        """:func:`assert_metric`, as a fixture."""
        return assert_metric
