"""ctxeval on a Ray cluster (extra ``ray``: ``pip install 'ctxeval[ray]'``).

The same evaluation as :func:`ctxeval.evaluate`, spread over Ray Data workers that each run
ctxeval's own runner, with ONE budget (calls in flight, requests and tokens per minute,
``Retry-After`` pauses, the cost cap) for the whole cluster::

    from ctxeval_ray import evaluate_on_ray

    evaluation = evaluate_on_ray("traces.parquet", ["context_precision"], llm=llm, workers=4,
                                 max_concurrency=32, journal="run/journal.jsonl")

* :func:`evaluate_on_ray`: rows gathered into an :class:`~ctxeval.Evaluation` (journaled and
  resumable); :func:`score_dataset`: the rows as a lazy Ray Dataset.
* :class:`SharedBudget`: the budget actor, usable by any process
  (``RunSettings(shared_limits=...)``).

See docs/scaling-out.md.
"""

from __future__ import annotations

from .budget import SharedBudget
from .run import evaluate_on_ray, ray_init, read_dataset, score_dataset

__all__ = ["SharedBudget", "evaluate_on_ray", "ray_init", "read_dataset", "score_dataset"]
