"""A module that notes which thread imported it (``tests/test_loop.py``: a run imports its HTTP
client's library in a worker thread, not on its event loop)."""

from __future__ import annotations

import threading

IMPORTED_IN = threading.get_ident()
