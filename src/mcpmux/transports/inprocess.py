"""The in-process transport: a built-in server run in this process over memory streams (or, with
its sandbox on, as a sandboxed stdio child).

No subprocess and no serialisation: the SDK's low-level server reads and writes
:class:`~mcp.shared.message.SessionMessage` objects on anyio memory streams, in a task group owned by
the context manager. Leaving the context closes the client side; the server sees end-of-stream,
finishes (lifespan teardown included) and is cancelled only if it overstays a short grace period.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from mcp.server import Server
from mcp.server.mcpserver import MCPServer
from mcp.shared.memory import create_client_server_memory_streams

import mcpmux.servers
from mcpmux._private.mcp_sdk import lowlevel_server
from mcpmux.config.models import BuiltinServerConfig, SandboxConfig, ServerSecurity, Settings, StdioServerConfig
from mcpmux.config.paths import data_dir
from mcpmux.errors import TransportError
from mcpmux.processes.sandbox import command_wrapper, sandbox_backend
from mcpmux.servers import build_server, refuse_wide_root
from mcpmux.servers.content_server import DATABASE_FILE
from mcpmux.transports.base import TransportStreams
from mcpmux.transports.stdio import open_stdio

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
    """Run the built-in server of ``server`` and yield the client side of its streams.

    Without a sandbox it runs in-process over memory streams. With the server's sandbox on (and a
    backend that works here) the whole server runs out of process, as a stdio child *inside* the
    sandbox (``python -m mcpmux.servers``), with its root writable: its file tools, not only its
    commands, are then confined by the kernel, and a bug in them cannot reach the host's memory.
    ``settings`` applies to that child; in-process there is no timeout or message size to enforce.

    Raises:
        ConfigError: unknown kind, a root that is not a directory or too wide (raised before yielding).
        TransportError: the sandbox is required and no backend works here.
    """
    sandbox = server.security.sandbox if server.security else None
    root = (server.root or Path.cwd()).resolve()
    if sandbox is not None and sandbox.enabled and sandbox_backend().name != "none":
        if not server.allow_wide_root:
            refuse_wide_root(server.kind, root, given=server.root is not None)
        async with open_stdio(_boxed_child(server, sandbox, root), settings) as streams:
            yield streams
        return
    wrapper = command_wrapper(server.name, sandbox, root) if server.kind == "workspace" else None
    built = build_server(
        server.kind, root=server.root, database=server.database, sandbox=wrapper, allow_wide_root=server.allow_wide_root
    )
    async with open_mcp_server(built, name=server.name, describe=_describe(server)) as streams:
        yield streams


def _boxed_child(server: BuiltinServerConfig, sandbox: SandboxConfig, root: Path) -> StdioServerConfig:
    """The stdio entry that runs ``server`` as ``python -m mcpmux.servers`` inside ``sandbox``."""
    args = ["-m", "mcpmux.servers", server.kind, "--root", str(root), "--inside-sandbox"]
    writable = [str(root)]
    if server.kind == "content_store":
        # Computed here: inside the sandbox the home directory is a private, empty one.
        database = server.database if server.database is not None else data_dir() / DATABASE_FILE
        args += ["--database", str(database)]
        if str(database) != ":memory:":
            writable.append(str(Path(database).resolve().parent))
    if server.allow_wide_root:
        args.append("--allow-wide-root")
    package = str(Path(mcpmux.servers.__file__).resolve().parents[2])  # a source tree or site-packages
    boxed = sandbox.model_copy(
        update={"writable": (*sandbox.writable, *writable), "filesystem": (*sandbox.filesystem, package)}
    )
    return StdioServerConfig(
        name=server.name, command=sys.executable, args=tuple(args), cwd=root, security=ServerSecurity(sandbox=boxed)
    )


@asynccontextmanager
async def open_mcp_server(
    server: MCPServer[Any] | Server[Any], *, name: str, describe: str
) -> AsyncIterator[TransportStreams]:
    """Run any SDK server (``MCPServer`` or low-level ``Server``) in-process over memory streams.

    Yields the client side of the streams.

    Args:
        server: the server to run; its lifespan runs inside this context.
        name: the configured server name, for errors and logs.
        describe: the ``describe`` of the yielded streams.
    """
    lowlevel = lowlevel_server(server) if isinstance(server, MCPServer) else server
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
