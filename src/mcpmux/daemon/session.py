"""``mcpmux connect --all`` served inside the daemon: one client's whole configuration as one MCP server.

The client (a host session behind the :mod:`.relay`) gets what ``mcpmux serve --stdio`` would give
it from the same configuration (the gateway's code: names, list changes, the guard, audit rows
naming the client by its ``initialize`` and its pid from ``SO_PEERCRED``). Its stdio servers come
from the warm pool (:mod:`.pool`), the instance every other client of the same entry uses, reached
in process (no socket, no JSON between the session and the instance); built-in and network servers
run in the session, as they would in a gateway of its own.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from anyio.streams.buffered import BufferedByteStream
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import ServerMessageMetadata, SessionMessage

from mcpmux.attach.attach import Attach, AttachAll, servable
from mcpmux.config.models import DEFAULT_MAX_MESSAGE_BYTES, ServerConfig, Settings
from mcpmux.connection.connection import Connection
from mcpmux.daemon.pool import Instance, Pool, Refused
from mcpmux.errors import ConnectFailed, MCPMuxError
from mcpmux.gateway import Downstream, Gateway
from mcpmux.host import Host
from mcpmux.policy import StateStore
from mcpmux.transports import TransportStreams
from mcpmux.transports.tcp import framed_streams
from mcpmux.types.callbacks import ClientCallbacks
from mcpmux.web.caller import LocalCaller

__all__ = ["Item", "serve_all", "tagged"]

logger = logging.getLogger(__name__)

Item = SessionMessage | Exception


async def serve_all(pool: Pool, attach: AttachAll, stream: BufferedByteStream, pid: int, store: StateStore) -> None:
    """Serve ``attach``'s configuration to the client on ``stream`` until it closes.

    Nothing it does ends the daemon: a failure is logged and closes this connection only.
    """
    config = attach.config
    downstream = Downstream()
    opener = _PoolOpener(pool, attach, pid)
    host = Host(
        config, face="daemon", store=store, approver=downstream.relay.approve, callbacks=downstream.client_callbacks(),
        project=attach.origin.partition("@")[2] or None, wait=False, connection_factory=opener.connection,
    )  # fmt: skip
    gateway = Gateway(host, downstream=downstream)
    limit = max(config.settings.max_message_bytes, DEFAULT_MAX_MESSAGE_BYTES)
    try:
        async with host, anyio.create_task_group() as tg:
            await tg.start(gateway.run)
            attempted = anyio.Event()
            gateway.starting(attempted)  # answer initialize at once, as `serve --stdio` does
            tg.start_soon(_attempted, host, attempted)
            async with (
                framed_streams("connect --all", stream, limit, f"client pid {pid}") as streams,
                tagged(streams.read, LocalCaller(pid)) as read,
            ):
                await gateway.server.run(read, streams.write, gateway.server.create_initialization_options())
            tg.cancel_scope.cancel()
    except MCPMuxError as exc:
        logger.warning("connect --all session of pid %d ended: %s", pid, exc)
    except Exception:  # one client's session never takes the daemon down; the log has the traceback
        logger.exception("connect --all session of pid %d failed", pid)


async def _attempted(host: Host, attempted: anyio.Event) -> None:
    await host.wait_started()
    attempted.set()
    for status in host.status():
        if status.state.value in ("failed", "needs-auth"):
            logger.warning("connect --all: server %r %s: %s", status.name, status.state.value, status.reason)


class _PoolOpener:
    """The session host's connection factory: its shareable stdio servers from the pool, in process."""

    def __init__(self, pool: Pool, attach: AttachAll, pid: int) -> None:
        self.pool, self.attach, self.pid = pool, attach, pid

    def connection(self, server: ServerConfig, settings: Settings, callbacks: ClientCallbacks) -> Connection:
        if not servable(server):
            return Connection(server, settings, callbacks=callbacks)
        answers = tuple(n for n in ("elicitation", "sampling") if getattr(callbacks, n) is not None)
        one = Attach(self.attach.origin, server, settings, self.attach.config.security, self.attach.client, answers)
        return Connection(server, settings, callbacks=callbacks, transport=lambda: self.open(one))

    @asynccontextmanager
    async def open(self, attach: Attach) -> AsyncIterator[TransportStreams]:
        """Message streams to the pool's instance of ``attach``; they end when the instance stops.

        Raises:
            ConnectFailed: the pool could not start the server (its reason).
        """
        try:
            instance = await self.pool.acquire(attach)
        except Refused as exc:
            raise ConnectFailed(attach.server.name, "the daemon's warm instance", str(exc)) from exc
        try:
            to_server, from_client = anyio.create_memory_object_stream[Item](0)
            to_client, from_server = anyio.create_memory_object_stream[SessionMessage](0)
            with to_server, from_client, to_client, from_server:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self._serve, instance, from_client, to_client)
                    describe = f"pid {instance.pid}: the daemon's warm instance"
                    try:
                        yield TransportStreams(read=from_server, write=to_server, describe=describe, pid=instance.pid)
                    finally:
                        to_server.close()
                        tg.cancel_scope.cancel()
        finally:
            self.pool.release(instance)

    async def _serve(
        self, instance: Instance, read: MemoryObjectReceiveStream[Item], write: MemoryObjectSendStream[SessionMessage]
    ) -> None:
        """The instance's gateway on one in-process session; ``write`` closes when it ends or the instance stops."""
        server = instance.gateway.server
        with write:
            async with anyio.create_task_group() as tg:

                async def stop_with_instance() -> None:
                    await instance.stopped.wait()
                    tg.cancel_scope.cancel()

                tg.start_soon(stop_with_instance)
                async with tagged(read, LocalCaller(self.pid)) as tagged_read:
                    try:
                        await server.run(tagged_read, write, server.create_initialization_options())
                    except MCPMuxError as exc:
                        logger.warning(
                            "session of pid %d with %s ended: %s", self.pid, instance.attach.server.name, exc
                        )
                tg.cancel_scope.cancel()


@asynccontextmanager
async def tagged(source: Any, caller: LocalCaller) -> AsyncIterator[MemoryObjectReceiveStream[Item]]:
    """``source`` with every message carrying ``caller`` as its request context (the audit names it)."""
    send, receive = anyio.create_memory_object_stream[Item](0)
    metadata = ServerMessageMetadata(request_context=caller)

    async def pump(sink: MemoryObjectSendStream[Item]) -> None:
        async with sink:
            async for item in source:
                message = SessionMessage(item.message, metadata=metadata) if isinstance(item, SessionMessage) else item
                try:
                    await sink.send(message)
                except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                    return

    with receive:
        async with anyio.create_task_group() as tg:
            tg.start_soon(pump, send)
            try:
                yield receive
            finally:
                tg.cancel_scope.cancel()
