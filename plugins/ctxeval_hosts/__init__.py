"""ctxeval's metrics inside the evaluation harnesses teams already run.

One module per host, each behind an extra of its own and imported only when used (importing
this package imports no host):

* :mod:`ctxeval_hosts.mlflow`: MLflow GenAI scorers (``mlflow.genai.evaluate``), extra
  ``mlflow``; docs/hosts/mlflow.md.
* :mod:`ctxeval_hosts.deepeval`: DeepEval metrics (``deepeval.evaluate``, ``assert_test``),
  extra ``deepeval``; docs/hosts/deepeval.md.
* :mod:`ctxeval_hosts.inspect_ai`, :mod:`ctxeval_hosts.langsmith`,
  :mod:`ctxeval_hosts.braintrust`, :mod:`ctxeval_hosts.phoenix`,
  :mod:`ctxeval_hosts.promptfoo`: Inspect AI, and the callables of LangSmith, Braintrust,
  Phoenix and promptfoo.

Every adapter stands on one :class:`ctxeval.Session` (one budget, cache and meter for all the
host's threads and tasks); ctxeval's ``undefined`` is the host's "not scored", never 0.
:class:`SharedSession` (``from ctxeval_hosts import SharedSession``) is one session several
adapters share, each row scored once between them.
"""

from ctxeval_hosts._shared import SharedSession

__all__ = ["SharedSession"]
