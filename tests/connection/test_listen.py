"""A stateless-era (2026-07-28) server's list changes and resource updates, through ``subscriptions/listen``.

The era has no unsolicited notifications and no ``resources/subscribe``: a connection listens, and
the callbacks see the same events as in the handshake era (before, they never fired).
"""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.server import Server

from mcpmux.connection import ClientCallbacks
from mcpmux.errors import ProtocolError
from mcpmux.testing import MockServer, ToolContext
from tests.connection.servers import connect

pytestmark = pytest.mark.anyio

NOTE = "memo://note"


async def grow(name: str, ctx: ToolContext) -> str:
    ctx.mock.tool(name, result="new")
    await ctx.send_tool_list_changed()
    return "grown"


async def touch(ctx: ToolContext) -> str:
    await ctx.send_resource_updated(NOTE)
    return "touched"


def mock(era: Any) -> MockServer:
    return MockServer("m").era(era).tool("grow", grow).tool("touch", touch).resource(NOTE, "a note")


class Seen:
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []
        self.arrived = anyio.Event()

    async def on_list_changed(self, server: str, kind: str) -> None:
        self.events.append(("list_changed", kind))
        self.arrived.set()

    async def on_resource_updated(self, server: str, uri: str) -> None:
        self.events.append(("updated", uri))
        self.arrived.set()

    async def next(self) -> tuple[str, str]:
        while not self.events:
            self.arrived = anyio.Event()
            await self.arrived.wait()
        return self.events.pop(0)


def callbacks(seen: Seen) -> ClientCallbacks:
    return ClientCallbacks(on_list_changed=seen.on_list_changed, on_resource_updated=seen.on_resource_updated)


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
async def test_list_changes_reach_the_callback_in_both_eras(era: str) -> None:
    seen = Seen()
    with anyio.fail_after(10):
        async with mock(era).serve("memory") as served, served.connection(callbacks=callbacks(seen)) as conn:
            assert conn.protocol_version == era
            await conn.call_tool("grow", {"name": "later"})
            assert await seen.next() == ("list_changed", "tools")
            assert "later" in {t.name for t in await conn.list_tools()}


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
async def test_resource_updates_reach_the_callback_only_while_subscribed(era: str) -> None:
    seen = Seen()
    with anyio.fail_after(10):
        async with mock(era).serve("memory") as served, served.connection(callbacks=callbacks(seen)) as conn:
            await conn.call_tool("touch", {})  # nobody subscribed: nothing arrives
            await conn.subscribe_resource(NOTE)
            await conn.call_tool("touch", {})
            assert await seen.next() == ("updated", NOTE)
            await conn.unsubscribe_resource(NOTE)
            await conn.call_tool("touch", {})
            await conn.call_tool("grow", {"name": "marker"})  # the next event is this one, not an update
            assert await seen.next() == ("list_changed", "tools")
    assert seen.events == []


async def test_subscribing_to_a_stateless_server_without_subscriptions_is_a_clear_error() -> None:
    # A 2026-07-28 server that serves no subscriptions/listen offers no resources.subscribe.
    async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=[types.Resource(uri=NOTE, name="note")])

    plain: Server[Any] = Server("plain", on_list_resources=list_resources)
    with anyio.fail_after(10):
        async with connect(plain, protocol="2026-07-28") as conn:
            assert conn.protocol_version == "2026-07-28"
            with pytest.raises(ProtocolError, match="offers no resource subscriptions"):
                await conn.subscribe_resource(NOTE)


async def test_a_stream_the_server_closes_is_opened_again() -> None:
    from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler
    from mcp.shared.subscriptions import ToolsListChanged

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[])

    bus = InMemorySubscriptionBus()
    handler = ListenHandler(bus)
    server: Server[Any] = Server("closing", on_list_tools=list_tools, on_subscriptions_listen=handler)
    seen = Seen()
    with anyio.fail_after(15):
        async with connect(server, protocol="2026-07-28", callbacks=callbacks(seen)) as conn:
            assert conn.protocol_version == "2026-07-28"
            handler.close()  # the server ends every stream gracefully (a restart, a deploy)
            while not seen.events:  # the client listens again; an event then arrives
                await bus.publish(ToolsListChanged())
                with anyio.move_on_after(0.2):
                    await seen.arrived.wait()
    assert seen.events[0] == ("list_changed", "tools")
