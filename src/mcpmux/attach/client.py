"""The client side: commands reach their servers through the daemon, or start them themselves.

:func:`connection_factory` is what a one-shot command, ``mcpmux chat`` and ``mcpmux run`` hand to
their :class:`~mcpmux.Host`: each stdio server (not ``share: per-call``) is then opened through the
daemon's socket, everything else as before. Above the transport nothing changes (names, the
guard, rendering), so a command prints the same with and without the daemon. Modes
(``settings.daemon``, ``MCPMUX_DAEMON``, ``--daemon``/``--no-daemon``):

- ``auto``: use the daemon when one runs; when none runs, or it cannot serve a server, that server
  is started here as before (logged at INFO); only ``mcpmux connect`` starts a daemon under
  ``auto`` (:mod:`.shim`);
- ``on``: the daemon is required, and started in the background when none runs (two commands
  starting it at once get one daemon: the lock file decides; a socket that is not this user's
  alone is never replaced); a failure is a :class:`~mcpmux.errors.DaemonUnavailable` (exit 3);
- ``off``: never.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread
from anyio.abc import ByteStream
from anyio.streams.buffered import BufferedByteStream

from mcpmux.attach.attach import (
    ATTACH,
    MAX_ATTACH_BYTES,
    STATUS,
    Attach,
    daemon_mode,
    origin_of,
    request_line,
    servable,
)
from mcpmux.attach.paths import check_owned, log_path, socket_path
from mcpmux.config.display import redact
from mcpmux.config.models import Config, DaemonMode, ServerConfig, Settings
from mcpmux.errors import DaemonUnavailable
from mcpmux.types.json_shapes import JSONObject

if TYPE_CHECKING:
    # Imported where used: a command that only asks the daemon (or has it off) never loads the SDK client.
    from mcpmux.connection.connection import Connection
    from mcpmux.connection.factory import ConnectionFactory
    from mcpmux.transports import TransportStreams
    from mcpmux.types.callbacks import ClientCallbacks

__all__ = [
    "START_TIMEOUT_S",
    "DaemonClient",
    "connect_socket",
    "connection_factory",
    "daemon_mode",
    "exchange",
    "request",
    "spawn_daemon",
    "start_daemon",
]

logger = logging.getLogger(__name__)

START_TIMEOUT_S = 20.0
REPLY_TIMEOUT_S = 60.0  # the first attach of a server waits for it to start (npx can take seconds)


def connection_factory(config: Config, override: str | None = None, *, client: str = "cli") -> ConnectionFactory | None:
    """The connection factory of a command's host, or ``None`` when the daemon is off."""
    mode = daemon_mode(config, override)
    if mode == "off":
        return None
    return DaemonClient(config, mode, client=client).connection


async def connect_socket(path: Path | None = None) -> ByteStream:
    """A connection to the daemon's socket, after checking the socket is this user's alone.

    Raises:
        DaemonUnavailable: no socket, refused, or the socket is another user's or writable by others.
    """
    path = path or socket_path()
    try:
        check_owned(path)
        return await anyio.connect_unix(path)
    except FileNotFoundError as exc:
        raise DaemonUnavailable(path, "no daemon is running") from exc
    except OSError as exc:
        raise DaemonUnavailable(path, exc.strerror or str(exc)) from exc


async def exchange(
    method: str, params: JSONObject | None = None, path: Path | None = None
) -> tuple[JSONObject, BufferedByteStream]:
    """Send the first request of a connection; its result and the (still open) connection.

    Raises:
        DaemonUnavailable: no daemon, no answer in time, or it refused (its reason in the message).
    """
    where = path or socket_path()
    stream = BufferedByteStream(await connect_socket(where))
    try:
        with anyio.fail_after(REPLY_TIMEOUT_S):
            await stream.send(request_line(method, params))
            reply = json.loads(await stream.receive_until(b"\n", MAX_ATTACH_BYTES))
    except TimeoutError as exc:
        await stream.aclose()
        raise DaemonUnavailable(where, f"no answer to {method} within {REPLY_TIMEOUT_S:g} s") from exc
    except (
        anyio.EndOfStream,
        anyio.IncompleteRead,
        anyio.DelimiterNotFound,
        anyio.BrokenResourceError,  # reset by the daemon (anyio's word for ECONNRESET/EPIPE)
        OSError,
        ValueError,
    ) as exc:
        await stream.aclose()
        raise DaemonUnavailable(where, f"the connection closed before it answered {method}") from exc
    if "error" in reply:
        await stream.aclose()
        raise DaemonUnavailable(where, str(reply["error"].get("message", reply["error"])))
    return reply.get("result", {}), stream


async def request(method: str, path: Path | None = None) -> JSONObject:
    """One ``mcpmux/status`` or ``mcpmux/stop`` request (raises :class:`DaemonUnavailable`)."""
    result, stream = await exchange(method, path=path)
    await stream.aclose()
    return result


