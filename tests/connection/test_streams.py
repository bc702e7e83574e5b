"""Which waiting request an oversized answer fails, over scripted in-process peers (unit tests)."""

from __future__ import annotations

import contextvars
import inspect
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
from mcp.shared.memory import create_client_server_memory_streams
from mcp.shared.message import SessionMessage

from mcpmux.config.models import Settings
from mcpmux.connection import Connection
from mcpmux.connection._streams import StreamWatch
from mcpmux.errors import MCPTimeoutError, MessageTooLarge, ResponseTooLarge
from mcpmux.transports.base import TransportStreams
from tests.connection.servers import Reply, config, initialize_reply, scripted

pytestmark = pytest.mark.anyio

CAP = 4096


def answering_calls_with(item: MessageTooLarge) -> Connection:
    async def answer(message: dict[str, Any]) -> Reply | list[Reply] | None:
        if message.get("method") == "initialize":
            return initialize_reply(message)
        if message.get("method") == "tools/call":
            return [item]
        return None

    return Connection(config(), Settings(max_message_bytes=CAP), transport=lambda: scripted(answer))


async def test_an_oversized_response_without_a_readable_id_fails_the_waiting_request() -> None:
    with anyio.fail_after(10):
        async with answering_calls_with(MessageTooLarge("mem", 9000, CAP, is_response=True)) as conn:
            with pytest.raises(ResponseTooLarge) as caught:
                await conn.call_tool("anything", timeout=30)
    assert (caught.value.size, caught.value.cap, caught.value.method) == (9000, CAP, "tools/call")


@pytest.mark.parametrize(
    "item",
    [
        MessageTooLarge("mem", 9000, CAP),  # a giant line that is not even a JSON-RPC envelope
        MessageTooLarge("mem", 9000, CAP, request_id=1, is_response=False),  # the server's own request
        MessageTooLarge("mem", 9000, CAP, request_id=999, is_response=True),  # no such request waits
    ],
)
async def test_an_oversized_message_that_answers_no_waiting_request_fails_none(item: MessageTooLarge) -> None:
    with anyio.fail_after(10):
        async with answering_calls_with(item) as conn:
            with pytest.raises(MCPTimeoutError):
                await conn.call_tool("anything", timeout=0.5)
            assert conn.is_connected


async def test_the_watched_read_stream_keeps_the_senders_context_for_the_dispatcher() -> None:
    # The SDK's HTTP and SSE transports stamp each message with its sender's contextvars; the
    # dispatcher reads them (duck-typed, `last_context`) to run handlers in that context.
    marker: contextvars.ContextVar[str] = contextvars.ContextVar("marker", default="")
    async with create_client_server_memory_streams() as ((client_read, client_write), (_server_read, server_write)):
        watch = StreamWatch("mem", TransportStreams(read=client_read, write=client_write, describe="memory"))
        ping = SessionMessage(types.JSONRPCRequest(jsonrpc="2.0", id=1, method="ping"))

        async def send_marked() -> None:
            marker.set("sender")
            await server_write.send(ping)

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(send_marked)
                received = await watch.read.receive()
    assert received is ping
    context = watch.read.last_context
    assert context is not None
    assert context.get(marker) == "sender"
    assert "last_context" in inspect.getsource(JSONRPCDispatcher.run)
