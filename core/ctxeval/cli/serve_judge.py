"""``ctxeval serve-judge``: a scripted, local, OpenAI-compatible judge to try the LLM metrics
with no key and no model. NOT A REAL JUDGE: its answers come from word overlap.

It serves ``POST /v1/chat/completions`` and ``GET /v1/models`` on 127.0.0.1 (see
:mod:`ctxeval._judge_server`), prints a banner with the command to run against it, and stops
on Ctrl-C (or SIGTERM).
"""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path
from typing import Any

from ctxeval.cli.invocation import program
from ctxeval.cli.render import EXIT_OK, UsageError, console
from ctxeval.cli.serving import listening, serve_until_stopped

__all__ = ["DEFAULT_PORT", "TRY_METRICS", "add_parser", "cmd_serve_judge", "try_command"]

DEFAULT_PORT = 8799
"""The port ``ctxeval serve-judge`` listens on unless ``--port`` says otherwise."""

TRY_METRICS = ("context_precision", "context_recall", "context_entity_recall")
"""The LLM metrics the banner's command runs on the demo data (``context_utilization`` needs
a ``response`` field, which the demo data has not)."""


def _demo_data() -> str:
    """The bundled demo data's path, relative to the current folder when it is below it."""
    from importlib.resources import files

    path = Path(str(files("ctxeval") / "data" / "demo.jsonl"))
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def try_command(api_base: str, data: str | None = None, out: str = "scripted-run") -> str:
    """The ``ctxeval evaluate`` command line that scores ``data`` (default: the demo data)
    with the LLM metrics against the scripted judge at ``api_base``."""
    from ctxeval._judge_server import MODEL

    words = ["evaluate", data or _demo_data()]
    for metric in TRY_METRICS:
        words += ["-m", metric]
    words += ["--model", f"openai/{MODEL}", "--api-base", api_base, "--out", out]
    return f"{program()} {shlex.join(words)}"


def _banner(url: str, host: str, latency: float) -> str:
    lines = [
        f"ctxeval scripted judge listening on {url}",
        "",
        "  NOT A REAL JUDGE — for trying the plumbing.",
        "  It answers ctxeval's LLM-metric prompts by word overlap, with no model:",
        "  its scores say nothing about your retrieval. Rows judged by it name the",
        "  model openai/scripted-judge in their provenance.",
    ]
    if host not in ("127.0.0.1", "localhost", "::1"):
        lines.append(f"  Listening on {host}: other machines can reach it.")
    if latency:
        lines.append(f"  Each answer waits {latency:g} s.")
    lines += [
        "",
        "Try it from another terminal (no API key needed):",
        "",
        f"  {try_command(url)}",
        "",
        "Ctrl-C to stop.",
    ]
    return "\n".join(lines)


def add_parser(commands: Any) -> None:
    """Declare ``ctxeval serve-judge`` and its options on ``commands`` (the
    subparsers of the ``ctxeval`` parser)."""
    parser = commands.add_parser(
        "serve-judge",
        help="a scripted local judge to try the LLM metrics without a key (NOT a real judge)",
        description="Serve an OpenAI-compatible endpoint on this machine that answers ctxeval's "
        "LLM-metric prompts with well-formed, deterministic answers made by word overlap: NOT A "
        "REAL JUDGE, for trying the plumbing. Use it with --model openai/scripted-judge "
        "--api-base http://127.0.0.1:PORT/v1; no API key is needed. Ctrl-C stops it.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="the address to listen on (127.0.0.1)")
    parser.add_argument(
        "--port", type=int, default=8799, metavar="N", help="the port (8799; 0: a free one)"
    )
    parser.add_argument(
        "--latency", type=float, default=0.0, metavar="S", help="seconds before each answer (0)"
    )
    parser.set_defaults(command_module="serve_judge")


def cmd_serve_judge(args: argparse.Namespace) -> int:
    from ctxeval._judge_server import make_server, server_url

    if args.latency < 0:
        raise UsageError(f"--latency must be 0 or more seconds, got {args.latency:g}")
    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port must be 0 to 65535, got {args.port}")
    server = listening(
        lambda: make_server(args.host, args.port, latency=args.latency), args.host, args.port
    )
    print(_banner(server_url(server), args.host, args.latency), flush=True)

    serve_until_stopped(server)
    console(stderr=True).print(
        f"scripted judge stopped ({server.answered} answers)", highlight=False
    )
    return EXIT_OK
