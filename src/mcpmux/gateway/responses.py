"""Deferred responses for the 2025-era Streamable HTTP transport: JSON when nothing else comes first.

A client of Streamable HTTP must accept either answer to a request POST: one JSON body or an SSE
stream (spec 2025-11-25, "Sending Messages to the Server"). The SDK's 2025-era transport always
opens an SSE stream unless the whole server runs in JSON mode, and that stream is most of the
cost of a short call on both ends (sse-starlette starts four tasks per response; the client parses
the stream). :class:`DeferredTransport` waits for the first message that belongs to the request:

- the response itself (most calls): it goes out as ``application/json``;
- a notification or a server request first (progress, a log line, a relayed sampling or
  elicitation request): the answer becomes an SSE stream, with that message as its first event;
- nothing within :data:`SSE_AFTER_S`: the stream opens anyway and carries a keepalive comment
  every :data:`SSE_AFTER_S`, so an idle-read timeout between client and gateway cannot cut a
  long call.

The SDK's own 2026-07-28 path makes the same choice with the same window. Every other POST
(``initialize``, notifications, responses, malformed bodies) and every GET or DELETE is served by
the SDK transport unchanged. The SDK has no public hook for this: the transport's internals it
needs are reached through :class:`~mcpmux._private.mcp_sdk.SessionTransport`.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from typing import Any

import anyio
import anyio.abc
import pydantic_core
from anyio.streams.memory import MemoryObjectReceiveStream
from mcp.server.connection import Connection
from mcp.server.streamable_http import CONTENT_TYPE_JSON, MCP_SESSION_ID_HEADER, EventMessage, check_accept_headers
from mcp.shared.dispatcher import coerce_request_id
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp.shared.jsonrpc_dispatcher import cancelled_request_id_from_params
from mcp_types import (
    DEFAULT_NEGOTIATED_VERSION,
    INTERNAL_ERROR,
    CallToolRequestParams,
    ErrorData,
    JSONRPCError,
    JSONRPCMessage,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
    RequestId,
    jsonrpc_message_adapter,
)
from pydantic import ValidationError
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from mcpmux._private.mcp_sdk import SessionTransport
from mcpmux.gateway.direct import CallHandler, DirectCall, direct_params

__all__ = ["DIRECT_CALLS", "SSE_AFTER_S", "DeferredTransport", "Keepalive", "Reply"]

logger = logging.getLogger(__name__)

SSE_AFTER_S = 15.0
_SSE_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"x-accel-buffering", b"no"),
]
_PING = b": ping\r\n\r\n"
_TERMINATED = EventMessage(
    JSONRPCError(
        jsonrpc="2.0",
        id=None,
        error=ErrorData(code=INTERNAL_ERROR, message="Session terminated before the request completed"),
    )
)
DIRECT_CALLS = "mcpmux.direct_calls"
"""The ASGI scope key under which a ``notifications/initialized`` POST carries its transport."""


class DeferredTransport(SessionTransport):
    """The SDK's 2025-era server transport, answering each request as JSON unless it must stream.

    Once the gateway has seen the session's ``notifications/initialized`` it may hand over its
    ``tools/call`` handler (:meth:`serve_calls_directly`): then calls that need nothing of the
    session's back channel are served in their POST's task (:mod:`mcpmux.gateway.direct`).
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._direct_service: tuple[Keepalive | None, CallHandler | None, Connection | None] = (None, None, None)
        self._direct_calls: dict[RequestId, DirectCall] = {}
        self._terminated_directly = False

    async def handle_post(self, scope: Scope, request: Request, receive: Receive, send: Send) -> None:
        message = await self._parsed(request)
        if isinstance(message, JSONRPCNotification):
            self._noticed(message, scope)
        if not isinstance(message, JSONRPCRequest) or message.method == "initialize":
            await super().handle_post(scope, request, receive, send)
        elif await self.headers_ok(request, send):
            await self._answer(message, request, send)

    def serve_calls_directly(self, handler: CallHandler, connection: Connection, keepalive: Keepalive) -> None:
        """Serve this session's eligible ``tools/call`` requests with ``handler`` over ``connection``.

        ``keepalive`` pings their answers once they turn into quiet SSE streams; it must be running.
        """
        self._direct_service = (keepalive, handler, connection)

    async def _parsed(self, request: Request) -> JSONRPCMessage | None:
        """The POST's message when this class may answer or watch it; ``None`` leaves the POST to the SDK.

        The SDK keeps everything it answers differently or reports on: JSON mode, resumable
        streams (an event store), bodies that do not parse, and clients that do not accept both
        media types; ``initialize``, notifications and responses go on to it as well.
        """
        if self.is_json_response_enabled or self.has_event_store:
            return None
        has_json, has_sse = check_accept_headers(request)
        if not (has_json and has_sse) or not self.content_type_ok(request):
            return None
        try:
            # Starlette keeps the body on the request, so the SDK can still read it after this.
            return jsonrpc_message_adapter.validate_python(pydantic_core.from_json(await request.body()), by_name=False)
        except (ValueError, ValidationError):
            return None

    def _noticed(self, message: JSONRPCNotification, scope: Scope) -> None:
        """Watch the notifications that concern direct calls (the SDK handles each one as well)."""
        if message.method == "notifications/initialized":
            # The gateway's handler of this notification finds the transport here (Gateway._initialized).
            scope[DIRECT_CALLS] = self
        elif message.method == "notifications/cancelled":
            request_id = cancelled_request_id_from_params(message.params)
            call = None if request_id is None else self._direct_calls.get(coerce_request_id(request_id))
            if call is not None:
                call.cancel()

    async def _answer(self, message: JSONRPCRequest, request: Request, send: Send) -> None:
        keepalive, handler, connection = self._direct_service
        params = self._direct_params(message, connection)
        if params is not None and keepalive is not None and handler is not None and connection is not None:
            reply = Reply(send, self._headers)
            await self._call_directly(
                DirectCall(message.id, message.params or {}, params, connection, request, reply),
                handler,
                keepalive,
                reply,
            )
            return
        request_id = str(message.id)
        version = request.headers.get(MCP_PROTOCOL_VERSION_HEADER, DEFAULT_NEGOTIATED_VERSION)
        _, reader = self.open_request_stream(request_id)
        try:
            await self.dispatch(message, request, request_id, version)
            await _respond(send, reader, request_id, self._headers)
        finally:
            await self.close_request_stream(request_id)

    def _direct_params(self, message: JSONRPCRequest, connection: Connection | None) -> CallToolRequestParams | None:
        """The params of ``message`` when it is a direct call, or ``None`` when it takes the SDK's path."""
        if connection is None or message.method != "tools/call" or message.params is None:
            return None
        if self._terminated_directly or coerce_request_id(message.id) in self._direct_calls:
            return None  # an id of a call still running: the SDK's path decides what that means
        return direct_params(connection, message.params)

    async def _call_directly(self, call: DirectCall, handler: CallHandler, keepalive: Keepalive, reply: Reply) -> None:
        key = coerce_request_id(call.request_id)
        self._direct_calls[key] = call
        keepalive.add(reply)
        try:
            await call.run(handler)
        finally:
            keepalive.discard(reply)
            del self._direct_calls[key]

    async def terminate(self) -> None:
        # Direct calls run in their POSTs' tasks, not in the session's: stop them as the session ends.
        self._terminated_directly = True
        for call in list(self._direct_calls.values()):
            call.terminate()
        await super().terminate()

    def _headers(self, headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
        if self.mcp_session_id:
            return [*headers, (MCP_SESSION_ID_HEADER.encode(), self.mcp_session_id.encode())]
        return headers


_Headers = Callable[[list[tuple[bytes, bytes]]], list[tuple[bytes, bytes]]]


async def _respond(
    send: Send, reader: MemoryObjectReceiveStream[EventMessage], request_id: str, headers: _Headers
) -> None:
    """Answer the POST from the request's stream: one JSON body if the answer comes first, else SSE."""
    streaming = False
    try:
        first = await _next(reader)
        if first is not None and _is_final(first):
            await _send_json(send, first, headers)
            return
        streaming = True
        await send({"type": "http.response.start", "status": 200, "headers": headers(_SSE_HEADERS)})
        await _stream(send, first, reader)
    except (anyio.EndOfStream, anyio.ClosedResourceError):
        # The stream closed without a response: the session was terminated while this request ran.
        logger.debug("session terminated with request %s in flight", request_id)
        if not streaming:
            await _send_json(send, _TERMINATED, headers, 500)
    finally:
        if streaming:
            await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _send_json(send: Send, event: EventMessage, headers: _Headers, status: int = 200) -> None:
    await _send_body(send, event.message.model_dump_json(by_alias=True, exclude_unset=True).encode(), headers, status)


async def _send_body(send: Send, body: bytes, headers: _Headers, status: int = 200) -> None:
    head = [(b"content-type", CONTENT_TYPE_JSON.encode()), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers(head)})
    await send({"type": "http.response.body", "body": body, "more_body": False})


