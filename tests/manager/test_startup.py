"""Manager start-up with many real, fast child servers: every wait ends, every child is reaped."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import psutil
import pytest

from mcpmux.config.models import Config, Settings, StdioServerConfig
from mcpmux.manager import Manager, ServerState

pytestmark = [pytest.mark.slow, pytest.mark.anyio, pytest.mark.subprocess]

TINY = Path(__file__).resolve().parents[1] / "fixtures" / "tiny_server.py"
SERVERS = 50
ROUNDS = 20


def tiny_servers(count: int) -> Config:
    servers = tuple(
        StdioServerConfig(name=f"tiny{i}", command=sys.executable, args=("-S", "-E", str(TINY))) for i in range(count)
    )
    return Config(servers=servers, settings=Settings(connect_timeout_ms=60_000, timeout_ms=60_000))


def children() -> set[int]:
    return {child.pid for child in psutil.Process().children(recursive=True)}


@pytest.mark.timeout(300)
async def test_fifty_fast_servers_start_twenty_times_without_hanging() -> None:
    config = tiny_servers(SERVERS)
    before = children()
    for _round in range(ROUNDS):
        # Generous: a round takes about a second here; a lost wake-up used to hang for ever.
        with anyio.fail_after(60):
            async with Manager(config, catalog=False) as mux:
                states = {status.state for status in mux.status()}
                assert states == {ServerState.CONNECTED}
                assert len(mux.tools()) == SERVERS
    assert children() - before == set()
