"""``ctxeval view``: a local, read-only web viewer of every sample of a run folder.

The parts, one concept each: :mod:`.sources` (a run to show: its folder, results and data
file, and where its index lives), :mod:`.schema` (the index's tables), :mod:`.index` (builds
the SQLite index once, streaming, and rebuilds it when the run changed), :mod:`.query` (a view
of the explorer: filter, search, sort, as SQL), :mod:`.reader` (reads pages and samples from
the index), :mod:`.page` (the HTML page), :mod:`.server` (the HTTP server).

Nothing here is imported by ``import ctxeval``: the command line imports it when asked.
"""
