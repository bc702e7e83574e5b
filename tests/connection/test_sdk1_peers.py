"""A real server built on the SDK 1.x low-level API: PyPI ``mcp-server-sqlite`` (its own venv, mcp<2).

It advertises ``resources`` and answers ``resources/templates/list`` with -32601. Its tools must be
listed and callable, and the server connected, through the connection and through the manager.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import mcp_types as types
import pytest

from mcpmux.config.models import Config, Settings, StdioServerConfig
from mcpmux.connection import Connection
from mcpmux.manager import Manager, ServerState
from tests.peers.fixtures import sqlite_command

pytestmark = [pytest.mark.anyio, pytest.mark.peers, pytest.mark.subprocess]

SETTINGS = Settings(connect_timeout_ms=30_000, timeout_ms=30_000)


def sqlite_server(database: Path) -> StdioServerConfig:
    command, args = sqlite_command(database)
    return StdioServerConfig(name="sqlite", command=command, args=tuple(args))


def text(result: types.CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, types.TextContent))


async def test_sqlite_server_without_templates_lists_empty_templates_and_its_tools(tmp_path: Path) -> None:
    with anyio.fail_after(60):
        async with Connection(sqlite_server(tmp_path / "test.db"), SETTINGS) as conn:
            assert conn.info.capabilities.resources is not None
            templates = await conn.list_resource_templates()
            resources = await conn.list_resources()
            tools = await conn.list_tools()
            prompts = await conn.list_prompts()
    assert templates == []
    assert [str(resource.uri) for resource in resources] == ["memo://insights"]
    assert {"read_query", "write_query", "create_table", "list_tables"} <= {tool.name for tool in tools}
    assert [prompt.name for prompt in prompts] == ["mcp-demo"]


async def test_sqlite_server_is_connected_and_its_tools_are_callable_through_the_manager(tmp_path: Path) -> None:
    config = Config(servers=(sqlite_server(tmp_path / "test.db"),), settings=SETTINGS)
    with anyio.fail_after(60):
        async with Manager(config, catalog=False) as mux:
            (status,) = mux.status()
            assert status.state is ServerState.CONNECTED, status.reason
            assert "sqlite:list_tables" in {tool.name for tool in mux.tools()}
            create = {"query": "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)"}
            await mux.call_tool("sqlite:create_table", create)
            tables = await mux.call_tool("sqlite:list_tables")
    assert "notes" in text(tables)