class Reply:
    """The answer to a direct call's POST: one JSON body when the result comes first, else an SSE stream.

    It decides as :func:`_respond` does for the SDK's path: the first message of the call that is
    not its result (a log line) opens the stream, and so does :class:`Keepalive` once the call has
    been quiet for :data:`SSE_AFTER_S` (then every :data:`SSE_AFTER_S` a keepalive comment).
    """

    __slots__ = ("_free", "_headers", "_send", "_writing", "done", "quiet_since", "streaming")

    def __init__(self, send: Send, headers: _Headers) -> None:
        self._send, self._headers = send, headers
        self.streaming = self.done = self._writing = False
        self._free: anyio.Event | None = None
        self.quiet_since = time.monotonic()

    async def _take(self) -> None:
        """Become the one writer (the call's task, an upstream's log line, a keepalive ping); :meth:`_give` after.

        Nearly always uncontended: an ``anyio.Lock`` costs ~10 us per answer (made and taken)
        where this costs a flag, and an event only when a writer has to wait.
        """
        while self._writing:
            if self._free is None:
                self._free = anyio.Event()
            await self._free.wait()
        self._writing = True

    def _give(self) -> None:
        self._writing = False
        free, self._free = self._free, None
        if free is not None:
            free.set()

    async def put(self, message: bytes, *, final: bool) -> None:
        """Send ``message`` (JSON-RPC); the ``final`` one, the call's answer, ends the answer."""
        await self._take()
        try:
            if self.done:
                return
            if final and not self.streaming:
                self.done = True
                await _send_body(self._send, message, self._headers)
                return
            await self._open()
            await self._send({"type": "http.response.body", "body": _sse(message), "more_body": not final})
            self.quiet_since = time.monotonic()
            self.done = final
        finally:
            self._give()

    async def ping(self) -> None:
        """Keep a quiet answer alive: open the stream if need be, and send a comment."""
        await self._take()
        try:
            if not self.done:
                await self._open()
                await self._send({"type": "http.response.body", "body": _PING, "more_body": True})
                self.quiet_since = time.monotonic()
        finally:
            self._give()

    async def fail(self) -> None:
        """End the answer without a result, as :func:`_respond` does when the session is terminated."""
        await self._take()
        try:
            if self.done:
                return
            self.done = True
            if self.streaming:
                await self._send({"type": "http.response.body", "body": b"", "more_body": False})
                return
            await _send_json(self._send, _TERMINATED, self._headers, 500)
        finally:
            self._give()

    async def _open(self) -> None:
        if not self.streaming:
            self.streaming = True
            await self._send({"type": "http.response.start", "status": 200, "headers": self._headers(_SSE_HEADERS)})


