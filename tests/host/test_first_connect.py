"""A call made while its server is still making its first connection waits for it (bounded by the server's
connect timeout), on the path every face takes: `mcpmux api` answered 503 "its tools are unknown" in the
first seconds after it started (issue 42, bug 3)."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest

from mcpmux import Host
from mcpmux.config.models import Config, SecurityConfig, StdioServerConfig
from mcpmux.errors import ServerUnavailable
from mcpmux.policy import StateStore

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess]

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
WAIT_S = 60.0


def _config(server: StdioServerConfig) -> Config:
    return Config(servers=(server,), security=SecurityConfig(pinning="off"))


async def test_a_call_waits_for_a_server_still_connecting(tmp_path: Path) -> None:
    slow = StdioServerConfig(
        name="slow", command=sys.executable, args=["-S", "-E", str(FIXTURES / "slow_server.py")],
        env={"SLOW_START_S": "2"}, connect_timeout_ms=60_000,
    )  # fmt: skip
    with anyio.fail_after(WAIT_S):
        async with Host(_config(slow), store=StateStore(tmp_path / "state.db"), wait=False, catalog=False) as host:
            assert host.manager.registry.catalog("slow") is None  # not listed yet: the call below must wait
            result = await host.call_tool("slow:echo", {"text": "hi"})
    assert [block.text for block in result.content] == ["hi"]  # type: ignore[union-attr]


async def test_a_server_that_fails_to_start_is_the_reason_without_waiting_out_the_timeout(tmp_path: Path) -> None:
    broken = StdioServerConfig(
        name="broken", command=sys.executable, args=["-c", "import sys; sys.exit('no such thing')"],
        connect_timeout_ms=600_000, retry_attempts=0,
    )  # fmt: skip
    with anyio.fail_after(WAIT_S):  # far under the 600 s connect timeout
        async with Host(_config(broken), store=StateStore(tmp_path / "state.db"), wait=False, catalog=False) as host:
            with pytest.raises(ServerUnavailable, match="tools are unknown"):
                await host.call_tool("broken:anything", {})
