"""The transports (private): how a configuration's requests are sent: the OpenAI-compatible
one over ctxeval's own HTTP clients, the Batch API, and litellm for every other provider;
:mod:`~ctxeval_llm._transports.choice` picks one, once per run. Below :mod:`ctxeval_llm._ask`,
above :mod:`ctxeval_llm._local`."""
