"""In-process servers for manager tests: real SDK servers over memory streams, no subprocess."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer

from mcpmux.config.models import ServerConfig, Settings, StdioServerConfig
from mcpmux.connection import ClientCallbacks, Connection
from mcpmux.errors import CommandNotFound
from mcpmux.transports.base import TransportStreams
from mcpmux.transports.inprocess import open_mcp_server


def stdio(name: str, **extra: Any) -> StdioServerConfig:
    """A server entry whose transport the tests replace (the command is never run)."""
    return StdioServerConfig(name=name, command="in-process", **extra)


def echo_server(name: str, *tools: str) -> MCPServer[Any]:
    """A server whose every tool answers ``<server>:<tool>:<text>``."""
    server: MCPServer[Any] = MCPServer(name)
    for tool in tools:

        def make(tool: str) -> Callable[[str], str]:
            def handler(text: str = "") -> str:
                return f"{name}:{tool}:{text}"

            return handler

        server.add_tool(make(tool), name=tool, description=f"{tool} of {name}")
    return server


def dynamic_server(name: str) -> MCPServer[Any]:
    """A server with ``add_tool`` that adds a tool and announces ``tools/list_changed``."""
    server: MCPServer[Any] = MCPServer(name)

    @server.tool()
    async def add_tool(new_name: str, ctx: Context) -> str:
        """Add a tool called new_name."""
        server.add_tool(lambda: "new", name=new_name, description="added at run time")
        await ctx.session.send_tool_list_changed()
        return "added"

    @server.tool()
    async def hang(ctx: Context) -> str:
        """Never answer."""
        await anyio.sleep_forever()
        return "unreachable"

    @server.resource("memo://greeting", name="greeting")
    def greeting() -> str:
        return "hello from resources"

    @server.prompt()
    def review(code: str) -> str:
        """Review some code."""
        return f"Please review: {code}"

    return server


@asynccontextmanager
async def _missing(name: str) -> AsyncIterator[TransportStreams]:
    raise CommandNotFound(name, "in-process-missing", "/nowhere")
    yield  # pragma: no cover


def factory(servers: dict[str, MCPServer[Any]]) -> Callable[[ServerConfig, Settings, ClientCallbacks], Connection]:
    """A connection factory that runs ``servers[name]`` in-process; unknown names fail to start."""

    def make(config: ServerConfig, settings: Settings, callbacks: ClientCallbacks) -> Connection:
        built = servers.get(config.name)
        if built is None:
            return Connection(config, settings, callbacks=callbacks, transport=lambda: _missing(config.name))
        return Connection(
            config,
            settings,
            callbacks=callbacks,
            transport=lambda: open_mcp_server(built, name=config.name, describe=f"in-process {config.name}"),
        )

    return make
