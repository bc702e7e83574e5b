"""``open_builtin``: a configured built-in server run in-process, driven by an SDK ``ClientSession``."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.client.session import ClientSession
from mcp.server.mcpserver import MCPServer

from mcpmux.config.models import BuiltinServerConfig, Settings
from mcpmux.errors import ConfigError, TransportError
from mcpmux.servers import build_server
from mcpmux.transports.inprocess import open_builtin, open_mcp_server
from tests.servers._client import text_of

pytestmark = pytest.mark.anyio


async def test_a_builtin_workspace_serves_a_client_session_in_process(root: Path) -> None:
    config = BuiltinServerConfig(name="workspace", root=root)
    with anyio.fail_after(10):
        async with open_builtin(config, Settings()) as streams:
            assert streams.describe == f"in-process builtin workspace (root {root})"
            async with ClientSession(streams.read, streams.write) as session:
                init = await session.initialize()
                assert init.server_info.name == "workspace"
                assert len((await session.list_tools()).tools) == 10
                result = await session.call_tool("read_file", {"path": "notes.txt"})
                assert text_of(result).startswith("alpha")


async def test_a_builtin_content_store_named_by_builtin_kind(root: Path) -> None:
    config = BuiltinServerConfig(name="docs", builtin="content_store", root=root, database=Path(":memory:"))
    with anyio.fail_after(10):
        async with open_builtin(config, Settings()) as streams, ClientSession(streams.read, streams.write) as session:
            await session.initialize()
            await session.call_tool("add_content", {"store": "s", "text": "hello world"})
            result = await session.call_tool("search", {"query": "hello"})
    assert "**hello**" in text_of(result)
    assert "content_store" in streams.describe
    assert ":memory:" in streams.describe


async def test_leaving_the_context_stops_the_server_even_mid_session(root: Path) -> None:
    config = BuiltinServerConfig(name="workspace", root=root)
    with anyio.fail_after(5):
        async with open_builtin(config, Settings()) as streams:
            await streams.write.aclose()
    # A new context works after the old one is gone: nothing was left running.
    with anyio.fail_after(5):
        async with open_builtin(config, Settings()) as streams, ClientSession(streams.read, streams.write) as session:
            assert isinstance(await session.initialize(), types.InitializeResult)


def test_an_unknown_kind_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="no built-in server 'shell'"):
        build_server("shell")


async def test_a_crashing_server_reports_a_transport_error_on_the_read_stream() -> None:
    @asynccontextmanager
    async def broken(server: MCPServer[Any]) -> AsyncIterator[None]:
        if server.name == "broken":
            raise RuntimeError("no database today")
        yield

    server: MCPServer[Any] = MCPServer("broken", lifespan=broken)
    with anyio.fail_after(5):
        async with open_mcp_server(server, name="broken", describe="test") as streams:
            item = await streams.read.receive()
    assert isinstance(item, TransportError)
    assert "built-in server crashed: no database today" in str(item)


def test_building_a_server_leaves_logging_unconfigured(root: Path) -> None:
    logger = logging.getLogger()
    saved, level = logger.handlers[:], logger.level
    logger.handlers.clear()
    try:
        build_server("workspace", root=root)
        assert logger.handlers == []
        assert logger.level == level
    finally:
        logger.handlers[:] = saved
