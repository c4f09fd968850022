"""The scripted judge behind ``ctxeval serve-judge``: an OpenAI-compatible local server that
answers ctxeval's LLM-metric prompts with well-formed, deterministic answers derived from the
request by word overlap. NOT A REAL JUDGE: it is there to try the plumbing (the command line,
the run folder, the report) without a key or a model.

Modules: :mod:`.answers` (what it answers), :mod:`.wire` (the OpenAI wire shapes, shared with
the project's test double), :mod:`.server` (the HTTP server).
"""

from __future__ import annotations

from ctxeval._judge_server.answers import answer
from ctxeval._judge_server.server import MODEL, JudgeServer, make_server, server_url

__all__ = ["MODEL", "JudgeServer", "answer", "make_server", "server_url"]
