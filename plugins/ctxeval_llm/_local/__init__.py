"""A local server, found out (private): how many requests it computes at once (its slots), its
context window, and its own count of a prompt's tokens. Below :mod:`ctxeval_llm._transports`,
above :mod:`ctxeval_llm._http`."""
