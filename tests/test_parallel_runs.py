"""What the parallel run (``scripts/test``: pytest-xdist, ``--dist loadgroup``) relies on, checked in it.

A group (``pytest.mark.xdist_group``) keeps a module's tests on one worker, so a module-scoped server
starts once, and a field server's five faces run once; a release of pytest or xdist that drops the
group would not fail anything else, only waste the run's time (it did: pytest 9.2 with xdist 3.8).
Workers take ports from blocks of their own.
"""

from __future__ import annotations

import socket

import pytest

from tests.peers import fixtures

pytestmark = pytest.mark.xdist_group("parallel-runs")


def test_a_grouped_test_carries_its_group_in_its_node_id_under_loadgroup(request: pytest.FixtureRequest) -> None:
    if not getattr(request.config.option, "loadgroup", False):
        pytest.skip("not a pytest-xdist worker under --dist loadgroup (scripts/test runs one)")
    assert request.node.nodeid.endswith("@parallel-runs"), (
        f"{request.node.nodeid}: xdist_group marks are ignored; pin the pytest/pytest-xdist pair that keeps them"
    )


def test_each_worker_takes_ports_from_its_own_block_below_the_ephemeral_range(monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = []
    for worker in ("gw0", "gw1", "gw7"):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
        fixtures._worker_port_block.cache_clear()
        block = fixtures._worker_port_block()
        assert block is not None
        start, size = block
        ports = {fixtures.free_port() for _ in range(5)}
        assert all(start <= port < start + size for port in ports), (worker, block, ports)
        blocks.append(range(start, start + size))
    fixtures._worker_port_block.cache_clear()
    assert not set(blocks[0]) & set(blocks[1]) and not set(blocks[1]) & set(blocks[2])
    with open("/proc/sys/net/ipv4/ip_local_port_range") as ephemeral:
        assert max(block.stop for block in blocks) <= int(ephemeral.read().split()[0])


def test_a_port_in_use_is_never_handed_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw3")
    fixtures._worker_port_block.cache_clear()
    try:
        taken = fixtures.free_port()
        with socket.create_server(("127.0.0.1", taken)):
            handed = {fixtures.free_port() for _ in range(fixtures._PORT_BLOCK_SIZE)}
        assert taken not in handed
    finally:
        fixtures._worker_port_block.cache_clear()


def test_outside_xdist_the_kernel_picks_the_port(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    fixtures._worker_port_block.cache_clear()
    try:
        assert fixtures._worker_port_block() is None
        port = fixtures.free_port()
        with socket.create_server(("127.0.0.1", port)):
            pass
    finally:
        fixtures._worker_port_block.cache_clear()
