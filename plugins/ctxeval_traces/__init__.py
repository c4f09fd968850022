"""ctxeval's trace readers: evaluate the retrieval an application already traces.

Registered through the ``ctxeval`` distribution's entry points (group ``ctxeval.traces``):
``openinference`` (OTLP JSON, :mod:`ctxeval_traces.otlp`), ``mlflow``, ``langsmith`` and
``phoenix``. Every reader turns its format's spans into one shape (:mod:`ctxeval_traces.spans`)
and one function makes the sample (:mod:`ctxeval_traces.assemble`), under the user's mapping
(:mod:`ctxeval_traces.mapping`). Reached as ``ctxeval.load_traces(source, format=NAME)`` and
``ctxeval evaluate FILE --from NAME``; see docs/traces.md.
"""

from .mapping import DEFAULTS, TraceMapping
from .readers import LangSmithReader, MLflowReader, OpenInferenceReader, PhoenixReader

__all__ = [
    "DEFAULTS",
    "LangSmithReader",
    "MLflowReader",
    "OpenInferenceReader",
    "PhoenixReader",
    "TraceMapping",
]
