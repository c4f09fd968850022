"""ctxeval's ID plugin: retrieval metrics over context IDs, no text needed.

Registered through the ``ctxeval.metrics`` and ``ctxeval.matchers`` entry points of the
``ctxeval`` distribution, exactly as a third-party plugin would be.

Metrics (see :mod:`ctxeval_ids.metrics`): ``id_based_context_precision``,
``id_based_context_recall`` (set metrics, rank ignored, as ragas defines them) and the ranked
metrics ``id_precision_at_k``, ``id_recall_at_k``, ``id_hit_rate_at_k``, ``id_mrr``,
``id_average_precision`` and ``id_ndcg_at_k``, computed as trec_eval computes them.

Multi-step search (see :mod:`ctxeval_ids.search`): ``search_evidence_recall``,
``search_first_hit_step``, ``search_calls_to_full_recall``, ``search_redundancy`` and
``search_step_precision``, over a sample's ``retrieval_steps``.
"""
