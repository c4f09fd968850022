"""IR measure names as ir_measures and ranx spell them (``nDCG@10``, ``P@5``, ``AP``,
``mrr``, ``recall@100``...), read as the ID plugin's metrics.

A name that is not registered is looked up here (case-insensitively): ``nDCG@10`` is
``id_ndcg_at_k`` with ``k=10``, and its rows are named ``nDCG@10``, as written.

=====================================  ==============================  =========
names                                  metric                          cut-off
=====================================  ==============================  =========
``nDCG@k``, ``ndcg_cut_k``             ``id_ndcg_at_k``                required
``P@k``, ``precision@k``, ``P_k``      ``id_precision_at_k``           required
``R@k``, ``recall@k``, ``recall_k``    ``id_recall_at_k``              required
``Success@k``, ``hit_rate@k``,         ``id_hit_rate_at_k``            required
``hits@k``, ``success_k``
``F1@k``                               ``id_f1_at_k``                  required
``AP``, ``MAP``, ``map``               ``id_average_precision``        none
``AP@k``, ``map@k``, ``map_cut_k``     ``id_average_precision_at_k``   optional
``RR``, ``MRR``, ``recip_rank``        ``id_mrr``                      none
``RR@k``, ``mrr@k``                    ``id_reciprocal_rank_at_k``     optional
``Rprec``, ``r-precision``             ``id_r_precision``              none
``Bpref``, ``bpref``                   ``id_bpref``                    none
``Judged@k``, ``judged_k``             ``id_judged_at_k``              required
``id_ndcg_at_10`` (a row name: the     the metric before ``_at_``      required
registry name with its ``k``)
=====================================  ==============================  =========
"""

from __future__ import annotations

import re
from typing import Any, Final

__all__ = ["IR_NAMES", "IR_SPELLINGS", "ir_names_of", "parse_ir_name"]

# spelling (lower case) -> (metric without a cut-off, metric with a cut-off)
IR_NAMES: Final[dict[str, tuple[str | None, str | None]]] = {
    "ndcg": (None, "id_ndcg_at_k"),
    "ndcg_cut": (None, "id_ndcg_at_k"),
    "p": (None, "id_precision_at_k"),
    "precision": (None, "id_precision_at_k"),
    "r": (None, "id_recall_at_k"),
    "recall": (None, "id_recall_at_k"),
    "success": (None, "id_hit_rate_at_k"),
    "hit_rate": (None, "id_hit_rate_at_k"),
    "hits": (None, "id_hit_rate_at_k"),
    "f1": (None, "id_f1_at_k"),
    "ap": ("id_average_precision", "id_average_precision_at_k"),
    "map": ("id_average_precision", "id_average_precision_at_k"),
    "map_cut": (None, "id_average_precision_at_k"),
    "rr": ("id_mrr", "id_reciprocal_rank_at_k"),
    "mrr": ("id_mrr", "id_reciprocal_rank_at_k"),
    "recip_rank": ("id_mrr", None),
    "rprec": ("id_r_precision", None),
    "r-precision": ("id_r_precision", None),
    "r_precision": ("id_r_precision", None),
    "bpref": ("id_bpref", None),
    "judged": (None, "id_judged_at_k"),
    # the row names of the ID metrics with a cut-off (``id_ndcg_at_k`` with k=10 names its
    # rows ``id_ndcg_at_10``): a row name is a name -m accepts
    **{
        metric[: -len("_k")]: (None, metric)
        for metric in (
            "id_ndcg_at_k",
            "id_precision_at_k",
            "id_recall_at_k",
            "id_hit_rate_at_k",
            "id_f1_at_k",
            "id_average_precision_at_k",
            "id_reciprocal_rank_at_k",
            "id_judged_at_k",
        )
    },
}
"""Every accepted spelling (lower case) and the metrics it stands for."""

IR_SPELLINGS: Final[dict[str, str]] = {
    "ndcg": "nDCG",
    "p": "P",
    "r": "R",
    "success": "Success",
    "f1": "F1",
    "ap": "AP",
    "map": "MAP",
    "rr": "RR",
    "mrr": "MRR",
    "rprec": "Rprec",
    "bpref": "Bpref",
    "judged": "Judged",
}
"""How ir_measures writes the spellings it has (for "did you mean"); others as in
:data:`IR_NAMES`."""

_NAME = re.compile(r"^(?P<measure>[A-Za-z][A-Za-z0-9_-]*?)(?:(?:@|_)(?P<k>\d+))?$")


DOCUMENT_SUFFIX: Final = "@document"
"""What the row name of a metric with ``unit="document"`` ends with (``P@10@document``,
``id_precision_at_10@document``): both levels of one metric side by side in a run."""


def parse_ir_name(name: str) -> tuple[str, dict[str, Any]] | None:
    """``(metric, options)`` for an IR measure name, or None when ``name`` is not one.

    Raises:
        ValueError: the measure needs a cut-off and has none (``nDCG``), or takes none
            (``Rprec@5``).
    """
    match = _NAME.match(name)
    if match is None:
        return None
    measure, k = match["measure"].lower(), match["k"]
    if measure not in IR_NAMES:
        return None
    plain, cut = IR_NAMES[measure]
    if k is None:
        if plain is None:
            raise ValueError(f"{name!r} needs a cut-off: write it as {name}@10, say")
        return plain, {"name": name}
    if cut is None:
        raise ValueError(f"{match['measure']} takes no cut-off; write it as {match['measure']!r}")
    return cut, {"name": name, "k": int(k)}


def ir_names_of(metric: str) -> list[str]:
    """The ir_measures-style spellings of ``metric`` (for listings), e.g. ``['nDCG@k']``."""
    shown = {
        "id_ndcg_at_k": ["nDCG@k"],
        "id_precision_at_k": ["P@k"],
        "id_recall_at_k": ["R@k"],
        "id_hit_rate_at_k": ["Success@k"],
        "id_f1_at_k": ["F1@k"],
        "id_average_precision": ["AP"],
        "id_average_precision_at_k": ["AP@k"],
        "id_mrr": ["RR"],
        "id_reciprocal_rank_at_k": ["RR@k"],
        "id_r_precision": ["Rprec"],
        "id_bpref": ["Bpref"],
        "id_judged_at_k": ["Judged@k"],
    }
    return shown.get(metric, [])
