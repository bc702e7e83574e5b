"""The in-process transport: a built-in server run in this process over memory streams.

No subprocess and no serialisation: the SDK's low-level server reads and writes
:class:`~mcp.shared.message.SessionMessage` objects on anyio memory streams, in a task group owned by
the context manager. Leaving the context closes the client side; the server sees end-of-stream,
finishes (lifespan teardown included) and is cancelled only if it overstays a short grace period.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.shared.memory import create_client_server_memory_streams

from mcpmux.config.models import BuiltinServerConfig, Settings
from mcpmux.errors import TransportError
from mcpmux.servers import build_server
from mcpmux.servers._sdk import lowlevel_server
from mcpmux.transports.base import TransportStreams
from mcpmux.transports.sandbox import command_wrapper

__all__ = ["SHUTDOWN_GRACE_S", "open_builtin", "open_mcp_server"]

logger = logging.getLogger(__name__)

SHUTDOWN_GRACE_S = 2.0


def _describe(server: BuiltinServerConfig) -> str:
    where = f"root {server.root if server.root is not None else Path.cwd()}"
    if server.kind == "content_store":
        where += f", database {server.database}" if server.database is not None else ", default database"
    return f"in-process builtin {server.kind} ({where})"


@asynccontextmanager
async def open_builtin(server: BuiltinServerConfig, settings: Settings) -> AsyncIterator[TransportStreams]:
    """Run the built-in server of ``server`` in-process and yield the client side of its streams.

    ``settings`` is accepted for the transport table's uniform signature; an in-process server has
    no connect timeout or message size to enforce. With the server's sandbox on, the workspace's
    ``execute_shell`` and ``execute_python`` run inside it, with the root writable.

    Raises:
        ConfigError: unknown kind, or a root that is not a directory (raised before yielding).
    """
    sandbox = server.security.sandbox if server.security else None
    root = (server.root or Path.cwd()).resolve()
    wrapper = command_wrapper(server.name, sandbox, root) if server.kind == "workspace" else None
    built = build_server(
        server.kind, root=server.root, database=server.database, sandbox=wrapper, allow_wide_root=server.allow_wide_root
    )
    async with open_mcp_server(built, name=server.name, describe=_describe(server)) as streams:
        yield streams


@asynccontextmanager
async def open_mcp_server(server: MCPServer[Any], *, name: str, describe: str) -> AsyncIterator[TransportStreams]:
    """Run any SDK ``MCPServer`` in-process over memory streams and yield the client side.

    Args:
        server: the server to run; its lifespan runs inside this context.
        name: the configured server name, for errors and logs.
        describe: the ``describe`` of the yielded streams.
    """
    lowlevel = lowlevel_server(server)
    async with create_client_server_memory_streams() as (client_streams, server_streams):
        client_read, client_write = client_streams
        server_read, server_write = server_streams
        done = anyio.Event()

        async def serve() -> None:
            try:
                await lowlevel.run(server_read, server_write, lowlevel.create_initialization_options())
            except Exception as exc:
                # The client learns of the crash through the read stream, as from any transport.
                logger.exception("built-in server %r crashed", name)
                error = TransportError(name, f"built-in server crashed: {exc}")
                with anyio.move_on_after(SHUTDOWN_GRACE_S):
                    await server_write.send(error)
            finally:
                await server_write.aclose()
                done.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(serve)
            try:
                yield TransportStreams(read=client_read, write=client_write, describe=describe)
            finally:
                with anyio.CancelScope(shield=True):
                    await client_write.aclose()
                    with anyio.move_on_after(SHUTDOWN_GRACE_S):
                        await done.wait()
                if not done.is_set():
                    tg.cancel_scope.cancel()
