"""``mcpmux connect SERVER``: stdin/stdout joined to the daemon's instance of SERVER, byte for byte.

The shim attaches (the daemon starts the server or reuses its warm instance), then copies bytes
both ways: the host's ``initialize`` reaches the daemon's gateway, which names the host in its
audit rows. Without a daemon (``auto`` mode, none can be started, or it cannot serve the server)
the shim serves SERVER itself, through the same gateway code and guard. When the daemon goes away
mid-session the shim exits 3 with one line on stderr; the host restarts it as it would a server.
"""

from __future__ import annotations

import os
import sys

import anyio
from anyio.abc import ByteStream

from mcpmux.config.models import Config, ServerConfig
from mcpmux.daemon.client import DaemonClient, daemon_mode
from mcpmux.errors import EXIT_OK, EXIT_UNREACHABLE

__all__ = ["CHUNK_BYTES", "connect_one"]

CHUNK_BYTES = 64 * 1024


async def connect_one(config: Config, server: ServerConfig, override: str | None = None) -> int:
    """Serve ``server`` on stdio through the daemon (or here); the exit code."""
    mode = daemon_mode(config, override)
    if mode != "off" and DaemonClient.serves(server):
        attached = await DaemonClient(config, mode, client="connect").attach(server, config.settings)
        if attached is not None:
            return await _pipe(attached[1])
    return await _serve_here(config, server)


async def _serve_here(config: Config, server: ServerConfig) -> int:
    from mcpmux.gateway.run import ServeOptions, serve

    alone = config.model_copy(update={"servers": (server.model_copy(update={"prefix": ""}),)})
    await serve(alone, ServeOptions(stdio=True), announce=lambda _line: None)
    return EXIT_OK


async def _pipe(stream: ByteStream) -> int:
    """Copy stdin to ``stream`` and ``stream`` to stdout until either side ends.

    stdin and stdout are made non-blocking and polled by the event loop (no thread stuck in a
    ``read`` keeps the process alive after the daemon's end closed).
    """
    stdin_ended = anyio.Event()
    os.set_blocking(0, False)
    os.set_blocking(1, False)

    async def upstream() -> None:
        while data := await _read(0):
            await stream.send(data)
        stdin_ended.set()
        await stream.send_eof()

    async with stream, anyio.create_task_group() as tg:
        tg.start_soon(upstream)
        try:
            while True:
                await _write_all(1, await stream.receive())
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass
        tg.cancel_scope.cancel()
    if stdin_ended.is_set():
        return EXIT_OK
    sys.stderr.write("mcpmux connect: the daemon closed the connection (stopped or killed)\n")
    return EXIT_UNREACHABLE


async def _read(fd: int) -> bytes:
    while True:
        await anyio.wait_readable(fd)
        try:
            return os.read(fd, CHUNK_BYTES)
        except BlockingIOError:
            continue


async def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        await anyio.wait_writable(fd)
        try:
            view = view[os.write(fd, view) :]
        except BlockingIOError:
            continue