def spawn_daemon(linger_s: float | None = None) -> None:
    """Start ``mcpmux daemon run`` in the background, detached: its own session, not this process's child.

    A short-lived ``sh`` starts it and exits (reaped here), so the daemon outlives the command
    that started it without ever being a zombie of it. Its output goes to :func:`log_path`.
    """
    command = [sys.executable, "-m", "mcpmux", "daemon", "run"]
    if linger_s is not None:
        command += ["--linger", f"{linger_s:g}"]
    log = str(log_path())
    launcher = ["/bin/sh", "-c", '"$@" </dev/null >>"$LOG" 2>&1 &', "sh", *command]
    subprocess.run(launcher, env={**os.environ, "LOG": log}, start_new_session=True, check=True, timeout=30)


async def start_daemon(linger_s: float | None = None) -> JSONObject:
    """Start the daemon unless one runs; its status once it answers.

    Raises:
        DaemonUnavailable: it did not answer within :data:`START_TIMEOUT_S` (its log is named).
    """
    try:
        return await request(STATUS)
    except DaemonUnavailable as exc:
        if not isinstance(exc.__cause__, FileNotFoundError | ConnectionRefusedError):
            raise  # a socket that is not this user's alone, or a daemon that did not answer: not ours to replace
    await anyio.to_thread.run_sync(spawn_daemon, linger_s)
    with anyio.move_on_after(START_TIMEOUT_S):
        while True:
            try:
                return await request(STATUS)
            except DaemonUnavailable:
                await anyio.sleep(0.05)
    raise DaemonUnavailable(socket_path(), f"it did not start within {START_TIMEOUT_S:g} s; see {log_path()}")


class DaemonClient:
    """Opens a command's stdio servers through the daemon (see the module's modes)."""

    def __init__(self, config: Config, mode: DaemonMode, *, client: str = "cli") -> None:
        self.config, self.mode, self.client = config, mode, client
        self.origin = origin_of(config)
        self._ensure_lock = anyio.Lock()
        self._unavailable: DaemonUnavailable | None = None
        self._running = False

    def connection(self, server: ServerConfig, settings: Settings, callbacks: ClientCallbacks) -> Connection:
        """A :data:`~mcpmux.connection.factory.ConnectionFactory`: through the daemon when it may serve ``server``."""
        from mcpmux.connection.connection import Connection

        if not self.serves(server):
            return Connection(server, settings, callbacks=callbacks)
        answers = tuple(n for n in ("elicitation", "sampling") if getattr(callbacks, n) is not None)
        return Connection(server, settings, callbacks=callbacks, transport=lambda: self.open(server, settings, answers))

    @staticmethod
    def serves(server: ServerConfig) -> bool:
        """Whether ``server`` goes through the daemon (:func:`~mcpmux.attach.attach.servable`)."""
        return servable(server)

    @asynccontextmanager
    async def open(
        self, server: ServerConfig, settings: Settings, answers: tuple[str, ...] = ()
    ) -> AsyncIterator[TransportStreams]:
        """The server's message streams through the daemon, or (``auto``) straight to it."""
        from mcpmux.transports import open_transport
        from mcpmux.transports.tcp import framed_streams

        attached = await self.attach(server, settings, answers)
        if attached is None:
            async with open_transport(server, settings) as streams:
                yield streams
            return
        reply, stream = attached
        pid = reply.get("server_pid")
        command = " ".join([getattr(server, "command", ""), *getattr(server, "args", ())])
        describe = redact(f"pid {pid}: {command}", server.secret_values)
        async with framed_streams(server.name, stream, settings.max_message_bytes, describe) as streams:
            streams.pid = pid if isinstance(pid, int) else None
            yield streams

    async def attach(
        self, server: ServerConfig, settings: Settings, answers: tuple[str, ...] = ("elicitation", "sampling")
    ) -> tuple[JSONObject, ByteStream] | None:
        """The daemon's answer and the open connection for ``server``; ``None`` (``auto``) to start it here.

        Raises:
            DaemonUnavailable: (``on``) the daemon cannot be started or reached, or cannot serve it.
        """
        security = self.config.security
        attach = Attach(self.origin, server, settings, security, client=self.client, answers=answers)
        try:
            await self._ensure()
            return await exchange(ATTACH, attach.params())
        except DaemonUnavailable as exc:
            if self.mode == "on":
                raise DaemonUnavailable(exc.socket, str(exc.reason), server=server.name) from exc
            logger.info("server %r: not through the daemon (%s); starting it here", server.name, exc.reason)
            return None

    async def _ensure(self) -> None:
        """Check once per command that the daemon answers (``on``: start it if none does)."""
        async with self._ensure_lock:
            if self._unavailable is not None:
                raise self._unavailable
            if self._running:
                return
            try:
                # ``auto`` uses a running daemon; a one-shot command, chat or run does not start
                # one: a background process that outlives one `mcpmux call` pays only if another
                # command follows within the servers' idle timeout, which the command cannot know.
                # `mcpmux connect` (a host session, long-lived and shared) does start it (.shim).
                await (start_daemon() if self.mode == "on" else request(STATUS))
            except DaemonUnavailable as exc:
                self._unavailable = exc
                raise
            self._running = True