class Keepalive:
    """One task for every direct call of a gateway: it pings the answers quiet for :data:`SSE_AFTER_S`.

    A direct call runs in its POST's own task, so nothing else of its own can wake up while it
    waits for the upstream; a task per call would cost more than the rest of the call (measured:
    ~0.3 M instructions). This task sleeps until the first answer falls quiet (or for a window
    when there is none), so a call added later never needs to wake it: its answer falls quiet
    after the time the task wakes anyway.
    """

    def __init__(self) -> None:
        self._replies: dict[int, Reply] = {}
        self._wake_at = math.inf
        self._woken = anyio.Event()
        self.running = False

    def add(self, reply: Reply) -> None:
        """Watch ``reply`` until :meth:`discard`."""
        self._replies[id(reply)] = reply
        if reply.quiet_since + SSE_AFTER_S < self._wake_at:
            self._woken.set()

    def discard(self, reply: Reply) -> None:
        self._replies.pop(id(reply), None)

    def __len__(self) -> int:
        """How many answers it watches now (the direct calls in flight)."""
        return len(self._replies)

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Ping quiet answers until cancelled."""
        self.running = True
        task_status.started()
        try:
            while True:
                await self._ping_quiet(time.monotonic() - SSE_AFTER_S)
                now = time.monotonic()
                self._wake_at = min((r.quiet_since for r in self._replies.values()), default=now) + SSE_AFTER_S
                self._woken = anyio.Event()
                with anyio.move_on_after(self._wake_at - now):
                    await self._woken.wait()
        finally:
            self.running = False

    async def _ping_quiet(self, since: float) -> None:
        for reply in [r for r in self._replies.values() if r.quiet_since <= since]:
            try:
                await reply.ping()
            except (OSError, RuntimeError) as exc:  # one answer is lost, not the gateway's task
                logger.warning("a keepalive ping failed; that answer gets no more: %r", exc)
                self.discard(reply)


async def _next(reader: MemoryObjectReceiveStream[EventMessage]) -> EventMessage | None:
    """The next message for the request, or ``None`` after :data:`SSE_AFTER_S` without one."""
    with anyio.move_on_after(SSE_AFTER_S):
        return await reader.receive()
    return None


async def _stream(send: Send, first: EventMessage | None, reader: MemoryObjectReceiveStream[EventMessage]) -> None:
    """Write the request's messages as SSE events until its response, pinging while it is quiet."""
    event = first
    while True:
        await send({"type": "http.response.body", "body": _event(event) if event else _PING, "more_body": True})
        if event is not None and _is_final(event):
            return
        event = await _next(reader)


def _is_final(event: EventMessage) -> bool:
    return isinstance(event.message, JSONRPCResponse | JSONRPCError)


def _sse(message: bytes) -> bytes:
    """A message of a direct call as an SSE event (no event ids: those need an event store)."""
    return b"event: message\r\ndata: %b\r\n\r\n" % message


def _event(event: EventMessage) -> bytes:
    data = event.message.model_dump_json(by_alias=True, exclude_unset=True)
    head = f"id: {event.event_id}\r\n" if event.event_id else ""
    return f"{head}event: message\r\ndata: {data}\r\n\r\n".encode()
