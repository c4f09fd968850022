"""ctxeval on a Ray cluster (extra ``ray``: ``pip install 'ctxeval[ray]'``).

The runner ``ray``: the same evaluation as in one process, spread over Ray Data workers that
each score with ctxeval's own runner, with ONE budget (calls in flight, requests and tokens per
minute, ``Retry-After`` pauses, the cost cap) for the whole cluster::

    import ctxeval

    evaluation = ctxeval.evaluate(ctxeval.load_samples("traces.parquet"), ["context_precision"],
                                  llm=llm, runner="ray", max_concurrency=32,
                                  journal="run/journal.jsonl")

* :class:`RayRunner`: the runner (``runner="ray"``, or ``runner=RayRunner(workers=4,
  address="auto")``; ``ctxeval evaluate --runner ray``).
* :func:`evaluate_on_ray`: the shortcut ``evaluate(..., runner=RayRunner(...))``;
  :func:`score_dataset`: the rows as a lazy Ray Dataset.
* :class:`SharedBudget`: the budget actor, usable by any process
  (``RunSettings(shared_limits=...)``).

See docs/scaling-out.md.
"""

from __future__ import annotations

from .budget import SharedBudget
from .run import RayRunner, evaluate_on_ray, ray_init, read_dataset, score_dataset

__all__ = [
    "RayRunner",
    "SharedBudget",
    "evaluate_on_ray",
    "ray_init",
    "read_dataset",
    "score_dataset",
]
