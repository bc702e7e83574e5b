"""``lifecycle: transient``: a server started for a call (or a sync) and stopped once no call is left.

Real children: each server is a :class:`~mcpmux.testing.MockServer` run over stdio by the manager
itself (``python -m mcpmux.testing``), so every start and stop is a real process started and reaped.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import psutil
import pytest

from mcpmux.config.models import Config, ServerConfig, Settings
from mcpmux.errors import MCPMuxError
from mcpmux.manager import Manager
from mcpmux.testing import MockServer
from mcpmux.types.events import StateChanged
from mcpmux.types.models import ServerState

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess]

DEADLINE_S = 120.0


@asynccontextmanager
async def _transient(mock: MockServer, name: str) -> AsyncIterator[ServerConfig]:
    async with mock.serve("stdio") as served:
        yield served.config.model_copy(update={"name": name, "lifecycle": "transient"})


def _state(manager: Manager, name: str) -> tuple[ServerState, int | None]:
    status = next(s for s in manager.status() if s.name == name)
    return status.state, status.pid


async def _until_parked(manager: Manager, name: str) -> None:
    """Wait until ``name`` is stopped again (it stops on its own, soon after its work)."""
    async with manager.subscribe() as events:
        if _state(manager, name)[0] is ServerState.CONFIGURED:
            return
        async for event in events:
            if isinstance(event, StateChanged) and event.server == name and event.new is ServerState.CONFIGURED:
                return


@pytest.mark.slow
async def test_a_transient_server_lists_then_stops_and_each_call_starts_it_for_that_call() -> None:
    mock = MockServer("tr").tool("echo", result="pong")
    async with _transient(mock, "tr") as server:
        config = Config(servers=(server,), settings=Settings(connect_timeout_ms=60_000))
        with anyio.fail_after(DEADLINE_S):
            async with Manager(config, catalog=False) as manager:
                # Started once to learn its tools (no catalog), then stopped: nothing runs between calls.
                await _until_parked(manager, "tr")
                assert [t.tool for t in manager.tools("tr")] == ["echo"]
                assert _state(manager, "tr")[1] is None
                for _ in range(2):
                    result = await manager.call_tool("tr:echo", {})
                    assert result.content[0].text == "pong"  # type: ignore[union-attr]
                    await _until_parked(manager, "tr")
                    assert _state(manager, "tr")[1] is None
                status = next(s for s in manager.status() if s.name == "tr")
                assert status.reason == "stopped after its last call (lifecycle: transient)"
                assert status.last_error is None  # a stop is not a failure
                # Three runs: the listing and one per call, each a new child.
                assert sum(1 for t in status.history if t.state is ServerState.CONNECTED) == 3


async def test_concurrent_calls_share_one_run_and_it_stops_after_the_last() -> None:
    mock = MockServer("tr").tool("slow", result="done").delay(0.5, tool="slow")
    async with _transient(mock, "tr") as server:
        config = Config(servers=(server,), settings=Settings(connect_timeout_ms=60_000))
        with anyio.fail_after(DEADLINE_S):
            async with Manager(config, catalog=False) as manager:
                await _until_parked(manager, "tr")
                answers: list[str] = []

                async def call(n: int) -> None:
                    result = await manager.call_tool("tr:slow", {})
                    answers.append(result.content[0].text)  # type: ignore[union-attr]

                async with anyio.create_task_group() as tg:
                    for n in range(5):
                        tg.start_soon(call, n)
                assert answers == ["done"] * 5
                await _until_parked(manager, "tr")
                history = next(s for s in manager.status() if s.name == "tr").history
                # The listing's run and one run for all five calls (none was cut off by a stop).
                assert sum(1 for t in history if t.state is ServerState.CONNECTED) == 2


@pytest.mark.slow
async def test_at_most_max_transient_servers_run_at_once() -> None:
    mocks = [MockServer(f"t{i}").tool("slow", result="ok").delay(0.3, tool="slow") for i in range(3)]
    async with _transient(mocks[0], "t0") as a, _transient(mocks[1], "t1") as b, _transient(mocks[2], "t2") as c:
        settings = Settings(connect_timeout_ms=60_000, max_transient_servers=1)
        with anyio.fail_after(DEADLINE_S):
            async with Manager(Config(servers=(a, b, c), settings=settings), catalog=False) as manager:
                for name in ("t0", "t1", "t2"):
                    await _until_parked(manager, name)
                most = 0
                done = anyio.Event()

                async def watch() -> None:
                    nonlocal most
                    while not done.is_set():
                        running = [s for s in manager.status() if s.pid is not None and psutil.pid_exists(s.pid)]
                        most = max(most, len(running))
                        await anyio.sleep(0.01)

                async def call(name: str) -> None:
                    result = await manager.call_tool(f"{name}:slow", {})
                    assert not result.is_error

                async with anyio.create_task_group() as tg:
                    tg.start_soon(watch)
                    async with anyio.create_task_group() as calls:
                        for name in ("t0", "t1", "t2", "t0", "t1", "t2"):
                            calls.start_soon(call, name)
                    done.set()
                assert most == 1


async def test_a_transient_server_that_crashes_mid_call_fails_that_call_and_serves_the_next() -> None:
    mock = MockServer("tr").tool("echo", result="again").tool("boom", result="never").crash(tool="boom")
    async with _transient(mock, "tr") as server:
        config = Config(servers=(server,), settings=Settings(connect_timeout_ms=60_000))
        with anyio.fail_after(DEADLINE_S):
            async with Manager(config, catalog=False) as manager:
                await _until_parked(manager, "tr")
                with pytest.raises(MCPMuxError) as failed:
                    await manager.call_tool("tr:boom", {})
                assert "tr" in str(failed.value)
                result = await manager.call_tool("tr:echo", {})
                assert result.content[0].text == "again"  # type: ignore[union-attr]
                await _until_parked(manager, "tr")
