"""WebSocket, one JSON-RPC message per text frame, subprotocol ``mcp``: the client and a server adapter.

The SDK 2.x dropped its WebSocket transport; this one uses the ``websockets`` library (asyncio).
A frame above ``max_message_bytes`` makes ``websockets`` fail the connection (close code 1009):
the read stream then carries a :class:`~mcpmux.errors.MessageTooLarge` item and ends.

The server adapter knows nothing of tokens or origins: whoever serves it passes ``admit``, which
sees the handshake's headers and refuses it (an HTTP status, before any MCP message) or lets it in,
optionally with a check asked before each incoming message (a revoked token closes the
connection with code 1008).
"""

from __future__ import annotations

import logging
import ssl
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
from anyio.abc import TaskStatus
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server import Server
from mcp.server.mcpserver import MCPServer
from mcp.shared.message import ServerMessageMetadata, SessionMessage
from pydantic import ValidationError
from websockets.asyncio.client import ClientConnection, connect
from websockets.asyncio.connection import Connection
from websockets.asyncio.server import ServerConnection, serve
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed as WSConnectionClosed, InvalidHandshake, InvalidStatus, InvalidURI
from websockets.http11 import Request, Response
from websockets.typing import Subprotocol

from mcpmux.config.models import DEFAULT_MAX_MESSAGE_BYTES, Settings, WebSocketServerConfig
from mcpmux.errors import AuthRequired, ConnectFailed, ConnectionClosed, HTTPStatusError, MessageTooLarge
from mcpmux.transports.base import TransportStreams
from mcpmux.transports.framing import log_garbage, parse_message
from mcpmux.transports.tcp import lowlevel_server_of

__all__ = ["SUBPROTOCOL", "Handshake", "open_websocket", "serve_websocket", "websocket_streams"]

logger = logging.getLogger("mcpmux.transports")

SUBPROTOCOL = Subprotocol("mcp")
CLOSE_TIMEOUT_S = 2.0
CLOSE_MESSAGE_TOO_BIG = 1009
CLOSE_POLICY_VIOLATION = 1008

Item = SessionMessage | Exception
StillValid = Callable[[], Awaitable[bool]]


@dataclass(frozen=True, slots=True)
class Handshake:
    """What ``admit`` decided about a handshake.

    Attributes:
        refuse_status: an HTTP status to refuse with, or ``None`` to let the client in.
        reason: the body of the refusal.
        still_valid: asked before each incoming message; ``False`` closes the connection (1008).
        context: attached to each incoming message as the SDK's ``request_context`` (what the
            server's handlers see as ``ctx.request``), e.g. who the token names.
    """

    refuse_status: int | None = None
    reason: str = ""
    still_valid: StillValid | None = None
    context: object = None


Admit = Callable[[Mapping[str, str]], Awaitable[Handshake]]
_PLAIN = Handshake()


@asynccontextmanager
async def websocket_streams(
    name: str, ws: Connection, max_message_bytes: int, describe: str, admitted: Handshake | None = None
) -> AsyncIterator[TransportStreams]:
    """Message streams over an open WebSocket connection; leaving the context closes it.

    ``max_message_bytes`` must be the ``max_size`` the connection was opened with; ``admitted``
    (server side) says what to check and attach for each incoming message.
    """
    read_send, read_receive = anyio.create_memory_object_stream[Item](0)
    write_send, write_receive = anyio.create_memory_object_stream[SessionMessage](0)
    # Closing all four ends here too: a task cancelled before its first step never closes its own.
    with read_send, read_receive, write_send, write_receive:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_read_frames, name, ws, max_message_bytes, read_send, admitted or _PLAIN)
            tg.start_soon(_write_frames, ws, write_receive)
            try:
                yield TransportStreams(read=read_receive, write=write_send, describe=describe)
            finally:
                write_send.close()
                read_receive.close()
                with anyio.CancelScope(shield=True), anyio.move_on_after(CLOSE_TIMEOUT_S):
                    await ws.close()
                tg.cancel_scope.cancel()


async def _read_frames(
    name: str, ws: Connection, limit: int, sink: MemoryObjectSendStream[Item], admitted: Handshake
) -> None:
    garbage = 0
    still_valid = admitted.still_valid
    metadata = None if admitted.context is None else ServerMessageMetadata(request_context=admitted.context)
    async with sink:
        try:
            async for frame in ws:
                if still_valid is not None and not await still_valid():
                    logger.info("%s: its credentials were revoked; closing", name)
                    await ws.close(CLOSE_POLICY_VIOLATION, "credentials revoked")
                    return
                try:
                    message = parse_message(frame)
                    if metadata is not None:
                        message = SessionMessage(message.message, metadata=metadata)
                    await sink.send(message)
                except ValidationError as exc:
                    garbage += 1
                    log_garbage(name, frame, exc, garbage)
        except WSConnectionClosed as exc:
            await _report_close(name, limit, exc, sink)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            logger.debug("server %r: websocket reader stopped, the session closed its stream", name)


