"""What a connected server costs the event loop: a bounded number of tasks, and calls that need no extra hop.

Not timings (the machine is shared): counts of what the manager keeps running per server, real
stdio children of the test kit. Issue 24 cut them (50 servers connect at <= 1.3x the raw SDK's CPU
is the aim; ``bench/bench_connect.py`` measures it). A change that adds a task per server shows here.
"""

from __future__ import annotations

from contextlib import AsyncExitStack

import anyio
import pytest

from mcpmux.config.models import Config, Settings
from mcpmux.manager import Manager
from mcpmux.testing import MockServer

pytestmark = pytest.mark.anyio

SERVERS = 3
TASKS_PER_SERVER = 3
"""Supervisor loop, dispatcher, stdout reader (stderr and the exit are watched from loop callbacks on asyncio)."""


def _mock(name: str) -> MockServer:
    return MockServer(name).tool("echo", result="hi", description="Say hi.")


async def test_a_connected_stdio_server_keeps_a_bounded_number_of_tasks() -> None:
    async with AsyncExitStack() as stack:
        served = [await stack.enter_async_context(_mock(f"s{i}").serve("stdio")) for i in range(SERVERS)]
        config = Config(servers=tuple(s.config for s in served), settings=Settings(connect_timeout_ms=60_000))
        with anyio.fail_after(120):
            before = len(anyio.get_running_tasks())
            async with Manager(config, catalog=False) as mux:
                assert all(s.state.value == "connected" for s in mux.status()), mux.status()
                await anyio.sleep(0.05)  # let every started task reach its first wait
                running = len(anyio.get_running_tasks()) - before
                # The watch of each session waits in the supervisor's own task; the re-lister
                # starts only when a list changes or expires (these servers never say so).
                assert running <= SERVERS * TASKS_PER_SERVER + 1, [t.name for t in anyio.get_running_tasks()]
                result = await mux.call_tool("s0:echo", {})
                assert result.content[0].text == "hi"  # type: ignore[union-attr]
