"""The optional hooks of a plugin, one runtime-checkable protocol each: a plugin has a hook or
not, and ctxeval checks with ``isinstance`` and calls it when there. Each protocol's docstring
says who calls the hook and when.

* what a plugin class declares: :class:`HasRegistryName`, :class:`DeclaresDependencies`;
* LLM use: :class:`NeedsLLM`, :class:`HasOwnLLM`, :class:`DescribesLLM`,
  :class:`SpendsResource`, :class:`PricedLLM`;
* evidence and resuming: :class:`Fingerprinted`, :class:`ReportsProvenance`,
  :class:`MetersUsage`, :class:`RepeatedJudgement`;
* the dry-run estimate: :class:`EstimatesExtractorCalls`, :class:`EstimatesMatcherCalls`,
  :class:`EstimatesAttributorCalls`, :class:`EstimatesCallsByJudge`,
  :class:`EstimatesMetricCalls`, :class:`EstimatesCallsByModel`, :class:`SharesCalls`;
* the fast path: :class:`MembershipMatcher`, :class:`ItemwiseMatcher`,
  :class:`MatchesBothSides`;
* metrics: :class:`HasPipeline` with its :class:`PipelineView`, :class:`TrecEvalAveraging`,
  :class:`ScoresColumn` (a deterministic metric's scores as a column, on the fast path) and
  :class:`ScoresColumnsTogether` (several such metrics in one pass), :class:`ScoresRankedColumns`
  (a ranked measure scored from a chunk of queries' columns, without a sample per query) and
  :class:`ScoresRankedEdges` (the rows of the queries it leaves, without a sample either);
* transports and run-wide objects: :class:`ChecksReady`, :class:`AsyncCloseable`.

``from ctxeval.plugin.hooks import NeedsLLM``; the same names stay importable from
:mod:`ctxeval.plugin` itself, as before.
"""

from ctxeval._plugins.hooks import *  # noqa: F403 (the protocols, each written once, there)
from ctxeval._plugins.hooks import __all__ as __all__
from ctxeval._public import rehome_all

rehome_all(globals(), __all__, __name__)  # each name shows its public module (ctxeval._public)
