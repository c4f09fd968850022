"""The ``ctxeval`` command line: one module per command, and the shared parts.

::

    ctxeval evaluate DATA -m METRIC [-m METRIC ...] [--out DIR] [--resume] ...
    ctxeval metrics [--json]
    ctxeval plugins [--json]
    ctxeval compare RUN RUN [RUN ...] [--json | --markdown]
    ctxeval label-sheet RUN -m METRIC [--data DATA] [-n N] [-o FILE]
    ctxeval demo [--out DIR]
    ctxeval view RUN [RUN_B] [--host HOST] [--port N] [--data DATA] [--data-b DATA]
    ctxeval report RUN [--data DATA] [-o FILE]
    ctxeval serve-judge [--port N] [--host HOST] [--latency S]

Exit codes: 0 when every row is ok or undefined and every ``--fail-under`` gate holds, 1 when
any row is an error (or the run stopped at its cost limit), 2 on bad usage or unreadable input
(the message names file, line and field), 3 when a ``--fail-under`` gate fails, 130 when
interrupted.

Modules: :mod:`.render` (console, errors, the summary table), :mod:`.specs` (metric specs and
run files), :mod:`.progress` (a run with its live progress view), and one per command:
:mod:`.evaluate`, :mod:`.metrics`, :mod:`.plugins`, :mod:`.compare`, :mod:`.label_sheet`,
:mod:`.demo`, :mod:`.view`.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Sequence

from ctxeval._errors import ConfigError, DataError, MissingExtraError
from ctxeval._version import __version__
from ctxeval.cli.render import EXIT_OK, EXIT_USAGE, UsageError, fail

__all__ = ["build_parser", "main"]

EXAMPLES = """\
examples (`ctxeval COMMAND --help` has more):
  ctxeval demo
  ctxeval evaluate traces.jsonl -m @ids --out run1
  ctxeval evaluate traces.jsonl -m context_precision \\
      --model openai/gpt-4o-mini --out run2 --max-cost 2.50
  ctxeval compare run1 run2
  ctxeval view run1
  ctxeval report run1
  ctxeval label-sheet run2 -m context_precision --data traces.jsonl
  ctxeval serve-judge
"""

COMMANDS = (
    "evaluate",
    "metrics",
    "plugins",
    "compare",
    "label_sheet",
    "demo",
    "view",
    "report",
    "serve_judge",
)
"""The command modules, in the order ``ctxeval --help`` lists them: each declares its
command with ``add_parser(commands)`` and runs it with ``cmd_NAME(args)``."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ctxeval",
        description="Measure the quality of the context a RAG system retrieves.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"ctxeval {__version__}")
    parser.add_argument(
        "-v", "--verbose", action="count", default=0, help="log more (-vv for debug)"
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in COMMANDS:
        importlib.import_module(f"{__name__}.{module}").add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=[logging.WARNING, logging.INFO, logging.DEBUG][min(args.verbose, 2)],
        format="%(levelname)s %(name)s: %(message)s",
    )
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    module = importlib.import_module(f"{__name__}.{args.command_module}")
    command = getattr(module, f"cmd_{args.command_module}")
    try:
        code: int = command(args)
        return code
    except UsageError as exc:
        fail(str(exc))
    except DataError as exc:
        hint = ""
        if exc.line is not None and getattr(args, "lenient", None) is False:
            hint = (
                "\n(to score the other rows and record each bad one as error rows, pass --lenient)"
            )
        fail(str(exc) + hint)
    except (ConfigError, MissingExtraError) as exc:
        fail(str(exc))
    except BrokenPipeError:  # e.g. piped into head
        return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
