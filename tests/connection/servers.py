"""In-process peers for connection tests: SDK servers over memory streams, and scripted raw peers."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
from mcp.server import MCPServer, Server
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError as ReportedToolError
from mcp.shared.memory import create_client_server_memory_streams
from mcp.shared.message import SessionMessage

from mcpmux._private.mcp_sdk import lowlevel_server
from mcpmux.config.models import Settings, StdioServerConfig
from mcpmux.connection import ClientCallbacks, Connection
from mcpmux.transports.base import TransportStreams

Wire = list[dict[str, Any]]


def config(name: str = "mem", **fields: Any) -> StdioServerConfig:
    """A server entry; its command is never run (tests inject the transport)."""
    return StdioServerConfig(name=name, command="unused", **fields)


class RecordingWrite:
    """A write stream that records every message the client sends, as wire JSON."""

    def __init__(self, inner: Any, wire: Wire) -> None:
        self._inner, self._wire = inner, wire

    async def send(self, item: SessionMessage) -> None:
        self._wire.append(item.message.model_dump(by_alias=True, mode="json", exclude_none=True))
        await self._inner.send(item)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> RecordingWrite:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


@asynccontextmanager
async def in_memory(server: Server[Any] | MCPServer, wire: Wire | None = None) -> AsyncIterator[TransportStreams]:
    """Serve ``server`` in-process and yield the client's streams."""
    lowlevel: Server[Any] = lowlevel_server(server) if isinstance(server, MCPServer) else server
    async with create_client_server_memory_streams() as (client, server_side), anyio.create_task_group() as tg:
        tg.start_soon(lowlevel.run, *server_side, lowlevel.create_initialization_options())
        write = RecordingWrite(client[1], wire) if wire is not None else client[1]
        yield TransportStreams(read=client[0], write=write, describe="in-memory")
        tg.cancel_scope.cancel()


Reply = dict[str, Any] | Exception
Script = Callable[[dict[str, Any]], Awaitable[Reply | list[Reply] | None]]


@asynccontextmanager
async def scripted(
    answer: Script, *, exit_code: Callable[[], int | None] = lambda: None, stderr: str = ""
) -> AsyncIterator[TransportStreams]:
    """A raw peer: ``answer`` gets each client message as JSON and returns a reply (or ``None``).

    An exception as reply is what a transport reports when its peer dies: it is queued, then the
    stream ends. A list of replies is queued in order, exceptions included, and the stream goes on.
    """
    to_client_send, to_client_recv = anyio.create_memory_object_stream[SessionMessage | Exception](16)
    to_server_send, to_server_recv = anyio.create_memory_object_stream[SessionMessage](16)

    async def serve() -> None:
        async for item in to_server_recv:
            reply = await answer(item.message.model_dump(by_alias=True, mode="json", exclude_none=True))
            if isinstance(reply, Exception):
                await to_client_send.send(reply)
                await to_client_send.aclose()
                return
            for out in reply if isinstance(reply, list) else [] if reply is None else [reply]:
                await to_client_send.send(
                    out
                    if isinstance(out, Exception)
                    else SessionMessage(types.jsonrpc_message_adapter.validate_python(out))
                )

    async with to_client_send, to_client_recv, to_server_send, to_server_recv, anyio.create_task_group() as tg:
        tg.start_soon(serve)
        yield TransportStreams(
            read=to_client_recv,
            write=to_server_send,
            describe="scripted",
            exit_code=exit_code,
            stderr_tail=lambda: stderr,
        )
        tg.cancel_scope.cancel()


def initialize_reply(message: dict[str, Any], **capabilities: Any) -> dict[str, Any]:
    """A 2025-11-25 ``initialize`` answer to ``message``."""
    result = {
        "protocolVersion": "2025-11-25",
        "capabilities": capabilities or {"tools": {}},
        "serverInfo": {"name": "scripted", "version": "1"},
    }
    return {"jsonrpc": "2.0", "id": message["id"], "result": result}


def connect(
    server: Server[Any] | MCPServer,
    *,
    wire: Wire | None = None,
    callbacks: ClientCallbacks | None = None,
    settings: Settings | None = None,
    **fields: Any,
) -> Connection:
    """A ``Connection`` to an in-process ``server``."""
    return Connection(
        config(**fields), settings or Settings(), callbacks=callbacks, transport=lambda: in_memory(server, wire)
    )


def everything_server() -> MCPServer:
    """An SDK server with one of each feature the connection must carry."""
    mcp = MCPServer("fixture", instructions="use echo", version="9.9")

    @mcp.tool()
    def echo(text: str) -> str:
        """Echo ``text``."""
        return text

    @mcp.tool()
    def fail() -> str:
        """Always fails (isError)."""
        raise ReportedToolError("it broke")

    @mcp.tool()
    async def slow(ctx: Context) -> str:
        """Report progress, then wait for a cancellation that never comes in time."""
        await ctx.report_progress(1, 2, "half")
        await anyio.sleep(30)
        return "late"

    @mcp.tool()
    async def progress(ctx: Context) -> str:
        """Report two steps of progress."""
        await ctx.report_progress(1, 2, "half")
        await ctx.report_progress(2, 2, "done")
        return "ok"

    @mcp.resource("fixture://static")
    def static() -> str:
        """A static text resource."""
        return "static text"

    @mcp.resource("fixture://items/{item}")
    def item(item: str) -> str:
        """A templated resource."""
        return f"item {item}"

    @mcp.prompt()
    def greet(name: str) -> str:
        """A prompt with an argument."""
        return f"Hello, {name}!"

    return mcp
