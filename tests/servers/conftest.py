"""Fixtures for the built-in servers: a workspace tree and MCP sessions over the in-process transport."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.server.mcpserver import MCPServer

from mcpmux.transports.inprocess import open_mcp_server

SessionFactory = Callable[[MCPServer[Any]], AbstractAsyncContextManager[ClientSession]]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A small workspace: a text file, a nested source file, and an outside secret beside it."""
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "notes.txt").write_text("alpha\nbeta\ngamma\ndelta\n", encoding="utf-8")
    (ws / "src" / "app.py").write_text("def main():\n    return 42\n\n# TODO: more\n", encoding="utf-8")
    (tmp_path / "secret.txt").write_text("top secret\n", encoding="utf-8")
    return ws.resolve()


@asynccontextmanager
async def _session(server: MCPServer[Any]) -> AsyncIterator[ClientSession]:
    async with (
        open_mcp_server(server, name=server.name, describe="test") as streams,
        ClientSession(streams.read, streams.write, read_timeout_seconds=30) as session,
    ):
        with anyio.fail_after(10):
            await session.initialize()
        yield session


@pytest.fixture
def connect() -> SessionFactory:
    """Open an initialised ``ClientSession`` to a built server, in-process."""
    return _session