async def _report_close(name: str, limit: int, exc: WSConnectionClosed, sink: MemoryObjectSendStream[Item]) -> None:
    if exc.sent is not None and exc.sent.code == CLOSE_MESSAGE_TOO_BIG:
        size = getattr(exc.__cause__, "size", None)
        item: Exception = MessageTooLarge(name, size if isinstance(size, int) else limit + 1, limit, ends_stream=True)
    elif exc.rcvd is not None and exc.rcvd.code in (1000, 1001):
        return
    else:
        item = ConnectionClosed(name, f"websocket closed abnormally: {exc}")
    try:
        await sink.send(item)
    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
        logger.debug("server %r: nobody is reading; %s not reported", name, item)


async def _write_frames(ws: Connection, source: MemoryObjectReceiveStream[SessionMessage]) -> None:
    async with source:
        try:
            async for message in source:
                await ws.send(message.message.model_dump_json(by_alias=True, exclude_unset=True))
        except WSConnectionClosed as exc:
            logger.debug("websocket writer stopped: %s", exc)


@asynccontextmanager
async def open_websocket(server: WebSocketServerConfig, settings: Settings) -> AsyncIterator[TransportStreams]:
    """Connect to ``server.url`` with subprotocol ``mcp`` and yield its message streams.

    Raises:
        ConnectFailed: refused, unknown host, TLS failure, timeout, or no ``mcp`` subprotocol.
        AuthRequired: the handshake was answered with 401 or 403.
        HTTPStatusError: the handshake was answered with another error status.
    """
    ws = await _connect(server, settings)
    if ws.subprotocol != SUBPROTOCOL:
        with anyio.CancelScope(shield=True), anyio.move_on_after(CLOSE_TIMEOUT_S):
            await ws.close()
        raise ConnectFailed(server.name, server.url, f"the server did not accept subprotocol {SUBPROTOCOL!r}")
    async with websocket_streams(server.name, ws, settings.max_message_bytes, server.url) as streams:
        yield streams


async def _connect(server: WebSocketServerConfig, settings: Settings) -> ClientConnection:
    timeout_s = server.effective_connect_timeout_s(settings)
    try:
        return await connect(
            server.url,
            subprotocols=[SUBPROTOCOL],
            additional_headers={key: value.get_secret_value() for key, value in server.headers.items()},
            max_size=settings.max_message_bytes,
            open_timeout=timeout_s,
            close_timeout=CLOSE_TIMEOUT_S,
            ssl=_tls_context(server),
        )
    except InvalidStatus as exc:
        status, body = exc.response.status_code, exc.response.body.decode("utf-8", "replace")
        if status in (401, 403):
            raise AuthRequired(server.name, server.url, status, body) from exc
        raise HTTPStatusError(server.name, server.url, status, body) from exc
    except TimeoutError as exc:
        raise ConnectFailed(server.name, server.url, f"no answer within {timeout_s:g} s") from exc
    except (OSError, InvalidHandshake, InvalidURI) as exc:
        raise ConnectFailed(server.name, server.url, str(exc) or type(exc).__name__) from exc


def _tls_context(server: WebSocketServerConfig) -> ssl.SSLContext | None:
    if not server.url.lower().startswith("wss://"):
        return None
    context = ssl.create_default_context()
    if not server.verify_tls:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


async def serve_websocket(
    server: Server[Any] | MCPServer[Any],
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    admit: Admit | None = None,
    task_status: TaskStatus[int] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Serve an SDK server over WebSocket (subprotocol ``mcp`` required), until cancelled.

    Start it with ``port = await tg.start(serve_websocket, server)``: ``task_status`` reports the
    bound port. A client that does not offer ``mcp`` is refused with HTTP 400; ``admit`` sees
    every handshake's headers (lower-case names, repeated ones joined by ``", "``) first.

    Raises:
        OSError: the address cannot be bound (in use, not local).
    """
    lowlevel = lowlevel_server_of(server)
    admitted: weakref.WeakKeyDictionary[ServerConnection, Handshake] = weakref.WeakKeyDictionary()

    async def process_request(connection: ServerConnection, request: Request) -> Response | None:
        if admit is None:
            return None
        verdict = await admit(_joined(request.headers))
        if verdict.refuse_status is not None:
            return connection.respond(verdict.refuse_status, verdict.reason + "\n")
        admitted[connection] = verdict
        return None

    async def serve_one(ws: ServerConnection) -> None:
        describe = f"websocket peer {ws.remote_address}"
        async with websocket_streams(lowlevel.name, ws, max_message_bytes, describe, admitted.pop(ws, None)) as streams:
            try:
                await lowlevel.run(streams.read, streams.write, lowlevel.create_initialization_options())
            except Exception:
                logger.exception("websocket session with %s failed", ws.remote_address)

    async with serve(
        serve_one, host, port, subprotocols=[SUBPROTOCOL], max_size=max_message_bytes, close_timeout=CLOSE_TIMEOUT_S,
        process_request=process_request,
    ) as listener:  # fmt: skip
        task_status.started(listener.sockets[0].getsockname()[1])
        await listener.serve_forever()


def _joined(headers: Headers) -> dict[str, str]:
    joined: dict[str, str] = {}
    for name, value in headers.raw_items():
        key = name.lower()
        joined[key] = f"{joined[key]}, {value}" if key in joined else value
    return joined
