"""Asking one prompt (private): the window check, the fan-out of a row's requests, the output
modes (JSON schema, JSON object, text), then the cache, the scheduler and a transport; below
:mod:`ctxeval_llm.judges`, above :mod:`ctxeval_llm._transports`."""
