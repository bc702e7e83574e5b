"""In-process servers for manager tests: ``MockServer``s of the test kit served in memory, no subprocess."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

from mcp.server.mcpserver import MCPServer

from mcpmux.config.models import ServerConfig, Settings, StdioServerConfig
from mcpmux.connection import ClientCallbacks, Connection
from mcpmux.errors import CommandNotFound
from mcpmux.testing import MockServer, ToolContext, in_memory
from mcpmux.transports.base import TransportStreams
from mcpmux.transports.inprocess import open_mcp_server

TEXT = {"type": "object", "properties": {"text": {"type": "string", "default": ""}}}
NEW_NAME = {"type": "object", "properties": {"new_name": {"type": "string"}}, "required": ["new_name"]}
Upstream = MockServer | MCPServer[Any]


def stdio(name: str, **extra: Any) -> StdioServerConfig:
    """A server entry whose transport the tests replace (the command is never run)."""
    return StdioServerConfig(name=name, command="in-process", **extra)


def echo_server(name: str, *tools: str) -> MockServer:
    """A mock whose every tool answers ``<server>:<tool>:<text>`` (tools only: no resource subscriptions)."""
    mock = MockServer(name).resource_subscriptions(False)
    for tool in tools:

        def make(tool: str) -> Callable[..., str]:
            def handler(text: str = "") -> str:
                return f"{name}:{tool}:{text}"

            return handler

        mock.tool(tool, make(tool), description=f"{tool} of {name}", schema=TEXT)
    return mock


def dynamic_server(name: str) -> MockServer:
    """A mock with ``add_tool`` that adds a tool and announces ``tools/list_changed``, a tool that hangs,
    a resource ``memo://greeting`` and a prompt ``review``."""

    async def add_tool(new_name: str, ctx: ToolContext) -> str:
        ctx.mock.tool(new_name, result="new", description="added at run time")
        await ctx.send_tool_list_changed()
        return "added"

    return (
        MockServer(name)
        .tool("add_tool", add_tool, description="Add a tool called new_name.", schema=NEW_NAME)
        .tool("hang", result="unreachable", description="Never answer.")
        .hang("hang")
        .resource("memo://greeting", "hello from resources", name="greeting", mime_type="text/plain")
        .prompt("review", "Please review: {code}", description="Review some code.", arguments=["code"])
    )


@asynccontextmanager
async def _missing(name: str) -> AsyncIterator[TransportStreams]:
    raise CommandNotFound(name, "in-process-missing", "/nowhere")
    yield  # pragma: no cover


def factory(servers: Mapping[str, Upstream]) -> Callable[[ServerConfig, Settings, ClientCallbacks], Connection]:
    """A connection factory that serves ``servers[name]`` in memory; unknown names fail to start.

    A ``MockServer`` is served by the kit (:func:`mcpmux.testing.in_memory`); an SDK server (a test
    about SDK-specific behaviour) through mcpmux's in-process transport.
    """
    served = {name: in_memory(server) for name, server in servers.items() if isinstance(server, MockServer)}

    def make(config: ServerConfig, settings: Settings, callbacks: ClientCallbacks) -> Connection:
        mock = served.get(config.name)
        if mock is not None:
            return mock.connection_factory(config, settings, callbacks)
        built = servers.get(config.name)
        if not isinstance(built, MCPServer):
            return Connection(config, settings, callbacks=callbacks, transport=lambda: _missing(config.name))
        return Connection(
            config,
            settings,
            callbacks=callbacks,
            transport=lambda: open_mcp_server(built, name=config.name, describe=f"in-process {config.name}"),
        )

    return make
