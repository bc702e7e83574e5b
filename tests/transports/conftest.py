"""Peers for transport tests: the misbehaving fixture server, an SDK echo server, free ports."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import uvicorn
from mcp import ClientSession
from mcp.server.mcpserver import MCPServer
from pydantic import SecretStr

import mcpmux
from mcpmux.config.models import ServerConfig, Settings, StdioServerConfig
from mcpmux.servers._sdk import new_server
from mcpmux.transports import TransportStreams, open_transport

FIXTURE = Path(__file__).parents[1] / "fixtures" / "misbehaving_server.py"
# The fixture is a MockServer script: it imports mcpmux, which an editable install keeps in the source
# tree (a regular install keeps it in site-packages, readable anyway). A sandbox must grant it.
MCPMUX_CODE = str(Path(mcpmux.__file__).resolve().parents[1])
WAIT_S = 20


def fixture_config(*args: str, name: str = "fx", env: dict[str, str] | None = None) -> StdioServerConfig:
    """A stdio entry running the misbehaving fixture server with ``args``."""
    secrets = {key: SecretStr(value) for key, value in (env or {}).items()}
    return StdioServerConfig(name=name, command=sys.executable, args=(str(FIXTURE), *args), env=secrets)


def echo_server() -> MCPServer[Any]:
    """An SDK server with one tool, ``echo``."""
    server = new_server("echo-server", "Echoes text.")

    @server.tool(description="Echo the text back.")
    def echo(text: str) -> str:
        return text

    return server


@asynccontextmanager
async def running_uvicorn(app: Any, **options: Any) -> AsyncIterator[int]:
    """Serve the ASGI ``app`` on 127.0.0.1 with uvicorn (``options`` go to its config); yields the port."""
    config = uvicorn.Config(
        app, host="127.0.0.1", port=0, log_level="warning", lifespan="on", timeout_graceful_shutdown=2, **options
    )
    server = uvicorn.Server(config)
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve)
        with anyio.fail_after(WAIT_S):
            while not server.started:  # noqa: ASYNC110 - uvicorn offers no startup event
                await anyio.sleep(0.01)
        try:
            yield server.servers[0].sockets[0].getsockname()[1]
        finally:
            server.should_exit = True


@asynccontextmanager
async def session_over(
    config: ServerConfig, settings: Settings | None = None, **options: Any
) -> AsyncIterator[tuple[TransportStreams, ClientSession]]:
    """The transport of ``config`` and an SDK ``ClientSession`` over it (not initialized yet)."""
    async with (
        open_transport(config, settings or Settings()) as streams,
        ClientSession(streams.read, streams.write, **options) as session,
    ):
        yield streams, session
