"""The TCP transport and its server adapter, over real 127.0.0.1 sockets."""

from __future__ import annotations

import json

import anyio
import pytest
from anyio.abc import SocketStream

from mcpmux.config.models import Settings, TcpServerConfig
from mcpmux.errors import ConnectFailed, MessageTooLarge
from mcpmux.transports import open_transport, serve_tcp
from tests.peers.fixtures import free_port
from tests.transports.conftest import WAIT_S, echo_server, session_over

pytestmark = [pytest.mark.anyio, pytest.mark.network]


def tcp(port: int) -> TcpServerConfig:
    return TcpServerConfig(name="tcp", url=f"tcp://127.0.0.1:{port}")


async def test_initialize_list_and_call_round_trip_over_tcp() -> None:
    with anyio.fail_after(WAIT_S):
        async with anyio.create_task_group() as tg:
            port = await tg.start(serve_tcp, echo_server())
            async with session_over(tcp(port), Settings()) as (_streams, session):
                await session.initialize()
                tools = await session.list_tools()
                result = await session.call_tool("echo", {"text": "over tcp"})
            tg.cancel_scope.cancel()
    assert [tool.name for tool in tools.tools] == ["echo"]
    assert result.content[0].text == "over tcp"  # type: ignore[union-attr]


async def test_a_refused_connection_raises_connect_failed() -> None:
    port = free_port()
    with pytest.raises(ConnectFailed) as caught:
        async with open_transport(tcp(port), Settings()):
            pass
    assert caught.value.target == f"tcp://127.0.0.1:{port}"


async def test_an_oversized_line_from_a_tcp_peer_is_dropped_and_the_next_one_arrives() -> None:
    ping = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode()

    async def peer(stream: SocketStream) -> None:
        async with stream:
            await stream.send(b"x" * (3 * 1024 * 1024) + b"\n" + ping + b"\n")
            await anyio.sleep(WAIT_S)

    with anyio.fail_after(WAIT_S):
        async with await anyio.create_tcp_listener(local_host="127.0.0.1") as listener, anyio.create_task_group() as tg:
            tg.start_soon(listener.serve, peer)
            port = listener.extra(anyio.abc.SocketAttribute.local_port)
            async with open_transport(tcp(port), Settings(max_message_bytes=1024 * 1024)) as streams:
                first = await streams.read.receive()
                second = await streams.read.receive()
            tg.cancel_scope.cancel()
    assert isinstance(first, MessageTooLarge)
    assert first.size == 3 * 1024 * 1024
    assert not isinstance(second, Exception)
    assert second.message.id == 1  # type: ignore[union-attr]
