"""ctxeval inside the evaluation harnesses teams already run (issue #51).

One module per host, each importing its host only when used (each host is an extra):

* :mod:`ctxeval_hosts.inspect_ai`: an Inspect AI ``@scorer`` (``pip install 'ctxeval[inspect]'``);
* :mod:`ctxeval_hosts.langsmith`: a LangSmith evaluator ``(inputs, outputs, reference_outputs)``;
* :mod:`ctxeval_hosts.braintrust`: an autoevals ``Scorer`` for Braintrust's ``Eval``;
* :mod:`ctxeval_hosts.phoenix`: a Phoenix evals evaluator for ``evaluate_dataframe``;
* :mod:`ctxeval_hosts.promptfoo`: a promptfoo python assertion ``get_assert(output, context)``.

Every adapter stands on one :class:`ctxeval.Session` (one budget, cache and meter for all the rows
the host scores with it), reads the sample's fields through one explicit mapping rule set
(:mod:`ctxeval_hosts._rowmap`) and writes ctxeval's results one way (:mod:`ctxeval_hosts._outcome`):
``undefined`` is the host's "not scored", never 0.
"""
