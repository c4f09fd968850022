"""``python -m ctxeval``: the command line."""

import sys

from ctxeval.cli import main

sys.exit(main())
