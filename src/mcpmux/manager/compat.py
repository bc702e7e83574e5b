"""The seed project's shapes, for users coming from it: ``MCPManager`` and ``MCPClient``.

Both are thin: ``MCPManager`` is a :class:`Manager` with explicit ``start()``/``stop()`` and
dict-shaped tool listings; ``MCPClient`` is one :class:`Connection`. ``start``/``connect`` and
``stop``/``close`` must be called from the same task (they enter and leave a task group).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

import mcp_types as types

from mcpmux.config.models import Config, ServerConfig, Settings
from mcpmux.connection import Connection
from mcpmux.errors import UsageError
from mcpmux.manager.manager import Manager
from mcpmux.types.json_shapes import JSONObject

__all__ = ["MCPClient", "MCPManager"]


class MCPManager:
    """Many servers: ``await m.start()``, ``m.get_all_tools()``, ``await m.call_tool("srv:tool", {...})``."""

    def __init__(self, configs: Config | Sequence[ServerConfig], settings: Settings | None = None) -> None:
        self.manager = Manager(configs, settings=settings)

    async def start(self) -> None:
        """Connect every enabled server (concurrently); a failing one does not stop the others."""
        await self.manager.start()

    async def stop(self) -> None:
        """Disconnect every server and stop every child process."""
        await self.manager.stop()

    def get_all_tools(self) -> list[JSONObject]:
        """Every tool as ``{"name": "server:tool", "server", "description", "input_schema"}``."""
        return [
            {"name": t.name, "server": t.server, "description": t.description, "input_schema": t.input_schema}
            for t in self.manager.tools()
        ]

    async def call_tool(self, namespaced_name: str, arguments: JSONObject | None = None) -> types.CallToolResult:
        """Call ``server:tool``; see :meth:`Manager.call_tool`."""
        return await self.manager.call_tool(namespaced_name, arguments)


class MCPClient:
    """One server: ``await c.connect()``, ``await c.list_tools()``, ``await c.call_tool(name, args)``.

    Given a config entry, or the command line of a stdio server as keywords::

        client = MCPClient(server_name="time", command="uvx", args=["mcp-server-time"], env={"TZ": "UTC"})
        await client.start()                 # or connect(); stop() or close() ends it
        async with MCPClient(server_name="time", command="uvx", args=["mcp-server-time"]) as client: ...

    Raises:
        UsageError: both a config and keywords, or neither.
        ConfigError: the keywords do not make a valid server entry.
    """

    def __init__(
        self,
        config: ServerConfig | None = None,
        settings: Settings | None = None,
        *,
        server_name: str | None = None,
        command: str | None = None,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
    ) -> None:
        keywords = server_name is not None or command is not None or bool(args) or env is not None
        if config is None and not keywords:
            raise UsageError("MCPClient needs a server: a config entry, or server_name= and command=")
        if config is not None and keywords:
            raise UsageError("MCPClient takes a config entry or server_name=/command=/args=/env=, not both")
        if config is None:
            if server_name is None or command is None:
                raise UsageError("MCPClient(server_name=..., command=...) needs both")
            entry = {"name": server_name, "command": command, "args": list(args), "env": dict(env or {})}
            # ServerConfig(...) validates and raises ConfigError (type checkers see only the union).
            config = cast(Any, ServerConfig)(**entry)
        self.connection = Connection(config, settings or Settings())

    async def connect(self) -> None:
        """Start or reach the server and complete the handshake."""
        await self.connection.connect()

    async def close(self) -> None:
        """Close the session (stopping a child process)."""
        await self.connection.close()

    async def start(self) -> None:
        """The same as :meth:`connect`."""
        await self.connect()

    async def stop(self) -> None:
        """The same as :meth:`close`."""
        await self.close()

    async def __aenter__(self) -> MCPClient:
        await self.connect()
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.close()

    async def list_tools(self) -> list[types.Tool]:
        """Every tool of the server (all pages)."""
        return await self.connection.list_tools()

    async def call_tool(self, name: str, arguments: JSONObject | None = None) -> types.CallToolResult:
        """Call ``name`` with ``arguments``; a result with ``isError`` is returned, not raised."""
        return await self.connection.call_tool(name, arguments)

    async def list_resources(self) -> list[types.Resource]:
        """Every resource of the server (all pages)."""
        return await self.connection.list_resources()

    async def read_resource(self, uri: str) -> types.ReadResourceResult:
        """Read one resource."""
        return await self.connection.read_resource(uri)
