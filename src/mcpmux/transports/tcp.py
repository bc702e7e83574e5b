"""Plain TCP, one JSON-RPC message per line (``tcp://HOST:PORT``): the client and a server adapter.

The SDK 2.x has no TCP transport. Both sides use the framing of the stdio transport, with the same
message size cap.

The server closes a connection whose first bytes are not a JSON-RPC message (``{`` or ``[``):
a web page can make the browser POST to any local port, and the body of that request, one
JSON-RPC message per line after the HTTP head, would otherwise be served (cross-protocol attack).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit

import anyio
from anyio.abc import ByteStream, SocketAttribute, SocketStream, TaskStatus
from anyio.streams.buffered import BufferedByteStream
from mcp.server import Server
from mcp.server.mcpserver import MCPServer
from mcp.shared.message import SessionMessage

from mcpmux.config.models import DEFAULT_MAX_MESSAGE_BYTES, Settings, TcpServerConfig
from mcpmux.errors import ConnectFailed, TransportError
from mcpmux.transports.base import TransportStreams
from mcpmux.transports.framing import LineFramer, pump_lines, pump_messages

__all__ = ["framed_streams", "lowlevel_server_of", "open_tcp", "serve_tcp"]

logger = logging.getLogger("mcpmux.transports")

Item = SessionMessage | Exception
JSON_RPC_STARTS = (b"{", b"[")
# How much leading whitespace a client may send before its first message.
MAX_LEADING_BLANK_BYTES = 4096


def parse_tcp_url(server: str, url: str) -> tuple[str, int]:
    """Split ``tcp://HOST:PORT`` into host and port.

    Raises:
        TransportError: the URL has no host or no valid port.
    """
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError as exc:
        raise TransportError(server, f"invalid port in {url!r}") from exc
    if not parts.hostname or port is None:
        raise TransportError(server, f"{url!r} must be tcp://HOST:PORT")
    return parts.hostname, port


@asynccontextmanager
async def framed_streams(
    name: str, stream: ByteStream, max_message_bytes: int, describe: str
) -> AsyncIterator[TransportStreams]:
    """Message streams over one connected byte stream; the read stream ends when the peer closes.

    Leaving the context closes the byte stream.
    """
    read_send, read_receive = anyio.create_memory_object_stream[Item](0)
    write_send, write_receive = anyio.create_memory_object_stream[SessionMessage](0)
    framer = LineFramer(name, max_message_bytes)

    async def read_until_eof() -> None:
        async with read_send:
            await pump_lines(stream, read_send, framer)

    # Closing all four ends here too: a task cancelled before its first step never closes its own.
    with read_send, read_receive, write_send, write_receive:
        async with stream, anyio.create_task_group() as tg:
            tg.start_soon(read_until_eof)
            tg.start_soon(pump_messages, write_receive, stream)
            try:
                yield TransportStreams(read=read_receive, write=write_send, describe=describe)
            finally:
                write_send.close()
                read_receive.close()
                tg.cancel_scope.cancel()


@asynccontextmanager
async def open_tcp(server: TcpServerConfig, settings: Settings) -> AsyncIterator[TransportStreams]:
    """Connect to ``server.url`` and yield its message streams.

    Raises:
        ConnectFailed: refused, unreachable, unknown host, or no answer within the connect timeout.
    """
    host, port = parse_tcp_url(server.name, server.url)
    timeout_s = server.effective_connect_timeout_s(settings)
    try:
        with anyio.fail_after(timeout_s):
            stream = await anyio.connect_tcp(host, port)
    except TimeoutError as exc:
        raise ConnectFailed(server.name, server.url, f"no answer within {timeout_s:g} s") from exc
    except OSError as exc:
        raise ConnectFailed(server.name, server.url, exc.strerror or str(exc)) from exc
    async with framed_streams(server.name, stream, settings.max_message_bytes, server.url) as streams:
        yield streams


def lowlevel_server_of(server: Server[Any] | MCPServer[Any]) -> Server[Any]:
    """The low-level :class:`Server` that serves ``server`` over a stream pair."""
    if isinstance(server, MCPServer):
        from mcpmux._private.mcp_sdk import lowlevel_server

        return lowlevel_server(server)
    return server


async def serve_tcp(
    server: Server[Any] | MCPServer[Any],
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    task_status: TaskStatus[int] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve an SDK server over TCP, one session per accepted connection, until cancelled.

    Start it with ``port = await tg.start(serve_tcp, server)``: ``task_status`` reports the bound
    port. A failing session is logged and closed; the listener keeps serving.
    """
    lowlevel = lowlevel_server_of(server)

    async def serve_one(socket: SocketStream) -> None:
        peer = socket.extra(SocketAttribute.remote_address)
        stream = await _json_rpc_or_close(socket, peer)
        if stream is None:
            return
        async with framed_streams(lowlevel.name, stream, max_message_bytes, f"tcp peer {peer}") as streams:
            try:
                await lowlevel.run(streams.read, streams.write, lowlevel.create_initialization_options())
            except Exception:
                logger.exception("tcp session with %s failed", peer)

    async with await anyio.create_tcp_listener(local_host=host, local_port=port) as listener:
        task_status.started(listener.extra(SocketAttribute.local_port))
        await listener.serve(serve_one)


async def _json_rpc_or_close(stream: SocketStream, peer: object) -> ByteStream | None:
    """``stream`` with its first bytes put back if they start a JSON-RPC message; else close it."""
    received = b""
    try:
        while not received.strip() and len(received) <= MAX_LEADING_BLANK_BYTES:
            received += await stream.receive()
    except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await stream.aclose()
        return None
    if not received.lstrip().startswith(JSON_RPC_STARTS):
        logger.warning("tcp peer %s did not start with a JSON-RPC message (%r...); closed", peer, received[:16])
        await stream.aclose()
        return None
    buffered = BufferedByteStream(stream)
    buffered.feed_data(received)
    return buffered
