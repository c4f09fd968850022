"""The suite's own plumbing: the ``xdist_group`` of every grouped test reaches pytest-xdist's
scheduler (``--dist loadgroup``, in ``pyproject.toml``), so each group runs on one worker: one
Ray cluster, one Spark session, one llama server (see ``conftest.py``). pytest 9.2 dropped
xdist's way of saying it without a word (pytest-dev/pytest-xdist#1386): the groups were then
spread over the workers."""

from __future__ import annotations

import pytest

from conftest import xdist_group_of


@pytest.mark.xdist_group("suite-groups")  # (so that the session always holds a grouped test)
def test_every_grouped_test_carries_its_group_to_the_scheduler(
    request: pytest.FixtureRequest,
) -> None:
    config = request.config
    if not hasattr(config, "workerinput") or not config.getoption("loadgroup", False):
        pytest.skip("asks a pytest-xdist worker with --dist loadgroup (the README's -n auto)")
    groups = {item.nodeid: xdist_group_of(item) for item in request.session.items}
    grouped = [(nodeid, group) for nodeid, group in groups.items() if group is not None]
    assert request.node.nodeid in {nodeid for nodeid, _ in grouped}
    # the scheduler's unit of work is the node id's text after its last "@"
    lost = [nodeid for nodeid, group in grouped if nodeid.rpartition("@")[2] != group]
    assert not lost, lost
