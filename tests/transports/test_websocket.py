"""The WebSocket transport and its server adapter, over real 127.0.0.1 sockets."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from websockets.asyncio.client import connect
from websockets.asyncio.server import ServerConnection, serve
from websockets.datastructures import Headers
from websockets.exceptions import InvalidStatus
from websockets.http11 import Request, Response

from mcpmux.config.models import Settings, WebSocketServerConfig
from mcpmux.errors import AuthRequired, ConnectFailed, HTTPStatusError, MessageTooLarge
from mcpmux.transports import open_transport, serve_websocket
from tests.peers.fixtures import free_port
from tests.transports.conftest import WAIT_S, echo_server, session_over

pytestmark = [pytest.mark.anyio, pytest.mark.network]


def ws(port: int, **fields: Any) -> WebSocketServerConfig:
    return WebSocketServerConfig(name="ws", url=f"ws://127.0.0.1:{port}/mcp", **fields)


async def test_initialize_list_and_call_round_trip_over_websocket() -> None:
    with anyio.fail_after(WAIT_S):
        async with anyio.create_task_group() as tg:
            port = await tg.start(serve_websocket, echo_server())
            async with session_over(ws(port), Settings()) as (_streams, session):
                await session.initialize()
                tools = await session.list_tools()
                result = await session.call_tool("echo", {"text": "over websocket"})
            tg.cancel_scope.cancel()
    assert [tool.name for tool in tools.tools] == ["echo"]
    assert result.content[0].text == "over websocket"  # type: ignore[union-attr]


async def test_the_server_adapter_negotiates_mcp_and_refuses_clients_without_it() -> None:
    with anyio.fail_after(WAIT_S):
        async with anyio.create_task_group() as tg:
            port = await tg.start(serve_websocket, echo_server())
            async with connect(f"ws://127.0.0.1:{port}", subprotocols=["mcp"]) as client:  # type: ignore[list-item]
                negotiated = client.subprotocol
            with pytest.raises(InvalidStatus) as caught:
                async with connect(f"ws://127.0.0.1:{port}"):
                    pass
            tg.cancel_scope.cancel()
    assert negotiated == "mcp"
    assert caught.value.response.status_code == 400


async def test_a_server_without_the_mcp_subprotocol_is_refused() -> None:
    async def handler(connection: ServerConnection) -> None:
        await connection.wait_closed()

    with anyio.fail_after(WAIT_S):
        async with serve(handler, "127.0.0.1", 0) as server:
            port = server.sockets[0].getsockname()[1]
            with pytest.raises(ConnectFailed, match="subprotocol"):
                async with open_transport(ws(port), Settings()):
                    pass


async def test_a_frame_above_the_cap_surfaces_as_message_too_large() -> None:
    async def handler(connection: ServerConnection) -> None:
        await connection.send("x" * 200_000)
        await connection.wait_closed()

    with anyio.fail_after(WAIT_S):
        async with serve(handler, "127.0.0.1", 0, subprotocols=["mcp"]) as server:  # type: ignore[list-item]
            port = server.sockets[0].getsockname()[1]
            async with open_transport(ws(port), Settings(max_message_bytes=100_000)) as streams:
                items = [item async for item in streams.read]
    assert len(items) == 1
    assert isinstance(items[0], MessageTooLarge)
    assert items[0].limit == 100_000


@pytest.mark.parametrize(("status", "error"), [(401, AuthRequired), (403, AuthRequired), (500, HTTPStatusError)])
async def test_a_rejected_handshake_maps_the_http_status(status: int, error: type[HTTPStatusError]) -> None:
    seen: list[str | None] = []

    def reject(connection: ServerConnection, request: Request) -> Response:
        seen.append(request.headers.get("Authorization"))
        return Response(status, "no", Headers(), b"go away")

    with anyio.fail_after(WAIT_S):
        async with serve(lambda c: c.wait_closed(), "127.0.0.1", 0, process_request=reject) as server:
            port = server.sockets[0].getsockname()[1]
            config = ws(port, headers={"Authorization": "Bearer t0ken"})
            with pytest.raises(error) as caught:
                async with open_transport(config, Settings()):
                    pass
    assert type(caught.value) is error
    assert caught.value.status == status
    assert "go away" in caught.value.body
    assert seen == ["Bearer t0ken"]


async def test_a_refused_websocket_connection_raises_connect_failed() -> None:
    with pytest.raises(ConnectFailed):
        async with open_transport(ws(free_port()), Settings()):
            pass
