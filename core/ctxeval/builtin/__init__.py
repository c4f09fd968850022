"""Plugins that ship in the core: string-similarity matching and the non-LLM metrics.

They are registered through the ``ctxeval`` distribution's entry points, like any plugin.
"""
