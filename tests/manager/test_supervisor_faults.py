"""A transport that fails mid-session (its task group raises) fails its server, never the host."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import mcp_types as types
import pytest

from mcpmux.config.models import Config, ServerConfig, Settings
from mcpmux.connection import ClientCallbacks, Connection
from mcpmux.errors import ConnectFailed
from mcpmux.manager import Manager, ServerState, StateChanged
from mcpmux.testing import Served, in_memory
from mcpmux.transports.base import TransportStreams
from tests.manager.conftest import echo_server, stdio

pytestmark = [pytest.mark.anyio]


@asynccontextmanager
async def crashing(server: Served, crash: anyio.Event) -> AsyncIterator[TransportStreams]:
    """``server`` (a mock served in memory), over a transport whose own task raises once ``crash`` is set."""

    async def blow_up() -> None:
        await crash.wait()
        raise ConnectFailed("boom", "memory://boom", "the peer vanished (test)")

    async with (
        server.open() as streams,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(blow_up)
        yield streams


def text(result: types.CallToolResult) -> str:
    return "".join(b.text for b in result.content if isinstance(b, types.TextContent))


async def test_a_transport_crashing_mid_session_fails_its_server_and_the_host_lives_on() -> None:
    crash = anyio.Event()
    servers = {name: in_memory(echo_server(name, "ping")) for name in ("good", "boom")}

    def factory(config: ServerConfig, settings: Settings, callbacks: ClientCallbacks) -> Connection:
        built = servers[config.name]
        if config.name == "boom" and not crash.is_set():
            return Connection(config, settings, callbacks=callbacks, transport=lambda: crashing(built, crash))
        return built.connection_factory(config, settings, callbacks)

    config = Config(servers=(stdio("good"), stdio("boom")), settings=Settings(retry_attempts=0))
    with anyio.fail_after(20):
        async with Manager(config, catalog=False, connection_factory=factory) as mux:
            async with mux.subscribe() as events:
                crash.set()
                async for event in events:
                    if isinstance(event, StateChanged) and event.server == "boom" and event.new is ServerState.FAILED:
                        break
            boom = mux.supervisor("boom")
            assert "the peer vanished" in boom.reason
            assert text(await mux.call_tool("good:ping")) == "good:ping:"
            # The next call starts it again (this time over a sound transport).
            assert text(await mux.call_tool("boom:ping")) == "boom:ping:"
