"""Quality gates: fail a build when a metric scores too low.

A :class:`Gate` says "metric M must reach V", on the mean of its ``ok`` rows or, stricter, on
the lower bound of its 95% confidence interval (so that a small or noisy evaluation does not
pass by luck). The command line's ``--fail-under M=V`` and :func:`ctxeval.testing.assert_metric`
both check gates here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import attrs

from ctxeval._errors import ConfigError
from ctxeval._plugins.validators import one_of, text, unit_interval
from ctxeval._results.evaluation import MetricSummary

__all__ = ["Gate", "GateResult", "check_gates", "parse_gate"]

On = Literal["mean", "ci-low"]


@attrs.frozen(kw_only=True)
class Gate:
    """``metric`` must reach ``threshold`` (``>=``), on its ``mean`` or its ``ci-low``."""

    metric: str = attrs.field(validator=text)
    threshold: float = attrs.field(validator=unit_interval)
    on: On = attrs.field(default="mean", validator=one_of("mean", "ci-low", what="gate basis"))

    def check(self, summary: MetricSummary | None) -> GateResult:
        """Whether ``summary`` (the metric's, or None when the run has no such metric)
        passes."""
        if summary is None:
            return GateResult(
                gate=self, passed=False, value=None, reason="the run has no such metric"
            )
        if self.on == "mean":
            value = summary.mean
            missing = "no ok row to average"
        else:
            value = summary.ci95[0] if summary.ci95 is not None else None
            missing = "fewer than 2 ok rows: no confidence interval"
        if value is None:
            return GateResult(gate=self, passed=False, value=None, reason=missing)
        return GateResult(gate=self, passed=value >= self.threshold, value=value)


@attrs.frozen(kw_only=True)
class GateResult:
    """A gate and how the run fared: ``passed``, the ``value`` compared (None when there was
    none) and, then, ``reason``."""

    gate: Gate
    passed: bool
    value: float | None
    reason: str | None = None

    def describe(self) -> str:
        """One line: ``nDCG@10 mean 0.612 >= 0.600`` (or why it failed)."""
        gate = self.gate
        threshold = f"{gate.threshold:.3f}"
        if float(threshold) != gate.threshold:
            threshold = f"{gate.threshold:g}"  # 0.3004, as written
        if self.value is None:
            return f"{gate.metric} {gate.on}: {self.reason} (needs >= {threshold})"
        sign = ">=" if self.passed else "<"
        value = f"{self.value:.3f}"
        if value == threshold and self.value != gate.threshold:
            value = f"{self.value:.6g}"  # a near miss does not read "0.300 < 0.300"
            if float(value) == gate.threshold:
                value = repr(self.value)
        return f"{gate.metric} {gate.on} {value} {sign} {threshold}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "metric": self.gate.metric,
            "on": self.gate.on,
            "threshold": self.gate.threshold,
            "value": self.value,
            "passed": self.passed,
            "reason": self.reason,
        }


def parse_gate(spec: str, *, on: str = "mean") -> Gate:
    """``METRIC=VALUE`` into a :class:`Gate` (the metric name may hold ``=``-free text such as
    ``nDCG@10``)."""
    metric, sep, value = spec.rpartition("=")
    if not sep or not metric.strip():
        raise ConfigError(f"--fail-under {spec!r}: write it as METRIC=VALUE, e.g. nDCG@10=0.6")
    try:
        threshold = float(value)
    except ValueError:
        raise ConfigError(f"--fail-under {spec!r}: {value!r} is not a number") from None
    if not math.isfinite(threshold) or not 0.0 <= threshold <= 1.0:
        raise ConfigError(f"--fail-under {spec!r}: the value must be in [0, 1]")
    try:
        return Gate(metric=metric.strip(), threshold=threshold, on=on)  # type: ignore[arg-type]
    except ValueError as exc:
        raise ConfigError(f"--fail-under {spec!r}: {exc}") from None


def check_gates(gates: Sequence[Gate], summary: Mapping[str, MetricSummary]) -> list[GateResult]:
    """Each gate's result against ``summary`` (``Evaluation.summary()``)."""
    return [gate.check(summary.get(gate.metric)) for gate in gates]
