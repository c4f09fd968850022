"""The HTTP floor (private): what every client shares (the answer type, the oversize error,
proxy rules, certificates), the aiohttp and httpx clients and the one a run gets, the bounded
httpx client handed to litellm, and the map from each foreign library's exceptions to
ctxeval's call errors. It imports nothing of the plugin above :mod:`ctxeval_llm.config`."""
